//! Heap bytes a `Server` holds per idle connected client, counted by a wrapping allocator:
//! `cargo run --release -p tickwire-proto --example connection_memory [clients]`.

use std::net::SocketAddr;
use std::time::Instant;

use tickwire_alloc_count::{CountingAllocator, live_bytes};
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::TokenIssuer;
use tickwire_proto::{Client, Server, ServerConfig};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const UNIX_TIME: u64 = 1_800_000_000;

fn main() {
    let count: u16 = std::env::args()
        .nth(1)
        .map_or(1000, |arg| arg.parse().expect("a client count"));
    let now = Instant::now();
    let server_address: SocketAddr = "127.0.0.1:40000".parse().expect("valid");
    let key = Key([1; 32]);
    let config = ServerConfig::new(1, key.clone(), vec![server_address]);
    let mut server = Server::new(config, now, UNIX_TIME, &mut rand::rng()).expect("valid config");
    let issuer = TokenIssuer {
        protocol_id: 1,
        key,
        server_addresses: vec![server_address],
        validity_seconds: 60,
        timeout_seconds: 5,
    };
    let mut clients: Vec<(SocketAddr, Client)> = (0..count)
        .map(|i| {
            let token = issuer
                .issue(&mut rand::rng(), UNIX_TIME, u64::from(i), &[])
                .expect("token");
            let address = SocketAddr::new("127.0.0.2".parse().expect("valid"), 1000 + i);
            (
                address,
                Client::new(token, now, UNIX_TIME, ReliabilityConfig::default()),
            )
        })
        .collect();

    // Request, challenge, response, accepted: a few rounds on a frozen clock connect everyone.
    let mut buf = vec![0u8; 2048];
    for _ in 0..4 {
        for (address, client) in &mut clients {
            while let Some(transmit) = client.poll_transmit(now, &mut buf) {
                server.handle_datagram(now, *address, &buf[..transmit.len]);
            }
        }
        while let Some(transmit) = server.poll_transmit(now, &mut buf) {
            if let Some((_, client)) = clients
                .iter_mut()
                .find(|(address, _)| *address == transmit.destination)
            {
                client.handle_datagram(now, server_address, &buf[..transmit.len]);
            }
        }
        while server.poll_event().is_some() {}
    }

    let connected = server.connection_count();
    let with_server = live_bytes();
    drop(server);
    let server_bytes = with_server - live_bytes();
    println!(
        "{connected} connected clients; server heap {} KiB, {} bytes per connection",
        server_bytes / 1024,
        server_bytes / connected.max(1) as isize
    );
}
