//! A TCP proxy a test puts between the store and its database server, to stop the database
//! or slow it down without touching the server other tests share: [`FaultProxy::cut`] closes
//! every connection and refuses new ones (the database is down), [`FaultProxy::restore`]
//! lets connections through again (it is back), [`FaultProxy::set_latency`] delays every
//! chunk it forwards, each way (a slow database), and
//! [`FaultProxy::lose_next_commit_answer`] lets the next `COMMIT` through but never the
//! database's answer (a commit whose outcome the client cannot know).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy to one upstream address; it stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    upstream: String,
    down: AtomicBool,
    latency_us: AtomicU64,
    /// Armed by `lose_next_commit_answer`, disarmed by the connection that sends `COMMIT`.
    lose_commit_answer: AtomicBool,
    /// Bumped by each cut: every connection open before it closes.
    cuts: watch::Sender<u64>,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy binds");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            upstream: upstream.to_owned(),
            down: AtomicBool::new(false),
            latency_us: AtomicU64::new(0),
            lose_commit_answer: AtomicBool::new(false),
            cuts: watch::Sender::new(0),
        });
        let task = tokio::spawn(accept(listener, shared.clone()));
        Self { addr, shared, task }
    }

    /// `url` (`scheme://user@host:port/db?…`) with its host and port replaced by the proxy's.
    pub fn url_for(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("url has a scheme");
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        let user = authority.rfind('@').map_or("", |at| &authority[..=at]);
        format!("{scheme}://{user}{}{path}", self.addr)
    }

    /// The database goes down: open connections close, new ones are closed at once.
    pub fn cut(&self) {
        self.shared.down.store(true, Ordering::SeqCst);
        self.shared.cuts.send_modify(|cuts| *cuts += 1);
    }

    /// The database is back: new connections go through.
    pub fn restore(&self) {
        self.shared.down.store(false, Ordering::SeqCst);
    }

    /// Delays every chunk forwarded, in either direction, by `latency`.
    pub fn set_latency(&self, latency: Duration) {
        self.shared
            .latency_us
            .store(latency.as_micros() as u64, Ordering::SeqCst);
    }
}

impl FaultProxy {
    /// The next connection to send `COMMIT` (as a simple query: PostgreSQL's and MySQL's
    /// clients do) has it forwarded, and from then on hears nothing back.
    pub fn lose_next_commit_answer(&self) {
        self.shared.lose_commit_answer.store(true, Ordering::SeqCst);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

/// The `host:port` of a database URL.
pub fn upstream_of(url: &str) -> String {
    let rest = url.split_once("://").expect("url has a scheme").1;
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    authority[authority.rfind('@').map_or(0, |at| at + 1)..].to_owned()
}

async fn accept(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if shared.down.load(Ordering::SeqCst) {
            drop(client); // refused: the client reads end of stream at once
            continue;
        }
        tokio::spawn(forward(client, shared.clone()));
    }
}

async fn forward(client: TcpStream, shared: Arc<Shared>) {
    let mut cuts = shared.cuts.subscribe();
    cuts.mark_unchanged();
    let Ok(server) = TcpStream::connect(&shared.upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Set once this connection's COMMIT went through with its answer to be lost.
    let deaf = AtomicBool::new(false);
    // Either direction ending, or a cut, closes both sockets.
    tokio::select! {
        () = pipe(client_read, server_write, &shared, Direction::ToServer, &deaf) => {}
        () = pipe(server_read, client_write, &shared, Direction::ToClient, &deaf) => {}
        _ = cuts.changed() => {}
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToClient,
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    shared: &Shared,
    direction: Direction,
    deaf: &AtomicBool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        match direction {
            Direction::ToServer => {
                let commit = buf[..n]
                    .windows(6)
                    .any(|w| w.eq_ignore_ascii_case(b"COMMIT"));
                if commit && shared.lose_commit_answer.swap(false, Ordering::SeqCst) {
                    deaf.store(true, Ordering::SeqCst);
                }
            }
            Direction::ToClient if deaf.load(Ordering::SeqCst) => continue,
            Direction::ToClient => {}
        }
        let latency = shared.latency_us.load(Ordering::SeqCst);
        if latency > 0 {
            tokio::time::sleep(Duration::from_micros(latency)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
