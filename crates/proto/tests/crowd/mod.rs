//! A crowd of clients connected to one `Server` on a frozen clock, with no network between
//! them: how the memory example and test fill a server. Included by path from both.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::Instant;

use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::TokenIssuer;
use tickwire_proto::{Client, ConnectionId, Server, ServerConfig, ServerEvent};

pub const UNIX_TIME: u64 = 1_800_000_000;

/// The server every crowd connects to.
pub fn server(now: Instant) -> (Server, SocketAddr, Key) {
    let address: SocketAddr = "127.0.0.1:40000".parse().expect("valid");
    let key = Key([1; 32]);
    let config = ServerConfig::new(1, key.clone(), vec![address]);
    let server = Server::new(config, now, UNIX_TIME, &mut rand::rng()).expect("valid config");
    (server, address, key)
}

/// A client of `server`'s (at `address`, with `key`) with its connect token, not yet
/// connected: its first `poll_transmit` is the connection request.
pub fn client(address: SocketAddr, key: &Key, client_id: u64, now: Instant) -> Client {
    let token = TokenIssuer {
        protocol_id: 1,
        key: key.clone(),
        server_addresses: vec![address],
        validity_seconds: 60,
        timeout_seconds: 5,
    }
    .issue(&mut rand::rng(), UNIX_TIME, client_id, &[])
    .expect("token");
    Client::new(token, now, UNIX_TIME, ReliabilityConfig::default())
}

/// Connects `count` clients (each from its own port of 127.0.0.2) to `server`: request,
/// challenge, response, accepted, a few rounds on a frozen clock. Returns the clients and
/// the server's ids for them.
pub fn connect(
    server: &mut Server,
    address: SocketAddr,
    key: &Key,
    count: u16,
    now: Instant,
) -> (Vec<Client>, Vec<ConnectionId>) {
    let port = |index: u16| 1000 + index;
    let mut clients: Vec<Client> = (0..count)
        .map(|index| client(address, key, u64::from(index), now))
        .collect();
    let mut buf = vec![0u8; 2048];
    let mut connected = Vec::new();
    for _ in 0..4 {
        for (index, client) in (0..count).zip(clients.iter_mut()) {
            let from = SocketAddr::new("127.0.0.2".parse().expect("valid"), port(index));
            while let Some(transmit) = client.poll_transmit(now, &mut buf) {
                server.handle_datagram(now, from, &buf[..transmit.len]);
            }
        }
        while let Some(transmit) = server.poll_transmit(now, &mut buf) {
            let index = usize::from(transmit.destination.port() - port(0));
            if let Some(client) = clients.get_mut(index) {
                client.handle_datagram(now, address, &buf[..transmit.len]);
            }
        }
        while let Some(event) = server.poll_event() {
            if let ServerEvent::Connected { connection, .. } = event {
                connected.push(connection);
            }
        }
    }
    (clients, connected)
}
