//! Operator access: the admin API, the admin page's routes and `/metrics` answer on the
//! operator listener only (the public port says 404); wrong admin tokens from one source
//! lock it out (429 with `Retry-After`), counted in `/metrics`, and behind a trusted proxy
//! the source is the client it forwards for; `/metrics` may ask for a token of its own; and
//! a generated admin token goes to an owner-only file, never to the log.

mod common;

use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::sync::{Arc, Mutex};

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

/// `GET path` with `headers` (each ending in `\r\n`); the whole answer, head included.
async fn get(address: SocketAddr, path: &str, headers: &str) -> String {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

/// `GET /api/admin/stats` with `token`; the whole answer, head included.
async fn admin_stats(address: SocketAddr, token: &str) -> String {
    get(
        address,
        "/api/admin/stats",
        &format!("Authorization: Bearer {token}\r\n"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_server_answers_metrics_and_the_admin_api_on_the_operator_listener_only() {
    // The default configuration's addresses, on free ports.
    let defaults = tickwire_server::config::ServeConfig::default();
    assert!(
        defaults.admin.listen.ip().is_loopback(),
        "the operator listener defaults to loopback: {}",
        defaults.admin.listen
    );
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let public = runtime.addresses().http;
    let operator = runtime.addresses().admin;
    assert!(operator.ip().is_loopback());
    assert_ne!(operator, public);

    for (address, path, bearer, status) in [
        (public, "/metrics", None, 404),
        (public, "/api/admin/stats", Some(ADMIN_TOKEN), 404),
        (public, "/api/admin/players", Some(ADMIN_TOKEN), 404),
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
    let shutdown = http(
        public,
        "POST",
        "/api/admin/shutdown",
        Some(ADMIN_TOKEN),
        None,
    )
    .await;
    assert_eq!(
        shutdown.status, 404,
        "the public port must not shut the server down"
    );
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_guessing_admin_tokens_is_locked_out_and_counted() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let address = runtime.addresses().admin;
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
async fn behind_a_trusted_proxy_one_guesser_does_not_lock_out_the_other_operators() {
    let mut config = test_config();
    // The test's connections come from loopback: it stands in for a proxy on this machine.
    config.admin.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    let runtime = Runtime::start(config, relay_kinds()).await.unwrap();
    let operator = runtime.addresses().admin;
    let through_proxy = |client: &str, token: &str| {
        format!("X-Forwarded-For: {client}\r\nAuthorization: Bearer {token}\r\n")
    };
    for attempt in 0..MAX_FAILURES {
        let answer = get(
            operator,
            "/api/admin/stats",
            &through_proxy("203.0.113.9", "guess"),
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 401"),
            "attempt {attempt}: {answer}"
        );
    }
    let guesser = get(
        operator,
        "/api/admin/stats",
        &through_proxy("203.0.113.9", ADMIN_TOKEN),
    )
    .await;
    assert!(
        guesser.starts_with("HTTP/1.1 429"),
        "the guessing client is locked out: {guesser}"
    );
    let colleague = get(
        operator,
        "/api/admin/stats",
        &through_proxy("198.51.100.1", ADMIN_TOKEN),
    )
    .await;
    assert!(
        colleague.starts_with("HTTP/1.1 200"),
        "another client behind the same proxy still gets in: {colleague}"
    );
    // A client's own claim before the proxy's entry changes nothing.
    let spoofed = get(
        operator,
        "/api/admin/stats",
        &through_proxy("198.51.100.1, 203.0.113.9", ADMIN_TOKEN),
    )
    .await;
    assert!(spoofed.starts_with("HTTP/1.1 429"), "{spoofed}");
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_token_is_asked_for_when_set() {
    let mut config = test_config();
    config.admin.metrics_token = "scrape-me".into();
    let runtime = Runtime::start(config, relay_kinds()).await.unwrap();
    let operator = runtime.addresses().admin;
    let bare = get(operator, "/metrics", "").await;
    assert!(bare.starts_with("HTTP/1.1 401"), "no token: {bare}");
    assert!(
        bare.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{bare}"
    );
    let admin = get(
        operator,
        "/metrics",
        &format!("Authorization: Bearer {ADMIN_TOKEN}\r\n"),
    )
    .await;
    assert!(
        admin.starts_with("HTTP/1.1 401"),
        "the admin token is not the metrics token: {admin}"
    );
    let scraped = get(operator, "/metrics", "Authorization: Bearer scrape-me\r\n").await;
    assert!(scraped.starts_with("HTTP/1.1 200"), "{scraped}");
    assert!(
        scraped.contains("tickwire_admin_auth_failures_total{via=\"metrics\"} 1"),
        "the wrong metrics token is counted:\n{scraped}"
    );
    runtime.shut_down().await.unwrap();
}

/// Everything the process logs, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_admin_token_goes_to_an_owner_only_file_and_never_to_the_log() {
    let log = Captured::default();
    let writer = log.clone();
    // Every thread's events, the workers' included, at every level.
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    )
    .expect("no other subscriber in this test binary");

    let dir = std::env::temp_dir().join(format!(
        "tickwire-admin-token-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("admin-token");
    let mut config = test_config();
    config.admin.token = String::new();
    config.admin.token_file = path.clone();
    let runtime = Runtime::start(config, relay_kinds()).await.unwrap();
    let token = runtime.admin_token().to_string();
    assert_eq!(token.len(), 32, "a generated token: {token:?}");

    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the token file's mode is {mode:o}");
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(written.trim(), token, "the file holds the token in force");
    let answer = admin_stats(runtime.addresses().admin, written.trim()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A lockout logs too, and must not carry the secret either.
    for _ in 0..MAX_FAILURES {
        admin_stats(runtime.addresses().admin, "guess").await;
    }
    runtime.shut_down().await.unwrap();
    assert!(
        !path.exists(),
        "the token file goes with the run that generated it"
    );

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(
        !text.contains(&token),
        "the log holds the admin token:\n{text}"
    );
    assert!(
        text.contains(&*path.to_string_lossy()),
        "the log names the token file:\n{text}"
    );
    assert!(
        text.contains("locked out"),
        "the lockout was logged:\n{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
