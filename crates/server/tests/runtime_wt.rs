//! The WebTransport transport of a whole server on loopback: matchmaking hands out its URL
//! and certificate hash; a WebTransport player meets WebSocket and UDP players in one relay
//! room (reliable frames and datagrams both ways); tokens are refused with the WebSocket
//! close codes; oversize frames, silent sessions and stray streams are dealt with.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::serve::{
    WsPlayer, answer_token, http, matchmake, metrics_until, test_config, ws_connect, ws_next,
    ws_present,
};
use common::{WAIT, udp_client, udp_next};
use serde_json::{Value, json};
use tickwire_net::driver::ClientDriver;
use tickwire_net::ws::CloseCode;
use tickwire_net::wt::{WtClient, WtClientError, WtRawSession, parse_cert_sha256};
use tickwire_proto::login::{PROOF_BYTES, ServerNonce, login_for_token};
use tickwire_proto::token::ConnectToken;
use tickwire_proto::{ClientEvent, ConnectionParams};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;

fn relay_kinds() -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds
}

fn wt_endpoint(answer: &Value) -> (String, [u8; 32]) {
    let wt = &answer["endpoints"]["wt"];
    let url = wt["url"].as_str().expect("a wt url").to_owned();
    let hash = parse_cert_sha256(wt["cert_sha256"].as_str().expect("a certificate hash"))
        .expect("64 hex digits");
    (url, hash)
}

fn token_bytes(token: &ConnectToken) -> Vec<u8> {
    token.to_bytes().unwrap().to_vec()
}

async fn wt_connected(answer: &Value) -> WtClient {
    let (url, hash) = wt_endpoint(answer);
    let session = timeout(WAIT, WtRawSession::open(&url, Some(hash)))
        .await
        .expect("a session in time")
        .expect("a session");
    timeout(WAIT, session.handshake(&token_bytes(&answer_token(answer))))
        .await
        .expect("accepted in time")
        .expect("accepted")
}

/// The server's close for a session whose first frame `login` makes from the challenge.
async fn refusal(answer: &Value, login: impl FnOnce(&ServerNonce) -> Vec<u8>) -> WtClientError {
    let (url, hash) = wt_endpoint(answer);
    let session = WtRawSession::open(&url, Some(hash))
        .await
        .expect("a session");
    timeout(WAIT, session.handshake_with(|nonce| Ok(login(nonce))))
        .await
        .expect("an answer in time")
        .expect_err("refused")
}

fn closed_with(error: &WtClientError, code: CloseCode) -> bool {
    matches!(error, WtClientError::Closed { code: got, .. } if *got == code.code())
}

/// The next message a WebTransport player gets that is not the relay's roll call.
async fn wt_next(client: &mut WtClient) -> (u8, Bytes) {
    loop {
        let (channel, message) = timeout(WAIT, client.recv())
            .await
            .expect("a message in time")
            .expect("a message");
        if message.as_ref() != b"roll call" {
            return (channel, message);
        }
    }
}

async fn udp_connected(answer: &Value) -> ClientDriver {
    let mut driver = udp_client(answer_token(answer));
    let event = timeout(WAIT, driver.next_event())
        .await
        .expect("connects in time")
        .unwrap();
    assert!(matches!(event, ClientEvent::Connected { .. }), "{event:?}");
    driver
}

async fn metric(admin_address: std::net::SocketAddr, name: &str) -> u64 {
    let metrics = http(admin_address, "GET", "/metrics", None, None).await;
    metrics
        .body
        .lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Polls `/metrics` until `name` is positive: the players gauge comes from the workers'
/// views, published a few times a second.
async fn metric_positive(admin_address: std::net::SocketAddr, name: &str) {
    let deadline = Instant::now() + WAIT;
    while metric(admin_address, name).await == 0 {
        assert!(Instant::now() < deadline, "{name} stayed 0");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webtransport_player_meets_websocket_and_udp_players_in_one_room() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;
    let wt_address = runtime.addresses().wt[0];

    let ann = matchmake(http_address, json!({"kind": "relay", "name": "ann"})).await;
    let bob = matchmake(http_address, json!({"kind": "relay", "name": "bob"})).await;
    let cat = matchmake(http_address, json!({"kind": "relay", "name": "cat"})).await;
    assert_eq!(ann["room"], cat["room"], "one room for all three");
    assert_eq!(
        ann["endpoints"]["wt"]["url"],
        format!("https://127.0.0.1:{}/wt", wt_address.port())
    );
    assert!(
        !answer_token(&ann)
            .server_addresses
            .contains(&std::net::SocketAddr::new(
                "127.0.0.1".parse().unwrap(),
                wt_address.port()
            )),
        "the token names UDP addresses only; the WebTransport endpoint is in the answer"
    );

    let mut wt = wt_connected(&ann).await;
    assert_eq!(wt.params().channels.len(), 3);
    let mut ws = WsPlayer::new(ws_connect(http_address, &answer_token(&bob)).await);
    let mut udp = udp_connected(&cat).await;

    // Reliable, WebTransport to the others: a frame on the control stream. Repeated until
    // heard: the relay passes on only what is said after everyone sat down.
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "the ws player never heard wt");
        wt.send(0, Bytes::from_static(b"reliable from wt"))
            .await
            .unwrap();
        if let Ok(heard) = timeout(Duration::from_millis(50), ws.next()).await
            && heard.as_ref() == b"\x00reliable from wt"
        {
            break;
        }
    }
    loop {
        let (channel, message) = udp_next(&mut udp).await;
        if message.as_ref() == b"reliable from wt" {
            assert_eq!(channel, 0);
            break;
        }
    }

    // Unreliable, UDP to WebTransport: a datagram from the server.
    let deadline = Instant::now() + WAIT;
    'heard: loop {
        assert!(Instant::now() < deadline, "wt never heard udp's datagram");
        udp.endpoint_mut()
            .send(1, Bytes::from_static(b"unreliable from udp"))
            .unwrap();
        udp.flush().await.unwrap();
        while let Ok(Ok((channel, message))) = timeout(Duration::from_millis(50), wt.recv()).await {
            if message.as_ref() == b"unreliable from udp" {
                assert_eq!(channel, 1);
                break 'heard;
            }
        }
    }

    // Sequenced, WebTransport to UDP: a datagram to the server.
    let deadline = Instant::now() + WAIT;
    'heard: loop {
        assert!(Instant::now() < deadline, "udp never heard wt's datagram");
        wt.send(2, Bytes::from_static(b"sequenced from wt"))
            .await
            .unwrap();
        while let Ok(Ok(event)) = timeout(Duration::from_millis(50), udp.next_event()).await {
            if let ClientEvent::Message { channel, message } = event
                && message.as_ref() == b"sequenced from wt"
            {
                assert_eq!(channel, 2);
                break 'heard;
            }
        }
    }

    // Reliable, WebSocket to WebTransport.
    ws.send(Message::Binary(Bytes::from_static(b"\x00reliable from ws")))
        .await;
    loop {
        let (channel, message) = wt_next(&mut wt).await;
        if message.as_ref() == b"reliable from ws" {
            assert_eq!(channel, 0);
            break;
        }
    }

    for name in [
        "tickwire_wt_datagrams_received_total",
        "tickwire_wt_datagrams_sent_total",
        "tickwire_wt_stream_frames_received_total",
        "tickwire_wt_stream_frames_sent_total",
        "tickwire_wt_sessions_total",
        "tickwire_wt_sessions_open",
        "tickwire_players{transport=\"wt\"}",
    ] {
        metric_positive(runtime.addresses().admin, name).await;
    }

    // Shutting down tells the WebTransport player why.
    runtime.shut_down().await.unwrap();
    let end = loop {
        match timeout(WAIT, wt.recv()).await.expect("a close in time") {
            Ok(_) => continue,
            Err(error) => break error,
        }
    };
    assert!(closed_with(&end, CloseCode::ServerShutdown), "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transport_is_told_its_rooms_tick_rate() {
    // Two kinds on one server, neither at the server's default of 60 Hz: the connection
    // parameters carry the rate of the room the player was seated in.
    let mut kinds = RoomKinds::new();
    kinds.register("slow", 16, || Box::new(RelayRoom::new(20)));
    kinds.register("fast", 16, || Box::new(RelayRoom::new(90)));
    let runtime = Runtime::start(test_config(), kinds).await.unwrap();
    let http_address = runtime.addresses().http;
    for (kind, rate) in [("slow", 20), ("fast", 90)] {
        let request = || json!({"kind": kind, "name": "ann"});
        let wt = wt_connected(&matchmake(http_address, request()).await).await;
        assert_eq!(wt.params().tick_rate_hz, rate, "webtransport, {kind}");

        let answer = matchmake(http_address, request()).await;
        let mut ws = ws_present(http_address, &answer_token(&answer)).await;
        let accepted = ws_next(&mut ws).await;
        let params = ConnectionParams::read(&accepted).expect("the accepted message");
        assert_eq!(params.tick_rate_hz, rate, "websocket, {kind}");

        let mut udp = udp_client(answer_token(&matchmake(http_address, request()).await));
        let event = timeout(WAIT, udp.next_event())
            .await
            .expect("connects in time")
            .unwrap();
        let ClientEvent::Connected { params } = event else {
            panic!("{event:?}");
        };
        assert_eq!(params.tick_rate_hz, rate, "udp, {kind}");
    }
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_expired_replayed_and_malformed_tokens_are_refused_with_their_codes() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;
    let answer = matchmake(http_address, json!({"kind": "relay", "name": "eve"})).await;
    let token = answer_token(&answer);

    let mut tampered = token.clone();
    tampered.private_token[10] ^= 1;
    let error = refusal(&answer, |nonce| {
        login_for_token(&token_bytes(&tampered), nonce).unwrap()
    })
    .await;
    assert!(closed_with(&error, CloseCode::BadToken), "{error:?}");

    let mut expired = token.clone();
    expired.expire_timestamp = 1;
    let error = refusal(&answer, |nonce| {
        login_for_token(&token_bytes(&expired), nonce).unwrap()
    })
    .await;
    assert!(closed_with(&error, CloseCode::TokenExpired), "{error:?}");

    let error = refusal(&answer, |_| b"not a token".to_vec()).await;
    assert!(
        closed_with(&error, CloseCode::ProtocolViolation),
        "{error:?}"
    );

    // The sealed token alone, as an observer of the UDP request has it, and with a proof
    // that does not verify: refused, and the token stays usable.
    let error = refusal(&answer, |_| token_bytes(&token)).await;
    assert!(closed_with(&error, CloseCode::BadProof), "{error:?}");
    let error = refusal(&answer, |_| {
        [token_bytes(&token), vec![0; PROOF_BYTES]].concat()
    })
    .await;
    assert!(closed_with(&error, CloseCode::BadProof), "{error:?}");

    let player = wt_connected(&answer).await;
    let error = refusal(&answer, |nonce| {
        login_for_token(&token_bytes(&token), nonce).unwrap()
    })
    .await;
    assert!(closed_with(&error, CloseCode::TokenReplayed), "{error:?}");
    drop(player);

    for (reason, at_least) in [
        ("bad_token", 3),
        ("expired", 1),
        ("malformed", 1),
        ("replayed", 1),
    ] {
        let name = format!("tickwire_wt_refused_total{{reason=\"{reason}\"}}");
        assert!(
            metric(runtime.addresses().admin, &name).await >= at_least,
            "{name}"
        );
    }
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_frame_is_refused_by_its_length_before_it_is_read() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;

    // As the first frame: announcing 16 MiB, sending none of it.
    let answer = matchmake(http_address, json!({"kind": "relay", "name": "big"})).await;
    let (url, hash) = wt_endpoint(&answer);
    let mut session = WtRawSession::open(&url, Some(hash)).await.unwrap();
    session.challenge().await.expect("the challenge");
    session
        .send
        .write_all(&(16u32 << 20).to_le_bytes())
        .await
        .unwrap();
    let error = timeout(WAIT, session.recv_frame(4096))
        .await
        .expect("an answer in time")
        .expect_err("refused");
    assert!(closed_with(&error, CloseCode::MessageTooLarge), "{error:?}");

    // After the handshake: one past the largest message (256 KiB and its channel byte).
    let answer = matchmake(http_address, json!({"kind": "relay", "name": "bigger"})).await;
    let mut player = wt_connected(&answer).await;
    let too_large = vec![0u8; 256 * 1024 + 1];
    let _ = player.send(0, Bytes::from(too_large)).await;
    let end = loop {
        match timeout(WAIT, player.recv()).await.expect("a close in time") {
            Ok(_) => continue,
            Err(error) => break error,
        }
    };
    assert!(closed_with(&end, CloseCode::MessageTooLarge), "{end:?}");
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_a_token_is_closed_at_the_handshake_timeout() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;
    let answer = matchmake(http_address, json!({"kind": "relay", "name": "mute"})).await;
    let (url, hash) = wt_endpoint(&answer);
    let mut session = WtRawSession::open(&url, Some(hash)).await.unwrap();
    session.challenge().await.expect("the challenge");
    // A partial length prefix: the stream exists, no frame ever completes.
    session.send.write_all(&[1]).await.unwrap();
    // The handshake timeout is 5 s; WAIT bounds each step at 5 s too, so allow both.
    let error = timeout(WAIT * 2, session.recv_frame(4096))
        .await
        .expect("closed in time")
        .expect_err("closed");
    assert!(
        closed_with(&error, CloseCode::HandshakeTimedOut),
        "{error:?}"
    );
    assert!(
        metric(
            runtime.addresses().admin,
            "tickwire_wt_refused_total{reason=\"handshake_timeout\"}"
        )
        .await
            >= 1
    );
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_past_the_per_address_cap_are_refused() {
    let mut config = test_config();
    config.webtransport.max_sessions_per_ip = 1;
    config.limits.exempt.clear();
    let runtime = Runtime::start(config, relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;
    let answer = matchmake(http_address, json!({"kind": "relay", "name": "one"})).await;
    let player = wt_connected(&answer).await;

    let (url, hash) = wt_endpoint(&answer);
    let second = timeout(WAIT, WtRawSession::open(&url, Some(hash)))
        .await
        .expect("an answer in time");
    assert!(
        second.is_err(),
        "a second session from 127.0.0.1 is refused"
    );
    assert_eq!(
        metric(
            runtime.addresses().admin,
            "tickwire_wt_refused_total{reason=\"per_ip\"}"
        )
        .await,
        1
    );
    drop(player);
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_stream_in_a_session_is_stopped() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;
    let answer = matchmake(http_address, json!({"kind": "relay", "name": "two"})).await;
    let (url, hash) = wt_endpoint(&answer);
    let mut session = WtRawSession::open(&url, Some(hash)).await.unwrap();
    let nonce = session.challenge().await.unwrap();
    let login = login_for_token(&token_bytes(&answer_token(&answer)), &nonce).unwrap();
    session.send_frame(&login).await.unwrap();
    let params = timeout(WAIT, session.recv_frame(4096))
        .await
        .unwrap()
        .unwrap();
    assert!(tickwire_proto::ConnectionParams::read(&params).is_some());

    let (mut send, mut recv) = session.connection.open_bi().await.unwrap().await.unwrap();
    // The server may stop the stream before the write has finished (a loaded machine):
    // that is the stop this test is after, not a failure.
    match send.write_all(b"\x01\x00\x00\x00\x00").await {
        Ok(()) | Err(wtransport::error::StreamWriteError::Stopped(_)) => {}
        Err(error) => panic!("writing the stray stream: {error:?}"),
    }
    let mut buffer = [0u8; 16];
    let read = timeout(WAIT, recv.read(&mut buffer))
        .await
        .expect("the stream is ended in time");
    assert!(
        matches!(read, Err(wtransport::error::StreamReadError::Reset(_))),
        "the server resets a second stream: {read:?}"
    );
    assert_eq!(
        metric(runtime.addresses().admin, "tickwire_wt_extra_streams_total").await,
        1
    );
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_goes_away_keeps_its_seat_and_a_goodbye_gives_it_up() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;

    // A goodbye (4001, what an SDK's leave sends): the seat is free at once.
    let bob = matchmake(http_address, json!({"kind": "relay", "name": "bob"})).await;
    let mut wt = wt_connected(&bob).await;
    metrics_until(
        runtime.addresses().admin,
        "tickwire_players{transport=\"wt\"} 1",
    )
    .await;
    wt.close(CloseCode::Requested, "bye").await;
    metrics_until(
        runtime.addresses().admin,
        "tickwire_players{transport=\"wt\"} 0",
    )
    .await;
    metrics_until(runtime.addresses().admin, "tickwire_players_reconnecting 0").await;
    let gone = http(
        http_address,
        "POST",
        "/api/matchmake",
        None,
        Some(&json!({"session": bob["session"]}).to_string()),
    )
    .await;
    assert_eq!(gone.status, 404, "no seat is held: {}", gone.body);

    // A session dropped without a close frame (a page that went away): the seat waits.
    let ann = matchmake(http_address, json!({"kind": "relay", "name": "ann"})).await;
    let wt = wt_connected(&ann).await;
    metrics_until(
        runtime.addresses().admin,
        "tickwire_players{transport=\"wt\"} 1",
    )
    .await;
    drop(wt);
    metrics_until(runtime.addresses().admin, "tickwire_players_reconnecting 1").await;
    let back = matchmake(http_address, json!({"session": ann["session"]})).await;
    assert_eq!(back["reconnect"], true);
    assert_eq!(back["room"], ann["room"]);
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_signed_certificate_is_renewed_and_open_sessions_keep_theirs() {
    let mut config = test_config();
    config.webtransport.renew_self_signed_secs = 1;
    let runtime = Runtime::start(config, relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;
    // A renewal every second may fall between a matchmaking answer and the session it
    // names: that session is refused, and a new answer carries the new hash.
    let connect = |name: &'static str| async move {
        for _ in 0..3 {
            let answer = matchmake(http_address, json!({"kind": "relay", "name": name})).await;
            let (url, hash) = wt_endpoint(&answer);
            let Ok(Ok(session)) = timeout(WAIT, WtRawSession::open(&url, Some(hash))).await else {
                continue;
            };
            let token = token_bytes(&answer_token(&answer));
            let client = timeout(WAIT, session.handshake(&token)).await;
            return (hash, client.expect("accepted in time").expect("accepted"));
        }
        panic!("{name} found no certificate in use");
    };
    let (first_hash, mut ann_wt) = connect("ann").await;
    let url = format!("https://127.0.0.1:{}/wt", runtime.addresses().wt[0].port());

    // Matchmaking hands out the new hash once the certificate has been replaced.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (second_hash, mut bob_wt) = connect("bob").await;
    assert_ne!(second_hash, first_hash, "renewed after a second");

    // New sessions get the new certificate: the old hash no longer opens one.
    let stale = timeout(WAIT, WtRawSession::open(&url, Some(first_hash)))
        .await
        .expect("an answer in time");
    assert!(stale.is_err(), "a session pinned to the old certificate");

    // The session opened before the renewal goes on: it hears the one opened after.
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "ann never heard bob");
        bob_wt
            .send(0, Bytes::from_static(b"after the renewal"))
            .await
            .unwrap();
        if let Ok(Ok((_, heard))) = timeout(Duration::from_millis(50), ann_wt.recv()).await
            && heard.as_ref() == b"after the renewal"
        {
            break;
        }
    }
    runtime.shut_down().await.unwrap();
}
