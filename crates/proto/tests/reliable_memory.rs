//! A burst of reliable messages leaves no memory behind once it is through: the send
//! window, the send queue, the record of units in flight and the receive queue hand their
//! peak back when they empty (issue 18, item 5). Before, each kept its peak for the
//! connection's life: a room's 29 join notices held ≈ 2.6 KB a player in a heap profile of
//! `tickwire bench hobo`.
//!
//! Heap bytes counted by the wrapping allocator; this binary has one test, so nothing else
//! allocates beside it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_alloc_count::{CountingAllocator, live_bytes};
use tickwire_proto::reliable::{Reliability, ReliabilityConfig};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Messages in the burst: the notices a player gets on joining a room of this size.
const BURST: usize = 200;
/// A steady trickle's messages in flight at once: within what an empty queue keeps.
const TRICKLE: usize = 3;
/// Heap the pair may hold after the burst beyond what it held after the trickle: the
/// queues' small kept capacity; before the change, 84,768 bytes.
const KEPT_MAX: isize = 1_024;

/// Exchanges packets both ways until neither end has anything to write, `step` apart.
fn settle(a: &mut Reliability, b: &mut Reliability, mut now: Instant) -> Instant {
    let mut packet = [0u8; 1200];
    for _ in 0..100 {
        let mut quiet = true;
        while let Some(len) = a.write_packet(now, &mut packet, false) {
            b.read_packet(now, &packet[..len])
                .expect("a's packet reads");
            quiet = false;
        }
        while b.receive().is_some() {}
        while let Some(len) = b.write_packet(now, &mut packet, false) {
            a.read_packet(now, &packet[..len])
                .expect("b's packet reads");
            quiet = false;
        }
        while a.receive().is_some() {}
        // Past the longest ack delay, so the acks owed for unreliable traffic go out.
        now += Duration::from_millis(50);
        if quiet && a.stats().reliable_queue_bytes == 0 && b.stats().reliable_queue_bytes == 0 {
            return now;
        }
    }
    panic!("the pair did not settle");
}

fn send_reliable(from: &mut Reliability, count: usize) {
    for i in 0..count {
        from.send(0, Bytes::from(format!("notice {i}: a player joined")))
            .expect("within the queue's bound");
    }
}

#[test]
fn a_reliable_burst_hands_its_memory_back_once_acked() {
    let mut server = Reliability::new(ReliabilityConfig::default()).expect("valid");
    let mut client = Reliability::new(ReliabilityConfig::default()).expect("valid");
    let now = Instant::now();

    // A steady trickle first: the queues' working size, which they keep.
    let mut now = now;
    for _ in 0..4 {
        send_reliable(&mut server, TRICKLE);
        send_reliable(&mut client, TRICKLE);
        now = settle(&mut server, &mut client, now);
    }
    let steady = live_bytes();

    send_reliable(&mut server, BURST);
    send_reliable(&mut client, BURST);
    let mut packet = [0u8; 1200];
    // Some of the burst in flight: the queues at their peak.
    let len = server
        .write_packet(now, &mut packet, false)
        .expect("a packet");
    client.read_packet(now, &packet[..len]).expect("reads");
    let peak = live_bytes();
    now = settle(&mut server, &mut client, now);
    assert_eq!(server.stats().bytes_in_flight, 0);
    assert_eq!(client.stats().bytes_in_flight, 0);

    // A trickle after the burst reallocates nothing the steady state did not have.
    send_reliable(&mut server, TRICKLE);
    settle(&mut server, &mut client, now);
    let after = live_bytes();
    let kept = after - steady;
    eprintln!("heap: steady {steady} B, burst peak {peak} B, after {after} B (kept {kept} B)");
    assert!(
        peak - steady > 10 * KEPT_MAX,
        "the burst should have grown the queues"
    );
    assert!(
        kept <= KEPT_MAX,
        "the pair kept {kept} bytes of a {BURST}-message burst (at most {KEPT_MAX})"
    );
}
