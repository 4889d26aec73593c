//! The HTTP listener cannot be held open: a body that never completes and a route that
//! never answers are cut at their timeouts, one address cannot hold more than its share of
//! connections before their upgrade, and a request without exactly one `Host` is refused.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::routing::{get, post};
use tickwire_net::ws::{HttpListener, ListenConfig, ListenMetrics};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TIMEOUT: Duration = Duration::from_millis(800);
/// How late a cut may come on a loaded machine.
const LATE: Duration = Duration::from_millis(2500);

async fn start(config: ListenConfig) -> (SocketAddr, ListenMetrics) {
    let router = Router::new()
        .route("/echo", post(|body: Bytes| async move { body }))
        .route("/hello", get(|| async { "hello" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        );
    let listener = HttpListener::bind("127.0.0.1:0".parse().unwrap(), None, config)
        .await
        .unwrap();
    let address = listener.local_addr().unwrap();
    let metrics = listener.metrics();
    tokio::spawn(listener.serve(router, std::future::pending()));
    (address, metrics)
}

fn short_timeouts() -> ListenConfig {
    ListenConfig {
        body_read_timeout: TIMEOUT,
        request_timeout: TIMEOUT * 2,
        ..ListenConfig::default()
    }
}

/// Sends `request`, then reads until the server closes; what it answered and how long the
/// connection lasted.
async fn exchange(address: SocketAddr, request: &[u8]) -> (String, Duration) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let started = Instant::now();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(TIMEOUT * 4 + LATE, async {
        let mut chunk = [0u8; 1024];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server held {:?} open for {:?}",
        String::from_utf8_lossy(request),
        started.elapsed()
    );
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn a_body_that_never_completes_is_cut_at_the_body_timeout() {
    let (address, metrics) = start(short_timeouts()).await;
    let (answer, lasted) = exchange(
        address,
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\na",
    )
    .await;
    assert!(
        lasted + Duration::from_millis(100) >= TIMEOUT && lasted <= TIMEOUT + LATE,
        "cut after {lasted:?}, the body timeout is {TIMEOUT:?}"
    );
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(metrics.snapshot().body_timeouts, 1);

    // A route that does not read the body answers, and the unread rest closes the
    // connection rather than waiting for it.
    let (answer, lasted) = exchange(
        address,
        b"GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\na",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(lasted <= TIMEOUT + LATE, "held for {lasted:?}");
}

#[tokio::test]
async fn a_request_not_answered_in_time_gets_408_and_is_closed() {
    let (address, metrics) = start(short_timeouts()).await;
    let (answer, lasted) = exchange(address, b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        lasted + Duration::from_millis(100) >= TIMEOUT * 2 && lasted <= TIMEOUT * 2 + LATE,
        "answered after {lasted:?}, the request timeout is {:?}",
        TIMEOUT * 2
    );
    assert_eq!(metrics.snapshot().request_timeouts, 1);
}

#[tokio::test]
async fn one_address_holds_at_most_its_cap_of_connections_before_upgrade() {
    let (address, metrics) = start(ListenConfig {
        max_connections_per_ip: 2,
        header_read_timeout: Duration::from_secs(30),
        ..ListenConfig::default()
    })
    .await;
    // Two idle connections take loopback's two places...
    let first = TcpStream::connect(address).await.unwrap();
    let _second = TcpStream::connect(address).await.unwrap();
    // ...so a third is closed at accept, without a byte.
    let (answer, _) = exchange(address, b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(answer, "", "a connection past the cap was served");
    assert_eq!(metrics.snapshot().refused_per_ip, 1);
    // A place given back is taken again.
    drop(first);
    let deadline = Instant::now() + LATE;
    loop {
        let (answer, _) = exchange(
            address,
            b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the freed place was never reused"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Exempt addresses are not capped.
    let (address, _) = start(ListenConfig {
        max_connections_per_ip: 1,
        exempt: vec!["127.0.0.1".parse().unwrap()],
        ..ListenConfig::default()
    })
    .await;
    let _held = TcpStream::connect(address).await.unwrap();
    let (answer, _) = exchange(
        address,
        b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_request_without_exactly_one_host_is_refused() {
    let (address, metrics) = start(ListenConfig::default()).await;
    for (request, status) in [
        (
            &b"GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n"[..],
            "400",
        ),
        (
            b"GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
            "400",
        ),
        (b"GET /hello HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", "400"),
        // HTTP/1.0 had no Host; one request without it is still fine.
        (b"GET /hello HTTP/1.0\r\n\r\n", "200"),
        (
            b"GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            "200",
        ),
    ] {
        let (answer, _) = exchange(address, request).await;
        let status_line = answer.lines().next().unwrap_or_default();
        assert!(
            status_line.contains(status),
            "{:?} answered {status_line:?}, not {status}",
            String::from_utf8_lossy(request)
        );
    }
    assert_eq!(metrics.snapshot().bad_host, 3);
}
