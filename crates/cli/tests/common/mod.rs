//! What the process tests share: a scratch directory, the `tickwire` command, `serve` on free
//! loopback ports, the line it prints once listening, and plain HTTP/1.1.

#![allow(dead_code, unreachable_pub)] // each test file uses its own subset

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::timeout;

pub const WAIT: Duration = Duration::from_secs(10);

/// `serve` with every listener on a free loopback port (none on a default one another
/// process may hold) and one shard.
pub const SERVE_ON_FREE_PORTS: [&str; 13] = [
    "serve",
    "--http",
    "127.0.0.1:0",
    "--udp",
    "127.0.0.1:0",
    "--wt",
    "127.0.0.1:0",
    "--console",
    "127.0.0.1:0",
    "--admin",
    "127.0.0.1:0",
    "--shards",
    "1",
];

/// A fresh empty directory, so no `tickwire.toml` is picked up by accident.
pub fn scratch_dir(name: &str) -> PathBuf {
    let unique = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("tickwire-{name}-{}-{unique}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `tickwire` binary, run in `dir`, with the default log filter, killed when dropped.
pub fn tickwire(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tickwire"));
    command
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Where a server listens, from the line it prints once it serves.
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    /// The public HTTP port: matchmaking, `/ws`, the web client.
    pub http: SocketAddr,
    /// The operator listener: `/metrics`, the admin API and page.
    pub admin: SocketAddr,
}

/// Reads the `listening http=… udp=… admin=…` line the server prints once it serves.
pub async fn listening(child: &mut Child) -> (Listening, BufReader<ChildStdout>) {
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    timeout(WAIT, stdout.read_line(&mut line))
        .await
        .expect("the server starts in time")
        .unwrap();
    let address = |name: &str| -> SocketAddr {
        line.split_whitespace()
            .find_map(|part| part.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} address in {line:?}"))
            .parse()
            .unwrap()
    };
    let at = Listening {
        http: address("http="),
        admin: address("admin="),
    };
    (at, stdout)
}

/// One HTTP/1.1 exchange; status and body.
pub async fn http(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    timeout(WAIT, stream.read_to_string(&mut raw))
        .await
        .expect("an answer in time")
        .unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_string(),
    )
}

/// The value of the Prometheus sample named exactly `name` (labels included in `name`).
pub fn metric<T: std::str::FromStr>(text: &str, name: &str) -> Option<T> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}
