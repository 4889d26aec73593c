//! A crowd that leaves takes its memory with it: once a thousand clients have connected to a
//! `Server` and gone, the server holds about what a fresh one holds, not a slot's worth of
//! connection state per client it ever had at once (issue 20, finding 4: a server's RSS
//! after 5,000 players left stayed at 3.7× its idle figure).
//!
//! Heap bytes counted by the wrapping allocator; this binary has one test, so nothing else
//! allocates beside it.

use std::net::SocketAddr;
use std::time::Instant;

use tickwire_alloc_count::{CountingAllocator, live_bytes};
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::TokenIssuer;
use tickwire_proto::{Client, DisconnectReason, Server, ServerConfig, ServerEvent, TIDY_INTERVAL};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const UNIX_TIME: u64 = 1_800_000_000;
const CROWD: u16 = 1_000;
const CROWD_SIZE: isize = CROWD as isize;
/// What a server that had the crowd may keep beyond a fresh one's heap, per client it had
/// at once: the used-token set, which remembers every token until it expires (its job: the
/// clock is frozen here, well inside the tokens' 60 s), and a slot's index entry; 216
/// bytes measured. Before: 4,292, a connection's inline state (about 2 KB) kept in every
/// slot and the goodbye replies' queue (three replies of 460 bytes per client) never
/// shrunk.
const KEPT_PER_CLIENT_MAX: isize = 300;

#[test]
fn a_crowd_that_leaves_takes_its_connections_memory_with_it() {
    let now = Instant::now();
    let server_address: SocketAddr = "127.0.0.1:40000".parse().expect("valid");
    let key = Key([1; 32]);
    let before_server = live_bytes();
    let config = ServerConfig::new(1, key.clone(), vec![server_address]);
    let mut server = Server::new(config, now, UNIX_TIME, &mut rand::rng()).expect("valid config");
    let fresh = live_bytes() - before_server;

    let issuer = TokenIssuer {
        protocol_id: 1,
        key,
        server_addresses: vec![server_address],
        validity_seconds: 60,
        timeout_seconds: 5,
    };
    let mut clients: Vec<(SocketAddr, Client)> = (0..CROWD)
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
    let mut connected = Vec::new();
    for _ in 0..4 {
        for (address, client) in &mut clients {
            while let Some(transmit) = client.poll_transmit(now, &mut buf) {
                server.handle_datagram(now, *address, &buf[..transmit.len]);
            }
        }
        while let Some(transmit) = server.poll_transmit(now, &mut buf) {
            let port = transmit.destination.port();
            if let Some((_, client)) = clients.get_mut(usize::from(port - 1000)) {
                client.handle_datagram(now, server_address, &buf[..transmit.len]);
            }
        }
        while let Some(event) = server.poll_event() {
            if let ServerEvent::Connected { connection, .. } = event {
                connected.push(connection);
            }
        }
    }
    assert_eq!(server.connection_count(), usize::from(CROWD));
    let with_crowd = live_bytes() - before_server;

    drop(clients);
    for connection in connected {
        server.disconnect(now, connection, DisconnectReason::ServerShutdown);
    }
    // The goodbyes go out, and a tidy comes due (at most every `TIDY_INTERVAL`).
    let later = now + TIDY_INTERVAL;
    while server.poll_event().is_some() {}
    while server.poll_transmit(later, &mut buf).is_some() {}
    assert_eq!(server.connection_count(), 0);
    let after = live_bytes() - before_server;

    let kept = after - fresh;
    eprintln!(
        "server heap: fresh {fresh} B, with {CROWD} clients {with_crowd} B, after they left {after} B ({} B kept per client)",
        kept / CROWD_SIZE
    );
    assert!(
        kept <= KEPT_PER_CLIENT_MAX * CROWD_SIZE,
        "the server kept {kept} bytes after {CROWD} clients left (at most {} per client)",
        KEPT_PER_CLIENT_MAX
    );
    drop(server);
}
