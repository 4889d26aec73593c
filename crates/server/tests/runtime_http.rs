//! The running server's HTTP side cannot be held open: a matchmaking request whose body
//! never completes is cut at `http.body_timeout_ms`, and the cut is counted in `/metrics`.

mod common;

use std::time::{Duration, Instant};

use common::serve::{metrics_until, test_config};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn relay_kinds() -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matchmaking_body_that_never_completes_is_cut_at_the_body_timeout() {
    let mut config = test_config();
    config.http.body_timeout_ms = 1000;
    let runtime = Runtime::start(config, relay_kinds()).await.unwrap();
    let address = runtime.addresses().http;

    let mut stream = TcpStream::connect(address).await.unwrap();
    let started = Instant::now();
    stream
        .write_all(b"POST /api/matchmake HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let closed =
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    let lasted = started.elapsed();
    assert!(closed.is_ok(), "the connection was held past 5 s");
    assert!(
        lasted >= Duration::from_millis(900),
        "cut after {lasted:?}, before the 1 s body timeout"
    );
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    metrics_until(
        runtime.addresses().admin,
        "tickwire_http_refused_total{reason=\"body_timeout\"} 1",
    )
    .await;
    runtime.shut_down().await.unwrap();
}
