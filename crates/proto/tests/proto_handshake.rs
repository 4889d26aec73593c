//! The handshake under attack and in the ordinary case: forged requests, expired, tampered,
//! replayed and wrong-server tokens, replayed packets, amplification, server-dictated
//! parameters, timeouts and disconnect reasons.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::{
    Harness, PROTOCOL_ID, UNIX_START, client_address, issuer, server_address, server_key,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use tickwire_proto::reliable::{ChannelKind, ReliabilityConfig};
use tickwire_proto::sim::LinkConfig;
use tickwire_proto::{
    Client, ClientEvent, ClientState, ConnectionParams, DisconnectReason, MAX_DATAGRAM_BYTES,
    ServerConfig, ServerEvent,
};

fn quiet_link() -> LinkConfig {
    LinkConfig::perfect(Duration::from_millis(20))
}

/// The handshake reply budget: the server never sends more to not-yet-connected clients
/// than they sent it.
fn assert_no_amplification(harness: &Harness) {
    let stats = harness.server.stats();
    assert!(
        stats.handshake_bytes_sent <= stats.handshake_bytes_received,
        "server sent {} handshake bytes for {} received",
        stats.handshake_bytes_sent,
        stats.handshake_bytes_received
    );
}

/// A harness whose server waits for the driver to accept each connection, with one client
/// that has completed its half of the handshake; returns the server's id for it.
fn awaiting_the_driver() -> (Harness, tickwire_proto::ConnectionId) {
    let mut config = ServerConfig::new(PROTOCOL_ID, server_key(), vec![server_address()]);
    config.accept_by_driver = true;
    config.params.timeout = Duration::from_secs(2);
    let mut harness = Harness::with_config(config, quiet_link(), 5);
    harness.add_client(7);
    harness.run_for(Duration::from_millis(500));
    let connection = harness
        .server_events
        .iter()
        .find_map(|event| match event {
            ServerEvent::Connected { connection, .. } => Some(*connection),
            _ => None,
        })
        .expect("the server saw the connection");
    assert!(
        !harness.client_connected(0),
        "no accepted packet before the driver accepts"
    );
    (harness, connection)
}

#[test]
fn a_driver_that_accepts_tells_the_client_the_rate_it_chose() {
    let (mut harness, connection) = awaiting_the_driver();
    let now = harness.now;
    harness.server.accept(now, connection, 20);
    // Accepted once: a later call changes nothing, a resent accepted packet included.
    harness.server.accept(now, connection, 90);
    harness.connect_all();
    let params = harness.connected_params(0);
    let expected = ConnectionParams {
        tick_rate_hz: 20,
        ..harness.server.params().clone()
    };
    assert_eq!(
        params,
        Some(expected),
        "the driver's rate, the rest configured"
    );
}

#[test]
fn a_driver_refusing_before_it_accepts_is_heard_with_its_reason() {
    let (mut harness, connection) = awaiting_the_driver();
    let now = harness.now;
    harness
        .server
        .disconnect_saying(now, connection, DisconnectReason::Kicked, "room is full");
    harness.run_for(Duration::from_millis(500));
    let client = &harness.clients[0].client;
    assert_eq!(
        client.state(),
        ClientState::Disconnected(DisconnectReason::Kicked)
    );
    assert_eq!(client.disconnect_text(), "room is full");
}

#[test]
fn a_connection_the_driver_never_accepts_times_out() {
    let (mut harness, _) = awaiting_the_driver();
    harness.run_for(Duration::from_secs(3));
    assert!(
        harness.server_events.iter().any(|event| matches!(
            event,
            ServerEvent::Disconnected {
                reason: DisconnectReason::TimedOut,
                ..
            }
        )),
        "the server let it go at the connection's timeout"
    );
    assert_eq!(harness.server.connection_count(), 0);
    assert!(!harness.client_connected(0));
}

#[test]
fn a_client_connects_and_adopts_the_parameters_the_server_dictates() {
    let mut config = ServerConfig::new(PROTOCOL_ID, server_key(), vec![server_address()]);
    config.params = ConnectionParams {
        tick_rate_hz: 30,
        keepalive_interval: Duration::from_millis(250),
        timeout: Duration::from_secs(4),
        mtu: 1000,
        channels: vec![ChannelKind::Reliable, ChannelKind::UnreliableSequenced],
        max_message_size: 64 * 1024,
    };
    let mut harness = Harness::with_config(config.clone(), quiet_link(), 1);
    let token = harness.issue(42, b"room:arena-1");
    harness.add_client_with(token);
    harness.connect_all();

    let params = harness.connected_params(0);
    assert_eq!(
        params,
        Some(config.params),
        "the client adopts exactly what the server sent"
    );

    let connected = harness.server_events.iter().find_map(|event| match event {
        ServerEvent::Connected {
            connection,
            client_id,
            address,
            user_data,
        } => Some((*connection, *client_id, *address, user_data.clone())),
        _ => None,
    });
    let (connection, client_id, address, user_data) =
        connected.expect("the server saw the connection");
    assert_eq!(client_id, 42);
    assert_eq!(address, client_address(0));
    assert_eq!(&user_data[..12], b"room:arena-1");

    harness.clients[0]
        .client
        .send(0, Bytes::from_static(b"hello server"))
        .unwrap();
    harness
        .server
        .send(
            harness.now,
            connection,
            0,
            Bytes::from_static(b"hello client"),
        )
        .unwrap();
    harness.run_for(Duration::from_millis(200));
    assert!(harness.server_events.iter().any(|event| matches!(
        event,
        ServerEvent::Message { channel: 0, message, .. } if message.as_ref() == b"hello server"
    )));
    assert!(harness.clients[0].events.iter().any(|event| matches!(
        event,
        ClientEvent::Message { channel: 0, message } if message.as_ref() == b"hello client"
    )));
    assert_no_amplification(&harness);
}

#[test]
fn ten_thousand_forged_requests_create_no_state_and_get_no_reply() {
    let mut harness = Harness::new(quiet_link(), 2);
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    let mut received = 0u64;
    for i in 0..10_000u32 {
        let from = SocketAddr::new(
            std::net::IpAddr::from(rng.random::<[u8; 4]>()),
            rng.random_range(1..=u16::MAX),
        );
        // Mostly the exact request size with a request prefix, so parsing goes deep.
        let len = if i % 4 == 0 {
            rng.random_range(0..1400)
        } else {
            1066
        };
        let mut datagram = vec![0u8; len];
        rng.fill(&mut datagram[..]);
        if i % 4 != 0 {
            datagram[0] = 0;
            datagram[1..14].copy_from_slice(&tickwire_proto::token::VERSION_INFO);
            datagram[14..22].copy_from_slice(&PROTOCOL_ID.to_le_bytes());
            datagram[22..30].copy_from_slice(&(UNIX_START + 30).to_le_bytes());
        }
        harness.server.handle_datagram(harness.now, from, &datagram);
        received += len as u64;
    }
    assert!(
        harness
            .server
            .poll_transmit(harness.now, &mut buf)
            .is_none(),
        "no reply to a forgery"
    );
    let stats = harness.server.stats();
    assert_eq!(harness.server.connection_count(), 0);
    assert_eq!(stats.datagrams_sent, 0);
    assert_eq!(stats.bytes_received, received);
    assert_eq!(
        stats.dropped.total(),
        10_000,
        "every forgery is counted: {:?}",
        stats.dropped
    );
    assert!(stats.dropped.token_tampered >= 7_000, "{:?}", stats.dropped);
    assert!(harness.server.poll_event().is_none());
}

/// The request a fresh client would send with `token`.
fn request_bytes(harness: &Harness, token: tickwire_proto::token::ConnectToken) -> Vec<u8> {
    let mut client = Client::new(
        token,
        harness.now,
        harness.unix_now(),
        ReliabilityConfig::default(),
    );
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    let transmit = client
        .poll_transmit(harness.now, &mut buf)
        .expect("a request is due");
    buf.truncate(transmit.len);
    buf
}

#[test]
fn expired_tampered_and_wrong_server_tokens_are_refused_and_counted() {
    let mut harness = Harness::new(quiet_link(), 3);
    let mut rng = ChaCha20Rng::seed_from_u64(3);

    let expired = issuer().issue(&mut rng, UNIX_START - 120, 1, &[]).unwrap();
    let request = request_bytes(&harness, expired);
    harness
        .server
        .handle_datagram(harness.now, client_address(0), &request);

    let mut tampered = issuer().issue(&mut rng, UNIX_START, 2, &[]).unwrap();
    tampered.private_token[100] ^= 0x01;
    let request = request_bytes(&harness, tampered);
    harness
        .server
        .handle_datagram(harness.now, client_address(1), &request);

    let mut elsewhere = issuer();
    elsewhere.server_addresses = vec!["127.0.0.1:9999".parse().unwrap()];
    let wrong_server = elsewhere.issue(&mut rng, UNIX_START, 3, &[]).unwrap();
    let request = request_bytes(&harness, wrong_server);
    harness
        .server
        .handle_datagram(harness.now, client_address(2), &request);

    let mut other_key = issuer();
    other_key.key = tickwire_proto::crypto::Key([1; 32]);
    let foreign = other_key.issue(&mut rng, UNIX_START, 4, &[]).unwrap();
    let request = request_bytes(&harness, foreign);
    harness
        .server
        .handle_datagram(harness.now, client_address(3), &request);

    let mut other_game = issuer();
    other_game.protocol_id ^= 1;
    let other_protocol = other_game.issue(&mut rng, UNIX_START, 5, &[]).unwrap();
    let request = request_bytes(&harness, other_protocol);
    harness
        .server
        .handle_datagram(harness.now, client_address(4), &request);

    let dropped = &harness.server.stats().dropped;
    assert_eq!(dropped.wrong_protocol, 1, "{dropped:?}");
    assert_eq!(dropped.token_expired, 1, "{dropped:?}");
    assert_eq!(
        dropped.token_tampered, 2,
        "tampered and foreign-key tokens: {dropped:?}"
    );
    assert_eq!(dropped.token_wrong_server, 1, "{dropped:?}");
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    assert!(
        harness
            .server
            .poll_transmit(harness.now, &mut buf)
            .is_none()
    );
}

#[test]
fn a_client_holding_an_expired_token_gives_up_without_connecting() {
    let mut harness = Harness::new(quiet_link(), 4);
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let mut short = issuer();
    short.validity_seconds = 1;
    let token = short.issue(&mut rng, UNIX_START - 5, 1, &[]).unwrap();
    harness.add_client_with(token);
    harness.run_for(Duration::from_secs(6));
    assert_eq!(
        harness.clients[0].client.state(),
        ClientState::Disconnected(DisconnectReason::HandshakeTimedOut)
    );
    assert_eq!(harness.server.connection_count(), 0);
}

#[test]
fn a_token_is_single_use_per_address() {
    let mut harness = Harness::new(quiet_link(), 5);
    let token = harness.issue(7, &[]);
    let request = request_bytes(&harness, token);
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];

    harness
        .server
        .handle_datagram(harness.now, client_address(0), &request);
    assert!(
        harness
            .server
            .poll_transmit(harness.now, &mut buf)
            .is_some(),
        "challenge"
    );
    // The same client retrying is fine; another address using the token is not.
    harness
        .server
        .handle_datagram(harness.now, client_address(0), &request);
    assert!(
        harness
            .server
            .poll_transmit(harness.now, &mut buf)
            .is_some(),
        "challenge again"
    );
    harness
        .server
        .handle_datagram(harness.now, client_address(1), &request);
    assert!(
        harness
            .server
            .poll_transmit(harness.now, &mut buf)
            .is_none()
    );
    assert_eq!(harness.server.stats().dropped.token_replayed, 1);
    assert_no_amplification(&harness);
}

#[test]
fn a_challenge_response_only_works_from_the_address_it_was_issued_to() {
    let mut harness = Harness::new(quiet_link(), 6);
    let token = harness.issue(8, &[]);
    let mut client = Client::new(
        token,
        harness.now,
        harness.unix_now(),
        ReliabilityConfig::default(),
    );
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    let from = client_address(0);

    let request = client.poll_transmit(harness.now, &mut buf).unwrap();
    harness
        .server
        .handle_datagram(harness.now, from, &buf[..request.len]);
    let challenge = harness.server.poll_transmit(harness.now, &mut buf).unwrap();
    client.handle_datagram(harness.now, server_address(), &buf[..challenge.len]);
    let response = client.poll_transmit(harness.now, &mut buf).unwrap();
    let response = buf[..response.len].to_vec();

    harness
        .server
        .handle_datagram(harness.now, client_address(5), &response);
    assert_eq!(harness.server.connection_count(), 0);
    assert_eq!(harness.server.stats().dropped.challenge_invalid, 1);

    let mut forged = response.clone();
    forged[20] ^= 0x40;
    harness.server.handle_datagram(harness.now, from, &forged);
    assert_eq!(harness.server.stats().dropped.challenge_invalid, 2);

    harness.server.handle_datagram(harness.now, from, &response);
    assert_eq!(
        harness.server.connection_count(),
        1,
        "the genuine response connects"
    );
    assert_no_amplification(&harness);
}

#[test]
fn a_replayed_data_packet_is_dropped() {
    let mut harness = Harness::new(quiet_link(), 7);
    harness.add_client(9);
    harness.connect_all();
    harness.run_for(Duration::from_millis(100));

    let now = harness.now;
    harness.clients[0]
        .client
        .send(0, Bytes::from_static(b"once"))
        .unwrap();
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    let transmit = harness.clients[0]
        .client
        .poll_transmit(now, &mut buf)
        .unwrap();
    let packet = buf[..transmit.len].to_vec();

    harness
        .server
        .handle_datagram(now, client_address(0), &packet);
    harness
        .server
        .handle_datagram(now, client_address(0), &packet);
    assert_eq!(harness.server.stats().dropped.packet_replayed, 1);
    let deliveries = std::iter::from_fn(|| harness.server.poll_event())
        .filter(|event| matches!(event, ServerEvent::Message { message, .. } if message.as_ref() == b"once"))
        .count();
    assert_eq!(deliveries, 1, "the message is delivered once");
}

#[test]
fn a_full_server_denies_with_a_reason_and_a_returning_client_id_replaces_its_old_connection() {
    let mut config = ServerConfig::new(PROTOCOL_ID, server_key(), vec![server_address()]);
    config.max_clients = 1;
    let mut harness = Harness::with_config(config, quiet_link(), 8);
    harness.add_client(1);
    harness.connect_all();
    harness.add_client(2);
    // Client id 1 again, from another address with a fresh token: a phone on a new network.
    harness.add_client(1);
    harness.run_for(Duration::from_secs(1));
    assert_eq!(
        harness.clients[1].client.state(),
        ClientState::Disconnected(DisconnectReason::ServerFull)
    );
    assert_eq!(
        harness.clients[0].client.state(),
        ClientState::Disconnected(DisconnectReason::AlreadyConnected),
        "the older connection is told it was replaced"
    );
    assert_eq!(harness.clients[2].client.state(), ClientState::Connected);
    let stats = harness.server.stats();
    assert_eq!(stats.connections_denied, 1);
    assert_eq!(stats.connections_replaced, 1);
    assert_no_amplification(&harness);
}

#[test]
fn a_silent_peer_is_dropped_after_the_timeout_the_server_dictated() {
    let mut config = ServerConfig::new(PROTOCOL_ID, server_key(), vec![server_address()]);
    config.params.timeout = Duration::from_secs(3);
    let mut harness = Harness::with_config(config, quiet_link(), 9);
    harness.add_client(1);
    harness.connect_all();
    harness.run_for(Duration::from_secs(5));
    assert_eq!(
        harness.clients[0].client.state(),
        ClientState::Connected,
        "keepalives hold it open"
    );

    let silenced_at = harness.now;
    harness.link.set_config(LinkConfig {
        loss: 1.0,
        ..quiet_link()
    });
    harness.run_for(Duration::from_secs(5));
    let server_saw = harness.server_events.iter().any(|event| {
        matches!(
            event,
            ServerEvent::Disconnected {
                reason: DisconnectReason::TimedOut,
                ..
            }
        )
    });
    assert!(
        server_saw,
        "the server dropped the silent client: {:?}",
        harness.server_events
    );
    assert_eq!(
        harness.clients[0].client.state(),
        ClientState::Disconnected(DisconnectReason::TimedOut),
        "the client uses the dictated 3 s timeout, not its own"
    );
    assert_eq!(harness.server.connection_count(), 0);
    assert!(harness.now.duration_since(silenced_at) >= Duration::from_secs(3));
}

#[test]
fn disconnect_reasons_reach_the_other_side() {
    let mut harness = Harness::new(quiet_link(), 10);
    harness.add_client(1);
    harness.add_client(2);
    harness.connect_all();

    let kicked = harness
        .server
        .connection_at(client_address(0))
        .expect("client 0 is connected");
    let now = harness.now;
    // With the server's words after the code, cut to a close frame's 123 bytes.
    let long = format!("cheaters may not play{}", "!".repeat(200));
    harness
        .server
        .disconnect_saying(now, kicked, DisconnectReason::Kicked, &long);
    harness.clients[1].client.disconnect(now);
    harness.run_for(Duration::from_millis(200));

    assert_eq!(
        harness.clients[0].client.state(),
        ClientState::Disconnected(DisconnectReason::Kicked)
    );
    assert_eq!(
        harness.clients[0].client.disconnect_text(),
        &long[..123],
        "the words arrive, cut to 123 bytes"
    );
    assert_eq!(harness.clients[1].client.disconnect_text(), "");
    assert!(harness.server_events.iter().any(|event| matches!(
        event,
        ServerEvent::Disconnected {
            client_id: 2,
            reason: DisconnectReason::Requested,
            ..
        }
    )));
    assert_eq!(harness.server.connection_count(), 0);
}

/// UDP may reorder: a client that the server accepted and at once kicked (a token naming a
/// room that no longer exists) can see the disconnect before the accepted packet. It ends
/// with the server's reason, not a timeout seconds later.
#[test]
fn a_disconnect_that_overtakes_the_accepted_packet_ends_the_handshake_with_its_reason() {
    let mut harness = Harness::new(quiet_link(), 12);
    harness.add_client(1);
    let now = harness.now;
    let mut client = harness.clients.remove(0).client;
    let server = &mut harness.server;
    let mut buf = vec![0; MAX_DATAGRAM_BYTES];
    let from = client_address(0);

    // Request, then challenge.
    while let Some(transmit) = client.poll_transmit(now, &mut buf) {
        server.handle_datagram(now, from, &buf[..transmit.len]);
    }
    while let Some(transmit) = server.poll_transmit(now, &mut buf) {
        client.handle_datagram(now, server_address(), &buf[..transmit.len]);
    }
    // Response: the server accepts, and kicks before anything reaches the client.
    while let Some(transmit) = client.poll_transmit(now, &mut buf) {
        server.handle_datagram(now, from, &buf[..transmit.len]);
    }
    let connection = std::iter::from_fn(|| server.poll_event())
        .find_map(|event| match event {
            ServerEvent::Connected { connection, .. } => Some(connection),
            _ => None,
        })
        .expect("the server accepted the response");
    server.disconnect(now, connection, DisconnectReason::Kicked);
    let mut replies = Vec::new();
    while let Some(transmit) = server.poll_transmit(now, &mut buf) {
        replies.push(buf[..transmit.len].to_vec());
    }
    assert!(
        replies.len() >= 2,
        "accepted, then disconnects: {replies:?}"
    );

    for reply in replies.iter().rev() {
        client.handle_datagram(now, server_address(), reply);
    }
    assert_eq!(
        client.state(),
        ClientState::Disconnected(DisconnectReason::Kicked)
    );
}

#[test]
fn forged_packets_from_a_connected_address_are_counted_not_fatal() {
    let mut harness = Harness::new(quiet_link(), 11);
    harness.add_client(1);
    harness.connect_all();
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    for _ in 0..1_000 {
        let len = rng.random_range(0..1300);
        let mut datagram = vec![0u8; len];
        rng.fill(&mut datagram[..]);
        harness
            .server
            .handle_datagram(harness.now, client_address(0), &datagram);
    }
    assert_eq!(
        harness.server.connection_count(),
        1,
        "garbage never ends a connection"
    );
    harness.run_for(Duration::from_secs(1));
    assert_eq!(harness.clients[0].client.state(), ClientState::Connected);
    let dropped = &harness.server.stats().dropped;
    assert_eq!(
        dropped.total(),
        1_000,
        "every forgery is counted: {dropped:?}"
    );
    assert_no_amplification(&harness);
}
