//! `tickwire serve` and the connect token's way to the player: the Rust client matchmakes
//! over the server's HTTPS listener and plays; plain HTTP beyond this machine starts with
//! one warning naming the risk, and `security.require_tls` refuses to start that way.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use tickwire_client::{
    ConnectOptions, Link, LinkEvent, MatchmakeRequest, TlsTrust, Transport, matchmake_with,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Child;
use tokio::time::{Instant, timeout};

mod common;

use common::{SERVE_ON_FREE_PORTS, WAIT, scratch_dir, tickwire};

/// What the plain-HTTP warning says, and the refusal's start.
const WARNING: &str = "serves matchmaking over plain HTTP beyond this machine";
const REFUSAL: &str = "security.require_tls = true: http.listen is not loopback";

/// `serve` on free ports, with `http.listen` at `http`.
fn serve_args(http: &str) -> Vec<String> {
    let mut args: Vec<String> = SERVE_ON_FREE_PORTS.iter().map(|a| a.to_string()).collect();
    let at = args.iter().position(|a| a == "--http").unwrap() + 1;
    args[at] = http.to_string();
    args
}

/// The `listening …` line's value for `key` (`https`), once the server prints it.
async fn listening_at(child: &mut Child, key: &str) -> String {
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    timeout(WAIT, stdout.read_line(&mut line))
        .await
        .expect("the server starts in time")
        .unwrap();
    line.split_whitespace()
        .find_map(|part| part.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} address in {line:?}"))
        .to_string()
}

/// Everything the server logged, once it is stopped.
async fn stop_and_read_log(mut child: Child) -> String {
    let mut stderr = child.stderr.take().unwrap();
    child.start_kill().unwrap();
    let mut log = String::new();
    timeout(WAIT, stderr.read_to_string(&mut log))
        .await
        .expect("the log ends with the process")
        .unwrap();
    log
}

/// A self-signed certificate for 127.0.0.1 in `dir`: its DER, and the PEM files' paths.
fn certificate_in(dir: &Path) -> (Vec<u8>, String, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (
        certified.cert.der().to_vec(),
        cert.display().to_string(),
        key.display().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_matchmakes_over_https_and_plays() {
    let dir = scratch_dir("serve-https");
    let (der, cert, key) = certificate_in(&dir);
    let mut child = tickwire(&dir)
        .args(serve_args("127.0.0.1:0"))
        .args([
            "--https",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ])
        .env("TICKWIRE_ADMIN__TOKEN", "operator")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!("https://{}", listening_at(&mut child, "https").await);
    let tls = TlsTrust::default()
        .certificate(der)
        .client_config()
        .unwrap();

    let ann = matchmake_with(
        &url,
        &MatchmakeRequest::kind("relay").named("ann"),
        WAIT,
        &tls,
    )
    .await
    .expect("matchmaking over serve's https listener");
    let bob = matchmake_with(
        &url,
        &MatchmakeRequest {
            room: Some(ann.room),
            ..MatchmakeRequest::default()
        },
        WAIT,
        &tls,
    )
    .await
    .unwrap();
    let mut ann_link = Link::connect(&ann, Transport::Udp, &ConnectOptions::default())
        .await
        .unwrap();
    let options = ConnectOptions {
        tls: Some(tls),
        ..ConnectOptions::default()
    };
    let mut bob_link = Link::connect(&bob, Transport::Wss, &options).await.unwrap();
    // The relay sends what a member said to the others on its next tick; a message sent
    // before bob was seated is not kept for him, so ann repeats it until he hears.
    let deadline = Instant::now() + WAIT;
    'heard: loop {
        ann_link.send(0, Bytes::from_static(b"ann here")).unwrap();
        ann_link.flush().await.unwrap();
        while let Ok(event) = timeout(Duration::from_millis(100), bob_link.next_event()).await {
            match event {
                LinkEvent::Message { message, .. } if message.as_ref() == b"ann here" => {
                    break 'heard;
                }
                LinkEvent::Message { .. } => {}
                LinkEvent::Ended(ended) => panic!("bob's link ended: {ended}"),
            }
        }
        assert!(Instant::now() < deadline, "bob never heard ann");
    }
    ann_link.close().await;
    bob_link.close().await;

    let log = stop_and_read_log(child).await;
    assert!(
        !log.contains(WARNING),
        "http.listen on loopback must not warn about plain HTTP:\n{log}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn plain_http_beyond_this_machine_warns_once_and_require_tls_refuses_it() {
    let dir = scratch_dir("serve-plain-http");
    let mut child = tickwire(&dir)
        .args(serve_args("0.0.0.0:0"))
        .env("TICKWIRE_ADMIN__TOKEN", "operator")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    listening_at(&mut child, "http").await;
    let log = stop_and_read_log(child).await;
    let warnings: Vec<&str> = log.lines().filter(|line| line.contains(WARNING)).collect();
    assert_eq!(
        warnings.len(),
        1,
        "one warning about plain HTTP on 0.0.0.0:\n{log}"
    );
    assert!(
        warnings[0].contains("WARN")
            && warnings[0].contains("http.listen = 0.0.0.0:0")
            && warnings[0].contains("connect tokens carry the session keys"),
        "the warning names the address and the risk: {}",
        warnings[0]
    );

    let mut strict = tickwire(&dir);
    strict
        .args(serve_args("0.0.0.0:0"))
        .env("TICKWIRE_ADMIN__TOKEN", "operator")
        .env("TICKWIRE_SECURITY__REQUIRE_TLS", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let refused = timeout(WAIT, strict.output())
        .await
        .expect("a refused start exits at once")
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(REFUSAL), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
