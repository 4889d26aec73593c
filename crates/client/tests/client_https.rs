//! Matchmaking over `https` against a real server with TLS on (`tls.listen`, a certificate
//! made here): the server's certificate trusted as an authority or pinned by its hash, the
//! player then connected and heard; and every certificate the client was not told to trust
//! refused before a byte of the request, with the token in it, is sent.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use tickwire_client::{
    ConnectOptions, Link, MatchmakeError, MatchmakeRequest, Session, SessionEvent, TlsTrust,
    Transport, matchmake, matchmake_with,
};
use tickwire_server::embed::free_ports_config;
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::time::{Instant, timeout};

const WAIT: Duration = Duration::from_secs(10);

/// A relay server serving HTTPS with a fresh self-signed certificate for 127.0.0.1: the
/// runtime, its `https://` URL, the certificate (DER) and the directory of its files.
async fn https_server(name: &str) -> (Runtime, String, Vec<u8>, PathBuf) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("tickwire-https-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();

    let mut config = free_ports_config();
    config.shards = 1;
    config.console.enabled = false;
    config.admin.token = "client-https-test-token".into();
    config.tls.listen = Some("127.0.0.1:0".parse().unwrap());
    config.tls.cert = Some(cert);
    config.tls.key = Some(key);
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    let runtime = Runtime::start(config, kinds).await.unwrap();
    let https = runtime.addresses().https.expect("an https listener");
    let url = format!("https://127.0.0.1:{}", https.port());
    (runtime, url, certified.cert.der().to_vec(), dir)
}

fn sha256(der: &[u8]) -> [u8; 32] {
    ring::digest::digest(&ring::digest::SHA256, der)
        .as_ref()
        .try_into()
        .unwrap()
}

/// `listener` hears `payload` within [`WAIT`] while `say` sends it again every 100 ms (a
/// message sent before the listener has joined is not kept for it).
async fn heard_from(say: &mut Link, listener: &mut Session, payload: &'static [u8]) {
    let deadline = Instant::now() + WAIT;
    loop {
        say.send(0, Bytes::from_static(payload)).unwrap();
        say.flush().await.unwrap();
        let listen = async {
            loop {
                match listener.next_event().await {
                    SessionEvent::Message { message, .. } if message.as_ref() == payload => {
                        return;
                    }
                    SessionEvent::Message { .. } => continue,
                    other => panic!("the listener's session ended: {other:?}"),
                }
            }
        };
        if timeout(Duration::from_millis(100), listen).await.is_ok() {
            return;
        }
        assert!(Instant::now() < deadline, "{payload:?} was never heard");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn players_matchmake_over_https_then_connect_and_hear_each_other() {
    let (runtime, url, certificate, dir) = https_server("plays").await;
    let trusted = TlsTrust::default()
        .certificate(certificate.clone())
        .client_config()
        .unwrap();
    let pinned = TlsTrust::default()
        .pin_sha256(sha256(&certificate))
        .client_config()
        .unwrap();

    // Ann trusts the certificate as an authority (the name is checked too) and plays over
    // UDP with the token the https answer carried.
    let ann = matchmake_with(
        &url,
        &MatchmakeRequest::kind("relay").named("ann"),
        WAIT,
        &trusted,
    )
    .await
    .expect("matchmaking over https with the server's certificate trusted");
    assert!(
        ann.endpoints
            .wss
            .as_deref()
            .is_some_and(|wss| wss.starts_with("wss://127.0.0.1:")),
        "an https server offers wss: {:?}",
        ann.endpoints
    );
    let mut ann_link = Link::connect(&ann, Transport::Udp, &ConnectOptions::default())
        .await
        .unwrap();

    // Bob pins the certificate's hash and goes through a Session, which matchmakes over
    // https and connects over wss with the same trust.
    let options = ConnectOptions {
        tls: Some(pinned),
        ..ConnectOptions::default()
    };
    let mut bob = Session::start(
        &url,
        MatchmakeRequest {
            room: Some(ann.room),
            name: Some("bob".into()),
            ..MatchmakeRequest::default()
        },
        Transport::Wss,
        options,
    )
    .await
    .expect("a session over https with the certificate pinned");
    assert_eq!(bob.answer().room, ann.room, "bob joined ann's room");

    heard_from(&mut ann_link, &mut bob, b"hello over https").await;
    ann_link.close().await;
    bob.close().await;
    runtime.shut_down().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_the_client_was_not_told_to_trust_is_refused() {
    let (runtime, url, certificate, dir) = https_server("refused").await;
    let request = MatchmakeRequest::kind("relay");

    // By default only the web's authorities count: a self-signed server is refused.
    let error = matchmake(&url, &request, WAIT).await.unwrap_err();
    assert!(
        matches!(
            &error,
            MatchmakeError::Untrusted {
                reason: rustls::CertificateError::UnknownIssuer,
                ..
            }
        ),
        "an unpinned self-signed server must be refused as untrusted: {error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&url)
            && message.contains("no authority this client trusts signed it")
            && message.contains("TlsTrust::pin_sha256"),
        "the error names the server and what is wrong: {message}"
    );

    // Another certificate trusted, or another one pinned, is no better.
    let stranger = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let stranger_der = stranger.cert.der().to_vec();
    let trusting_another = TlsTrust::default()
        .certificate(stranger_der.clone())
        .client_config()
        .unwrap();
    let error = matchmake_with(&url, &request, WAIT, &trusting_another)
        .await
        .unwrap_err();
    assert!(
        matches!(error, MatchmakeError::Untrusted { .. }),
        "trusting another certificate: {error:?}"
    );
    let pinning_another = TlsTrust::default()
        .pin_sha256(sha256(&stranger_der))
        .client_config()
        .unwrap();
    let error = matchmake_with(&url, &request, WAIT, &pinning_another)
        .await
        .unwrap_err();
    let seen = sha256(&certificate)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<String>();
    assert!(
        matches!(error, MatchmakeError::Untrusted { .. })
            && error.to_string().contains(&format!("{seen} is not pinned")),
        "pinning another certificate: {error}"
    );

    // A trusted certificate for another name: the name in the URL is checked.
    let trusted = TlsTrust::default()
        .certificate(certificate)
        .client_config()
        .unwrap();
    let by_name = url.replace("127.0.0.1", "localhost");
    let error = matchmake_with(&by_name, &request, WAIT, &trusted)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            MatchmakeError::Untrusted {
                reason: rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                ..
            }
        ),
        "a certificate for 127.0.0.1 reached as localhost: {error:?}"
    );
    runtime.shut_down().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
