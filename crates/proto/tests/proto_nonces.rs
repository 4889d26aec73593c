//! Nonces and recorded handshakes: no key ever seals two different packets under one nonce,
//! on either side, whatever the handshake goes through; and what an observer recorded of a
//! handshake (a challenge, a request, a response) buys nothing later.
//!
//! Every check reads the wire as an observer would: an encrypted packet's prefix and
//! sequence are in the clear, and its nonce is its sequence, so two different datagrams
//! with one sequence under one key are a nonce sealed twice.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::{Harness, PROTOCOL_ID, Sent, client_address, server_address, server_key};
use proptest::prelude::*;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::sim::LinkConfig;
use tickwire_proto::{
    Client, ClientEvent, ClientState, DisconnectReason, ServerConfig, ServerEvent,
};

const REQUEST: u8 = 0;
const CHALLENGE: u8 = 2;
const RESPONSE: u8 = 3;

fn quiet_link() -> LinkConfig {
    LinkConfig::perfect(Duration::from_millis(20))
}

/// An encrypted datagram's type and sequence, read from its clear header; `None` for a
/// request (the one packet sent in the clear).
fn type_and_sequence(bytes: &[u8]) -> Option<(u8, u64)> {
    let prefix = *bytes.first()?;
    let packet_type = prefix & 0x0f;
    if packet_type == REQUEST {
        return None;
    }
    let len = usize::from(prefix >> 4);
    let mut sequence = [0u8; 8];
    sequence[..len].copy_from_slice(bytes.get(1..1 + len)?);
    Some((packet_type, u64::from_le_bytes(sequence)))
}

/// Which way a datagram went and with whom: each client holds its own token, so its own
/// pair of keys, and `(client address, direction)` names one key for a recording in which
/// every address holds one token.
fn key_of(sent: &Sent) -> (SocketAddr, bool) {
    if sent.from == server_address() {
        (sent.to, true)
    } else {
        (sent.from, false)
    }
}

/// Fails if one key sealed two different datagrams under one nonce. The same datagram sent
/// again (a client repeating its sealed response) is one sealing.
fn assert_no_nonce_sealed_twice(wire: &[Sent]) {
    let mut sealed: HashMap<((SocketAddr, bool), u64), &[u8]> = HashMap::new();
    for sent in wire {
        let Some((_, sequence)) = type_and_sequence(&sent.bytes) else {
            continue;
        };
        if let Some(earlier) = sealed.insert((key_of(sent), sequence), &sent.bytes)
            && earlier != sent.bytes.as_slice()
        {
            panic!(
                "two different packets under one key and nonce: {:?} sequence {sequence}",
                key_of(sent)
            );
        }
    }
}

fn connection_of(harness: &Harness, client_id: u64) -> Option<tickwire_proto::ConnectionId> {
    harness
        .server_events
        .iter()
        .rev()
        .find_map(|event| match event {
            ServerEvent::Connected {
                connection,
                client_id: id,
                ..
            } if *id == client_id => Some(*connection),
            _ => None,
        })
}

#[test]
fn a_client_on_a_fresh_server_never_sees_a_sequence_twice_under_its_key() {
    let mut harness = Harness::new(quiet_link(), 3);
    harness.record = true;
    let first = harness.add_client(1);
    let second = harness.add_client(2);
    harness.connect_all();
    for round in 0..20u8 {
        for client_id in [1, 2] {
            let connection = connection_of(&harness, client_id).expect("connected");
            let now = harness.now;
            harness
                .server
                .send(now, connection, 0, Bytes::from(vec![round; 40]))
                .expect("queued");
        }
        harness.clients[first]
            .client
            .send(0, Bytes::from_static(b"up"))
            .expect("queued");
        harness.run_for(Duration::from_millis(50));
    }
    let connection = connection_of(&harness, 1).expect("connected");
    let now = harness.now;
    harness
        .server
        .disconnect(now, connection, DisconnectReason::Kicked);
    harness.run_for(Duration::from_secs(1));
    assert_eq!(
        harness.clients[first].client.state(),
        ClientState::Disconnected(DisconnectReason::Kicked)
    );

    for client in [first, second] {
        let mut seen = HashMap::new();
        let mut types = Vec::new();
        for sent in harness
            .wire
            .iter()
            .filter(|sent| sent.to == client_address(client))
        {
            let (packet_type, sequence) = type_and_sequence(&sent.bytes).expect("encrypted");
            types.push(packet_type);
            if let Some(earlier) = seen.insert(sequence, packet_type) {
                panic!(
                    "client {client} saw sequence {sequence} twice (types {earlier} and \
                     {packet_type})"
                );
            }
        }
        assert!(types.contains(&CHALLENGE) && types.contains(&4) && types.contains(&5));
    }
    assert!(
        harness
            .wire
            .iter()
            .any(|sent| sent.to == client_address(first) && sent.bytes[0] & 0x0f == 6),
        "the kick's disconnect packets are in the recording"
    );
    assert_no_nonce_sealed_twice(&harness.wire);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Handshakes on a lossy link (so requests, challenges and responses are repeated),
    /// denials by a full server, replacements by a client id coming back from another
    /// address, disconnects and reconnections: no key seals two packets under one nonce.
    #[test]
    fn no_key_seals_two_packets_under_one_nonce(
        seed in any::<u64>(),
        max_clients in 1usize..4,
        client_ids in proptest::collection::vec(1u64..5, 2..7),
        loss in 0.0f64..0.3,
    ) {
        let mut config = ServerConfig::new(PROTOCOL_ID, server_key(), vec![server_address()]);
        config.max_clients = max_clients;
        let link = LinkConfig { loss, duplicate: 0.05, reorder: 0.1, ..LinkConfig::hostile() };
        let mut harness = Harness::with_config(config, link, seed);
        harness.record = true;
        for (wave, &client_id) in client_ids.iter().enumerate() {
            harness.add_client(client_id);
            harness.run_for(Duration::from_millis(300));
            for index in 0..harness.clients.len() {
                if harness.clients[index].client.state() == ClientState::Connected {
                    let _ = harness.clients[index].client.send(0, Bytes::from_static(b"hi"));
                }
            }
            if wave % 3 == 2 {
                let now = harness.now;
                harness.clients[0].client.disconnect(now);
            }
            if let Some(connection) = connection_of(&harness, client_id) {
                let now = harness.now;
                let _ = harness.server.send(now, connection, 1, Bytes::from_static(b"tick"));
            }
        }
        harness.run_for(Duration::from_secs(3));
        prop_assert!(harness.server.stats().connections_accepted > 0);
        assert_no_nonce_sealed_twice(&harness.wire);
    }
}

/// The datagrams of one type a client sent or was sent.
fn recorded(harness: &Harness, client: usize, packet_type: u8, to_server: bool) -> Vec<Vec<u8>> {
    let address = client_address(client);
    harness
        .wire
        .iter()
        .filter(|sent| {
            if to_server {
                sent.from == address
            } else {
                sent.to == address
            }
        })
        .filter(|sent| sent.bytes[0] & 0x0f == packet_type)
        .map(|sent| sent.bytes.clone())
        .collect()
}

#[test]
fn a_recorded_challenge_replayed_to_a_connected_client_changes_nothing() {
    // Enough clients before this one that its challenge's sequence is far ahead of its
    // connection's, as any server that has been up a while has.
    let mut harness = Harness::new(quiet_link(), 5);
    harness.record = true;
    for client_id in 0..300 {
        harness.add_client(client_id);
    }
    harness.connect_all();
    let victim = 299;
    let challenge = recorded(&harness, victim, CHALLENGE, false)
        .pop()
        .expect("the victim's challenge was recorded");
    let now = harness.now;
    harness.clients[victim]
        .client
        .handle_datagram(now, server_address(), &challenge);

    let connection = connection_of(&harness, victim as u64).expect("connected");
    let now = harness.now;
    harness
        .server
        .send(now, connection, 0, Bytes::from_static(b"still here"))
        .expect("queued");
    harness.run_for(Duration::from_secs(1));
    assert!(
        harness.clients[victim].events.iter().any(|event| matches!(
            event,
            ClientEvent::Message { message, .. } if message.as_ref() == b"still here"
        )),
        "the connected client still takes in the server's packets"
    );
    assert_eq!(
        harness.clients[victim].client.state(),
        ClientState::Connected
    );
}

/// Replays a recorded request and response from `from`, as an attacker who saw them could.
fn replay_handshake(harness: &mut Harness, from: SocketAddr, request: &[u8], response: &[u8]) {
    let now = harness.now;
    harness.server.handle_datagram(now, from, request);
    harness.run_for(Duration::from_millis(100));
    let now = harness.now;
    harness.server.handle_datagram(now, from, response);
    harness.run_for(Duration::from_millis(100));
}

#[test]
fn a_recorded_handshake_neither_rebuilds_a_connection_nor_kicks_its_client() {
    let mut harness = Harness::new(quiet_link(), 6);
    harness.record = true;
    let first = harness.add_client(7);
    harness.connect_all();
    let request = recorded(&harness, first, REQUEST, true).remove(0);
    let response = recorded(&harness, first, RESPONSE, true).remove(0);

    // The client leaves; its token has not expired. The recording is replayed from its
    // address: no connection may come of it (it would restart the connection's sequences
    // under the same keys).
    let now = harness.now;
    harness.clients[first].client.disconnect(now);
    harness.run_for(Duration::from_secs(1));
    assert_eq!(harness.server.connection_count(), 0);
    replay_handshake(&mut harness, client_address(first), &request, &response);
    assert_eq!(
        harness.server.connection_count(),
        0,
        "no connection from a recording"
    );

    // The same client id comes back with a fresh token from elsewhere; replaying the old
    // handshake again must not replace (kick) that connection.
    let back = harness.add_client(7);
    harness.connect_all();
    replay_handshake(&mut harness, client_address(first), &request, &response);
    assert_eq!(harness.clients[back].client.state(), ClientState::Connected);
    assert_eq!(harness.server.stats().connections_replaced, 0);
    let connects = harness
        .server_events
        .iter()
        .filter(|event| matches!(event, ServerEvent::Connected { .. }))
        .count();
    assert_eq!(
        connects, 2,
        "the first connection and the one that came back"
    );
}

#[test]
fn a_full_server_turns_a_client_away_without_using_up_its_token() {
    let mut config = ServerConfig::new(PROTOCOL_ID, server_key(), vec![server_address()]);
    config.max_clients = 1;
    let mut harness = Harness::with_config(config, quiet_link(), 9);
    let occupant = harness.add_client(1);
    harness.connect_all();
    let token = harness.issue(2, b"late");
    let turned_away = harness.add_client_with(token.clone());
    harness.run_for(Duration::from_secs(1));
    assert_eq!(
        harness.clients[turned_away].client.state(),
        ClientState::Disconnected(DisconnectReason::ServerFull)
    );

    // Room frees up; the same token, from another address, still gets in.
    let now = harness.now;
    harness.clients[occupant].client.disconnect(now);
    harness.run_for(Duration::from_secs(1));
    let retry = Client::new(
        token,
        harness.now,
        harness.unix_now(),
        ReliabilityConfig::default(),
    );
    let placeholder = harness.issue(99, b"placeholder");
    let index = harness.add_client_with(placeholder);
    harness.clients[index].client = retry;
    let connected = harness.run_while_not(Duration::from_secs(5), |h| h.client_connected(index));
    assert!(connected, "{:?}", harness.clients[index].client.state());
}

#[test]
fn a_recorded_request_replayed_during_a_newer_handshake_does_not_break_it() {
    let mut harness = Harness::new(quiet_link(), 10);
    harness.record = true;
    let client = harness.add_client(5);
    harness.connect_all();
    let old_request = recorded(&harness, client, REQUEST, true).remove(0);
    let now = harness.now;
    harness.clients[client].client.disconnect(now);
    harness.run_for(Duration::from_secs(5));

    // The same player comes back from the same address (a NAT keeps its port) with a fresh
    // token, while someone replays the old request from that address over and over.
    let fresh = harness.issue(5, b"again");
    harness.clients[client].client = Client::new(
        fresh,
        harness.now,
        harness.unix_now(),
        ReliabilityConfig::default(),
    );
    harness.clients[client].events.clear();
    for _ in 0..100 {
        let now = harness.now;
        harness
            .server
            .handle_datagram(now, client_address(client), &old_request);
        harness.run_for(Duration::from_millis(10));
    }
    let connected = harness.run_while_not(Duration::from_secs(3), |h| h.client_connected(client));
    assert!(
        connected,
        "the fresh handshake completes: {:?}",
        harness.clients[client].client.state()
    );
    assert!(harness.server.stats().dropped.token_replayed > 0);
}
