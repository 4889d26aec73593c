//! `tickwire serve` as an operator runs it: a real process, configured from a file, the
//! environment and flags; SIGTERM with players in rooms tells every player why and exits 0
//! within the grace period.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use tickwire_net::driver::ClientDriver;
use tickwire_net::udp::BatchSocket;
use tickwire_proto::login::{ServerNonce, login_for_token};
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::ConnectToken;
use tickwire_proto::{Client, ClientEvent, DisconnectReason, unix_now};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;

mod common;

use common::{SERVE_ON_FREE_PORTS, WAIT, http, listening, scratch_dir, tickwire};

/// A connect token from `POST /api/matchmake`.
async fn matchmake(http_address: SocketAddr, name: &str) -> ConnectToken {
    let body = format!(r#"{{"kind": "relay", "name": "{name}"}}"#);
    let (status, answer) = http(http_address, "POST", "/api/matchmake", "", &body).await;
    assert_eq!(status, 200, "{answer}");
    let token = answer
        .split("\"token\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a token in the answer");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token)
        .unwrap();
    ConnectToken::from_bytes(&bytes).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_tells_every_player_and_exits_zero_within_the_grace_period() {
    let dir = scratch_dir("sigterm");
    let mut child = tickwire(&dir)
        .args(SERVE_ON_FREE_PORTS)
        .env("TICKWIRE_ADMIN__TOKEN", "operator")
        .env("TICKWIRE_DRAIN__GRACE_SECS", "5")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (at, _stdout) = listening(&mut child).await;
    let http_address = at.http;

    let udp_token = matchmake(http_address, "udp-player").await;
    let ws_token = matchmake(http_address, "ws-player").await;
    let client = Client::new(
        udp_token,
        std::time::Instant::now(),
        unix_now(),
        ReliabilityConfig::default(),
    );
    let mut udp = ClientDriver::new(
        BatchSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap(),
        client,
    );
    let connected = timeout(WAIT, udp.next_event())
        .await
        .expect("connects")
        .unwrap();
    assert!(
        matches!(connected, ClientEvent::Connected { .. }),
        "{connected:?}"
    );
    let stream = TcpStream::connect(http_address).await.unwrap();
    let (mut ws, _) = tokio_tungstenite::client_async(format!("ws://{http_address}/ws"), stream)
        .await
        .unwrap();
    let challenge = match timeout(WAIT, ws.next())
        .await
        .expect("the challenge in time")
    {
        Some(Ok(Message::Binary(challenge))) => challenge,
        other => panic!("expected the challenge, got {other:?}"),
    };
    let nonce = ServerNonce::read(&challenge).expect("a 32-byte challenge");
    let login = login_for_token(&ws_token.to_bytes().unwrap()[..], &nonce).unwrap();
    ws.send(Message::Binary(login.into())).await.unwrap();

    // Both seated, as the admin API (token from the environment) reports.
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, players) = http(
            at.admin,
            "GET",
            "/api/admin/players",
            "Authorization: Bearer operator\r\n",
            "",
        )
        .await;
        assert_eq!(status, 200, "{players}");
        if players.contains("udp-player") && players.contains("ws-player") {
            break;
        }
        assert!(Instant::now() < deadline, "players never seated: {players}");
        // Keep the UDP client's keepalives going while waiting.
        let _ = timeout(Duration::from_millis(50), udp.next_event()).await;
    }

    // Persistence is on by default, on embedded SQLite in the working directory.
    let (status, leaderboard) = http(http_address, "GET", "/api/leaderboard", "", "").await;
    assert_eq!(status, 200, "{leaderboard}");
    let (_, metrics) = http(at.admin, "GET", "/metrics", "", "").await;
    assert!(
        metrics.contains("tickwire_store_queue_depth") && metrics.contains("tickwire_rooms"),
        "{metrics}"
    );
    // The binary counts its allocations, and says how many (the benches' per-message
    // figure comes from this counter).
    let allocations = common::metric::<f64>(&metrics, "tickwire_allocations_total");
    assert!(allocations.is_some_and(|n| n > 0.0), "{metrics}");
    assert!(
        dir.join("tickwire.db").is_file(),
        "the database file is created"
    );

    let signalled = Instant::now();
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: kill(2) with a pid this test spawned and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);

    let reason = timeout(WAIT, async {
        loop {
            if let ClientEvent::Disconnected { reason } = udp.next_event().await.unwrap() {
                return reason;
            }
        }
    })
    .await
    .expect("the UDP player is told in time");
    assert_eq!(reason, DisconnectReason::ServerShutdown);
    let close = timeout(WAIT, async {
        loop {
            match ws.next().await {
                Some(Ok(Message::Close(frame))) => return frame.map(|frame| u16::from(frame.code)),
                Some(Ok(_)) => continue,
                other => panic!("expected a close, got {other:?}"),
            }
        }
    })
    .await
    .expect("the WebSocket player is told in time");
    assert_eq!(close, Some(4003), "server shutting down");

    let status = timeout(WAIT, child.wait()).await.expect("exits").unwrap();
    assert!(status.success(), "exit status {status}");
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "exited {:?} after SIGTERM, past the 5 s grace period",
        signalled.elapsed()
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn configuration_layers_file_then_environment_then_flags() {
    let dir = scratch_dir("config");
    std::fs::write(
        dir.join("tickwire.toml"),
        "shards = 3\n[http]\nlisten = \"127.0.0.1:1000\"\n[udp]\nlisten = \"127.0.0.1:2000\"\n[drain]\ngrace_secs = 20\n",
    )
    .unwrap();
    let output = tickwire(&dir)
        .args(["serve", "--print-config", "--http", "127.0.0.1:3000"])
        .env("TICKWIRE_UDP__LISTEN", "127.0.0.1:4000")
        .env("TICKWIRE_BLESS", "1") // not configuration: ignored
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8(output.stdout).unwrap();
    for expected in [
        "shards = 3",                  // the file
        "grace_secs = 20",             // the file
        "listen = \"127.0.0.1:4000\"", // the environment over the file
        "listen = \"127.0.0.1:3000\"", // the flag over the file
        "[store]",
        "url = \"sqlite://tickwire.db\"", // the binary's own section, defaulted
    ] {
        assert!(printed.contains(expected), "no {expected:?} in\n{printed}");
    }

    let bad = tickwire(&dir)
        .args(["serve", "--print-config"])
        .env("TICKWIRE_LIMITS__CONNECT_RATE", "-1")
        .output()
        .await
        .unwrap();
    assert!(!bad.status.success());
    let error = String::from_utf8_lossy(&bad.stderr);
    assert!(error.contains("limits.connect_rate"), "{error}");

    std::fs::write(dir.join("tickwire.toml"), "[htp]\nlisten = 1\n").unwrap();
    let typo = tickwire(&dir)
        .args(["serve", "--print-config"])
        .output()
        .await
        .unwrap();
    assert!(!typo.status.success());
    let error = String::from_utf8_lossy(&typo.stderr);
    assert!(error.contains("htp"), "an unknown key is named: {error}");

    std::fs::write(dir.join("tickwire.toml"), "[store]\nulr = \"x\"\n").unwrap();
    let typo = tickwire(&dir)
        .args(["serve", "--print-config"])
        .output()
        .await
        .unwrap();
    assert!(!typo.status.success());
    let error = String::from_utf8_lossy(&typo.stderr);
    assert!(
        error.contains("ulr"),
        "a typo in the store section is named: {error}"
    );

    std::fs::remove_file(dir.join("tickwire.toml")).unwrap();
    let unopenable = tickwire(&dir)
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--udp",
            "127.0.0.1:0",
            "--wt",
            "127.0.0.1:0",
        ])
        .env(
            "TICKWIRE_STORE__URL",
            "postgres://nobody:secret@127.0.0.1:1/none",
        )
        .env("TICKWIRE_STORE__CONNECT_TIMEOUT_MS", "2000")
        .output()
        .await
        .unwrap();
    assert!(!unopenable.status.success());
    let error = String::from_utf8_lossy(&unopenable.stderr);
    assert!(
        error.contains("cannot open the store at postgres://nobody:***@127.0.0.1:1/none"),
        "the store is named, its password is not: {error}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The admin API is on the operator listener, so the admin page that calls it is too (built
/// into the binary: no `[web] dir` has it), with its assets and `/metrics`; the public port
/// answers `/admin/`, the API and `/metrics` with 404 (the page's saying where it went), and
/// still serves the game's own page.
#[tokio::test]
async fn the_admin_page_follows_the_admin_api_to_the_operator_listener() {
    let dir = scratch_dir("admin-page");
    let web = dir.join("web");
    std::fs::create_dir_all(&web).unwrap();
    std::fs::write(web.join("index.html"), "<title>arena page</title>").unwrap();
    let mut child = tickwire(&dir)
        .args(SERVE_ON_FREE_PORTS)
        .env("TICKWIRE_ADMIN__TOKEN", "operator")
        .env("TICKWIRE_WEB__DIR", &web)
        .env("TICKWIRE_STORE__URL", "")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (at, _stdout) = listening(&mut child).await;
    let (public, operator) = (at.http, at.admin);
    let bearer = "Authorization: Bearer operator\r\n";

    for path in ["/admin", "/admin/"] {
        let (status, body) = http(operator, "GET", path, "", "").await;
        assert_eq!(status, 200, "{path}");
        assert!(body.contains("<title>tickwire admin</title>"), "{body}");
        assert!(body.contains("/admin/admin.js"), "{body}");
    }
    let (status, body) = http(operator, "GET", "/admin/admin.js", "", "").await;
    assert_eq!(status, 200);
    assert!(
        body.contains("/api/admin/stats"),
        "the page's script calls the API"
    );
    let (status, _) = http(operator, "GET", "/admin/admin.css", "", "").await;
    assert_eq!(status, 200);
    let (status, body) = http(operator, "GET", "/api/admin/stats", bearer, "").await;
    assert_eq!(status, 200, "{body}");

    let (status, body) = http(public, "GET", "/admin/", "", "").await;
    assert_eq!(status, 404);
    assert!(body.contains("operator listener"), "{body}");
    let (status, _) = http(public, "GET", "/api/admin/stats", bearer, "").await;
    assert_eq!(status, 404, "the admin API is off the public port");
    let (status, _) = http(public, "GET", "/metrics", "", "").await;
    assert_eq!(status, 404, "/metrics is off the public port");
    let (status, body) = http(operator, "GET", "/metrics", "", "").await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(public, "GET", "/", "", "").await;
    assert_eq!((status, body.as_str()), (200, "<title>arena page</title>"));
    child.kill().await.unwrap();
}

/// A default `tickwire serve` with no `admin.token`: the generated token is in an
/// owner-only file in the working directory and nowhere in the log, and neither the admin
/// API nor `/metrics` answers on the public port, only on the operator listener.
#[tokio::test]
async fn a_default_serve_keeps_the_operator_doors_and_the_generated_token_off_the_public_side() {
    use std::os::unix::fs::PermissionsExt as _;
    use tokio::io::AsyncReadExt as _;

    let dir = scratch_dir("operator-doors");
    let mut child = tickwire(&dir)
        .args(SERVE_ON_FREE_PORTS)
        .env_remove("TICKWIRE_ADMIN__TOKEN")
        .env("TICKWIRE_STORE__URL", "")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (at, _stdout) = listening(&mut child).await;
    let path = dir.join("tickwire-admin-token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the token file's mode is {mode:o}");
    let token = std::fs::read_to_string(&path).unwrap().trim().to_string();
    assert_eq!(token.len(), 32, "{token:?}");
    let bearer = format!("Authorization: Bearer {token}\r\n");

    for path in ["/api/admin/stats", "/api/admin/players", "/metrics"] {
        let (status, body) = http(at.http, "GET", path, &bearer, "").await;
        assert_eq!(status, 404, "public {path}: {body}");
    }
    let (status, body) = http(at.admin, "GET", "/api/admin/stats", &bearer, "").await;
    assert_eq!(status, 200, "the file's token opens the admin API: {body}");
    let (status, _) = http(at.admin, "GET", "/metrics", "", "").await;
    assert_eq!(status, 200);

    child.kill().await.unwrap();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .await
        .unwrap();
    assert!(
        !log.contains(&token),
        "the log holds the admin token:\n{log}"
    );
    assert!(
        log.contains("tickwire-admin-token"),
        "the log names the token file:\n{log}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
