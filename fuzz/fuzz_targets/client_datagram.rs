//! Feeds arbitrary datagrams to a client that completed its handshake with a real server (in
//! memory, no sockets): from the server's own address and from others. The client must never
//! panic, and nothing it cannot authenticate may end its connection.

#![no_main]

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::TokenIssuer;
use tickwire_proto::{Client, ClientState, MAX_DATAGRAM_BYTES, Server, ServerConfig};

const UNIX_NOW: u64 = 1_800_000_000;

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let server_address: SocketAddr = "127.0.0.1:40000".parse().unwrap();
    let client_address: SocketAddr = "127.0.0.1:50000".parse().unwrap();
    let key = Key([7; 32]);
    let mut rng = StdRng::seed_from_u64(1);
    let config = ServerConfig::new(0x7157, key.clone(), vec![server_address]);
    let mut server = Server::new(config, now, UNIX_NOW, &mut rng).expect("valid config");
    let issuer = TokenIssuer {
        protocol_id: 0x7157,
        key,
        server_addresses: vec![server_address],
        validity_seconds: 60,
        timeout_seconds: 5,
    };
    let token = issuer.issue(&mut rng, UNIX_NOW, 1, b"fuzz").expect("token");
    let mut client = Client::new(token, now, UNIX_NOW, ReliabilityConfig::default());

    // The handshake, datagram by datagram, until the client is connected.
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES];
    for _ in 0..16 {
        while let Some(transmit) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, client_address, &buf[..transmit.len]);
        }
        while let Some(transmit) = server.poll_transmit(now, &mut buf) {
            client.handle_datagram(now, server_address, &buf[..transmit.len]);
        }
        if client.state() == ClientState::Connected {
            break;
        }
    }
    assert_eq!(client.state(), ClientState::Connected, "handshake in memory");
    while client.poll_event().is_some() {}

    // Then the input: a series of datagrams, each a flag byte (from the server's address or
    // another), a length byte pair, the bytes.
    let mut rest = data;
    while rest.len() >= 3 {
        let from = if rest[0] & 1 == 0 {
            server_address
        } else {
            SocketAddr::new(IpAddr::from([10, 0, 0, rest[0]]), 40000)
        };
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        client.handle_datagram(now, from, &rest[3..3 + len]);
        rest = &rest[3 + len..];
        while client.poll_event().is_some() {}
    }
    assert_eq!(
        client.state(),
        ClientState::Connected,
        "an unauthenticated datagram ended the connection"
    );
});
