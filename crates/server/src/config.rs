//! The deployment configuration of `tickwire serve`: plain structs with public fields and
//! defaults that just work, loaded by the binary from a TOML file, then `TICKWIRE_*`
//! environment variables, then the command line (later wins), and printable with
//! `tickwire serve --print-config`. Every key is described in `docs/OPERATIONS.md`.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use tickwire_proto::ConnectionParams;

use crate::limits::{IpLimitConfig, MessageLimitConfig};
use crate::shard::ShardConfig;
use crate::timestep::{MAX_TICK_RATE_HZ, MIN_TICK_RATE_HZ};

/// Everything `tickwire serve` needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Shard worker threads; 0 means one per CPU core.
    pub shards: usize,
    /// The address clients reach this server at, written into connect tokens and the
    /// endpoints matchmaking returns. Clients on other machines need the real one.
    pub public_ip: IpAddr,
    /// HTTP: matchmaking, `/ws`, health (the operator's routes are on `admin.listen`).
    pub http: HttpConfig,
    /// HTTPS: the same routes behind TLS (wss), when enabled.
    pub tls: TlsConfig,
    /// The UDP protocol.
    pub udp: UdpConfig,
    /// WebTransport (HTTP/3 over QUIC): browsers' datagrams, on its own UDP port.
    pub webtransport: WebTransportConfig,
    /// What every connection is told, whatever its transport.
    pub connection: ConnectionConfig,
    /// The admin console.
    pub console: ConsoleConfig,
    /// The operator's listener (`/metrics`, the admin API) and the admin secret.
    pub admin: AdminConfig,
    /// Who players are.
    pub auth: AuthConfig,
    /// What the server insists on before it starts.
    pub security: SecurityConfig,
    /// Rooms: capacities, reconnection and disposal.
    pub rooms: RoomsConfig,
    /// Limits on hostile clients.
    pub limits: LimitsConfig,
    /// Graceful shutdown.
    pub drain: DrainConfig,
    /// Several nodes sharing one room directory on Redis; off (no `redis_url`) the node
    /// runs alone.
    pub cluster: ClusterConfig,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            shards: 0,
            public_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            http: HttpConfig::default(),
            tls: TlsConfig::default(),
            udp: UdpConfig::default(),
            webtransport: WebTransportConfig::default(),
            connection: ConnectionConfig::default(),
            console: ConsoleConfig::default(),
            admin: AdminConfig::default(),
            auth: AuthConfig::default(),
            security: SecurityConfig::default(),
            rooms: RoomsConfig::default(),
            limits: LimitsConfig::default(),
            drain: DrainConfig::default(),
            cluster: ClusterConfig::default(),
        }
    }
}

/// The HTTP listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Where players reach the HTTP side when a proxy or load balancer stands in front
    /// (`https://game.example.com`, a path prefix allowed): matchmaking answers name the
    /// WebSocket endpoint under it (`wss://game.example.com/ws` for an `https` URL, `ws://`
    /// for `http`). Unset: the host the request named, with this server's own ports.
    pub public_url: Option<String>,
    /// The kernel send buffer of each HTTP and WebSocket connection, in bytes; 0 leaves the
    /// kernel's autotuning, which grows it to megabytes. A bounded buffer makes a client that
    /// reads slowly back up into the WebSocket outbox, where unreliable data is shed and a
    /// reliable backlog closes the connection, instead of queueing seconds of stale
    /// messages in the kernel. Default 64 KiB (Linux doubles it for bookkeeping).
    pub tcp_send_buffer_bytes: usize,
    /// Time a request's body has to arrive in full after its headers, in milliseconds
    /// (100 to 60000). Default 5000: a matchmaking body is one round trip.
    pub body_timeout_ms: u64,
    /// Time a request has from the end of its headers to its response, body included, in
    /// milliseconds (100 to 600000); past it the client gets 408. Default 10000.
    pub request_timeout_ms: u64,
    /// HTTP connections one address may hold open before their WebSocket upgrade (0: no
    /// cap); `limits.exempt` addresses are not capped. Default 64: a browser opens about 6.
    pub max_connections_per_ip: u32,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080),
            public_url: None,
            tcp_send_buffer_bytes: 64 << 10,
            body_timeout_ms: 5000,
            request_timeout_ms: 10_000,
            max_connections_per_ip: 64,
        }
    }
}

impl HttpConfig {
    /// The WebSocket endpoint under `public_url`: whether it is TLS (`wss`), and its URL.
    /// `None` when `public_url` is unset; an error naming the problem when it is malformed.
    pub fn public_ws_endpoint(&self) -> Result<Option<(bool, String)>, &'static str> {
        let Some(url) = &self.public_url else {
            return Ok(None);
        };
        let uri: axum::http::Uri = url.parse().map_err(|_| "not a URL")?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err("must start with http:// or https://"),
        };
        let authority = uri.authority().ok_or("has no host")?;
        if uri.query().is_some() {
            return Err("must not have a query");
        }
        let prefix = uri.path().trim_end_matches('/');
        let scheme = if tls { "wss" } else { "ws" };
        Ok(Some((tls, format!("{scheme}://{authority}{prefix}/ws"))))
    }
}

/// The HTTPS listener (wss).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// Where to listen; no HTTPS listener when unset.
    pub listen: Option<SocketAddr>,
    /// PEM certificate chain.
    pub cert: Option<PathBuf>,
    /// PEM private key.
    pub key: Option<PathBuf>,
    /// Without `cert` and `key`: generate a self-signed certificate at start (development
    /// only: browsers warn about it).
    pub self_signed: bool,
}

/// The WebTransport endpoint (`https://host:port/wt` over HTTP/3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebTransportConfig {
    /// Serve WebTransport; matchmaking offers it (`endpoints.wt`) only when on.
    pub enabled: bool,
    /// The UDP address to listen on (its port must be open to UDP in firewalls).
    pub listen: SocketAddr,
    /// PEM certificate chain (production: one browsers trust). Without `cert` and `key`, a
    /// self-signed ECDSA P-256 certificate valid for 13 days is made at start, renewed every
    /// `renew_self_signed_secs`, and its SHA-256 hash handed out by matchmaking (browsers
    /// accept it by hash).
    pub cert: Option<PathBuf>,
    /// PEM private key.
    pub key: Option<PathBuf>,
    /// Most WebTransport sessions open at once, handshakes included.
    pub max_sessions: usize,
    /// Most WebTransport sessions open at once from one IP address (`limits.exempt`
    /// addresses excepted).
    pub max_sessions_per_ip: usize,
    /// Answer each new client address with a QUIC Retry (address validation: one more round
    /// trip, no amplification or held slots from spoofed addresses).
    pub retry: bool,
    /// How often the self-signed certificate is replaced by a fresh one: at most its 13
    /// days of validity. Open sessions keep theirs.
    pub renew_self_signed_secs: u64,
}

/// The self-signed WebTransport certificate's validity, 13 days: the longest a renewal may
/// wait.
pub const SELF_SIGNED_VALID_SECS: u64 = 13 * 24 * 3600;

impl Default for WebTransportConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 4433),
            cert: None,
            key: None,
            max_sessions: 4096,
            max_sessions_per_ip: 16,
            retry: true,
            renew_self_signed_secs: 12 * 24 * 3600,
        }
    }
}

/// The UDP protocol's sockets and tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UdpConfig {
    /// Shard 0's address; shard `i` listens on the port after it by `i` (with port 0,
    /// each on a port of the system's choosing).
    pub listen: SocketAddr,
    /// The game's protocol id: clients of another game (or version) are ignored.
    pub protocol_id: u64,
    /// How long a connect token may be used after matchmaking issued it.
    pub token_validity_secs: u64,
    /// How long a client keeps trying to complete the handshake.
    pub handshake_timeout_secs: u32,
}

impl Default for UdpConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 7777),
            protocol_id: 0x7469_636b_7769_7265, // "tickwire"
            token_validity_secs: 30,
            handshake_timeout_secs: 5,
        }
    }
}

/// Connection parameters the server dictates to every client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionConfig {
    /// Silence after which a connection is considered lost (its player's seat is then
    /// held for `rooms.reconnect_grace_secs`). The keepalive interval follows from it: a
    /// tenth of it, at most one second.
    pub timeout_ms: u64,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            timeout_ms: ConnectionParams::default().timeout.as_millis() as u64,
        }
    }
}

/// The admin console.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Whether to serve it.
    pub enabled: bool,
    /// Where to listen; loopback unless `allow_remote`.
    pub listen: SocketAddr,
    /// Allow a non-loopback address (the console is plain text: put it behind a VPN or an
    /// SSH tunnel).
    pub allow_remote: bool,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 7000),
            allow_remote: false,
        }
    }
}

/// Operator access.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// The console password and the admin API's bearer token. When empty, a random one is
    /// generated at start and written to `token_file` (never to the log).
    pub token: String,
    /// Where a generated token is written, readable by its owner only (mode 0600); a
    /// relative path is under the working directory. Default `tickwire-admin-token`.
    pub token_file: PathBuf,
    /// The operator's listener: `/metrics`, the admin API and the admin page (with
    /// `/healthz` and `/readyz` beside them); the public ports answer 404 for those.
    /// Default `127.0.0.1:9090`: loopback, so only this machine (or a tunnel) reaches it.
    pub listen: SocketAddr,
    /// The bearer token `/metrics` asks for; empty (the default): none, the operator
    /// listener's reach is the limit.
    pub metrics_token: String,
    /// Proxies whose `X-Forwarded-For` names the client the lockout on wrong admin
    /// tokens counts against (otherwise every operator behind the proxy shares its
    /// address, and one guesser locks them all out). Default none.
    pub trusted_proxies: Vec<IpAddr>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            token: String::new(),
            token_file: PathBuf::from("tickwire-admin-token"),
            listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9090),
            metrics_token: String::new(),
            trusted_proxies: Vec::new(),
        }
    }
}

/// How players are identified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// Anyone may play under a generated id and a name of their choice.
    #[default]
    Guest,
    /// A backend signs each player's identity with the shared secret; unsigned requests
    /// are refused.
    SharedSecret,
}

/// Player identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Guest or backend-signed identities.
    pub mode: AuthMode,
    /// The HMAC-SHA256 key the backend signs identities with (`shared_secret` mode).
    pub shared_secret: String,
    /// How long a session string is good for after it was first issued, in seconds (60 to
    /// 31536000); coming back with it does not extend it. Default 86400: a day, so one
    /// that leaks is not good forever, and a day's play never meets the limit.
    pub session_ttl_secs: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            mode: AuthMode::default(),
            shared_secret: String::new(),
            session_ttl_secs: 24 * 3600,
        }
    }
}

/// What the server insists on before it starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecurityConfig {
    /// Refuse to start when matchmaking would hand out connect tokens over plain HTTP
    /// beyond this machine (see [`ServeConfig::plain_http_warning`]). Default false: the
    /// server starts, with a warning.
    pub require_tls: bool,
    /// Web pages whose WebSocket upgrades are taken, as `scheme://host[:port]` origins
    /// (`https://play.example.com`); an upgrade from any other page's `Origin` is refused
    /// with 403, one without an `Origin` (a native client) is let through. Empty (the
    /// default): every origin.
    pub allowed_origins: Vec<String>,
}

impl SecurityConfig {
    /// The WebSocket endpoint's allow-list: `None` (every origin) when none are listed.
    pub fn origin_allow_list(&self) -> Option<Vec<String>> {
        (!self.allowed_origins.is_empty()).then(|| self.allowed_origins.clone())
    }
}

/// One room kind's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindConfig {
    /// Seats per room.
    pub capacity: u16,
}

/// A relay room's ticks per second unless configured (60: a message waits at most 16.7 ms).
pub const DEFAULT_RELAY_TICK_RATE_HZ: u32 = crate::rooms::relay::DEFAULT_TICK_RATE_HZ;

/// Rooms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RoomsConfig {
    /// How long a player whose connection dropped keeps their seat.
    pub reconnect_grace_secs: u64,
    /// How long an empty room lives before it is disposed of.
    pub empty_room_ttl_secs: u64,
    /// Capacity overrides by room kind (`[rooms.kinds.relay] capacity = 32`).
    pub kinds: BTreeMap<String, KindConfig>,
    /// Ticks per second of `relay` rooms, which send what their members sent on each tick.
    pub relay_tick_rate_hz: u32,
}

impl Default for RoomsConfig {
    fn default() -> Self {
        let shard = ShardConfig::default();
        Self {
            reconnect_grace_secs: shard.reconnect_grace.as_secs(),
            empty_room_ttl_secs: shard.empty_room_ttl.as_secs(),
            kinds: BTreeMap::new(),
            relay_tick_rate_hz: DEFAULT_RELAY_TICK_RATE_HZ,
        }
    }
}

/// Limits on what one address or player may do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// New game connections per second per address, sustained.
    pub connect_rate: f64,
    /// New game connections an address may open in a burst.
    pub connect_burst: u32,
    /// Game connections an address may hold at once (UDP and WebSocket together).
    pub max_connections_per_ip: u32,
    /// Addresses never limited (a trusted proxy, a load-test host).
    pub exempt: Vec<IpAddr>,
    /// Matchmaking requests per second per address, sustained (burst: ten times that).
    pub matchmake_rate: f64,
    /// Messages per second a player may send, sustained.
    pub messages_per_second: f64,
    /// Messages a player may send in a burst.
    pub message_burst: u32,
    /// Messages over the limit within 10 seconds after which the player is disconnected.
    pub max_message_violations: u32,
    /// Most WebSocket connections open at once.
    pub max_ws_connections: usize,
    /// Most UDP connections per shard.
    pub max_udp_connections_per_shard: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let ip = IpLimitConfig::default();
        let messages = MessageLimitConfig::default();
        Self {
            connect_rate: ip.connect_rate,
            connect_burst: ip.connect_burst,
            max_connections_per_ip: ip.max_connections,
            exempt: vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ],
            matchmake_rate: 5.0,
            messages_per_second: messages.rate,
            message_burst: messages.burst,
            max_message_violations: messages.max_violations,
            max_ws_connections: 16_384,
            max_udp_connections_per_shard: 16_384,
        }
    }
}

/// Graceful shutdown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DrainConfig {
    /// How long a shutdown may take (final ticks, goodbyes, flushes) before the process
    /// exits regardless.
    pub grace_secs: u64,
}

impl Default for DrainConfig {
    fn default() -> Self {
        Self { grace_secs: 10 }
    }
}

/// A cluster of nodes sharing one room directory on Redis (docs/OPERATIONS.md, "Scaling
/// out"). Every node of a cluster has the same `redis_url`, `name` and `secret`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// `redis://host:port/db` (`rediss://` for TLS). Empty: no cluster, the node runs alone.
    pub redis_url: String,
    /// The cluster's name: the prefix of its keys and channels, so several clusters (or
    /// tests) can share one Redis.
    pub name: String,
    /// The secret every node of the cluster shares (at least 16 bytes): connect tokens and
    /// sessions are keyed from it, so a player matchmade on one node connects to another
    /// and reconnects through any. Required with `redis_url`; there is no default.
    pub secret: String,
    /// This node's id in the directory. Empty: the host name and a random suffix.
    pub node_id: String,
    /// The node's lease in milliseconds (1000 to 60000): renewed three times per lease, so
    /// one slow renewal loses nothing; a node that stops renewing (killed, cut off) leaves
    /// the directory, with its rooms, within it. Default 10000.
    pub lease_ms: u64,
    /// How long a matchmake waits for another node to create a room, in milliseconds (100 to
    /// 30000); past it the request is refused, and the room is never created later. Default
    /// 2000.
    pub create_timeout_ms: u64,
    /// How long one Redis command may take before the directory counts as unavailable, in
    /// milliseconds (50 to 10000). Default 1000.
    pub redis_timeout_ms: u64,
    /// Players this node takes at most: with as many seated or promised, new rooms go to
    /// other nodes. 0: no limit. Default 0.
    pub max_players: u32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            redis_url: String::new(),
            name: "tickwire".into(),
            secret: String::new(),
            node_id: String::new(),
            lease_ms: 10_000,
            create_timeout_ms: 2000,
            redis_timeout_ms: 1000,
            max_players: 0,
        }
    }
}

impl ClusterConfig {
    /// Whether this node is part of a cluster.
    pub fn enabled(&self) -> bool {
        !self.redis_url.is_empty()
    }
}

/// Why a configuration cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A value out of its range.
    #[error("{key} = {value}: {reason}")]
    Invalid {
        /// The key, dotted (`limits.connect_rate`).
        key: &'static str,
        /// The value given.
        value: String,
        /// What it must be.
        reason: &'static str,
    },
}

/// What plain HTTP beyond this machine exposes, in the warning and the refusal alike.
macro_rules! plain_http_risk {
    () => {
        "connect tokens carry the session keys, so whoever sees a matchmaking answer can read \
         and forge that player's traffic"
    };
}

fn invalid(key: &'static str, value: impl ToString, reason: &'static str) -> ConfigError {
    ConfigError::Invalid {
        key,
        value: value.to_string(),
        reason,
    }
}

impl ServeConfig {
    /// Checks what serde cannot: ranges and combinations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.public_ip.is_unspecified() {
            return Err(invalid(
                "public_ip",
                self.public_ip,
                "must be an address clients can reach, not unspecified",
            ));
        }
        if let Err(why) = self.http.public_ws_endpoint() {
            return Err(invalid(
                "http.public_url",
                self.http.public_url.as_deref().unwrap_or_default(),
                why,
            ));
        }
        if self.http.tcp_send_buffer_bytes != 0
            && !(4096..=(64 << 20)).contains(&self.http.tcp_send_buffer_bytes)
        {
            return Err(invalid(
                "http.tcp_send_buffer_bytes",
                self.http.tcp_send_buffer_bytes,
                "must be 0 (the kernel's autotuning) or 4096 to 67108864",
            ));
        }
        if !(100..=60_000).contains(&self.http.body_timeout_ms) {
            return Err(invalid(
                "http.body_timeout_ms",
                self.http.body_timeout_ms,
                "must be 100 to 60000",
            ));
        }
        if !(100..=600_000).contains(&self.http.request_timeout_ms) {
            return Err(invalid(
                "http.request_timeout_ms",
                self.http.request_timeout_ms,
                "must be 100 to 600000",
            ));
        }
        if self.udp.token_validity_secs == 0 || self.udp.token_validity_secs > 3600 {
            return Err(invalid(
                "udp.token_validity_secs",
                self.udp.token_validity_secs,
                "must be 1 to 3600",
            ));
        }
        if !(1..=60).contains(&self.udp.handshake_timeout_secs) {
            return Err(invalid(
                "udp.handshake_timeout_secs",
                self.udp.handshake_timeout_secs,
                "must be 1 to 60",
            ));
        }
        if self.tls.listen.is_some()
            && !self.tls.self_signed
            && (self.tls.cert.is_none() || self.tls.key.is_none())
        {
            return Err(invalid(
                "tls.listen",
                self.tls.listen.map_or(String::new(), |a| a.to_string()),
                "needs tls.cert and tls.key, or tls.self_signed = true",
            ));
        }
        if self.webtransport.cert.is_some() != self.webtransport.key.is_some() {
            return Err(invalid(
                "webtransport.cert",
                "(set without its pair)",
                "webtransport.cert and webtransport.key go together",
            ));
        }
        if self.webtransport.max_sessions == 0 || self.webtransport.max_sessions_per_ip == 0 {
            return Err(invalid(
                "webtransport.max_sessions",
                self.webtransport
                    .max_sessions
                    .min(self.webtransport.max_sessions_per_ip),
                "max_sessions and max_sessions_per_ip must be positive",
            ));
        }
        let renew = self.webtransport.renew_self_signed_secs;
        if !(1..=SELF_SIGNED_VALID_SECS).contains(&renew) {
            return Err(invalid(
                "webtransport.renew_self_signed_secs",
                renew,
                "must be 1 to 1123200 (13 days, the certificate's validity)",
            ));
        }
        if !(60..=365 * 24 * 3600).contains(&self.auth.session_ttl_secs) {
            return Err(invalid(
                "auth.session_ttl_secs",
                self.auth.session_ttl_secs,
                "must be 60 to 31536000",
            ));
        }
        if self.auth.mode == AuthMode::SharedSecret && self.auth.shared_secret.len() < 16 {
            return Err(invalid(
                "auth.shared_secret",
                format!("({} bytes)", self.auth.shared_secret.len()),
                "shared_secret mode needs a secret of at least 16 bytes",
            ));
        }
        for (key, rate) in [
            ("limits.connect_rate", self.limits.connect_rate),
            ("limits.matchmake_rate", self.limits.matchmake_rate),
            (
                "limits.messages_per_second",
                self.limits.messages_per_second,
            ),
        ] {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(invalid(key, rate, "must be a positive number"));
            }
        }
        if !(500..=120_000).contains(&self.connection.timeout_ms) {
            return Err(invalid(
                "connection.timeout_ms",
                self.connection.timeout_ms,
                "must be 500 to 120000",
            ));
        }
        if self.rooms.empty_room_ttl_secs < self.udp.token_validity_secs {
            return Err(invalid(
                "rooms.empty_room_ttl_secs",
                self.rooms.empty_room_ttl_secs,
                "must be at least udp.token_validity_secs: a new room must outlive the tokens issued for it",
            ));
        }
        if self.console.enabled
            && !self.console.listen.ip().is_loopback()
            && !self.console.allow_remote
        {
            return Err(invalid(
                "console.listen",
                self.console.listen,
                "is not loopback; the console is plain text (set console.allow_remote to insist)",
            ));
        }
        if self.admin.token.trim() != self.admin.token {
            return Err(invalid(
                "admin.token",
                "(hidden)",
                "must not start or end with whitespace",
            ));
        }
        if self.admin.metrics_token.trim() != self.admin.metrics_token {
            return Err(invalid(
                "admin.metrics_token",
                "(hidden)",
                "must not start or end with whitespace",
            ));
        }
        if self.admin.token.is_empty() && self.admin.token_file.as_os_str().is_empty() {
            return Err(invalid(
                "admin.token_file",
                "\"\"",
                "must name a file when admin.token is empty (the generated token goes there)",
            ));
        }
        if self.tls.listen.is_none() {
            for (key, set) in [
                ("tls.cert", self.tls.cert.is_some()),
                ("tls.key", self.tls.key.is_some()),
                ("tls.self_signed", self.tls.self_signed),
            ] {
                if set {
                    return Err(invalid(
                        key,
                        "(set)",
                        "needs tls.listen, the address to serve HTTPS on",
                    ));
                }
            }
        }
        if self.security.require_tls && self.plain_http_exposed() {
            return Err(invalid(
                "security.require_tls",
                true,
                concat!(
                    "http.listen is not loopback and no TLS stands in front of it (tls.listen, ",
                    "or a TLS proxy named by an https:// http.public_url): ",
                    plain_http_risk!()
                ),
            ));
        }
        if self.drain.grace_secs == 0 {
            return Err(invalid("drain.grace_secs", 0, "must be at least 1"));
        }
        self.validate_cluster()?;
        if !(MIN_TICK_RATE_HZ..=MAX_TICK_RATE_HZ).contains(&self.rooms.relay_tick_rate_hz) {
            return Err(invalid(
                "rooms.relay_tick_rate_hz",
                self.rooms.relay_tick_rate_hz,
                "must be 1 to 128",
            ));
        }
        for (kind, settings) in &self.rooms.kinds {
            if settings.capacity == 0 {
                return Err(invalid(
                    "rooms.kinds.<kind>.capacity",
                    format!("{kind}: 0"),
                    "must be at least 1",
                ));
            }
        }
        Ok(())
    }

    fn validate_cluster(&self) -> Result<(), ConfigError> {
        let cluster = &self.cluster;
        if !cluster.enabled() {
            return Ok(());
        }
        if !(cluster.redis_url.starts_with("redis://")
            || cluster.redis_url.starts_with("rediss://"))
        {
            return Err(invalid(
                "cluster.redis_url",
                &cluster.redis_url,
                "must start with redis:// or rediss://",
            ));
        }
        if cluster.secret.len() < 16 {
            return Err(invalid(
                "cluster.secret",
                format!("({} bytes)", cluster.secret.len()),
                "a cluster needs a shared secret of at least 16 bytes (connect tokens and sessions are keyed from it)",
            ));
        }
        let name_ok = |name: &str, max: usize| {
            !name.is_empty()
                && name.len() <= max
                && name
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte))
        };
        if !name_ok(&cluster.name, 64) {
            return Err(invalid(
                "cluster.name",
                &cluster.name,
                "must be 1 to 64 letters, digits, '-', '_' or '.'",
            ));
        }
        if !cluster.node_id.is_empty() && !name_ok(&cluster.node_id, 64) {
            return Err(invalid(
                "cluster.node_id",
                &cluster.node_id,
                "must be empty or 1 to 64 letters, digits, '-', '_' or '.'",
            ));
        }
        for (key, value, range) in [
            ("cluster.lease_ms", cluster.lease_ms, 1000..=60_000),
            (
                "cluster.create_timeout_ms",
                cluster.create_timeout_ms,
                100..=30_000,
            ),
            (
                "cluster.redis_timeout_ms",
                cluster.redis_timeout_ms,
                50..=10_000,
            ),
        ] {
            if !range.contains(&value) {
                return Err(invalid(
                    key,
                    value,
                    "is out of its range (docs/OPERATIONS.md)",
                ));
            }
        }
        Ok(())
    }

    /// Whether matchmaking hands connect tokens out over plain HTTP beyond this machine:
    /// `http.listen` is not loopback and no TLS stands in front of it (neither `tls.listen`
    /// nor a TLS-terminating proxy, which an `https://` `http.public_url` names).
    pub fn plain_http_exposed(&self) -> bool {
        let proxied_tls = matches!(self.http.public_ws_endpoint(), Ok(Some((true, _))));
        !(self.http.listen.ip().to_canonical().is_loopback()
            || self.tls.listen.is_some()
            || proxied_tls)
    }

    /// The warning a server that [`plain_http_exposed`](Self::plain_http_exposed) starts
    /// with.
    pub fn plain_http_warning(&self) -> Option<String> {
        self.plain_http_exposed().then(|| {
            format!(
                "http.listen = {} serves matchmaking over plain HTTP beyond this machine with no \
                 TLS in front (tls.listen, or a TLS proxy named by an https:// http.public_url): \
                 {}; set security.require_tls = true to refuse to start like this",
                self.http.listen,
                plain_http_risk!()
            )
        })
    }

    /// Shard workers to run: the configured count, or one per core.
    pub fn shard_count(&self) -> usize {
        match self.shards {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            shards => shards,
        }
    }

    /// The shards' reconnection, disposal and message limits.
    pub fn shard_config(&self) -> ShardConfig {
        ShardConfig {
            reconnect_grace: Duration::from_secs(self.rooms.reconnect_grace_secs),
            empty_room_ttl: Duration::from_secs(self.rooms.empty_room_ttl_secs),
            message_limit: MessageLimitConfig {
                rate: self.limits.messages_per_second,
                burst: self.limits.message_burst,
                max_violations: self.limits.max_message_violations,
                ..MessageLimitConfig::default()
            },
        }
    }

    /// The parameters every connection is told in its handshake.
    pub fn connection_params(&self) -> ConnectionParams {
        ConnectionParams::with_timeout(Duration::from_millis(self.connection.timeout_ms))
    }

    /// The per-address connection limits.
    pub fn ip_limits(&self) -> IpLimitConfig {
        IpLimitConfig {
            connect_rate: self.limits.connect_rate,
            connect_burst: self.limits.connect_burst,
            max_connections: self.limits.max_connections_per_ip,
            ..IpLimitConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_survive_a_round_trip_through_toml_json() {
        let config = ServeConfig::default();
        config.validate().unwrap();
        let json = serde_json::to_string(&config).unwrap();
        let back: ServeConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, config);
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut config = ServeConfig::default();
        config.limits.connect_rate = f64::NAN;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("limits.connect_rate = NaN"), "{error}");

        let mut config = ServeConfig::default();
        config.auth.mode = AuthMode::SharedSecret;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("auth.shared_secret"), "{error}");

        let mut config = ServeConfig::default();
        config.tls.listen = Some("127.0.0.1:8443".parse().unwrap());
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("tls.cert"), "{error}");

        let mut config = ServeConfig::default();
        config.http.tcp_send_buffer_bytes = 100;
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.starts_with("http.tcp_send_buffer_bytes = 100"),
            "{error}"
        );
        config.http.tcp_send_buffer_bytes = 0;
        config.validate().unwrap();
        for (key, set) in [
            (
                "http.body_timeout_ms = 99",
                (|c: &mut ServeConfig| c.http.body_timeout_ms = 99) as fn(&mut ServeConfig),
            ),
            ("http.request_timeout_ms = 600001", |c| {
                c.http.request_timeout_ms = 600_001
            }),
            ("rooms.relay_tick_rate_hz = 0", |c| {
                c.rooms.relay_tick_rate_hz = 0
            }),
            ("rooms.relay_tick_rate_hz = 129", |c| {
                c.rooms.relay_tick_rate_hz = 129
            }),
            ("auth.session_ttl_secs = 59", |c| {
                c.auth.session_ttl_secs = 59
            }),
        ] {
            let mut config = ServeConfig::default();
            set(&mut config);
            let error = config.validate().unwrap_err().to_string();
            assert!(error.starts_with(key), "{error}");
        }
    }

    #[test]
    fn a_public_url_names_the_websocket_endpoint_players_use() {
        let with = |url: &str| HttpConfig {
            public_url: Some(url.into()),
            ..HttpConfig::default()
        };
        assert_eq!(HttpConfig::default().public_ws_endpoint(), Ok(None));
        assert_eq!(
            with("https://game.example.com").public_ws_endpoint(),
            Ok(Some((true, "wss://game.example.com/ws".into())))
        );
        assert_eq!(
            with("http://10.0.0.5:9000/arena/").public_ws_endpoint(),
            Ok(Some((false, "ws://10.0.0.5:9000/arena/ws".into())))
        );
        for bad in ["game.example.com", "ftp://x", "https://x/?a=1", "::"] {
            let config = ServeConfig {
                http: with(bad),
                ..ServeConfig::default()
            };
            let error = config.validate().unwrap_err().to_string();
            assert!(error.starts_with("http.public_url"), "{bad}: {error}");
        }
    }

    #[test]
    fn the_self_signed_renewal_must_come_within_the_certificates_validity() {
        let with = |secs| {
            let mut config = ServeConfig::default();
            config.webtransport.renew_self_signed_secs = secs;
            config.validate()
        };
        assert!(with(1).is_ok());
        assert!(with(SELF_SIGNED_VALID_SECS).is_ok());
        for bad in [0, SELF_SIGNED_VALID_SECS + 1] {
            let error = with(bad).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!("webtransport.renew_self_signed_secs = {bad}")),
                "{error}"
            );
        }
    }

    #[test]
    fn a_cluster_needs_a_secret_and_sane_settings() {
        let mut config = ServeConfig::default();
        config.cluster.redis_url = "redis://127.0.0.1:6379".into();
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("cluster.secret"), "{error}");
        config.cluster.secret = "sixteen bytes ok".into();
        config.validate().unwrap();
        config.cluster.lease_ms = 500;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("cluster.lease_ms = 500"), "{error}");
        config.cluster.lease_ms = 10_000;
        config.cluster.name = "has space".into();
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("cluster.name"), "{error}");
        config.cluster.name = "tickwire".into();
        config.cluster.redis_url = "http://x".into();
        let error = config.validate().unwrap_err().to_string();
        assert!(error.starts_with("cluster.redis_url"), "{error}");
    }

    #[test]
    fn plain_http_beyond_this_machine_warns_and_require_tls_refuses_it() {
        let mut config = ServeConfig::default();
        assert_eq!(config.http.listen.to_string(), "0.0.0.0:8080");
        let warning = config
            .plain_http_warning()
            .expect("the default 0.0.0.0 listener without TLS must warn");
        assert!(
            warning.contains("http.listen = 0.0.0.0:8080") && warning.contains("session keys"),
            "the warning names the address and the risk: {warning}"
        );
        config.validate().unwrap();
        config.security.require_tls = true;
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.starts_with("security.require_tls = true: http.listen is not loopback")
                && error.contains("session keys"),
            "{error}"
        );

        let with = |set: fn(&mut ServeConfig)| {
            let mut config = ServeConfig::default();
            config.security.require_tls = true;
            set(&mut config);
            config
        };
        for (why, config) in [
            (
                "loopback",
                with(|c| c.http.listen = "127.0.0.1:8080".parse().unwrap()),
            ),
            (
                "v4-mapped loopback",
                with(|c| c.http.listen = "[::ffff:127.0.0.1]:8080".parse().unwrap()),
            ),
            (
                "tls.listen",
                with(|c| {
                    c.tls.listen = Some("0.0.0.0:8443".parse().unwrap());
                    c.tls.self_signed = true;
                }),
            ),
            (
                "a TLS proxy",
                with(|c| c.http.public_url = Some("https://play.example.com".into())),
            ),
        ] {
            assert_eq!(config.plain_http_warning(), None, "{why}");
            assert!(config.validate().is_ok(), "{why}");
        }
        let plain_proxy = with(|c| c.http.public_url = Some("http://play.example.com".into()));
        assert!(
            plain_proxy.validate().is_err(),
            "an http:// public_url is no TLS"
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        let error = serde_json::from_str::<ServeConfig>(r#"{"htp": {}}"#).unwrap_err();
        assert!(error.to_string().contains("unknown field `htp`"), "{error}");
    }
}
