//! Operator access under attack: wrong admin tokens from one address lock it out (429 with
//! `Retry-After`), counted in `/metrics`; and with `admin.separate_listener` the admin API
//! and `/metrics` leave the public port for a listener of their own.

mod common;

use std::net::SocketAddr;

use common::serve::{ADMIN_TOKEN, http, test_config};
use tickwire_server::credentials::MAX_FAILURES;
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn relay_kinds() -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds
}

/// `GET /api/admin/stats` with `token`; the whole answer, head included.
async fn admin_stats(address: SocketAddr, token: &str) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!(
        "GET /api/admin/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_guessing_admin_tokens_is_locked_out_and_counted() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let address = runtime.addresses().http;
    // No token is no guess: a dashboard without one does not lock its address out.
    for _ in 0..MAX_FAILURES + 2 {
        let reply = http(address, "GET", "/api/admin/stats", None, None).await;
        assert_eq!(reply.status, 401);
    }
    assert!(
        admin_stats(address, ADMIN_TOKEN)
            .await
            .starts_with("HTTP/1.1 200")
    );
    for attempt in 0..MAX_FAILURES {
        let answer = admin_stats(address, "guess").await;
        assert!(
            answer.starts_with("HTTP/1.1 401"),
            "attempt {attempt}: {answer}"
        );
    }
    let answer = admin_stats(address, ADMIN_TOKEN).await;
    assert!(
        answer.starts_with("HTTP/1.1 429"),
        "the right token from a locked-out address: {answer}"
    );
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 300"),
        "{answer}"
    );
    let metrics = http(address, "GET", "/metrics", None, None).await.body;
    for line in [
        "tickwire_admin_auth_failures_total{via=\"api\"} 10",
        "tickwire_admin_auth_locked_out_total{via=\"api\"} 1",
        "tickwire_admin_lockouts_total 1",
    ] {
        assert!(
            metrics.lines().any(|have| have == line),
            "no {line:?} in:\n{metrics}"
        );
    }
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_operator_listener_takes_metrics_and_the_admin_api_off_the_public_port() {
    let mut config = test_config();
    config.admin.separate_listener = true;
    config.admin.listen = "127.0.0.1:0".parse().unwrap();
    let runtime = Runtime::start(config, relay_kinds()).await.unwrap();
    let public = runtime.addresses().http;
    let operator = runtime.addresses().admin.expect("an operator listener");
    assert!(operator.ip().is_loopback());
    assert_ne!(operator, public);

    for (address, path, bearer, status) in [
        (public, "/metrics", None, 404),
        (public, "/api/admin/stats", Some(ADMIN_TOKEN), 404),
        (public, "/healthz", None, 200),
        (public, "/readyz", None, 200),
        (operator, "/metrics", None, 200),
        (operator, "/api/admin/stats", Some(ADMIN_TOKEN), 200),
        (operator, "/api/admin/stats", None, 401),
        (operator, "/healthz", None, 200),
        (operator, "/readyz", None, 200),
        (operator, "/api/matchmake", None, 404),
    ] {
        let method = if path == "/api/matchmake" {
            "POST"
        } else {
            "GET"
        };
        let reply = http(address, method, path, bearer, None).await;
        let which = if address == public {
            "public"
        } else {
            "operator"
        };
        assert_eq!(reply.status, status, "{which} {path}: {}", reply.body);
    }
    runtime.shut_down().await.unwrap();
}
