//! Feeds arbitrary payloads to the reliability layer while it has data in flight: it must
//! never panic and never hold more reassembly memory than its bound.

#![no_main]

use std::time::{Duration, Instant};

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tickwire_proto::reliable::{Reliability, ReliabilityConfig};

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let config = ReliabilityConfig {
        max_message_size: 8 * 1024,
        max_reassembly_bytes: 16 * 1024,
        ..ReliabilityConfig::default()
    };
    let mut reliability = Reliability::new(config).expect("valid config");
    // Something in flight, so acks in the input have packets to match.
    let _ = reliability.send(0, Bytes::from_static(&[7; 3000]));
    let mut out = [0u8; 1150];
    while reliability.write_packet(now, &mut out, false).is_some() {}
    // The input is a series of payloads, each prefixed by a length byte pair.
    let mut rest = data;
    let mut at = now;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        at += Duration::from_millis(5);
        if reliability.read_packet(at, &rest[2..2 + len]).is_err() {
            // Fatal or malformed: either way the connection's owner decides; keep going.
        }
        while reliability.receive().is_some() {}
        assert!(reliability.stats().reassembly_bytes <= 16 * 1024, "reassembly past its bound");
        rest = &rest[2 + len..];
    }
});
