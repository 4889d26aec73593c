//! The server's ready queue and deadlines: `poll_transmit` serves only connections with
//! something to send, and `poll_timeout`/`handle_timeout` find keepalives, resends and
//! timeouts without a scan. Each test drives the server alone on the virtual clock where it
//! matters that nothing else happens, so a timer that never fires shows as silence.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Harness, PROTOCOL_ID, client_address, server_address, server_key};
use tickwire_proto::sim::LinkConfig;
use tickwire_proto::{
    ClientEvent, ConnectionId, DisconnectReason, Server, ServerConfig, ServerEvent,
};

const RELIABLE: u8 = 0;
const UNRELIABLE: u8 = 1;

fn config(keepalive: Duration, timeout: Duration) -> ServerConfig {
    let mut config = ServerConfig::new(PROTOCOL_ID, server_key(), vec![server_address()]);
    config.params.keepalive_interval = keepalive;
    config.params.timeout = timeout;
    config
}

fn connected(keepalive: Duration, timeout: Duration, clients: u64) -> Harness {
    let mut harness = Harness::with_config(
        config(keepalive, timeout),
        LinkConfig::perfect(Duration::from_millis(5)),
        11,
    );
    for id in 0..clients {
        harness.add_client(id);
    }
    harness.connect_all();
    // Let the handshake's last packets and acks land.
    harness.run_for(Duration::from_millis(50));
    harness
}

fn id_of(harness: &Harness, client: usize) -> ConnectionId {
    harness
        .server
        .connection_at(client_address(client))
        .expect("client is connected")
}

/// Everything `poll_transmit` has now, in order.
fn drain(server: &mut Server, now: Instant) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut buf = vec![0u8; 2048];
    let mut out = Vec::new();
    while let Some(transmit) = server.poll_transmit(now, &mut buf) {
        out.push((transmit.destination, buf[..transmit.len].to_vec()));
    }
    out
}

/// Steps the server alone (no datagram reaches it) from deadline to deadline until `until`,
/// returning what it sent with the time it sent it.
fn run_server_alone(
    server: &mut Server,
    now: &mut Instant,
    until: Instant,
    events: &mut Vec<(Instant, ServerEvent)>,
) -> Vec<(Instant, SocketAddr, Vec<u8>)> {
    let mut sent = Vec::new();
    let mut steps = 0;
    while let Some(at) = server.poll_timeout() {
        if at > until {
            break;
        }
        assert!(
            at >= *now,
            "poll_timeout went back in time: {at:?} before {now:?}"
        );
        steps += 1;
        assert!(steps < 100_000, "the server's deadlines never settle");
        *now = at;
        server.handle_timeout(*now);
        while let Some(event) = server.poll_event() {
            events.push((*now, event));
        }
        for (to, bytes) in drain(server, *now) {
            sent.push((*now, to, bytes));
        }
    }
    *now = until;
    sent
}

#[test]
fn a_lost_reliable_message_is_resent_when_its_timer_fires_with_nothing_else_happening() {
    // Keepalives far off, so only the resend timer can make the server send.
    let mut harness = connected(Duration::from_secs(5), Duration::from_secs(20), 1);
    let id = id_of(&harness, 0);
    let mut now = harness.now;
    harness
        .server
        .send(now, id, RELIABLE, Bytes::from_static(b"must arrive"))
        .expect("queued");
    let first = drain(&mut harness.server, now);
    assert_eq!(
        first.len(),
        1,
        "the message goes out at once, in one datagram"
    );
    // ...and is lost: the client never sees it.
    let rto = harness
        .server
        .connection_stats(id)
        .expect("connected")
        .reliability
        .resend_timeout;
    assert_eq!(
        harness.server.poll_timeout(),
        Some(now + rto),
        "the next deadline must be the unacked message's resend"
    );
    let mut events = Vec::new();
    let until = now + rto;
    let sent = run_server_alone(&mut harness.server, &mut now, until, &mut events);
    assert_eq!(
        sent.len(),
        1,
        "exactly one datagram, the resend, when the resend timer fires: {sent:?}"
    );
    assert_eq!(sent[0].1, client_address(0));
    let client = &mut harness.clients[0].client;
    client.handle_datagram(now, server_address(), &sent[0].2);
    let got: Vec<_> = std::iter::from_fn(|| client.poll_event()).collect();
    assert!(
        got.contains(&ClientEvent::Message {
            channel: RELIABLE,
            message: Bytes::from_static(b"must arrive"),
        }),
        "the resent datagram must carry the message: {got:?}"
    );
    assert!(events.is_empty(), "nothing else happened: {events:?}");
}

#[test]
fn idle_connections_get_keepalives_on_time_and_time_out_when_the_peer_is_silent() {
    let keepalive = Duration::from_millis(100);
    let timeout = Duration::from_millis(1500);
    let clients = 20;
    let mut harness = connected(keepalive, timeout, clients);
    let mut now = harness.now;
    let mut events = Vec::new();
    let until = now + Duration::from_secs(2);
    let sent = run_server_alone(&mut harness.server, &mut now, until, &mut events);
    for client in 0..clients as usize {
        let times: Vec<Instant> = sent
            .iter()
            .filter(|(_, to, _)| *to == client_address(client))
            .map(|(at, _, _)| *at)
            .collect();
        // The client's last packet reached the server at most 50 ms before the run; it
        // times out 1.5 s after that, sending a keepalive every 100 ms meanwhile.
        assert!(
            times.len() >= 14,
            "client {client} got {} keepalives in its last 1.5 s, want one per 100 ms",
            times.len()
        );
        for pair in times.windows(2) {
            assert_eq!(
                pair[1] - pair[0],
                keepalive,
                "client {client}: keepalives must be exactly one interval apart"
            );
        }
        let ended = events.iter().find_map(|(at, event)| match event {
            ServerEvent::Disconnected {
                client_id, reason, ..
            } if *client_id == client as u64 => Some((*at, *reason)),
            _ => None,
        });
        let (ended_at, reason) = ended.unwrap_or_else(|| panic!("client {client} never timed out"));
        assert_eq!(reason, DisconnectReason::TimedOut);
        assert!(
            times.iter().all(|at| *at <= ended_at),
            "client {client}: no keepalive after the timeout"
        );
    }
    assert_eq!(harness.server.connection_count(), 0);
    assert_eq!(
        harness.server.poll_timeout(),
        None,
        "no connection, no deadline"
    );
}

#[test]
fn one_busy_connection_cannot_starve_the_others() {
    let mut harness = connected(Duration::from_secs(5), Duration::from_secs(20), 3);
    let (busy, a, b) = (id_of(&harness, 0), id_of(&harness, 1), id_of(&harness, 2));
    let now = harness.now;
    // 100 messages that each fill most of a packet: 100 datagrams for the busy connection.
    let big = Bytes::from(vec![7u8; 1000]);
    for _ in 0..100 {
        harness
            .server
            .send(now, busy, UNRELIABLE, big.clone())
            .expect("queued");
    }
    let mut buf = vec![0u8; 2048];
    let mut order = Vec::new();
    for _ in 0..5 {
        let transmit = harness
            .server
            .poll_transmit(now, &mut buf)
            .expect("busy has more");
        order.push(transmit.destination);
    }
    // Two quiet connections get one small message each, after the busy one started.
    for id in [a, b] {
        harness
            .server
            .send(now, id, UNRELIABLE, Bytes::from_static(b"hi"))
            .expect("queued");
    }
    let rest: Vec<SocketAddr> = drain(&mut harness.server, now)
        .into_iter()
        .map(|(to, _)| to)
        .collect();
    let position = |client: usize| {
        rest.iter()
            .position(|to| *to == client_address(client))
            .unwrap_or_else(|| panic!("client {client} got nothing"))
    };
    assert!(
        position(1) < 3 && position(2) < 3,
        "the quiet connections must be served within the next round, not after the busy \
         one's backlog: {rest:?}"
    );
    assert_eq!(
        order.len() + rest.iter().filter(|to| **to == client_address(0)).count(),
        100,
        "every busy message in its own datagram"
    );
}

#[test]
fn messages_ready_together_leave_in_one_datagram() {
    let mut harness = connected(Duration::from_secs(5), Duration::from_secs(20), 2);
    let id = id_of(&harness, 1);
    let now = harness.now;
    for i in 0..15u8 {
        harness
            .server
            .send(now, id, UNRELIABLE, Bytes::from(vec![i; 32]))
            .expect("queued");
    }
    let sent = drain(&mut harness.server, now);
    assert_eq!(
        sent.len(),
        1,
        "15 messages of 32 bytes for one client fit one datagram"
    );
    let client = &mut harness.clients[1].client;
    client.handle_datagram(now, server_address(), &sent[0].1);
    let messages = std::iter::from_fn(|| client.poll_event())
        .filter(|event| matches!(event, ClientEvent::Message { .. }))
        .count();
    assert_eq!(messages, 15);
    assert!(
        drain(&mut harness.server, now).is_empty(),
        "nothing is left once the queue is drained"
    );
}

#[test]
fn a_datagram_that_wants_an_ack_is_answered_in_the_same_turn() {
    let mut harness = connected(Duration::from_secs(5), Duration::from_secs(20), 1);
    let now = harness.now;
    let mut buf = vec![0u8; 2048];
    let client = &mut harness.clients[0].client;
    client
        .send(UNRELIABLE, Bytes::from_static(b"hello"))
        .expect("queued");
    let transmit = client.poll_transmit(now, &mut buf).expect("a packet");
    harness
        .server
        .handle_datagram(now, client_address(0), &buf[..transmit.len]);
    assert!(
        matches!(
            harness.server.poll_event(),
            Some(ServerEvent::Message { .. })
        ),
        "the message arrives"
    );
    let sent = drain(&mut harness.server, now);
    assert_eq!(sent.len(), 1, "the server acks the packet in the same turn");
}

#[test]
fn a_turn_for_more_connections_than_one_batch_seals_each_clients_packet_for_it() {
    // 100 connections: more than one staging round (64 packets), messages of every length
    // around the cipher's 64-byte blocks, each sealed in a batch with the others' packets.
    let mut harness = connected(Duration::from_secs(5), Duration::from_secs(20), 100);
    let now = harness.now;
    for client in 0..100 {
        let id = id_of(&harness, client);
        let message = Bytes::from(vec![client as u8; 1 + client * 7]);
        harness
            .server
            .send(now, id, UNRELIABLE, message)
            .expect("queued");
    }
    let sent = drain(&mut harness.server, now);
    assert_eq!(sent.len(), 100, "one datagram per connection");
    for (to, datagram) in sent {
        let client = (to.port() - client_address(0).port()) as usize;
        let endpoint = &mut harness.clients[client].client;
        endpoint.handle_datagram(now, server_address(), &datagram);
        let messages: Vec<Bytes> = std::iter::from_fn(|| endpoint.poll_event())
            .filter_map(|event| match event {
                ClientEvent::Message { message, .. } => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(
            messages,
            [Bytes::from(vec![client as u8; 1 + client * 7])],
            "client {client} opens its own packet and reads its message"
        );
    }
}

#[test]
fn a_payload_written_before_a_disconnect_leaves_before_it() {
    let mut harness = connected(Duration::from_secs(5), Duration::from_secs(20), 2);
    let (a, b) = (id_of(&harness, 0), id_of(&harness, 1));
    let now = harness.now;
    for id in [a, b] {
        harness
            .server
            .send(now, id, RELIABLE, Bytes::from_static(b"last words"))
            .expect("queued");
    }
    let mut buf = vec![0u8; 2048];
    // This call writes both connections' packets (one batch) and hands out the first.
    let first = harness
        .server
        .poll_transmit(now, &mut buf)
        .expect("a packet");
    assert_eq!(first.destination, client_address(0));
    harness
        .server
        .disconnect_saying(now, b, DisconnectReason::Kicked, "bye");
    let rest = drain(&mut harness.server, now);
    assert_eq!(
        rest.iter().map(|(to, _)| *to).collect::<Vec<_>>(),
        [client_address(1); 4],
        "b's payload, then its three disconnects"
    );
    let client = &mut harness.clients[1].client;
    for (_, datagram) in &rest {
        client.handle_datagram(now, server_address(), datagram);
    }
    let events: Vec<ClientEvent> = std::iter::from_fn(|| client.poll_event()).collect();
    assert!(
        matches!(
            events.as_slice(),
            [
                ClientEvent::Message { message, .. },
                ClientEvent::Disconnected { reason: DisconnectReason::Kicked, .. },
            ] if message.as_ref() == b"last words"
        ),
        "the message written before the kick arrives before it: {events:?}"
    );
}
