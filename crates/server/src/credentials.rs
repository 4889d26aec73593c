//! The admin secrets (the console password and admin API bearer token, and the optional
//! `/metrics` token) and the one check of a presented secret: compared in constant time,
//! and throttled per source, so it cannot be guessed at full speed. The console,
//! `/api/admin/*` and `/metrics` all call [`Credentials::check`].
//!
//! A source is an IPv4 address or an IPv6 /64: one host is usually handed a whole /64, so
//! counting its addresses apart would let it rotate through them between guesses. Behind a
//! trusted proxy the source is the client the proxy names ([`Credentials::client`]), so
//! one guesser there does not lock out every operator behind the same proxy.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write as _};
use std::net::{IpAddr, Ipv6Addr};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Wrong attempts from one source, within [`FAILURE_WINDOW`], that lock it out.
pub const MAX_FAILURES: u32 = 10;
/// The window [`MAX_FAILURES`] are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// How long a locked-out source is refused, even with the right secret.
pub const LOCKOUT: Duration = Duration::from_secs(300);
/// Sources remembered at most; past it, those not locked out are forgotten first.
const MAX_TRACKED: usize = 65_536;

/// Where a secret was presented, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The admin console's password prompt.
    Console,
    /// An `Authorization: Bearer` header on the admin API.
    Api,
    /// An `Authorization: Bearer` header on `/metrics`, checked against the metrics token.
    Metrics,
}

impl Via {
    /// Every door, in the order [`CredentialStats`] counts them.
    pub const ALL: [Via; 3] = [Via::Console, Via::Api, Via::Metrics];

    /// `console`, `api` or `metrics`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Console => "console",
            Self::Api => "api",
            Self::Metrics => "metrics",
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

/// Counts for `/metrics`, by [`Via`] (in [`Via::ALL`]'s order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CredentialStats {
    /// Wrong secrets presented.
    pub failures: [u64; 3],
    /// Attempts refused because their source was locked out.
    pub locked_out: [u64; 3],
    /// Lockouts begun.
    pub lockouts: u64,
}

/// What wrong attempts are counted against: an IPv4 address, or an IPv6 address's /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Source(IpAddr);

impl Source {
    fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let network = u128::from(v6) & !u128::from(u64::MAX);
                Self(IpAddr::V6(Ipv6Addr::from(network)))
            }
            v4 => Self(v4),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

#[derive(Debug)]
struct Attempts {
    window_start: Instant,
    failures: u32,
    locked_until: Option<Instant>,
}

/// The admin secrets and the per-source throttle on guessing them.
#[derive(Debug)]
pub struct Credentials {
    secret: String,
    metrics_secret: String,
    trusted_proxies: Vec<IpAddr>,
    attempts: Mutex<HashMap<Source, Attempts>>,
    failures: [AtomicU64; 3],
    locked_out: [AtomicU64; 3],
    lockouts: AtomicU64,
}

impl Credentials {
    /// The admin secret to check against; no metrics token, no trusted proxy.
    pub fn new(secret: impl Into<String>) -> Self {
        Self {
            secret: secret.into(),
            metrics_secret: String::new(),
            trusted_proxies: Vec::new(),
            attempts: Mutex::default(),
            failures: Default::default(),
            locked_out: Default::default(),
            lockouts: AtomicU64::new(0),
        }
    }

    /// Also checks [`Via::Metrics`] attempts, against `secret` (empty: `/metrics` asks for
    /// none, see [`Credentials::metrics_open`]).
    pub fn with_metrics_secret(mut self, secret: impl Into<String>) -> Self {
        self.metrics_secret = secret.into();
        self
    }

    /// Takes `X-Forwarded-For` from these peers as naming the client ([`Credentials::client`]).
    pub fn with_trusted_proxies(mut self, proxies: Vec<IpAddr>) -> Self {
        self.trusted_proxies = proxies.into_iter().map(|ip| ip.to_canonical()).collect();
        self
    }

    /// The admin secret in force.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Whether `/metrics` answers without a token.
    pub fn metrics_open(&self) -> bool {
        self.metrics_secret.is_empty()
    }

    /// Who sent a request that came from `peer` with these `X-Forwarded-For` values (each
    /// header's, in order): `peer` itself unless it is a trusted proxy; else, reading the
    /// list from its end (each proxy appends the address it heard from), the first
    /// address that is not a trusted proxy. An entry that is not an address ends the walk
    /// at the proxy that wrote it, since what stands before it is only the client's word.
    pub fn client<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl IntoIterator<Item = &'a str>,
    ) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusted_proxies.contains(&peer) {
            return peer;
        }
        let hops: Vec<&str> = forwarded_for
            .into_iter()
            .flat_map(|value| value.split(','))
            .collect();
        let mut client = peer;
        for hop in hops.into_iter().rev() {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else {
                break;
            };
            client = ip.to_canonical();
            if !self.trusted_proxies.contains(&client) {
                break;
            }
        }
        client
    }

    /// Whether `given`, presented by `client`, is the secret `via` asks for (the metrics
    /// token for [`Via::Metrics`], the admin secret otherwise). [`MAX_FAILURES`] wrong
    /// ones from one source (an IPv4 address, an IPv6 /64) within [`FAILURE_WINDOW`],
    /// whichever door they came through, lock it out of every door for [`LOCKOUT`] (logged
    /// once, when it begins); the right one clears its count.
    pub fn check(
        &self,
        now: Instant,
        client: IpAddr,
        via: Via,
        given: &[u8],
    ) -> Result<(), Refused> {
        let source = Source::of(client);
        let index = via as usize;
        let mut attempts = self
            .attempts
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(locked_until) = attempts.get(&source).and_then(|a| a.locked_until)
            && locked_until > now
        {
            self.locked_out[index].fetch_add(1, Ordering::Relaxed);
            return Err(Refused::LockedOut {
                retry_after: locked_until - now,
            });
        }
        let secret = match via {
            Via::Metrics => &self.metrics_secret,
            Via::Console | Via::Api => &self.secret,
        };
        if !secret.is_empty() && constant_time_eq(given, secret.as_bytes()) {
            attempts.remove(&source);
            return Ok(());
        }
        self.failures[index].fetch_add(1, Ordering::Relaxed);
        if attempts.len() >= MAX_TRACKED && !attempts.contains_key(&source) {
            attempts.retain(|_, a| a.locked_until.is_some_and(|until| until > now));
        }
        let entry = attempts.entry(source).or_insert(Attempts {
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
                %source,
                via = via.name(),
                "{MAX_FAILURES} wrong admin credentials within {FAILURE_WINDOW:?}; source locked out for {LOCKOUT:?}"
            );
        }
        Err(Refused::Wrong)
    }

    /// Counts since start.
    pub fn stats(&self) -> CredentialStats {
        let load =
            |counters: &[AtomicU64; 3]| counters.each_ref().map(|c| c.load(Ordering::Relaxed));
        CredentialStats {
            failures: load(&self.failures),
            locked_out: load(&self.locked_out),
            lockouts: self.lockouts.load(Ordering::Relaxed),
        }
    }
}

/// Writes `token` to `path`, readable and writable by this process's user only (mode
/// 0600): into a new file beside it, renamed over `path`, so neither an older file's wider
/// mode nor a symbolic link planted at `path` decides where the secret goes or who may read
/// it.
pub fn write_token_file(path: &Path, token: &str) -> io::Result<()> {
    let mut staged = path.as_os_str().to_owned();
    staged.push(".new");
    let staged = Path::new(&staged);
    match std::fs::remove_file(staged) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(staged)?;
    // The mode given to open is masked by the umask; this one is not.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(token.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    std::fs::rename(staged, path)
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
        assert_eq!(stats.failures, [0, u64::from(MAX_FAILURES), 0]);
        assert_eq!(stats.locked_out, [1, 0, 0]);
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
    fn wrong_secrets_from_one_ipv6_64_count_together() {
        let credentials = Credentials::new("secret");
        let now = Instant::now();
        // A host rotating through its /64: each guess from a fresh address.
        for i in 0..MAX_FAILURES {
            let rotated: IpAddr = format!("2001:db8:1:2::{:x}", i + 1).parse().unwrap();
            assert_eq!(
                credentials.check(now, rotated, Via::Api, b"guess"),
                Err(Refused::Wrong)
            );
        }
        let fresh: IpAddr = "2001:db8:1:2:ffff:ffff:ffff:ffff".parse().unwrap();
        assert!(
            matches!(
                credentials.check(now, fresh, Via::Api, b"secret"),
                Err(Refused::LockedOut { .. })
            ),
            "another address in the same /64 is locked out with it"
        );
        let neighbour: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(
            credentials.check(now, neighbour, Via::Api, b"secret"),
            Ok(()),
            "the next /64 is not"
        );
    }

    #[test]
    fn behind_a_trusted_proxy_the_forwarded_client_is_locked_out_not_the_proxy() {
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let credentials = Credentials::new("secret").with_trusted_proxies(vec![proxy]);
        let now = Instant::now();
        let guesser = credentials.client(proxy, ["203.0.113.9"]);
        assert_eq!(guesser, "203.0.113.9".parse::<IpAddr>().unwrap());
        for _ in 0..MAX_FAILURES {
            let _ = credentials.check(now, guesser, Via::Api, b"guess");
        }
        assert!(matches!(
            credentials.check(now, guesser, Via::Api, b"secret"),
            Err(Refused::LockedOut { .. })
        ));
        let operator = credentials.client(proxy, ["198.51.100.1"]);
        assert_eq!(
            credentials.check(now, operator, Via::Api, b"secret"),
            Ok(()),
            "an operator behind the same proxy still gets in"
        );
    }

    #[test]
    fn forwarded_for_is_read_from_its_end_and_only_from_trusted_proxies() {
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let inner: IpAddr = "10.0.0.6".parse().unwrap();
        let credentials = Credentials::new("s").with_trusted_proxies(vec![proxy, inner]);
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let stranger = ip("192.0.2.7");
        assert_eq!(
            credentials.client(stranger, ["198.51.100.1"]),
            stranger,
            "an untrusted peer's header is its own claim"
        );
        assert_eq!(
            credentials.client(proxy, ["1.2.3.4, 198.51.100.1, 10.0.0.6"]),
            ip("198.51.100.1"),
            "the client spoofed the first entry; the proxies appended the rest"
        );
        assert_eq!(
            credentials.client(proxy, ["1.2.3.4", "198.51.100.1"]),
            ip("198.51.100.1"),
            "several headers read as one list"
        );
        assert_eq!(
            credentials.client(proxy, ["198.51.100.1, garbage"]),
            proxy,
            "an entry that is no address stops the walk at the proxy that wrote it"
        );
        assert_eq!(credentials.client(proxy, []), proxy);
        assert_eq!(
            credentials.client(ip("::ffff:10.0.0.5"), ["198.51.100.1"]),
            ip("198.51.100.1"),
            "a mapped IPv4 peer is the same proxy"
        );
    }

    #[test]
    fn the_metrics_token_is_its_own_secret_under_the_same_throttle() {
        let credentials = Credentials::new("admin").with_metrics_secret("scrape");
        let now = Instant::now();
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        assert!(!credentials.metrics_open());
        assert_eq!(credentials.check(now, ip, Via::Metrics, b"scrape"), Ok(()));
        assert_eq!(
            credentials.check(now, ip, Via::Metrics, b"admin"),
            Err(Refused::Wrong),
            "the admin token is not the metrics token"
        );
        assert_eq!(
            credentials.check(now, ip, Via::Api, b"scrape"),
            Err(Refused::Wrong),
            "nor the other way round"
        );
        assert_eq!(credentials.stats().failures, [0, 1, 1]);
        assert!(Credentials::new("admin").metrics_open());
    }

    #[test]
    fn a_token_file_is_readable_by_its_owner_only_even_over_an_older_wider_one() {
        let dir = std::env::temp_dir().join(format!(
            "tickwire-token-file-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("admin-token");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_token_file(&path, "0123abcd").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "mode {mode:o}");
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "0123abcd");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn comparison_needs_the_same_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
