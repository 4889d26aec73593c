//! `Client::handle_datagram_with` and `Reliability::read_packet_into`: messages handed to
//! the caller as they are read, a slice of the decrypted packet when they came whole and in
//! order. The load bots read snapshots this way, a thousand to a core; a `Bytes` and an
//! event per message were a `malloc`, a `free` and two queue operations per snapshot.
//!
//! Allocations counted by the wrapping allocator, on this thread only.

mod crowd;

use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_alloc_count::{CountingAllocator, thread_allocations};
use tickwire_proto::reliable::{Reliability, ReliabilityConfig};
use tickwire_proto::{Client, ClientEvent, Server};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const RELIABLE: u8 = 0;
const UNRELIABLE: u8 = 1;

/// The datagrams the server has to send now, each with the port it goes to (a crowd's
/// client `i` is at port `1000 + i`).
fn datagrams(server: &mut Server, now: Instant) -> Vec<(u16, Vec<u8>)> {
    let mut buf = vec![0u8; 2048];
    let mut out = Vec::new();
    while let Some(transmit) = server.poll_transmit(now, &mut buf) {
        out.push((transmit.destination.port(), buf[..transmit.len].to_vec()));
    }
    out
}

/// The messages `client` has as events.
fn message_events(client: &mut Client) -> Vec<(u8, Bytes)> {
    let mut messages = Vec::new();
    while let Some(event) = client.poll_event() {
        if let ClientEvent::Message { channel, message } = event {
            messages.push((channel, message));
        }
    }
    messages
}

#[test]
fn lent_messages_arrive_as_the_events_would_and_a_snapshot_allocates_nothing() {
    let mut now = Instant::now();
    let (mut server, address, key) = crowd::server(now);
    let (mut clients, ids) = crowd::connect(&mut server, address, &key, 2, now);
    let (lent_id, queued_id) = (ids[0], ids[1]);
    let mut lent = clients.remove(0);
    let mut queued = clients.remove(0);
    message_events(&mut lent);
    message_events(&mut queued);

    let mut seen: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut take_in = |client: &mut Client, datagram: &[u8], now: Instant| {
        client.handle_datagram_with(now, address, datagram, |channel, message| {
            seen.push((channel, message.to_vec()));
        });
    };
    let mut expected: Vec<(u8, Bytes)> = Vec::new();
    for round in 0..20u8 {
        now += Duration::from_millis(16);
        let reliable = Bytes::from(vec![round; 40]);
        let snapshot = Bytes::from(vec![round; 120]);
        for id in [lent_id, queued_id] {
            server
                .send(now, id, RELIABLE, reliable.clone())
                .expect("queued");
            server
                .send(now, id, UNRELIABLE, snapshot.clone())
                .expect("queued");
        }
        for (port, datagram) in datagrams(&mut server, now) {
            match port {
                1000 => take_in(&mut lent, &datagram, now),
                _ => queued.handle_datagram(now, address, &datagram),
            }
        }
        expected.extend(message_events(&mut queued));
        assert!(
            message_events(&mut lent).is_empty(),
            "lent messages are not also events"
        );
    }
    let seen: Vec<(u8, Bytes)> = seen
        .into_iter()
        .map(|(channel, message)| (channel, Bytes::from(message)))
        .collect();
    assert_eq!(seen.len(), 40, "20 reliable and 20 unreliable messages");
    assert_eq!(seen, expected, "the same messages in the same order");

    // A snapshot read in place: no allocation at all, warm or not.
    let mut snapshot_bytes = 0;
    for _ in 0..10 {
        now += Duration::from_millis(16);
        server
            .send(now, lent_id, UNRELIABLE, Bytes::from(vec![9u8; 200]))
            .expect("queued");
        let datagrams = datagrams(&mut server, now);
        let before = thread_allocations();
        for (_, datagram) in &datagrams {
            lent.handle_datagram_with(now, address, datagram, |_, message| {
                snapshot_bytes += message.len();
            });
        }
        assert_eq!(thread_allocations() - before, 0, "read in place");
    }
    assert_eq!(snapshot_bytes, 2_000, "every snapshot was lent");
}

#[test]
fn a_reliable_message_that_came_early_is_held_then_handed_over_in_order() {
    let now = Instant::now();
    let mut sender = Reliability::new(ReliabilityConfig::default()).expect("valid");
    let mut receiver = Reliability::new(ReliabilityConfig::default()).expect("valid");
    let mut packets = Vec::new();
    let mut buf = [0u8; 1200];
    for message in [&b"first"[..], b"second", b"third"] {
        sender
            .send(RELIABLE, Bytes::copy_from_slice(message))
            .expect("queued");
        let len = sender.write_packet(now, &mut buf, false).expect("a packet");
        packets.push(buf[..len].to_vec());
    }
    let mut seen: Vec<Vec<u8>> = Vec::new();
    for index in [2, 0, 1] {
        receiver
            .read_packet_into(now, &packets[index], &mut |channel: u8, message: &[u8]| {
                assert_eq!(channel, RELIABLE);
                seen.push(message.to_vec());
            })
            .expect("reads");
        if index == 2 {
            assert!(seen.is_empty(), "the third waits for the first two");
        }
    }
    assert_eq!(seen, [&b"first"[..], b"second", b"third"]);
    assert_eq!(receiver.receive(), None, "nothing was queued as well");
}
