//! A seeded, simulated network link for deterministic tests: latency, jitter, loss,
//! duplication, reordering and an MTU, with deliveries ordered on a virtual clock.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use tickwire_proto::sim::{Link, LinkConfig};
//!
//! let start = Instant::now();
//! let mut link = Link::new(LinkConfig::perfect(Duration::from_millis(50)), 7);
//! let (a, b) = ("127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap());
//! link.send(start, a, b, b"ping");
//! assert_eq!(link.next_delivery(), Some(start + Duration::from_millis(50)));
//! let datagram = link.deliver(start + Duration::from_millis(50)).unwrap();
//! assert_eq!(datagram.bytes, b"ping");
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How the link misbehaves. Probabilities are per datagram, from 0 to 1.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// One-way delay before jitter.
    pub latency: Duration,
    /// Each datagram's delay is `latency` plus a uniform offset in `-jitter..=jitter`.
    pub jitter: Duration,
    /// Chance a datagram is lost.
    pub loss: f64,
    /// Chance a datagram arrives twice (the copy with its own delay).
    pub duplicate: f64,
    /// Chance a datagram is held back by an extra `latency` so later ones overtake it.
    pub reorder: f64,
    /// Datagrams larger than this are dropped, as a path with a smaller MTU would.
    pub mtu: usize,
}

impl LinkConfig {
    /// No loss, duplication, reordering or jitter; a fixed one-way `latency`.
    pub fn perfect(latency: Duration) -> Self {
        Self {
            latency,
            jitter: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            mtu: 1500,
        }
    }

    /// The issue's hostile link: 20 % loss, 100 ms ± 20 ms, 4 % reordering, 1 % duplication.
    pub fn hostile() -> Self {
        Self {
            latency: Duration::from_millis(100),
            jitter: Duration::from_millis(20),
            loss: 0.20,
            duplicate: 0.01,
            reorder: 0.04,
            mtu: 1500,
        }
    }
}

/// A datagram in flight or delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// Sender.
    pub from: SocketAddr,
    /// Receiver.
    pub to: SocketAddr,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// What the link did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams given to [`Link::send`].
    pub sent: u64,
    /// Datagrams lost at random.
    pub lost: u64,
    /// Datagrams dropped for exceeding the MTU.
    pub too_large: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Datagrams held back to be overtaken.
    pub reordered: u64,
    /// Datagrams handed out by [`Link::deliver`].
    pub delivered: u64,
}

struct InFlight {
    at: Instant,
    /// Tie-break so equal times deliver in send order.
    order: u64,
    datagram: Datagram,
}

// Ordered by delivery time, then send order; the contents never matter.
impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}

impl Eq for InFlight {}

impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// A simulated link shared by every endpoint in a test.
pub struct Link {
    config: LinkConfig,
    rng: StdRng,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    stats: LinkStats,
}

impl Link {
    /// A link behaving as `config`, its randomness fixed by `seed`.
    pub fn new(config: LinkConfig, seed: u64) -> Self {
        Self {
            config,
            rng: StdRng::seed_from_u64(seed),
            in_flight: BinaryHeap::new(),
            order: 0,
            stats: LinkStats::default(),
        }
    }

    /// What the link did so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Changes how the link behaves from now on (datagrams in flight keep their fate).
    pub fn set_config(&mut self, config: LinkConfig) {
        self.config = config;
    }

    /// Puts a datagram on the link at `now`.
    pub fn send(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, bytes: &[u8]) {
        self.stats.sent += 1;
        if bytes.len() > self.config.mtu {
            self.stats.too_large += 1;
            return;
        }
        if self.rng.random_bool(self.config.loss) {
            self.stats.lost += 1;
            return;
        }
        let copies = if self.rng.random_bool(self.config.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now + self.delay();
            self.order += 1;
            self.in_flight.push(Reverse(InFlight {
                at,
                order: self.order,
                datagram: Datagram {
                    from,
                    to,
                    bytes: bytes.to_vec(),
                },
            }));
        }
    }

    fn delay(&mut self) -> Duration {
        let jitter = self.config.jitter.as_secs_f64();
        let offset = if jitter > 0.0 {
            self.rng.random_range(-jitter..=jitter)
        } else {
            0.0
        };
        let mut delay = (self.config.latency.as_secs_f64() + offset).max(0.0);
        if self.rng.random_bool(self.config.reorder) {
            self.stats.reordered += 1;
            delay += self.config.latency.as_secs_f64();
        }
        Duration::from_secs_f64(delay)
    }

    /// When the next datagram arrives.
    pub fn next_delivery(&self) -> Option<Instant> {
        self.in_flight.peek().map(|Reverse(next)| next.at)
    }

    /// The next datagram due at or before `now`.
    pub fn deliver(&mut self, now: Instant) -> Option<Datagram> {
        if self.next_delivery()? > now {
            return None;
        }
        let Reverse(next) = self.in_flight.pop()?;
        self.stats.delivered += 1;
        Some(next.datagram)
    }
}
