//! A deterministic network for protocol tests: one server and any number of clients on a
//! seeded simulated link, with a virtual clock that jumps to the next thing that happens.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::sim::{Link, LinkConfig};
use tickwire_proto::token::{ConnectToken, TokenIssuer};
use tickwire_proto::{
    Client, ClientEvent, ConnectionParams, MAX_DATAGRAM_BYTES, Server, ServerConfig, ServerEvent,
};

pub const PROTOCOL_ID: u64 = 0x7157_0001;
/// Unix time at the start of every test.
pub const UNIX_START: u64 = 1_800_000_000;

pub fn server_address() -> SocketAddr {
    "127.0.0.1:40000".parse().expect("valid address")
}

pub fn client_address(index: usize) -> SocketAddr {
    SocketAddr::new(
        "127.0.0.1".parse().expect("valid ip"),
        50_000 + index as u16,
    )
}

pub fn server_key() -> Key {
    Key([0x5e; 32])
}

pub fn issuer() -> TokenIssuer {
    TokenIssuer {
        protocol_id: PROTOCOL_ID,
        key: server_key(),
        server_addresses: vec![server_address()],
        validity_seconds: 60,
        timeout_seconds: 5,
    }
}

pub struct TestClient {
    pub address: SocketAddr,
    pub client: Client,
    pub events: Vec<ClientEvent>,
}

/// A datagram as it was handed to the link (before loss or duplication).
#[derive(Debug, Clone)]
pub struct Sent {
    pub from: SocketAddr,
    pub to: SocketAddr,
    pub bytes: Vec<u8>,
}

pub struct Harness {
    /// Every datagram sent, when `record` is set: what an observer of the network sees.
    pub wire: Vec<Sent>,
    pub record: bool,
    pub start: Instant,
    pub now: Instant,
    pub link: Link,
    pub server: Server,
    pub server_events: Vec<ServerEvent>,
    pub clients: Vec<TestClient>,
    rng: ChaCha20Rng,
    buf: Vec<u8>,
}

impl Harness {
    pub fn new(link: LinkConfig, seed: u64) -> Self {
        Self::with_config(
            ServerConfig::new(PROTOCOL_ID, server_key(), vec![server_address()]),
            link,
            seed,
        )
    }

    pub fn with_config(config: ServerConfig, link: LinkConfig, seed: u64) -> Self {
        let start = Instant::now();
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let server = Server::new(config, start, UNIX_START, &mut rng).expect("valid server config");
        Self {
            wire: Vec::new(),
            record: false,
            start,
            now: start,
            link: Link::new(link, seed),
            server,
            server_events: Vec::new(),
            clients: Vec::new(),
            rng,
            buf: vec![0; MAX_DATAGRAM_BYTES],
        }
    }

    pub fn unix_now(&self) -> u64 {
        UNIX_START + self.now.duration_since(self.start).as_secs()
    }

    pub fn issue(&mut self, client_id: u64, user_data: &[u8]) -> ConnectToken {
        let unix_now = self.unix_now();
        issuer()
            .issue(&mut self.rng, unix_now, client_id, user_data)
            .expect("token issues")
    }

    /// Adds a client holding `token`; returns its index.
    pub fn add_client_with(&mut self, token: ConnectToken) -> usize {
        let index = self.clients.len();
        let client = Client::new(
            token,
            self.now,
            self.unix_now(),
            ReliabilityConfig::default(),
        );
        self.clients.push(TestClient {
            address: client_address(index),
            client,
            events: Vec::new(),
        });
        index
    }

    pub fn add_client(&mut self, client_id: u64) -> usize {
        let token = self.issue(client_id, &client_id.to_le_bytes());
        self.add_client_with(token)
    }

    /// Runs everything due now: deliveries, timeouts, events, transmits.
    fn settle(&mut self) {
        let now = self.now;
        while let Some(datagram) = self.link.deliver(now) {
            if datagram.to == server_address() {
                self.server
                    .handle_datagram(now, datagram.from, &datagram.bytes);
            } else if let Some(client) = self.clients.iter_mut().find(|c| c.address == datagram.to)
            {
                client
                    .client
                    .handle_datagram(now, datagram.from, &datagram.bytes);
            }
        }
        self.server.handle_timeout(now);
        while let Some(event) = self.server.poll_event() {
            self.server_events.push(event);
        }
        while let Some(transmit) = self.server.poll_transmit(now, &mut self.buf) {
            if self.record {
                self.wire.push(Sent {
                    from: server_address(),
                    to: transmit.destination,
                    bytes: self.buf[..transmit.len].to_vec(),
                });
            }
            self.link.send(
                now,
                server_address(),
                transmit.destination,
                &self.buf[..transmit.len],
            );
        }
        for client in &mut self.clients {
            client.client.handle_timeout(now);
            while let Some(event) = client.client.poll_event() {
                client.events.push(event);
            }
            while let Some(transmit) = client.client.poll_transmit(now, &mut self.buf) {
                if self.record {
                    self.wire.push(Sent {
                        from: client.address,
                        to: transmit.destination,
                        bytes: self.buf[..transmit.len].to_vec(),
                    });
                }
                self.link.send(
                    now,
                    client.address,
                    transmit.destination,
                    &self.buf[..transmit.len],
                );
            }
        }
    }

    /// Advances the virtual clock to `until`, stopping at every event on the way.
    pub fn run_until(&mut self, until: Instant) {
        let mut steps = 0u64;
        loop {
            steps += 1;
            assert!(
                steps < 1_000_000,
                "the harness stopped making progress at {:?}",
                self.now - self.start
            );
            self.settle();
            let next = [self.link.next_delivery(), self.server.poll_timeout()]
                .into_iter()
                .chain(self.clients.iter().map(|c| c.client.poll_timeout()))
                .flatten()
                .filter(|at| *at > self.now)
                .min()
                .unwrap_or(until);
            if next >= until {
                self.now = until;
                self.settle();
                return;
            }
            self.now = next;
        }
    }

    pub fn run_for(&mut self, duration: Duration) {
        let until = self.now + duration;
        self.run_until(until);
    }

    /// Runs until `done` holds or `limit` passes; returns whether it held.
    pub fn run_while_not(&mut self, limit: Duration, mut done: impl FnMut(&Self) -> bool) -> bool {
        let deadline = self.now + limit;
        while self.now < deadline {
            if done(self) {
                return true;
            }
            let step = (self.now + Duration::from_millis(5)).min(deadline);
            self.run_until(step);
        }
        done(self)
    }

    /// The parameters client `index` adopted when it connected, if it did.
    pub fn connected_params(&self, index: usize) -> Option<ConnectionParams> {
        self.clients[index]
            .events
            .iter()
            .find_map(|event| match event {
                ClientEvent::Connected { params } => Some(params.clone()),
                _ => None,
            })
    }

    pub fn client_connected(&self, index: usize) -> bool {
        self.clients[index]
            .events
            .iter()
            .any(|event| matches!(event, ClientEvent::Connected { .. }))
    }

    pub fn connect_all(&mut self) {
        let count = self.clients.len();
        let connected = self.run_while_not(Duration::from_secs(30), |h| {
            (0..count).all(|i| h.client_connected(i))
        });
        assert!(
            connected,
            "clients did not connect: {:?}",
            self.clients
                .iter()
                .map(|c| c.client.state())
                .collect::<Vec<_>>()
        );
    }
}
