//! Feeds arbitrary datagrams from arbitrary addresses to a server endpoint: it must never
//! panic, never reply to what it cannot authenticate, and never create a connection.

#![no_main]

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tickwire_proto::crypto::Key;
use tickwire_proto::{MAX_DATAGRAM_BYTES, Server, ServerConfig};

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let config = ServerConfig::new(0x7157, Key([7; 32]), vec!["127.0.0.1:40000".parse().unwrap()]);
    let mut server = Server::new(config, now, 1_800_000_000, &mut StdRng::seed_from_u64(1))
        .expect("valid config");
    // The input is a series of datagrams: 6 address bytes, a length byte pair, the bytes.
    let mut rest = data;
    while rest.len() >= 8 {
        let from = SocketAddr::new(
            IpAddr::from([rest[0], rest[1], rest[2], rest[3]]),
            u16::from_le_bytes([rest[4], rest[5]]),
        );
        let len = usize::from(u16::from_le_bytes([rest[6], rest[7]])).min(rest.len() - 8);
        server.handle_datagram(now, from, &rest[8..8 + len]);
        rest = &rest[8 + len..];
    }
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    assert!(server.poll_transmit(now, &mut buf).is_none(), "replied to a forgery");
    assert_eq!(server.connection_count(), 0, "a forgery connected");
});
