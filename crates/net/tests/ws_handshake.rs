//! The WebSocket handshake over real sockets: a valid login over ws and wss, every refusal
//! with its close code (a token without its proof of possession included), and bad first messages that leave other clients unaffected.

mod ws_support;

use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tickwire_net::ws::{CloseCode, WsClosed, WsConfig, WsSendError};
use tickwire_proto::ConnectionParams;
use tickwire_proto::login::{
    LOGIN_BYTES, PROOF_BYTES, SERVER_NONCE_BYTES, ServerNonce, login_for_token, login_message,
};
use tickwire_proto::token::ConnectToken;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use ws_support::{
    EVENT_TIMEOUT, Options, TestServer, challenge, expect_close, framed, login, next_binary,
    send_detached, unix_now,
};

/// Messages go both ways on every channel once the token is accepted.
async fn exchange(server: &mut TestServer) {
    let (mut client, mut connection) = server.connect(42).await;
    assert_eq!(&connection.user_data()[..7], b"ws test");
    assert!(connection.peer_address().is_some());

    client.send(framed(0, b"hello")).await.unwrap();
    client.send(framed(2, b"")).await.unwrap();
    let received = tokio::time::timeout(EVENT_TIMEOUT, connection.recv())
        .await
        .unwrap();
    assert_eq!(received, Ok((0, Bytes::from_static(b"hello"))));
    let received = tokio::time::timeout(EVENT_TIMEOUT, connection.recv())
        .await
        .unwrap();
    assert_eq!(
        received,
        Ok((2, Bytes::new())),
        "an empty payload is a message"
    );

    let sender = connection.sender();
    sender.send(0, Bytes::from_static(b"reliable")).unwrap();
    sender.send(1, Bytes::from_static(b"unreliable")).unwrap();
    sender.send(2, Bytes::from_static(b"snapshot")).unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(next_binary(&mut client).await);
    }
    got.sort();
    assert_eq!(
        got,
        [
            Bytes::from_static(b"\x00reliable"),
            Bytes::from_static(b"\x01unreliable"),
            Bytes::from_static(b"\x02snapshot"),
        ]
    );

    client
        .close(Some(CloseFrame {
            code: 1000.into(),
            reason: "done".into(),
        }))
        .await
        .unwrap();
    let closed = tokio::time::timeout(EVENT_TIMEOUT, connection.recv())
        .await
        .unwrap();
    assert_eq!(
        closed,
        Err(WsClosed::ByClient {
            code: Some(1000),
            reason: "done".into()
        })
    );
    let stats = server.endpoint.stats();
    assert_eq!(stats.connections_accepted, 1);
    assert_eq!(stats.messages_received, 2);
    assert_eq!(stats.bytes_received, 5);
}

#[tokio::test]
async fn a_client_with_a_valid_token_exchanges_messages_over_ws() {
    let mut server = TestServer::start(Options::default()).await;
    exchange(&mut server).await;
}

#[tokio::test]
async fn a_client_with_a_valid_token_exchanges_messages_over_wss() {
    let mut server = TestServer::start(Options {
        tls: true,
        ..Options::default()
    })
    .await;
    exchange(&mut server).await;
}

/// Reads the challenge, sends `first` as the first message and returns the close the server
/// answers with.
async fn refused(server: &TestServer, first: Message) -> (u16, String) {
    let mut client = server.upgrade().await;
    challenge(&mut client).await;
    let mut read = send_detached(client, first);
    let (code, reason, data) = expect_close(&mut read).await;
    assert_eq!(data, 0, "no accepted message before a refusal");
    (code, reason)
}

/// Answers the challenge with a login for `token` with its proof, and returns the close the
/// server answers with.
async fn refused_login(server: &TestServer, token: &[u8]) -> (u16, String) {
    let mut client = server.upgrade().await;
    let nonce = challenge(&mut client).await;
    let login = login_for_token(token, &nonce).unwrap();
    let mut read = send_detached(client, Message::Binary(login.into()));
    let (code, reason, data) = expect_close(&mut read).await;
    assert_eq!(data, 0, "no accepted message before a refusal");
    (code, reason)
}

#[tokio::test]
async fn bad_tokens_are_closed_with_their_codes() {
    let mut server = TestServer::start(Options::default()).await;

    let expired = server.token_at(1, unix_now() - 120);
    let (code, reason) = refused_login(&server, &expired).await;
    assert_eq!(code, CloseCode::TokenExpired.code(), "{reason}");
    assert!(reason.contains("expired"), "{reason}");

    let mut tampered = server.token(2);
    tampered[49 + 100] ^= 0x40; // inside the sealed private token
    let (code, reason) = refused_login(&server, &tampered).await;
    assert_eq!(code, CloseCode::BadToken.code(), "{reason}");

    let mut elsewhere = server.issuer.clone();
    elsewhere.server_addresses = vec!["127.0.0.1:1".parse().unwrap()];
    server.issuer = elsewhere;
    let wrong_server = server.token(3);
    let (code, reason) = refused_login(&server, &wrong_server).await;
    assert_eq!(code, CloseCode::BadToken.code(), "{reason}");
    assert!(reason.contains("names none"), "{reason}");
    server.issuer.server_addresses = vec![server.address];

    server.issuer.protocol_id ^= 1;
    let other_protocol = server.token(5);
    let (code, reason) = refused_login(&server, &other_protocol).await;
    assert_eq!(code, CloseCode::BadToken.code(), "{reason}");
    assert!(reason.contains("protocol"), "{reason}");
    server.issuer.protocol_id ^= 1;

    let right_key = server.issuer.key.clone();
    server.issuer.key = tickwire_proto::crypto::Key([1; 32]);
    let other_key = server.token(6);
    let (code, reason) = refused_login(&server, &other_key).await;
    assert_eq!(code, CloseCode::BadToken.code(), "{reason}");
    assert!(reason.contains("does not authenticate"), "{reason}");
    server.issuer.key = right_key;

    let token = server.token(4);
    let mut first = server.upgrade().await;
    login(&mut first, &token).await;
    next_binary(&mut first).await;
    let (code, reason) = refused_login(&server, &token).await;
    assert_eq!(code, CloseCode::TokenReplayed.code(), "{reason}");

    let stats = server.endpoint.stats();
    assert_eq!(stats.refused_expired, 1);
    assert_eq!(stats.refused_bad_token, 4);
    assert_eq!(stats.refused_replayed, 1);
    assert_eq!(stats.connections_accepted, 1);
}

#[tokio::test]
async fn the_sealed_token_without_its_proof_or_with_a_wrong_one_is_refused() {
    let mut server = TestServer::start(Options::default()).await;
    let token = server.token(1);

    // What an observer of the UDP request (the same sealed token) could send.
    let (code, reason) = refused(&server, Message::Binary(token.clone().into())).await;
    assert_eq!(code, CloseCode::BadProof.code(), "{reason}");
    assert!(reason.contains("without a proof"), "{reason}");

    let zeros = [&token[..], &[0; PROOF_BYTES]].concat();
    let (code, reason) = refused(&server, Message::Binary(zeros.into())).await;
    assert_eq!(code, CloseCode::BadProof.code(), "{reason}");
    assert!(reason.contains("does not verify"), "{reason}");

    // A proof for another connection's challenge.
    let stale = login_for_token(&token, &ServerNonce([7; SERVER_NONCE_BYTES])).unwrap();
    let (code, reason) = refused(&server, Message::Binary(stale.into())).await;
    assert_eq!(code, CloseCode::BadProof.code(), "{reason}");

    // A proof under a key the token does not hold.
    let parsed = ConnectToken::from_bytes(&token).unwrap();
    let mut client = server.upgrade().await;
    let nonce = challenge(&mut client).await;
    let forged = login_message(
        token.as_slice().try_into().unwrap(),
        &parsed.server_to_client_key,
        &nonce,
    );
    let mut read = send_detached(client, Message::Binary(forged.into()));
    let (code, reason, _) = expect_close(&mut read).await;
    assert_eq!(code, CloseCode::BadProof.code(), "{reason}");

    assert_eq!(server.endpoint.stats().refused_bad_token, 4);
    assert_eq!(server.endpoint.stats().connections_accepted, 0);
    // None of that used the token up: its holder logs in with it.
    let mut client = server.upgrade().await;
    login(&mut client, &token).await;
    let accepted = next_binary(&mut client).await;
    assert_eq!(
        ConnectionParams::read(&accepted),
        Some(server.params.clone())
    );
}

#[tokio::test]
async fn bad_first_messages_and_oversize_frames_are_closed_while_others_carry_on() {
    let mut server = TestServer::start(Options::default()).await;
    let (mut bystander, mut bystander_side) = server.connect(7).await;

    let (code, reason) = refused(&server, Message::Binary(vec![0xab; 100].into())).await;
    assert_eq!(code, CloseCode::ProtocolViolation.code());
    assert!(reason.contains("100 bytes"), "{reason}");

    let (code, reason) = refused(&server, Message::Binary(vec![0; LOGIN_BYTES].into())).await;
    assert_eq!(code, CloseCode::ProtocolViolation.code(), "{reason}");

    let (code, reason) = refused(&server, Message::Text("hello".into())).await;
    assert_eq!(code, CloseCode::ProtocolViolation.code());
    assert!(reason.contains("text"), "{reason}");

    let limit = WsConfig::default().max_message_bytes();
    let (code, reason) = refused(&server, Message::Binary(vec![0; limit + 1].into())).await;
    assert_eq!(code, CloseCode::WsMessageTooBig.code(), "{reason}");

    // After the handshake too: an oversize message, then a text message, from connected
    // clients.
    let (big, mut big_side) = server.connect(8).await;
    let mut big = send_detached(big, Message::Binary(vec![0; limit + 1].into()));
    let (code, _, _) = expect_close(&mut big).await;
    assert_eq!(code, CloseCode::WsMessageTooBig.code());
    let closed = tokio::time::timeout(EVENT_TIMEOUT, big_side.recv())
        .await
        .unwrap();
    assert!(
        matches!(
            closed,
            Err(WsClosed::ByServer {
                code: CloseCode::WsMessageTooBig,
                ..
            })
        ),
        "{closed:?}"
    );
    let (mut wrong_channel, mut wrong_channel_side) = server.connect(9).await;
    wrong_channel.send(framed(3, b"x")).await.unwrap();
    let closed = tokio::time::timeout(EVENT_TIMEOUT, wrong_channel_side.recv())
        .await
        .unwrap();
    assert!(
        matches!(closed, Err(WsClosed::ByServer { code: CloseCode::ProtocolViolation, ref reason }) if reason.contains("channel 3")),
        "{closed:?}"
    );
    let (code, _, _) = expect_close(&mut wrong_channel).await;
    assert_eq!(code, CloseCode::ProtocolViolation.code());

    // The first client never noticed.
    bystander.send(framed(0, b"still here")).await.unwrap();
    let received = tokio::time::timeout(EVENT_TIMEOUT, bystander_side.recv())
        .await
        .unwrap();
    assert_eq!(received, Ok((0, Bytes::from_static(b"still here"))));
    bystander_side
        .sender()
        .send(0, Bytes::from_static(b"ack"))
        .unwrap();
    assert_eq!(&next_binary(&mut bystander).await[..], b"\x00ack");

    let stats = server.endpoint.stats();
    assert_eq!(stats.refused_malformed, 3);
    assert_eq!(stats.closed_too_large, 2);
    assert_eq!(stats.closed_protocol_violation, 1);
}

#[tokio::test]
async fn a_client_that_sends_no_token_is_closed_at_the_handshake_timeout() {
    let server = TestServer::start(Options {
        ws: WsConfig {
            handshake_timeout: Duration::from_millis(300),
            ..WsConfig::default()
        },
        ..Options::default()
    })
    .await;
    let mut client = server.upgrade().await;
    let started = std::time::Instant::now();
    let (code, reason, _) = expect_close(&mut client).await;
    assert_eq!(code, CloseCode::HandshakeTimedOut.code(), "{reason}");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "closed after {:?}, before the timeout",
        started.elapsed()
    );
    assert_eq!(server.endpoint.stats().handshake_timeouts, 1);
}

#[tokio::test]
async fn the_connection_limit_holds_and_a_closed_connection_frees_its_place() {
    // Which player a connection is, and whether a newer one replaces it, is the shard's
    // session table's to decide (the server's tests cover replacement); the endpoint only
    // counts connections against its limit.
    let mut server = TestServer::start(Options {
        ws: WsConfig {
            max_connections: 2,
            ..WsConfig::default()
        },
        ..Options::default()
    })
    .await;
    let (_first, first_side) = server.connect(1).await;
    let (_second, _second_side) = server.connect(2).await;
    let token = server.token(3);
    let (code, reason) = refused_login(&server, &token).await;
    assert_eq!(code, CloseCode::ServerFull.code(), "{reason}");
    assert_eq!(server.endpoint.connection_count(), 2);
    assert_eq!(server.endpoint.stats().refused_full, 1);

    // A replacement, as a shard closes the older connection: its place is free once gone.
    first_side.close(CloseCode::AlreadyConnected, "connected again elsewhere");
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    while server.endpoint.connection_count() > 1 {
        assert!(tokio::time::Instant::now() < deadline, "place never freed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.endpoint.stats().connections_replaced, 1);
    let (_third, _third_side) = server.connect(3).await;
}

#[tokio::test]
async fn shutdown_closes_every_connection_with_its_code() {
    let mut server = TestServer::start(Options::default()).await;
    let (mut client, connection) = server.connect(1).await;
    let sender = connection.sender();
    sender.send(0, Bytes::from_static(b"last words")).unwrap();
    server.shutdown();
    let (code, _, data) = expect_close(&mut client).await;
    assert_eq!(code, CloseCode::ServerShutdown.code());
    assert_eq!(data, 1, "what was queued before the close is written first");
    assert!(sender.is_closing());
    assert_eq!(
        sender.send(0, Bytes::from_static(b"too late")),
        Err(WsSendError::Closed)
    );
    let token = server.token(2);
    let (code, _) = refused_login(&server, &token).await;
    assert_eq!(code, CloseCode::ServerShutdown.code());
}

#[tokio::test]
async fn a_kick_reaches_the_client_with_the_rooms_reason() {
    let mut server = TestServer::start(Options::default()).await;
    let (mut client, connection) = server.connect(1).await;
    connection.close(CloseCode::Kicked, "idle in lobby");
    let (code, reason, _) = expect_close(&mut client).await;
    assert_eq!(code, CloseCode::Kicked.code());
    assert_eq!(reason, "idle in lobby");
    // The client's own close answer ends the stream.
    let end = tokio::time::timeout(EVENT_TIMEOUT, client.next())
        .await
        .unwrap();
    assert!(
        end.is_none() || end.is_some_and(|item| item.is_err()),
        "stream ends"
    );
}

/// A server whose connections time out after `timeout` (and are pinged after a quarter of it).
async fn server_with_timeout(timeout: Duration) -> TestServer {
    TestServer::start(Options {
        ws: WsConfig {
            params: tickwire_proto::ConnectionParams::with_timeout(timeout),
            ..WsConfig::default()
        },
        ..Options::default()
    })
    .await
}

#[tokio::test]
async fn a_silent_client_is_timed_out_but_one_answering_pings_is_kept() {
    let timeout = Duration::from_millis(400);
    let mut server = server_with_timeout(timeout).await;
    let (mut answering, mut answering_side) = server.connect(1).await;
    let (mut silent, mut silent_side) = server.connect(2).await;

    // Reading is what makes a client answer pings (as a browser always does). Read for
    // 2.5 timeouts: only pings arrive, and the connection stays open.
    let until = tokio::time::Instant::now() + timeout * 5 / 2;
    let mut pings = 0;
    while let Ok(message) = tokio::time::timeout_at(until, answering.next()).await {
        match message {
            Some(Ok(Message::Ping(_))) => pings += 1,
            other => panic!("expected only pings, got {other:?}"),
        }
    }
    assert!(pings >= 3, "{pings} pings in {:?}", timeout * 5 / 2);
    answering.send(framed(0, b"alive")).await.unwrap();
    let received = tokio::time::timeout(EVENT_TIMEOUT, answering_side.recv())
        .await
        .unwrap();
    assert_eq!(received, Ok((0, Bytes::from_static(b"alive"))));

    // The silent client never read, so never answered: closed as timed out.
    let closed = tokio::time::timeout(EVENT_TIMEOUT, silent_side.recv())
        .await
        .unwrap();
    assert!(
        matches!(
            closed,
            Err(WsClosed::ByServer {
                code: CloseCode::TimedOut,
                ..
            })
        ),
        "{closed:?}"
    );
    let (code, _, _) = expect_close(&mut silent).await;
    assert_eq!(code, CloseCode::TimedOut.code());
    assert_eq!(server.endpoint.stats().closed_idle, 1);
}

#[tokio::test]
async fn a_client_that_only_listens_while_the_room_streams_is_pinged_and_kept() {
    let timeout = Duration::from_millis(400);
    let mut server = server_with_timeout(timeout).await;
    let (mut listener, listener_side) = server.connect(1).await;
    let sender = listener_side.sender();

    // The room streams a message every 20 ms for 2.5 timeouts; the client only reads (and
    // so answers pings, as a browser does), never sending anything of its own.
    let until = tokio::time::Instant::now() + timeout * 5 / 2;
    let mut streamed = 0u32;
    let mut pings = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if tokio::time::Instant::now() >= until {
                    break;
                }
                sender.send(1, Bytes::from(streamed.to_le_bytes().to_vec())).unwrap();
                streamed += 1;
            }
            message = listener.next() => match message {
                Some(Ok(Message::Ping(_))) => pings += 1,
                Some(Ok(Message::Binary(_))) => {}
                other => panic!("the connection must stay open, got {other:?}"),
            },
        }
    }
    assert!(
        pings >= 2,
        "{pings} pings while streaming for {:?}",
        timeout * 5 / 2
    );
    assert_eq!(server.endpoint.stats().closed_idle, 0);
}
