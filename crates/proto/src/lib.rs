//! The tickwire protocol without I/O: connect tokens, the handshake, packet encryption,
//! acks, channels and fragmentation. Time comes in as an argument and datagrams go in and out
//! as byte slices, so everything here is tested with a virtual clock and a simulated link.
//!
//! ```text
//! client                                   server
//!   | -- request (connect token) ----------> |  token opened; the client's key kept
//!   | <---------- challenge (sealed token) -- |  (sequences with bit 63 set)
//!   | -- response (token, sealed again) ---> |  connection created
//!   | <------ accepted (tick rate, MTU, …) -- |
//!   | <=========== payload packets ========> |  acks, channels, keepalives
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`TokenIssuer`](token::TokenIssuer), [`ConnectToken`](token::ConnectToken) | what the HTTP side gives a client |
//! | [`Admission`](admission::Admission), [`Refusal`](admission::Refusal) | the one connect-token check, shared by UDP, WebSocket and WebTransport |
//! | [`UsedTokens`](admission::UsedTokens) | the used-token set every transport of a server shares |
//! | [`login`] | a WebSocket or WebTransport login: the server's nonce, the client's token and proof of possession |
//! | [`Server`] | the server endpoint: handshakes and every connection |
//! | [`Client`] | the client endpoint |
//! | [`Endpoint`] | the sans-IO calls both share, for drivers |
//! | [`ConnectionParams`] | what the server dictates: tick rate, keepalive, timeout, MTU, channels |
//! | [`reliable`] | acks, RTT, channels, fragmentation inside a connection |
//! | [`matchmake`] | the matchmaking API's JSON: request, answer, signed identity |
//! | [`sim`] | a seeded link simulator for deterministic tests |
//! | [`prefetch`](mod@prefetch) | a cache hint for drivers taking in batches for many endpoints |

use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub mod admission;
mod bytes_io;
mod client;
mod connection;
pub mod crypto;
mod deadlines;
pub mod login;
pub mod matchmake;
mod packet;
mod params;
pub mod prefetch;
pub mod reliable;
mod replay;
mod server;
pub mod sim;
mod staged;
pub mod token;
pub mod websocket;
pub mod webtransport;

pub use client::{Client, ClientEvent, ClientSendError, ClientState, HANDSHAKE_RESEND_INTERVAL};
pub use connection::ConnectionStats;
pub use packet::ENCRYPTED_OVERHEAD_MAX;
pub use params::{
    ConnectionParams, DisconnectReason, MAX_CHANNELS, MAX_MTU, MAX_PARAMS_BYTES, MAX_TICK_RATE_HZ,
    MIN_MTU, ParamsError,
};
pub use server::{
    CHALLENGE_LIFETIME, ConnectionId, DropCounts, DropReason, MAX_DATAGRAM_BYTES, Server,
    ServerConfig, ServerEvent, ServerSendError, ServerStats, TIDY_INTERVAL,
};

/// The sans-IO shape both [`Server`] and [`Client`] share, so one driver runs either.
///
/// A driver calls, in a loop: [`handle_datagram`](Self::handle_datagram) for each datagram
/// received; [`handle_timeout`](Self::handle_timeout) once [`poll_timeout`](Self::poll_timeout)
/// has passed; [`poll_event`](Self::poll_event) until `None` (the application reacts, and may
/// queue messages); [`poll_transmit`](Self::poll_transmit) until `None`, sending each
/// datagram; then waits for a datagram or the next `poll_timeout`.
pub trait Endpoint {
    /// What the endpoint reports to the application.
    type Event;

    /// Takes in one datagram received from `from` at `now`.
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]);
    /// Runs timers due at `now`.
    fn handle_timeout(&mut self, now: Instant);
    /// Writes the next datagram to send into `buf`.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;
    /// The next event for the application.
    fn poll_event(&mut self) -> Option<Self::Event>;
    /// When `handle_timeout` next has work, if ever.
    fn poll_timeout(&self) -> Option<Instant>;
}

macro_rules! endpoint {
    ($endpoint:ty, $event:ty) => {
        impl Endpoint for $endpoint {
            type Event = $event;

            fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
                <$endpoint>::handle_datagram(self, now, from, datagram)
            }

            fn handle_timeout(&mut self, now: Instant) {
                <$endpoint>::handle_timeout(self, now)
            }

            fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
                <$endpoint>::poll_transmit(self, now, buf)
            }

            fn poll_event(&mut self) -> Option<$event> {
                <$endpoint>::poll_event(self)
            }

            fn poll_timeout(&self) -> Option<Instant> {
                <$endpoint>::poll_timeout(self)
            }
        }
    };
}

endpoint!(Server, ServerEvent);
endpoint!(Client, ClientEvent);

/// A datagram to send: its first `len` bytes of the buffer given to `poll_transmit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Where to send it.
    pub destination: SocketAddr,
    /// How many bytes of the buffer it fills.
    pub len: usize,
}

/// The system clock's Unix time in whole seconds (0 if it reads before 1970): what a driver
/// passes to [`Server::new`], a token issuer or a client, once, at the edge. Nothing in this
/// crate calls it; endpoints derive Unix time from the monotonic `now` they are given.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// Unix time derived from the driver's monotonic clock, so endpoints never read the system
/// clock and tests can run on a virtual one.
#[derive(Debug, Clone, Copy)]
struct UnixClock {
    origin: Instant,
    origin_unix_seconds: u64,
}

impl UnixClock {
    fn new(now: Instant, unix_seconds: u64) -> Self {
        Self {
            origin: now,
            origin_unix_seconds: unix_seconds,
        }
    }

    fn unix_seconds(&self, now: Instant) -> u64 {
        let elapsed: Duration = now.saturating_duration_since(self.origin);
        self.origin_unix_seconds.saturating_add(elapsed.as_secs())
    }
}
