//! Limits on what one client or one address may do: connection rate and count per IP, message
//! rate per player. Sans-IO and allocation-bounded: time comes in, verdicts go out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// A token bucket: `rate` tokens per second, holding at most `burst`.
#[derive(Debug, Clone, Copy)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(now: Instant, rate_per_second: f64, burst: u32) -> Self {
        Self {
            rate: rate_per_second.max(0.0),
            burst: f64::from(burst.max(1)),
            tokens: f64::from(burst.max(1)),
            last: now,
        }
    }

    /// Takes one token if there is one.
    pub fn try_take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now.max(self.last);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Per-address connection limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IpLimitConfig {
    /// New connections per second per address, sustained.
    pub connect_rate: f64,
    /// New connections an address may open in a burst.
    pub connect_burst: u32,
    /// Connections an address may hold open at once.
    pub max_connections: u32,
    /// Addresses tracked at once; past this, the idlest are forgotten.
    pub max_tracked: usize,
}

impl Default for IpLimitConfig {
    /// 2 connections per second with bursts of 10, and 32 open per address: room for a
    /// household or a LAN party behind one NAT, not for a flood.
    fn default() -> Self {
        Self {
            connect_rate: 2.0,
            connect_burst: 10,
            max_connections: 32,
            max_tracked: 65_536,
        }
    }
}

/// Why a connection from an address was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IpRefused {
    /// The address opened connections faster than the rate limit.
    #[error("too many new connections from this address")]
    RateLimited,
    /// The address holds as many connections as allowed.
    #[error("address already holds {0} connections")]
    TooManyConnections(u32),
}

#[derive(Debug, Clone, Copy)]
struct IpEntry {
    bucket: TokenBucket,
    open: u32,
    last_seen: Instant,
}

/// Connection rate and count per IP address.
#[derive(Debug)]
pub struct IpLimiter {
    config: IpLimitConfig,
    entries: HashMap<IpAddr, IpEntry>,
    /// Connections refused so far.
    pub refused: u64,
}

impl IpLimiter {
    /// A limiter with `config`.
    pub fn new(config: IpLimitConfig) -> Self {
        Self {
            config,
            entries: HashMap::new(),
            refused: 0,
        }
    }

    /// Admits a new connection from `ip`, or says why not. Call [`closed`](Self::closed)
    /// when an admitted connection ends.
    pub fn try_open(&mut self, now: Instant, ip: IpAddr) -> Result<(), IpRefused> {
        if !self.entries.contains_key(&ip) && self.entries.len() >= self.config.max_tracked {
            self.forget_idlest();
        }
        let config = self.config;
        let entry = self.entries.entry(ip).or_insert_with(|| IpEntry {
            bucket: TokenBucket::new(now, config.connect_rate, config.connect_burst),
            open: 0,
            last_seen: now,
        });
        entry.last_seen = now;
        let verdict = if entry.open >= config.max_connections {
            Err(IpRefused::TooManyConnections(entry.open))
        } else if !entry.bucket.try_take(now) {
            Err(IpRefused::RateLimited)
        } else {
            entry.open += 1;
            Ok(())
        };
        if verdict.is_err() {
            self.refused += 1;
        }
        verdict
    }

    /// An admitted connection from `ip` ended.
    pub fn closed(&mut self, ip: IpAddr) {
        if let Some(entry) = self.entries.get_mut(&ip) {
            entry.open = entry.open.saturating_sub(1);
        }
    }

    /// Addresses tracked now.
    pub fn tracked(&self) -> usize {
        self.entries.len()
    }

    /// Drops the address seen longest ago that holds no connection (or, if all hold some,
    /// the one seen longest ago): memory stays bounded whatever an attacker sends.
    fn forget_idlest(&mut self) {
        let victim = self
            .entries
            .iter()
            .min_by_key(|(_, entry)| (entry.open > 0, entry.last_seen))
            .map(|(ip, _)| *ip);
        if let Some(ip) = victim {
            self.entries.remove(&ip);
        }
    }
}

/// Per-player message limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageLimitConfig {
    /// Messages per second a player may send, sustained.
    pub rate: f64,
    /// Messages a player may send in a burst.
    pub burst: u32,
    /// Messages dropped for the rate within `violation_window` before the player is
    /// disconnected.
    pub max_violations: u32,
    /// The window violations are counted in.
    pub violation_window: Duration,
}

impl Default for MessageLimitConfig {
    /// 120 messages per second (inputs at 60 Hz plus chat and actions) with bursts of 240;
    /// a player dropping 600 messages within 10 s is flooding, not lagging.
    fn default() -> Self {
        Self {
            rate: 120.0,
            burst: 240,
            max_violations: 600,
            violation_window: Duration::from_secs(10),
        }
    }
}

/// What to do with a player's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageVerdict {
    /// Hand it to the room.
    Allow,
    /// Drop it (counted).
    Drop,
    /// Drop it and disconnect the player: they keep flooding.
    Disconnect,
}

/// One player's message rate limit.
#[derive(Debug, Clone, Copy)]
pub struct MessageLimiter {
    config: MessageLimitConfig,
    bucket: TokenBucket,
    violations: u32,
    window_start: Instant,
}

impl MessageLimiter {
    /// A limiter for a player who just connected.
    pub fn new(now: Instant, config: MessageLimitConfig) -> Self {
        Self {
            config,
            bucket: TokenBucket::new(now, config.rate, config.burst),
            violations: 0,
            window_start: now,
        }
    }

    /// The verdict on one message arriving at `now`.
    pub fn check(&mut self, now: Instant) -> MessageVerdict {
        if self.bucket.try_take(now) {
            return MessageVerdict::Allow;
        }
        if now.saturating_duration_since(self.window_start) >= self.config.violation_window {
            self.window_start = now;
            self.violations = 0;
        }
        self.violations += 1;
        if self.violations >= self.config.max_violations {
            MessageVerdict::Disconnect
        } else {
            MessageVerdict::Drop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(start, 10.0, 3);
        assert!((0..3).all(|_| bucket.try_take(start)));
        assert!(!bucket.try_take(start));
        assert!(!bucket.try_take(start + Duration::from_millis(50)));
        assert!(
            bucket.try_take(start + Duration::from_millis(100)),
            "one token per 100 ms"
        );
        // A long pause refills only up to the burst.
        let later = start + Duration::from_secs(60);
        assert!((0..3).all(|_| bucket.try_take(later)));
        assert!(!bucket.try_take(later));
    }

    #[test]
    fn an_address_is_limited_in_rate_and_in_open_connections() {
        let start = Instant::now();
        let mut limiter = IpLimiter::new(IpLimitConfig {
            connect_rate: 1.0,
            connect_burst: 3,
            max_connections: 4,
            max_tracked: 100,
        });
        let ip: IpAddr = "203.0.113.7".parse().unwrap();
        assert!((0..3).all(|_| limiter.try_open(start, ip).is_ok()));
        assert_eq!(limiter.try_open(start, ip), Err(IpRefused::RateLimited));
        let later = start + Duration::from_secs(5);
        assert!(limiter.try_open(later, ip).is_ok());
        assert_eq!(
            limiter.try_open(later, ip),
            Err(IpRefused::TooManyConnections(4))
        );
        limiter.closed(ip);
        assert!(
            limiter.try_open(later, ip).is_ok(),
            "a closed connection frees a slot"
        );
        let other: IpAddr = "198.51.100.1".parse().unwrap();
        assert!(
            limiter.try_open(start, other).is_ok(),
            "other addresses are unaffected"
        );
        assert_eq!(limiter.refused, 2);
    }

    #[test]
    fn a_flood_of_addresses_keeps_memory_bounded() {
        let start = Instant::now();
        let mut limiter = IpLimiter::new(IpLimitConfig {
            max_tracked: 64,
            ..IpLimitConfig::default()
        });
        let holder: IpAddr = "10.0.0.1".parse().unwrap();
        limiter.try_open(start, holder).unwrap();
        for i in 0..10_000u32 {
            let ip = IpAddr::from((0x0a01_0000u32 + i).to_be_bytes());
            let _ = limiter.try_open(start + Duration::from_millis(u64::from(i)), ip);
            limiter.closed(ip);
        }
        assert!(limiter.tracked() <= 64);
        assert_eq!(
            limiter.try_open(start, holder).map_err(|_| ()),
            Ok(()),
            "an address holding a connection is remembered, not evicted"
        );
    }

    #[test]
    fn a_flooding_player_is_dropped_then_disconnected() {
        let start = Instant::now();
        let config = MessageLimitConfig {
            rate: 10.0,
            burst: 10,
            max_violations: 5,
            violation_window: Duration::from_secs(1),
        };
        let mut limiter = MessageLimiter::new(start, config);
        assert!((0..10).all(|_| limiter.check(start) == MessageVerdict::Allow));
        let verdicts: Vec<_> = (0..5).map(|_| limiter.check(start)).collect();
        assert_eq!(verdicts[..4], [MessageVerdict::Drop; 4]);
        assert_eq!(verdicts[4], MessageVerdict::Disconnect);

        // A player who is briefly over the limit but not flooding is never disconnected.
        let mut limiter = MessageLimiter::new(start, config);
        let mut now = start;
        for _ in 0..100 {
            for _ in 0..13 {
                assert_ne!(limiter.check(now), MessageVerdict::Disconnect);
            }
            now += Duration::from_secs(1);
        }
    }
}
