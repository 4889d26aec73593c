//! The admin secret (the console password and the admin API bearer token) and the one
//! check of a presented secret: compared in constant time, and throttled per address, so
//! it cannot be guessed at full speed. Both the console and `/api/admin/*` call
//! [`Credentials::check`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Wrong attempts from one address, within [`FAILURE_WINDOW`], that lock it out.
pub const MAX_FAILURES: u32 = 10;
/// The window [`MAX_FAILURES`] are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// How long a locked-out address is refused, even with the right secret.
pub const LOCKOUT: Duration = Duration::from_secs(300);
/// Addresses remembered at most; past it, those not locked out are forgotten first.
const MAX_TRACKED: usize = 65_536;

/// Where a secret was presented, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The admin console's password prompt.
    Console,
    /// An `Authorization: Bearer` header on the admin API.
    Api,
}

impl Via {
    /// `console` or `api`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Console => "console",
            Self::Api => "api",
        }
    }
}

/// Why a presented secret was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It is not the secret.
    Wrong,
    /// The address is locked out for this much longer, whatever it presents.
    LockedOut {
        /// Until the lockout ends.
        retry_after: Duration,
    },
}

impl Refused {
    /// Whole seconds until a lockout ends, rounded up (a `Retry-After` value); `None` for a
    /// wrong secret.
    pub fn retry_after_secs(self) -> Option<u64> {
        match self {
            Self::Wrong => None,
            Self::LockedOut { retry_after } => {
                Some(retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0))
            }
        }
    }
}

/// Counts for `/metrics`, by [`Via`] (console first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CredentialStats {
    /// Wrong secrets presented.
    pub failures: [u64; 2],
    /// Attempts refused because their address was locked out.
    pub locked_out: [u64; 2],
    /// Lockouts begun.
    pub lockouts: u64,
}

#[derive(Debug)]
struct Attempts {
    window_start: Instant,
    failures: u32,
    locked_until: Option<Instant>,
}

/// The admin secret and the per-address throttle on guessing it.
#[derive(Debug)]
pub struct Credentials {
    secret: String,
    attempts: Mutex<HashMap<IpAddr, Attempts>>,
    failures: [AtomicU64; 2],
    locked_out: [AtomicU64; 2],
    lockouts: AtomicU64,
}

impl Credentials {
    /// The secret to check against.
    pub fn new(secret: impl Into<String>) -> Self {
        Self {
            secret: secret.into(),
            attempts: Mutex::default(),
            failures: Default::default(),
            locked_out: Default::default(),
            lockouts: AtomicU64::new(0),
        }
    }

    /// The secret in force.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Whether `given`, presented from `ip`, is the secret. [`MAX_FAILURES`] wrong ones
    /// within [`FAILURE_WINDOW`] lock the address out for [`LOCKOUT`] (logged once, when it
    /// begins); the right one clears its count.
    pub fn check(&self, now: Instant, ip: IpAddr, via: Via, given: &[u8]) -> Result<(), Refused> {
        let ip = ip.to_canonical();
        let index = via as usize;
        let mut attempts = self
            .attempts
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(locked_until) = attempts.get(&ip).and_then(|a| a.locked_until)
            && locked_until > now
        {
            self.locked_out[index].fetch_add(1, Ordering::Relaxed);
            return Err(Refused::LockedOut {
                retry_after: locked_until - now,
            });
        }
        if constant_time_eq(given, self.secret.as_bytes()) {
            attempts.remove(&ip);
            return Ok(());
        }
        self.failures[index].fetch_add(1, Ordering::Relaxed);
        if attempts.len() >= MAX_TRACKED && !attempts.contains_key(&ip) {
            attempts.retain(|_, a| a.locked_until.is_some_and(|until| until > now));
        }
        let entry = attempts.entry(ip).or_insert(Attempts {
            window_start: now,
            failures: 0,
            locked_until: None,
        });
        if now.duration_since(entry.window_start) > FAILURE_WINDOW {
            entry.window_start = now;
            entry.failures = 0;
        }
        entry.failures += 1;
        if entry.failures >= MAX_FAILURES {
            entry.locked_until = Some(now + LOCKOUT);
            entry.failures = 0;
            entry.window_start = now + LOCKOUT;
            self.lockouts.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                %ip,
                via = via.name(),
                "{MAX_FAILURES} wrong admin credentials within {FAILURE_WINDOW:?}; address locked out for {LOCKOUT:?}"
            );
        }
        Err(Refused::Wrong)
    }

    /// Counts since start.
    pub fn stats(&self) -> CredentialStats {
        let load =
            |counters: &[AtomicU64; 2]| counters.each_ref().map(|c| c.load(Ordering::Relaxed));
        CredentialStats {
            failures: load(&self.failures),
            locked_out: load(&self.locked_out),
            lockouts: self.lockouts.load(Ordering::Relaxed),
        }
    }
}

/// Compares SHA-256 digests of both sides, so neither the content nor the length of the
/// secret shows in how long a comparison takes.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let digest = |bytes: &[u8]| ring::digest::digest(&ring::digest::SHA256, bytes);
    let (a, b) = (digest(a), digest(b));
    let diff = a
        .as_ref()
        .iter()
        .zip(b.as_ref())
        .fold(0u8, |diff, (x, y)| diff | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_secrets_lock_an_address_out_and_the_lockout_ends() {
        let credentials = Credentials::new("secret");
        let start = Instant::now();
        let attacker: IpAddr = "203.0.113.9".parse().unwrap();
        let operator: IpAddr = "198.51.100.1".parse().unwrap();
        for _ in 0..MAX_FAILURES {
            assert_eq!(
                credentials.check(start, attacker, Via::Api, b"guess"),
                Err(Refused::Wrong)
            );
        }
        assert_eq!(
            credentials.check(start, attacker, Via::Console, b"secret"),
            Err(Refused::LockedOut {
                retry_after: LOCKOUT
            }),
            "locked out even with the right secret"
        );
        assert_eq!(
            credentials.check(start, operator, Via::Api, b"secret"),
            Ok(()),
            "another address is not"
        );
        let after = start + LOCKOUT;
        assert_eq!(
            credentials.check(after, attacker, Via::Api, b"secret"),
            Ok(())
        );
        let stats = credentials.stats();
        assert_eq!(stats.failures, [0, u64::from(MAX_FAILURES)]);
        assert_eq!(stats.locked_out, [1, 0]);
        assert_eq!(stats.lockouts, 1);
    }

    #[test]
    fn failures_spread_wider_than_the_window_do_not_lock_out() {
        let credentials = Credentials::new("secret");
        let start = Instant::now();
        let ip: IpAddr = "::ffff:203.0.113.9".parse().unwrap();
        for i in 0..MAX_FAILURES * 2 {
            let now = start + FAILURE_WINDOW / (MAX_FAILURES - 2) * i;
            assert_eq!(
                credentials.check(now, ip, Via::Api, b"x"),
                Err(Refused::Wrong),
                "{i}"
            );
        }
    }

    #[test]
    fn comparison_needs_the_same_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
