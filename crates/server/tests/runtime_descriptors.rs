//! Out of file descriptors: with the process's limit used up by connections to the public
//! port, the public listener backs off and counts its failed accepts, and the operator's
//! listener still answers `/healthz` from the descriptor it holds in reserve. Its own test
//! binary: lowering the descriptor limit affects the whole process.

mod common;

use std::time::{Duration, Instant};

use common::serve::{http, test_config};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Sets the soft descriptor limit; puts the old one back when dropped (a failing test must
/// not leave the process without descriptors for the harness).
struct Limit(libc::rlimit);

impl Limit {
    fn lower_to(soft: u64) -> Self {
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `old` is a valid rlimit to write into.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
        let new = libc::rlimit {
            rlim_cur: soft,
            rlim_max: old.rlim_max,
        };
        // SAFETY: `new` is a valid rlimit; lowering the soft limit is always allowed.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) }, 0);
        Self(old)
    }
}

impl Drop for Limit {
    fn drop(&mut self) {
        // SAFETY: restores the limit read before, which was in force.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.0) };
    }
}

/// The highest descriptor number open now.
fn highest_descriptor() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_answered_on_the_operator_listener_when_descriptors_run_out() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let public = runtime.addresses().http;
    let operator = runtime.addresses().admin;
    // The probe's own socket exists before the descriptors run out, as an orchestrator's
    // would (it lives in another process).
    let probe = TcpSocket::new_v4().unwrap();

    let limit = Limit::lower_to(highest_descriptor() + 40);
    // Each connection costs two descriptors in this process: ours and the server's. Open
    // them until our side gets none; the server's accepts are failing by then too.
    let mut hogs = Vec::new();
    loop {
        match TcpStream::connect(public).await {
            Ok(stream) => hogs.push(stream),
            Err(error) => {
                assert_eq!(error.raw_os_error(), Some(libc::EMFILE), "{error}");
                break;
            }
        }
        assert!(hogs.len() < 1000, "the descriptor limit does not bite");
    }

    // The idle connections are cut at the 5 s header timeout, which would free descriptors:
    // the answer must come well before.
    let asked = Instant::now();
    let mut stream = tokio::time::timeout(Duration::from_secs(2), probe.connect(operator))
        .await
        .expect("connected in time")
        .unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut answer))
        .await
        .expect("/healthz answered while out of descriptors")
        .unwrap();
    let took = asked.elapsed();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok\n"), "{answer}");
    drop(stream);
    drop(hogs);
    drop(limit);

    let metrics = http(operator, "GET", "/metrics", None, None).await.body;
    let failed_accepts: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("tickwire_http_accept_errors_total "))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no accept error count in:\n{metrics}"));
    assert!(
        failed_accepts >= 1,
        "the failed accepts were not counted (health answered in {took:?})"
    );
    runtime.shut_down().await.unwrap();
}

fn relay_kinds() -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds
}
