//! `Client::wants_to_send`: a driver that skips `poll_transmit` when it says false must
//! lose nothing. It says true for what must leave at once (the handshake's next packet, an
//! ack owed for reliable data, queued messages, a farewell) and false for what can wait for
//! a timer (the ack of unreliable data), and never false while `poll_transmit` would write.

mod crowd;

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use tickwire_proto::{Client, HANDSHAKE_RESEND_INTERVAL, Server};

const RELIABLE: u8 = 0;
const UNRELIABLE: u8 = 1;

/// Hands everything the server has to send to the one client.
fn deliver(server: &mut Server, client: &mut Client, address: SocketAddr, now: Instant) {
    let mut buf = vec![0u8; 2048];
    while let Some(transmit) = server.poll_transmit(now, &mut buf) {
        client.handle_datagram(now, address, &buf[..transmit.len]);
    }
}

/// Whether the client has a packet to write now (written and dropped).
fn writes(client: &mut Client, now: Instant) -> bool {
    let mut buf = vec![0u8; 2048];
    client.poll_transmit(now, &mut buf).is_some()
}

#[test]
fn a_client_wants_to_send_when_a_packet_must_leave_at_once() {
    let now = Instant::now();
    let (mut server, address, key) = crowd::server(now);
    let (mut clients, ids) = crowd::connect(&mut server, address, &key, 1, now);
    let (client, id) = (&mut clients[0], ids[0]);
    while writes(client, now) {}
    assert!(!client.wants_to_send(now), "connected and quiet");

    // The first packet of unreliable data is also an RTT probe (a ping), acked at once;
    // the next, within the probe interval, is not.
    for snapshot in [b"snapshot 1", b"snapshot 2"] {
        server
            .send(now, id, UNRELIABLE, Bytes::from_static(snapshot))
            .expect("queued");
        deliver(&mut server, client, address, now);
        if snapshot == b"snapshot 1" {
            assert!(client.wants_to_send(now), "a ping is answered at once");
            while writes(client, now) {}
        }
    }
    assert!(
        !client.wants_to_send(now),
        "an unreliable message's ack waits for a ride or its timer"
    );
    assert!(!writes(client, now), "and poll_transmit agrees");

    server
        .send(now, id, RELIABLE, Bytes::from_static(b"welcome"))
        .expect("queued");
    deliver(&mut server, client, address, now);
    assert!(client.wants_to_send(now), "reliable data is acked at once");
    assert!(writes(client, now));
    assert!(!client.wants_to_send(now), "the ack went");

    client
        .send(UNRELIABLE, Bytes::from_static(b"input"))
        .expect("queued");
    assert!(client.wants_to_send(now), "a queued message");
    assert!(writes(client, now));

    client.disconnect(now);
    assert!(client.wants_to_send(now), "the farewell");
}

#[test]
fn a_new_client_wants_to_send_its_request_and_then_waits_to_resend_it() {
    let now = Instant::now();
    let (_, address, key) = crowd::server(now);
    let mut client = crowd::client(address, &key, 7, now);
    assert!(client.wants_to_send(now), "the request is due");
    assert!(writes(&mut client, now));
    assert!(
        !client.wants_to_send(now),
        "sent: the next waits for the resend interval"
    );
    let later = now + HANDSHAKE_RESEND_INTERVAL;
    assert!(client.wants_to_send(later), "the resend is due");
}
