//! Tests of `Reliability` as a whole: two instances wired back to back, and hand-made
//! hostile packets. The lossy-link runs are in `tests/reliable_link.rs`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::frame::{Frame, FrameReader, PacketWriter};
use super::header::PacketHeader;
use super::*;

const CHANNEL_RELIABLE: u8 = 0;
const CHANNEL_UNRELIABLE: u8 = 1;
const CHANNEL_SEQUENCED: u8 = 2;

fn pair(config: &ReliabilityConfig) -> (Reliability, Reliability) {
    let a = Reliability::new(config.clone()).expect("test config must be valid");
    let b = Reliability::new(config.clone()).expect("test config must be valid");
    (a, b)
}

fn default_pair() -> (Reliability, Reliability) {
    pair(&ReliabilityConfig::default())
}

/// Every packet `from` writes at `now`.
fn drain(from: &mut Reliability, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1500];
    while let Some(len) = from.write_packet(now, &mut buf, false) {
        out.push(buf[..len].to_vec());
        assert!(out.len() < 100_000, "write_packet never returned None");
    }
    out
}

/// Delivers everything `from` writes at `now` to `to`; returns the packet count.
fn exchange(from: &mut Reliability, to: &mut Reliability, now: Instant) -> usize {
    let packets = drain(from, now);
    for packet in &packets {
        to.read_packet(now, packet)
            .expect("a packet from a conforming peer must be accepted");
    }
    packets.len()
}

fn received(r: &mut Reliability) -> Vec<(u8, Bytes)> {
    std::iter::from_fn(|| r.receive()).collect()
}

fn frames(packet: &[u8]) -> Vec<Frame<'_>> {
    const KINDS: [ChannelKind; 3] = [
        ChannelKind::Reliable,
        ChannelKind::Unreliable,
        ChannelKind::UnreliableSequenced,
    ];
    FrameReader::new(packet, HEADER_LEN, &KINDS)
        .collect::<Result<_, _>>()
        .expect("our own packets must parse")
}

/// A message whose bytes say which it is: `n` as 4 little-endian bytes, then a pattern.
fn message(n: u32, len: usize) -> Bytes {
    let mut data: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(n) as u8)
        .collect();
    let head = n.to_le_bytes();
    let k = len.min(4);
    data[..k].copy_from_slice(&head[..k]);
    Bytes::from(data)
}

/// A packet without acks carrying `frames` verbatim.
fn raw_packet(sequence: u16, frames: &[u8]) -> Vec<u8> {
    let mut packet = vec![0u8; HEADER_LEN];
    let head = packet.first_chunk_mut().expect("HEADER_LEN bytes");
    PacketHeader {
        sequence,
        ack: None,
        ping: false,
    }
    .encode(head);
    packet.extend_from_slice(frames);
    packet
}

/// A fragment frame on channel 0 with data of the right length.
fn fragment_frame(id: u16, total_len: u32, fragment_size: u16, index: u16) -> Vec<u8> {
    let mut frame = vec![0x80];
    frame.extend_from_slice(&id.to_le_bytes());
    frame.extend_from_slice(&total_len.to_le_bytes());
    frame.extend_from_slice(&fragment_size.to_le_bytes());
    frame.extend_from_slice(&index.to_le_bytes());
    let range = fragment::fragment_range(total_len as usize, fragment_size.into(), index);
    frame.resize(frame.len() + range.len(), index as u8);
    frame
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The worked example in `docs/PROTOCOL.md` ("Reliability and channels", "Frames"), byte for byte.
const DOC_EXAMPLE: &str = "01050003000500000000000002686901017502070000";

#[test]
fn the_documented_example_payload_reads_as_documented() {
    let payload: Vec<u8> = (0..DOC_EXAMPLE.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&DOC_EXAMPLE[i..i + 2], 16).expect("hex"))
        .collect();
    let header = PacketHeader::decode(&payload).expect("valid header");
    assert_eq!(
        header,
        PacketHeader {
            sequence: 5,
            ack: Some(header::Ack {
                ack: 3,
                bits: 0b101
            }),
            ping: false
        }
    );
    let (_, mut b) = default_pair();
    b.read_packet(Instant::now(), &payload)
        .expect("the example is valid");
    assert_eq!(
        received(&mut b),
        vec![
            (0, Bytes::from_static(b"hi")),
            (1, Bytes::from_static(b"u")),
            (2, Bytes::new())
        ]
    );
    // Writing the same content reproduces the frames after the header.
    let mut buf = [0u8; 64];
    let mut writer = PacketWriter::new(&mut buf);
    assert!(writer.try_message(0, Some(0), b"hi"));
    assert!(writer.try_message(1, None, b"u"));
    assert!(writer.try_message(2, Some(7), b""));
    let len = writer.len();
    assert_eq!(buf[..len], payload[HEADER_LEN..]);
}

#[test]
fn reliable_messages_arrive_once_and_in_order_whatever_the_packet_order() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    let mut packets = Vec::new();
    for n in 0..3 {
        a.send(CHANNEL_RELIABLE, message(n, 10))
            .expect("queue has room");
        packets.extend(drain(&mut a, t0));
    }
    assert_eq!(packets.len(), 3, "one packet per message");
    for &i in &[2, 0, 0, 2, 1, 1] {
        b.read_packet(t0, &packets[i]).expect("valid packet");
    }
    let got = received(&mut b);
    assert_eq!(
        got,
        (0..3)
            .map(|n| (CHANNEL_RELIABLE, message(n, 10)))
            .collect::<Vec<_>>(),
        "reliable messages must come out once each, in send order"
    );
    assert_eq!(b.stats().packets_duplicate, 3);
    assert_eq!(
        b.stats().reassembly_bytes,
        0,
        "nothing is held once delivered"
    );
}

#[test]
fn a_duplicated_packet_delivers_nothing_twice() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    a.send(CHANNEL_RELIABLE, message(1, 20)).expect("room");
    a.send(CHANNEL_UNRELIABLE, message(2, 20)).expect("room");
    a.send(CHANNEL_SEQUENCED, message(3, 20)).expect("room");
    let packets = drain(&mut a, t0);
    assert_eq!(
        packets.len(),
        1,
        "three small messages from three channels share one packet"
    );
    assert_eq!(frames(&packets[0]).len(), 3);
    b.read_packet(t0, &packets[0]).expect("valid");
    b.read_packet(t0, &packets[0])
        .expect("a duplicate is dropped, not an error");
    assert_eq!(
        received(&mut b).len(),
        3,
        "the duplicate must not re-deliver any message"
    );
    assert_eq!(b.stats().packets_received, 1);
    assert_eq!(b.stats().packets_duplicate, 1);
}

#[test]
fn sequenced_channel_drops_a_message_older_than_one_delivered() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    a.send(CHANNEL_SEQUENCED, message(1, 8)).expect("room");
    let first = drain(&mut a, t0);
    a.send(CHANNEL_SEQUENCED, message(2, 8)).expect("room");
    let second = drain(&mut a, t0);
    b.read_packet(t0, &second[0]).expect("valid");
    b.read_packet(t0, &first[0]).expect("valid");
    assert_eq!(
        received(&mut b),
        vec![(CHANNEL_SEQUENCED, message(2, 8))],
        "message 1 arrived after message 2 and must be dropped"
    );
    assert_eq!(b.stats().messages_out_of_sequence, 1);
}

#[test]
fn unacked_reliable_is_resent_after_the_timeout_and_not_before() {
    let (mut a, _) = default_pair();
    let t0 = Instant::now();
    a.send(CHANNEL_RELIABLE, message(7, 30)).expect("room");
    assert_eq!(drain(&mut a, t0).len(), 1);
    assert_eq!(a.stats().bytes_in_flight, 30);
    let rto = a.stats().resend_timeout;
    assert_eq!(rto, ms(300), "initial timeout: 100 ms srtt + 4 × 50 ms");
    assert_eq!(a.next_timeout(), Some(t0 + rto));
    assert!(
        drain(&mut a, t0 + rto - ms(1)).is_empty(),
        "resent before its timeout"
    );
    let resent = drain(&mut a, t0 + rto);
    assert_eq!(resent.len(), 1, "not resent at its timeout");
    let expected = message(7, 30);
    assert_eq!(
        frames(&resent[0]),
        [Frame::Reliable {
            channel: 0,
            id: 0,
            data: &expected
        }]
    );
    assert_eq!(a.stats().units_resent, 1);
    assert_eq!(
        a.stats().bytes_in_flight,
        30,
        "a resend is not new bytes in flight"
    );
    assert_eq!(a.next_timeout(), Some(t0 + rto * 2));
}

#[test]
fn acked_reliable_data_is_freed_and_never_resent() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    a.send(CHANNEL_RELIABLE, message(1, 100)).expect("room");
    exchange(&mut a, &mut b, t0);
    assert_eq!(
        exchange(&mut b, &mut a, t0 + ms(40)),
        1,
        "b owes a and sends one ack"
    );
    let stats = a.stats();
    assert_eq!(
        (stats.bytes_in_flight, stats.reliable_queue_bytes),
        (0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.packets_acked, 1);
    assert_eq!(stats.rtt, ms(40), "the first RTT sample sets srtt");
    assert_eq!(a.next_timeout(), None, "nothing in flight");
    assert!(
        drain(&mut a, t0 + Duration::from_secs(5)).is_empty(),
        "acked data resent"
    );
    assert!(!a.has_pending());
}

#[test]
fn a_late_ack_of_an_ack_only_packet_is_not_an_rtt_sample() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    b.send(CHANNEL_UNRELIABLE, message(0, 5)).expect("room");
    exchange(&mut b, &mut a, t0);
    exchange(&mut a, &mut b, t0 + ms(40)); // a acks at once: b's first sample is 40 ms
    assert_eq!(b.stats().rtt, ms(40));
    a.send(CHANNEL_UNRELIABLE, message(1, 5)).expect("room");
    exchange(&mut a, &mut b, t0 + ms(50));
    exchange(&mut b, &mut a, t0 + ms(60)); // b's ack-only packet: a owes nothing for it
    // a acks that packet only when it next has data, 5 s later: not a round trip.
    a.send(CHANNEL_UNRELIABLE, message(2, 5)).expect("room");
    exchange(&mut a, &mut b, t0 + Duration::from_secs(5));
    let rtt = b.stats().rtt;
    assert_eq!(
        rtt,
        ms(40),
        "an ack-only packet's late ack skewed the RTT to {rtt:?}"
    );
}

#[test]
fn game_streams_carry_each_others_acks_and_the_rtt_stays_true() {
    // `server` sends a snapshot every 16 ms, `client` an input every 40 ms, both unreliable,
    // over a link of 10 ms each way; both write whatever is due every millisecond.
    let (mut server, mut client) = default_pair();
    let t0 = Instant::now();
    let one_way = ms(10);
    let mut in_flight: Vec<(Instant, bool, Vec<u8>)> = Vec::new();
    let mut lone_acks = [0usize; 2];
    let mut packets = [0usize; 2];
    for step in 0..=4000u64 {
        let now = t0 + ms(step);
        let mut index = 0;
        while index < in_flight.len() {
            if in_flight[index].0 <= now {
                let (_, to_client, packet) = in_flight.swap_remove(index);
                let to = if to_client { &mut client } else { &mut server };
                to.read_packet(now, &packet).expect("valid");
            } else {
                index += 1;
            }
        }
        if step % 16 == 0 {
            server
                .send(CHANNEL_UNRELIABLE, message(step as u32, 100))
                .expect("room");
        }
        if step % 40 == 0 {
            client
                .send(CHANNEL_UNRELIABLE, message(step as u32, 20))
                .expect("room");
        }
        for (side, from) in [&mut server, &mut client].into_iter().enumerate() {
            for packet in drain(from, now) {
                packets[side] += 1;
                lone_acks[side] += usize::from(packet.len() == HEADER_LEN);
                in_flight.push((now + one_way, side == 0, packet));
            }
        }
    }
    // 4 s: 251 snapshots and 101 inputs; an ack goes alone only to answer the other side's
    // RTT probe (one each RTT_PROBE_INTERVAL that finds nothing to ride on).
    assert_eq!(packets[0] - lone_acks[0], 251, "one packet per snapshot");
    assert_eq!(packets[1] - lone_acks[1], 101, "one packet per input");
    let probes = (4000 / RTT_PROBE_INTERVAL.as_millis() + 1) as usize;
    for (side, lone) in lone_acks.into_iter().enumerate() {
        assert!(
            lone <= probes,
            "side {side} sent {lone} ack-only packets; at most {probes} (the probes) expected"
        );
    }
    for (name, r) in [("server", &server), ("client", &client)] {
        let stats = r.stats();
        assert_eq!(
            stats.rtt,
            ms(20),
            "{name}'s RTT must be the path's 20 ms, not include held acks"
        );
        assert_eq!(stats.packet_loss, 0.0, "{name} saw loss on a lossless link");
    }
}

#[test]
fn acks_are_owed_only_for_packets_that_ask_for_them() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    let mut buf = [0u8; 1150];
    assert_eq!(
        a.write_packet(t0, &mut buf, false),
        None,
        "nothing to send, nothing owed"
    );
    a.send(CHANNEL_UNRELIABLE, message(1, 5)).expect("room");
    exchange(&mut a, &mut b, t0);
    let ack = b.write_packet(t0, &mut buf, false).expect("b owes an ack");
    assert_eq!(ack, HEADER_LEN, "an ack-only packet is just a header");
    assert_eq!(b.write_packet(t0, &mut buf, false), None, "the ack is paid");
    a.read_packet(t0, &buf[..ack]).expect("valid");
    assert_eq!(
        a.write_packet(t0, &mut buf, false),
        None,
        "an ack-only packet must not be acked"
    );
    let ping = a
        .write_packet(t0, &mut buf, true)
        .expect("force always writes");
    assert_eq!(ping, HEADER_LEN);
    b.read_packet(t0, &buf[..ping]).expect("valid");
    assert_eq!(
        b.write_packet(t0 + Duration::from_secs(1), &mut buf, false),
        None,
        "a keepalive asks for no ack: the peer sends its own"
    );
}

#[test]
fn a_burst_longer_than_the_ack_bitfield_is_acked_completely() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    a.send(CHANNEL_RELIABLE, message(9, 200 * 1024))
        .expect("room");
    let sent = exchange(&mut a, &mut b, t0);
    assert!(sent > 100, "200 KiB takes {sent} packets, expected > 100");
    assert_eq!(
        received(&mut b),
        vec![(CHANNEL_RELIABLE, message(9, 200 * 1024))]
    );
    let acks = exchange(&mut b, &mut a, t0 + ms(50));
    assert_eq!(
        acks,
        sent.div_ceil(33),
        "{sent} packets need ceil({sent} / 33) acks"
    );
    assert_eq!(a.stats().bytes_in_flight, 0, "every fragment must be acked");
    assert!(
        drain(&mut a, t0 + Duration::from_secs(2)).is_empty(),
        "acked fragments resent"
    );
}

#[test]
fn a_64_kib_message_reassembles_from_shuffled_duplicated_fragments() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    let big = message(64, 64 * 1024);
    a.send(CHANNEL_RELIABLE, big.clone()).expect("room");
    let mut packets = drain(&mut a, t0);
    let count = packets.len();
    assert_eq!(count, (64 * 1024usize).div_ceil(1150 - HEADER_LEN - 11));
    let mut rng = ChaCha8Rng::seed_from_u64(64);
    let copies: Vec<Vec<u8>> = packets.iter().step_by(3).cloned().collect();
    packets.extend(copies);
    packets.shuffle(&mut rng);
    for (i, packet) in packets.iter().enumerate() {
        b.read_packet(t0, packet).expect("valid");
        let held = b.stats().reassembly_bytes;
        assert!(held <= 64 * 1024, "holding {held} bytes after packet {i}");
    }
    assert_eq!(
        received(&mut b),
        vec![(CHANNEL_RELIABLE, big)],
        "the message must be intact"
    );
    assert_eq!(b.stats().reassembly_bytes, 0);
}

#[test]
fn sequences_and_message_ids_wrap_around_under_loss() {
    // 70,000 rounds wrap the u16 packet sequence both ways, and 70,000 messages wrap the
    // reliable id; every third packet a is lost, every seventh of b's.
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    let mut buf = [0u8; 1150];
    let mut next_expected = 0u32;
    let mut now = t0;
    for round in 0..70_000u32 {
        now += ms(20);
        a.send(
            CHANNEL_RELIABLE,
            Bytes::copy_from_slice(&round.to_le_bytes()),
        )
        .expect("room");
        let mut written = 0;
        while let Some(len) = a.write_packet(now, &mut buf, false) {
            written += 1;
            if (a.stats().packets_sent % 3) != 0 {
                b.read_packet(now, &buf[..len]).expect("valid");
            }
        }
        assert!(written > 0, "round {round}: a must have something to send");
        while let Some((_, got)) = b.receive() {
            assert_eq!(got.as_ref(), next_expected.to_le_bytes(), "round {round}");
            next_expected += 1;
        }
        while let Some(len) = b.write_packet(now, &mut buf, false) {
            if (b.stats().packets_sent % 7) != 0 {
                a.read_packet(now, &buf[..len]).expect("valid");
            }
        }
    }
    assert!(
        a.stats().packets_sent >= 70_000,
        "the packet sequence must have wrapped"
    );
    assert!(
        next_expected > 69_000,
        "only {next_expected} of 70,000 delivered"
    );
}

#[test]
fn a_sender_keeps_at_most_the_window_of_messages_in_flight() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    for n in 0..2000 {
        a.send(CHANNEL_RELIABLE, message(n, 4)).expect("room");
    }
    exchange(&mut a, &mut b, t0);
    assert_eq!(
        received(&mut b).len(),
        MESSAGE_WINDOW,
        "only a window's worth may be sent"
    );
    exchange(&mut b, &mut a, t0);
    exchange(&mut a, &mut b, t0);
    let rest = received(&mut b);
    assert_eq!(
        rest.len(),
        2000 - MESSAGE_WINDOW,
        "the acks must open the window"
    );
    assert_eq!(rest.last(), Some(&(CHANNEL_RELIABLE, message(1999, 4))));
}

#[test]
fn a_sender_keeps_the_receiver_within_its_reassembly_bound() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    for n in 0..8 {
        a.send(CHANNEL_RELIABLE, message(n, 200 * 1024))
            .expect("4 MiB of queue has room");
    }
    // 5 × 200 KiB fit the 1 MiB budget; packets with message 0's fragments are lost, so b
    // holds 1..=4 (the last fragments of 1..=3 share a packet with message 0's last one).
    let packets = drain(&mut a, t0);
    for packet in &packets {
        let lost = frames(packet)
            .iter()
            .any(|frame| matches!(frame, Frame::Fragment { id: 0, .. }));
        if !lost {
            b.read_packet(t0, packet)
                .expect("a conforming sender never breaks the bound");
        }
    }
    assert_eq!(
        b.stats().reassembly_bytes,
        4 * 200 * 1024,
        "b holds messages 1 to 4"
    );
    assert!(
        received(&mut b).is_empty(),
        "nothing may be delivered before message 0"
    );
    exchange(&mut b, &mut a, t0 + ms(10));
    let later = t0 + Duration::from_secs(1);
    for packet in drain(&mut a, later) {
        b.read_packet(later, &packet)
            .expect("resends stay within the bound too");
        let held = b.stats().reassembly_bytes;
        assert!(
            held <= 1024 * 1024,
            "b holds {held} bytes, over the 1 MiB bound"
        );
    }
    let expected: Vec<_> = (0..5)
        .map(|n| (CHANNEL_RELIABLE, message(n, 200 * 1024)))
        .collect();
    assert_eq!(
        received(&mut b),
        expected,
        "messages 0 to 4, in order, once 0 is resent"
    );
    assert_eq!(b.stats().reassembly_bytes, 0);
}

#[test]
fn fragments_claiming_more_than_the_reassembly_bound_are_fatal() {
    let config = ReliabilityConfig {
        max_message_size: 4096,
        max_reassembly_bytes: 4096,
        max_reliable_queue_bytes: 4096,
        ..ReliabilityConfig::default()
    };
    let mut b = Reliability::new(config).expect("valid");
    let t0 = Instant::now();
    // Messages 1 and 2 (held: message 0 has not arrived) claim 2000 bytes each.
    for (sequence, id) in [(0, 1), (1, 2)] {
        b.read_packet(t0, &raw_packet(sequence, &fragment_frame(id, 2000, 64, 0)))
            .expect("fits");
    }
    assert_eq!(b.stats().reassembly_bytes, 4000);
    let error = b
        .read_packet(t0, &raw_packet(2, &fragment_frame(3, 2000, 64, 0)))
        .expect_err("6000 bytes held would pass the 4096 bound");
    assert_eq!(
        error,
        ReadError::ReassemblyLimit {
            needed: 6000,
            max: 4096
        }
    );
    assert!(error.is_fatal(), "the lead must disconnect on {error}");
    assert_eq!(
        b.stats().reassembly_bytes,
        4000,
        "the refused message allocated nothing"
    );
    // A whole message held out of order counts too.
    let mut whole = vec![0x00, 4, 0, 0x80, 0x01];
    whole.resize(whole.len() + 128, 0);
    assert_eq!(
        b.read_packet(t0, &raw_packet(3, &whole)),
        Err(ReadError::ReassemblyLimit {
            needed: 4128,
            max: 4096
        })
    );
}

#[test]
fn a_message_claiming_more_than_max_message_size_is_fatal() {
    let (_, mut b) = default_pair();
    let t0 = Instant::now();
    let max = 256 * 1024;
    let error = b
        .read_packet(t0, &raw_packet(0, &fragment_frame(0, max + 1, 1130, 0)))
        .expect_err("over max_message_size");
    assert_eq!(
        error,
        ReadError::MessageTooLarge {
            len: max as usize + 1,
            max: max as usize
        }
    );
    assert!(error.is_fatal());
    assert_eq!(
        b.stats().reassembly_bytes,
        0,
        "nothing was allocated for it"
    );
    assert!(
        b.read_packet(t0, &raw_packet(1, &fragment_frame(0, max, 1130, 0)))
            .is_ok()
    );
}

#[test]
fn reliable_queue_over_its_bound_is_queue_full() {
    let config = ReliabilityConfig {
        max_message_size: 64 * 1024,
        max_reliable_queue_bytes: 64 * 1024,
        ..ReliabilityConfig::default()
    };
    let (mut a, mut b) = pair(&config);
    let t0 = Instant::now();
    let overhead = RELIABLE_MESSAGE_OVERHEAD;
    a.send(CHANNEL_RELIABLE, message(0, 60 * 1024))
        .expect("fits the queue");
    assert_eq!(
        a.send(CHANNEL_RELIABLE, message(1, 4 * 1024)),
        Err(SendError::QueueFull {
            queued: 60 * 1024 + overhead,
            len: 4 * 1024,
            max: 64 * 1024
        }),
        "each message counts its bookkeeping beside its payload"
    );
    a.send(CHANNEL_RELIABLE, message(2, 4 * 1024 - 2 * overhead))
        .expect("exactly fills the queue");
    assert_eq!(a.stats().reliable_queue_bytes, 64 * 1024);
    exchange(&mut a, &mut b, t0);
    exchange(&mut b, &mut a, t0 + ms(10));
    assert_eq!(
        a.stats().reliable_queue_bytes,
        0,
        "acked bytes leave the queue"
    );
    a.send(CHANNEL_RELIABLE, message(3, 64 * 1024))
        .expect("room again once acked: an empty queue takes a message of the largest size");
}

/// Small messages fill the bound by their count too: a peer that stops acking holds at
/// most the bound in payload and bookkeeping together, not the bound in payload alone.
#[test]
fn many_small_reliable_messages_fill_the_queue_by_their_bookkeeping() {
    let config = ReliabilityConfig {
        max_reliable_queue_bytes: 64 * 1024,
        max_message_size: 64 * 1024,
        ..ReliabilityConfig::default()
    };
    let (mut a, _b) = pair(&config);
    let mut queued = 0;
    while a.send(CHANNEL_RELIABLE, message(queued, 16)).is_ok() {
        queued += 1;
    }
    assert_eq!(
        queued as usize,
        64 * 1024 / (16 + RELIABLE_MESSAGE_OVERHEAD),
        "without the overhead, 4,096 16-byte messages would have been queued"
    );
}

#[test]
fn unreliable_overflow_drops_the_oldest_and_counts() {
    let (mut a, mut b) = default_pair();
    let t0 = Instant::now();
    for n in 0..300 {
        a.send(CHANNEL_UNRELIABLE, message(n, 4))
            .expect("unreliable send never refuses room");
    }
    assert_eq!(a.stats().messages_dropped, 300 - 256);
    exchange(&mut a, &mut b, t0);
    let got: Vec<Bytes> = received(&mut b).into_iter().map(|(_, m)| m).collect();
    assert_eq!(
        got,
        (44..300).map(|n| message(n, 4)).collect::<Vec<_>>(),
        "the newest 256 remain"
    );
}

#[test]
fn oversize_messages_and_unknown_channels_are_refused() {
    let (mut a, _) = default_pair();
    let max_unreliable = a
        .max_message_len(CHANNEL_UNRELIABLE)
        .expect("channel 1 exists");
    let max_sequenced = a
        .max_message_len(CHANNEL_SEQUENCED)
        .expect("channel 2 exists");
    assert_eq!((max_unreliable, max_sequenced), (1138, 1136));
    assert_eq!(
        a.send(CHANNEL_UNRELIABLE, message(0, 1139)),
        Err(SendError::TooLarge {
            len: 1139,
            max: 1138
        })
    );
    assert_eq!(
        a.send(CHANNEL_SEQUENCED, message(0, 1137)),
        Err(SendError::TooLarge {
            len: 1137,
            max: 1136
        })
    );
    assert_eq!(
        a.send(CHANNEL_RELIABLE, message(0, 256 * 1024 + 1)),
        Err(SendError::TooLarge {
            len: 256 * 1024 + 1,
            max: 256 * 1024
        })
    );
    assert_eq!(
        a.send(3, message(0, 1)),
        Err(SendError::UnknownChannel {
            channel: 3,
            channels: 3
        })
    );
    a.send(CHANNEL_UNRELIABLE, message(0, 1138))
        .expect("the largest unreliable message");
    a.send(CHANNEL_SEQUENCED, message(0, 1136))
        .expect("the largest sequenced message");
    let packets = drain(&mut a, Instant::now());
    assert_eq!(packets.len(), 2, "each fills a packet alone");
    assert!(
        packets.iter().all(|p| p.len() == 1150),
        "both fill the payload exactly"
    );
}

#[test]
fn a_malformed_packet_has_no_effect() {
    let (_, mut b) = default_pair();
    let t0 = Instant::now();
    let good = [0x00, 0, 0, 2, b'o', b'k'];
    let mut bad = good.to_vec();
    bad.extend_from_slice(&[0x01, 0x09]); // unreliable frame claiming 9 bytes, 0 follow
    assert_eq!(
        b.read_packet(t0, &raw_packet(0, &bad)),
        Err(ReadError::Malformed(MalformedError::Truncated {
            offset: 17,
            needed: 9,
            remaining: 0
        }))
    );
    assert!(
        b.receive().is_none(),
        "the good frame before the bad one must not be delivered"
    );
    let mut buf = [0u8; 1150];
    assert_eq!(
        b.write_packet(t0, &mut buf, false),
        None,
        "a refused packet must not be acked"
    );
    b.read_packet(t0, &raw_packet(0, &good))
        .expect("the same sequence is not a duplicate");
    assert_eq!(received(&mut b), vec![(0, Bytes::from_static(b"ok"))]);
}

#[test]
fn ids_beyond_the_window_and_inconsistent_fragments_are_malformed() {
    let (_, mut b) = default_pair();
    let t0 = Instant::now();
    assert_eq!(
        b.read_packet(t0, &raw_packet(0, &[0x00, 0x00, 0x04, 0])),
        Err(ReadError::Malformed(MalformedError::OutOfWindow {
            channel: 0,
            id: 1024,
            ahead: 1024,
            window: MESSAGE_WINDOW
        }))
    );
    b.read_packet(t0, &raw_packet(1, &[0x00, 0xff, 0x03, 0]))
        .expect("id 1023 is in the window");
    b.read_packet(t0, &raw_packet(2, &fragment_frame(5, 1000, 100, 0)))
        .expect("valid");
    assert_eq!(
        b.read_packet(t0, &raw_packet(3, &fragment_frame(5, 1000, 200, 1))),
        Err(ReadError::Malformed(MalformedError::FragmentMismatch {
            channel: 0,
            id: 5,
            total_len: 1000,
            fragment_size: 200
        }))
    );
    // Id 40000 is more than half the circle ahead of 0: behind, a repeat, silently ignored.
    b.read_packet(t0, &raw_packet(4, &[0x00, 0x40, 0x9c, 1, 9]))
        .expect("old id is ignored");
    assert!(b.receive().is_none());
}

#[test]
fn write_packet_stays_within_out_and_max_packet_payload() {
    let (mut a, _) = default_pair();
    let t0 = Instant::now();
    let mut small = [0u8; HEADER_LEN - 1];
    a.send(CHANNEL_UNRELIABLE, message(0, 1)).expect("room");
    assert_eq!(
        a.write_packet(t0, &mut small, true),
        None,
        "no room for a header"
    );
    for n in 0..50 {
        a.send(CHANNEL_RELIABLE, message(n, 100)).expect("room");
    }
    let mut big = [0u8; 4000];
    let len = a.write_packet(t0, &mut big, false).expect("data waiting");
    assert!(
        len <= 1150,
        "packet of {len} bytes passes max_packet_payload 1150"
    );
    let mut tight = [0u8; 300];
    let len = a.write_packet(t0, &mut tight, false).expect("data waiting");
    assert!(
        len <= 300 && len > 200,
        "{len} bytes should pack 300 closely"
    );
}

#[test]
fn invalid_config_is_refused_by_new() {
    let config = ReliabilityConfig {
        channels: vec![],
        ..ReliabilityConfig::default()
    };
    assert_eq!(
        Reliability::new(config).err(),
        Some(ConfigError::ChannelCount {
            count: 0,
            max: MAX_CHANNELS
        })
    );
}

/// A frame built from arbitrary fields, well-formed or not, so the fuzzing reaches the
/// window, fragment and budget logic rather than stopping at the first byte.
fn arbitrary_frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Mostly valid fragments of a few messages (so reassemblies start, fill, complete and
        // pile up against the bound), some claiming more than max_message_size.
        4 => (0u16..40, 1u32..6000, prop_oneof![Just(64u16), 64u16..300], any::<u16>()).prop_map(
            |(id, total_len, fragment_size, index)| {
                let count = total_len.div_ceil(u32::from(fragment_size)) as u16;
                fragment_frame(id, total_len, fragment_size, index % count.max(1))
            }
        ),
        // Fragments with arbitrary fields: wrong channels, indices past the end.
        1 => (0u8..4, any::<u16>(), 0u32..10_000, 60u16..300, 0u16..200).prop_map(
            |(channel, id, total_len, fragment_size, index)| {
                let mut frame = fragment_frame(id % 2048, total_len, fragment_size.max(64), index);
                frame[0] = 0x80 | channel;
                frame
            }
        ),
        // Whole messages, near and past the window.
        2 => (
            0u8..4,
            0u16..1100,
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(channel, id, data)| {
                let mut frame = vec![channel];
                if channel != 1 {
                    frame.extend_from_slice(&id.to_le_bytes());
                }
                frame.push(data.len().min(127) as u8);
                frame.extend_from_slice(&data[..data.len().min(127)]);
                frame
            }),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

fn fuzz_config() -> ReliabilityConfig {
    ReliabilityConfig {
        max_message_size: 4096,
        max_reassembly_bytes: 8192,
        max_reliable_queue_bytes: 8192,
        ..ReliabilityConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn read_packet_never_panics_on_arbitrary_bytes(
        packets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..20)
    ) {
        let mut r = Reliability::new(fuzz_config()).expect("valid");
        let t0 = Instant::now();
        for (i, packet) in packets.iter().enumerate() {
            let _ = r.read_packet(t0 + ms(i as u64), packet);
            prop_assert!(r.stats().reassembly_bytes <= 8192);
        }
    }

    #[test]
    fn read_packet_never_panics_or_passes_the_bound_on_frame_soup(
        packets in proptest::collection::vec(
            (any::<u16>(), any::<bool>(), any::<u16>(), any::<u32>(),
             proptest::collection::vec(arbitrary_frame(), 0..8)),
            1..30,
        )
    ) {
        let mut r = Reliability::new(fuzz_config()).expect("valid");
        let t0 = Instant::now();
        let mut buf = [0u8; 1150];
        // Reliable data in flight (one message in fragments), so the random acks have
        // packets, units and budgets to act on.
        let queue = |r: &mut Reliability, n: u32| {
            for len in [10, 3000] {
                // QueueFull is expected at times: the random acks may never free anything.
                let _ = r.send(CHANNEL_RELIABLE, message(n, len));
            }
            r.send(CHANNEL_SEQUENCED, message(n, 20)).expect("unreliable sends never fail");
        };
        queue(&mut r, 0);
        while r.write_packet(t0, &mut buf, false).is_some() {}
        for (i, (sequence, has_ack, ack, bits, frames)) in packets.iter().enumerate() {
            if i % 4 == 3 {
                queue(&mut r, i as u32);
            }
            let mut packet = vec![0u8; HEADER_LEN];
            let head = packet.first_chunk_mut().expect("HEADER_LEN bytes");
            // Acks near our own sequences, so that many of them hit packets we sent.
            let ack = has_ack.then_some(header::Ack { ack: ack % 16, bits: *bits });
            PacketHeader { sequence: sequence % 64, ack, ping: false }.encode(head);
            for frame in frames {
                packet.extend_from_slice(frame);
            }
            let now = t0 + ms(i as u64 * 10);
            let result = r.read_packet(now, &packet);
            let held = r.stats().reassembly_bytes;
            prop_assert!(held <= 8192, "holding {} bytes after {:?}", held, result);
            while r.receive().is_some() {}
            // Writing back must not panic either, whatever state the input left.
            while r.write_packet(now, &mut buf, false).is_some() {}
            let stats = r.stats();
            prop_assert!(stats.reliable_queue_bytes <= 8192, "{:?}", stats);
            prop_assert!(stats.bytes_in_flight <= stats.reliable_queue_bytes, "{:?}", stats);
            let _ = r.next_timeout();
        }
    }
}

#[test]
fn random_two_way_traffic_keeps_the_counters_consistent() {
    // A quick lossy exchange that checks the bookkeeping the big link test relies on.
    let (mut a, mut b) = default_pair();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let t0 = Instant::now();
    let mut now = t0;
    let mut sent = 0u32;
    let mut got = 0u32;
    for _ in 0..500 {
        now += ms(16);
        for _ in 0..rng.random_range(0..4) {
            let len = rng.random_range(0..3000);
            a.send(CHANNEL_RELIABLE, message(sent, len)).expect("room");
            sent += 1;
        }
        for packet in drain(&mut a, now) {
            if rng.random_bool(0.8) {
                b.read_packet(now, &packet).expect("valid");
            }
        }
        for packet in drain(&mut b, now) {
            if rng.random_bool(0.8) {
                a.read_packet(now, &packet).expect("valid");
            }
        }
        while let Some((_, m)) = b.receive() {
            assert_eq!(
                m.get(..4.min(m.len())),
                message(got, m.len()).get(..4.min(m.len()))
            );
            got += 1;
        }
    }
    for _ in 0..200 {
        now += ms(50);
        exchange(&mut a, &mut b, now);
        exchange(&mut b, &mut a, now);
    }
    while b.receive().is_some() {
        got += 1;
    }
    assert_eq!(got, sent, "every reliable message must arrive");
    let stats = a.stats();
    assert_eq!(
        (stats.bytes_in_flight, stats.reliable_queue_bytes),
        (0, 0),
        "all acked, so nothing may remain counted: {stats:?}"
    );
    assert_eq!(b.stats().reassembly_bytes, 0);
}

#[test]
fn the_highest_channel_id_works_and_the_layer_is_send() {
    fn assert_send<T: Send + 'static>() {}
    assert_send::<Reliability>();
    let mut channels = vec![ChannelKind::Unreliable; 31];
    channels.push(ChannelKind::Reliable);
    let config = ReliabilityConfig {
        channels,
        ..ReliabilityConfig::default()
    };
    let (mut a, mut b) = pair(&config);
    a.send(31, message(1, 5000))
        .expect("channel 31 is reliable");
    a.send(30, message(2, 10))
        .expect("channel 30 is unreliable");
    exchange(&mut a, &mut b, Instant::now());
    assert_eq!(
        received(&mut b),
        vec![(31, message(1, 5000)), (30, message(2, 10))]
    );
}
