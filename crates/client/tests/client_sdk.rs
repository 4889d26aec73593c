//! The SDK against a real server on loopback: matchmaking, UDP and WebSocket links in one
//! relay room, round-trip measurement, reconnection to the held seat, and the errors a
//! game must be able to tell apart.

use std::time::Duration;

use bytes::Bytes;
use tickwire_client::{
    ConnectError, ConnectOptions, DisconnectReason, Ended, Link, LinkEvent, MatchmakeError,
    MatchmakeRequest, Session, SessionEvent, Transport, matchmake,
};
use tickwire_server::embed::free_ports_config;
use tickwire_server::room::{JoinRefused, Member, Room, RoomContext};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::time::{Instant, timeout};

mod common;

const WAIT: Duration = Duration::from_secs(10);

/// The relay server with a 500 ms connection timeout (lost connections are noticed fast)
/// and a room kind that refuses cheaters.
async fn relay_server() -> (Runtime, String) {
    common::relay_server(|config, kinds| {
        config.connection.timeout_ms = 500;
        kinds.register("picky", 4, || Box::new(Picky));
    })
    .await
}

/// Refuses players named "cheater", with a reason of its own.
struct Picky;

impl Room for Picky {
    fn join(&mut self, _ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        if member.name == "cheater" {
            return Err(JoinRefused::game("cheaters may not play"));
        }
        Ok(())
    }
}

fn options() -> ConnectOptions {
    ConnectOptions {
        ws_ping_interval: Duration::from_millis(50),
        ..ConnectOptions::default()
    }
}

/// The next message `link` receives with this payload, skipping others.
async fn heard(link: &mut Link, payload: &[u8]) -> u8 {
    let listen = async {
        loop {
            match link.next_event().await {
                LinkEvent::Message { channel, message } if message.as_ref() == payload => {
                    return channel;
                }
                LinkEvent::Message { .. } => continue,
                LinkEvent::Ended(ended) => panic!("ended while listening: {ended}"),
            }
        }
    };
    timeout(WAIT, listen).await.expect("heard in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_and_websocket_links_share_a_room_and_measure_their_round_trip() {
    let (runtime, url) = relay_server().await;
    let ann_answer = matchmake(&url, &MatchmakeRequest::kind("relay").named("ann"), WAIT)
        .await
        .unwrap();
    let bob_answer = matchmake(&url, &MatchmakeRequest::kind("relay").named("bob"), WAIT)
        .await
        .unwrap();
    assert_eq!(ann_answer.room, bob_answer.room);
    assert_eq!(ann_answer.name, "ann");
    let mut ann = Link::connect(&ann_answer, Transport::Udp, &options())
        .await
        .unwrap();
    let mut bob = Link::connect(&bob_answer, Transport::Ws, &options())
        .await
        .unwrap();
    assert_eq!(ann.params().channels, bob.params().channels);

    // Until both are seated, a message may reach nobody: repeat until it is heard.
    let deadline = Instant::now() + WAIT;
    loop {
        ann.send(0, Bytes::from_static(b"hello from udp")).unwrap();
        ann.flush().await.unwrap();
        if let Ok(channel) = timeout(
            Duration::from_millis(100),
            heard(&mut bob, b"hello from udp"),
        )
        .await
        {
            assert_eq!(channel, 0, "on the channel it was sent on");
            break;
        }
        assert!(Instant::now() < deadline, "bob never heard ann");
    }
    bob.send(1, Bytes::from_static(b"hello from ws")).unwrap();
    bob.flush().await.unwrap();
    assert_eq!(heard(&mut ann, b"hello from ws").await, 1);

    // Round trips: UDP from packet acks, WebSocket from pings.
    let deadline = Instant::now() + WAIT;
    while ann.stats().rtt.is_none() || bob.stats().rtt.is_none() {
        assert!(
            Instant::now() < deadline,
            "no RTT: {:?} {:?}",
            ann.stats(),
            bob.stats()
        );
        ann.send(1, Bytes::from_static(b"tick")).unwrap();
        bob.send(1, Bytes::from_static(b"tock")).unwrap();
        let _ = timeout(Duration::from_millis(20), ann.next_event()).await;
        let _ = timeout(Duration::from_millis(20), bob.next_event()).await;
    }
    let (ann_stats, bob_stats) = (ann.stats(), bob.stats());
    assert!(ann_stats.rtt.unwrap() < Duration::from_secs(1));
    assert!(ann_stats.packet_loss.is_some() && bob_stats.packet_loss.is_none());
    assert!(ann_stats.messages_sent >= 1 && ann_stats.messages_received >= 1);
    assert!(bob_stats.bytes_sent >= b"hello from ws".len() as u64);

    bob.close().await;
    assert_eq!(
        bob.send(0, Bytes::new()),
        Err(tickwire_client::SendError::Ended)
    );
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_comes_back_to_its_seat_over_either_transport() {
    let (runtime, url) = relay_server().await;
    for transport in [Transport::Udp, Transport::Ws] {
        let request = MatchmakeRequest::kind("relay").named(transport.name());
        let mut session = Session::start(&url, request, transport, options())
            .await
            .unwrap();
        let (player, room) = (session.answer().player_id, session.answer().room);

        let back = timeout(WAIT, session.reconnect())
            .await
            .expect("back in time")
            .unwrap();
        assert_eq!(
            back,
            SessionEvent::Reconnected {
                same_room: true,
                attempts: 1
            },
            "{transport:?}"
        );
        assert_eq!(session.answer().player_id, player, "the same player");
        assert_eq!(session.answer().room, room, "in the same room");
        assert_eq!(session.link().transport(), transport);

        // The new connection is the player's: a listener in the room hears it.
        let listener_answer = matchmake(
            &url,
            &MatchmakeRequest {
                room: Some(room),
                ..Default::default()
            },
            WAIT,
        )
        .await
        .unwrap();
        let mut listener = Link::connect(&listener_answer, Transport::Udp, &options())
            .await
            .unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            session.send(0, Bytes::from_static(b"still here")).unwrap();
            session.flush().await.unwrap();
            if timeout(
                Duration::from_millis(100),
                heard(&mut listener, b"still here"),
            )
            .await
            .is_ok()
            {
                break;
            }
            assert!(Instant::now() < deadline, "{transport:?}: never heard");
        }
        session.close().await;
        listener.close().await;
    }
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_told_apart_and_a_shutdown_is_not_retried() {
    let (runtime, url) = relay_server().await;

    match matchmake(&url, &MatchmakeRequest::kind("no-such-kind"), WAIT).await {
        Err(MatchmakeError::Refused { status, message }) => {
            assert!((400..500).contains(&status), "{status}");
            assert!(message.contains("no-such-kind"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    assert!(matches!(
        matchmake(
            &format!("http://{closed_port}"),
            &MatchmakeRequest::kind("relay"),
            WAIT
        )
        .await,
        Err(MatchmakeError::Unreachable { .. })
    ));
    assert!(matches!(
        matchmake(
            "ftp://example.invalid",
            &MatchmakeRequest::kind("relay"),
            WAIT
        )
        .await,
        Err(MatchmakeError::BadUrl { .. })
    ));

    let answer = matchmake(&url, &MatchmakeRequest::kind("relay"), WAIT)
        .await
        .unwrap();
    assert!(matches!(
        Link::connect(&answer, Transport::Wss, &options()).await,
        Err(ConnectError::Unavailable(_))
    ));
    let first = Link::connect(&answer, Transport::Ws, &options())
        .await
        .unwrap();
    match Link::connect(&answer, Transport::Ws, &options()).await {
        Err(ConnectError::Refused(ended)) => {
            assert_eq!(
                ended,
                Ended::TokenRefused(4012),
                "a token opens one ws connection"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    drop(first);

    let mut session = Session::start(
        &url,
        MatchmakeRequest::kind("relay"),
        Transport::Udp,
        options(),
    )
    .await
    .unwrap();
    let handle = runtime.handle();
    let running = tokio::spawn(runtime.run());
    handle.shutdown();
    let ended = timeout(WAIT, session.next_event())
        .await
        .expect("ends in time");
    assert_eq!(
        ended,
        SessionEvent::Ended(Ended::Reason(DisconnectReason::ServerShutdown))
    );
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_connects_when_the_client_trusts_the_servers_certificate() {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("tickwire-client-wss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, certified.cert.pem()).unwrap();
    std::fs::write(&key_path, certified.signing_key.serialize_pem()).unwrap();

    let mut config = free_ports_config();
    config.shards = 1;
    config.tls.listen = Some("127.0.0.1:0".parse().unwrap());
    config.tls.cert = Some(cert_path);
    config.tls.key = Some(key_path);
    config.console.enabled = false;
    config.admin.token = "client-sdk-test-token".into();
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds.register("picky", 4, || Box::new(Picky));
    let runtime = Runtime::start(config, kinds).await.unwrap();
    let url = format!("http://{}", runtime.addresses().http);

    let answer = matchmake(&url, &MatchmakeRequest::kind("relay"), WAIT)
        .await
        .unwrap();
    assert!(
        answer
            .endpoints
            .wss
            .as_deref()
            .unwrap()
            .starts_with("wss://127.0.0.1:")
    );
    let untrusting = Link::connect(&answer, Transport::Wss, &options()).await;
    assert!(
        matches!(untrusting, Err(ConnectError::Unavailable(_))),
        "wss without a trust configuration is refused up front: {untrusting:?}"
    );
    let trusting = ConnectOptions {
        tls: Some(tickwire_client::tls_trusting(certified.cert.der()).unwrap()),
        ..options()
    };
    let mut link = Link::connect(&answer, Transport::Wss, &trusting)
        .await
        .unwrap();
    assert_eq!(link.transport(), Transport::Wss);
    link.send(0, Bytes::from_static(b"over tls")).unwrap();
    link.flush().await.unwrap();
    link.close().await;

    // A certificate the client does not trust fails the TLS handshake.
    let stranger = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let wary = ConnectOptions {
        tls: Some(tickwire_client::tls_trusting(stranger.cert.der()).unwrap()),
        ..options()
    };
    let second = matchmake(&url, &MatchmakeRequest::kind("relay"), WAIT)
        .await
        .unwrap();
    assert!(matches!(
        Link::connect(&second, Transport::Wss, &wary).await,
        Err(ConnectError::Io(_))
    ));
    runtime.shut_down().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rooms_refusal_reaches_the_client_in_its_own_words() {
    let (runtime, url) = relay_server().await;
    for transport in [Transport::Udp, Transport::Ws, Transport::Wt] {
        let answer = matchmake(
            &url,
            &MatchmakeRequest::kind("picky").named("cheater"),
            WAIT,
        )
        .await
        .unwrap();
        // Over WebSocket the refusal takes the accepted message's place; UDP's handshake and
        // WebTransport's session are up before the room is asked, so it may end the link
        // instead.
        let ended = match Link::connect(&answer, transport, &options()).await {
            Err(ConnectError::Refused(ended)) => ended,
            Ok(mut link) => match timeout(WAIT, link.next_event()).await.expect("in time") {
                LinkEvent::Ended(ended) => ended,
                other => panic!("{transport:?}: a message before the refusal: {other:?}"),
            },
            Err(other) => panic!("{transport:?}: expected the room's refusal, got {other:?}"),
        };
        assert_eq!(
            ended,
            Ended::Kicked("cheaters may not play".into()),
            "{transport:?}"
        );
        assert!(!ended.is_retryable(), "a refusal is not tried again");
        let error: Box<dyn std::error::Error> = Box::new(ended);
        assert_eq!(error.to_string(), "kicked: cheaters may not play");
    }
    runtime.shut_down().await.unwrap();
}
