//! The whole server process: shard workers, the HTTP side (matchmaking, `/ws`, health,
//! metrics, the admin API), the admin console, and graceful shutdown. `tickwire serve` is
//! this plus configuration loading and signal handling.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tickwire_server::config::ServeConfig;
//! use tickwire_server::rooms::relay::RelayRoom;
//! use tickwire_server::runtime::{RoomKinds, Runtime};
//!
//! let mut kinds = RoomKinds::new();
//! kinds.register("relay", 16, || Box::new(RelayRoom::default()));
//! let runtime = Runtime::start(ServeConfig::default(), kinds).await?;
//! let handle = runtime.handle();
//! tokio::spawn(async move {
//!     tokio::signal::ctrl_c().await.ok();
//!     handle.shutdown();
//! });
//! runtime.run().await?; // until a shutdown is asked for, then drains within the grace period
//! # Ok(())
//! # }
//! ```

mod admin;
mod admin_page;
mod api;
mod cluster;
mod extras;
mod identity;
mod kinds;
mod memory;
mod metrics;

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tickwire_net::ws::{
    HttpListener, ListenConfig, ListenMetrics, TlsIdentity, WsConfig, WsEndpoint, WsSocket,
};
use tickwire_net::wt::{WtCertificate, WtConfig, WtLinks, WtMeters};
use tickwire_proto::ServerConfig;
use tickwire_proto::admission::{Admission, UsedTokens};
use tickwire_proto::crypto::Key;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

pub use extras::Extras;
pub use identity::{Identity, IdentityError, MAX_PLAYER_ID, SignedIdentity};
pub use kinds::RoomKinds;

use crate::config::ServeConfig;
use crate::limits::{IpLimitConfig, IpLimiter};
use crate::matchmaker::Matchmaker;
use crate::shard::{RoomId, SeatChange};
use crate::worker::{
    Control, SeatTicket, ShardWorker, SharedIpLimiter, SharedView, WorkerLinks, WorkerReport,
};
use identity::Identities;

/// Connections the WebSocket endpoint may hand over before the hand-off task takes them.
const HANDOFF_QUEUE: usize = 256;
/// Used connect tokens the server remembers, across every transport and shard: at least
/// the tokens matchmaking issues within one validity period (a forgotten token that has
/// not expired could be used again). 65,536 tags and bindings are about 4 MiB.
const USED_TOKENS_REMEMBERED: usize = 65_536;

/// Where a running server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addresses {
    /// HTTP (and ws).
    pub http: SocketAddr,
    /// HTTPS (and wss), when enabled.
    pub https: Option<SocketAddr>,
    /// Each shard's UDP socket.
    pub udp: Vec<SocketAddr>,
    /// Each shard's WebTransport UDP socket, when enabled (empty when not): a shard serves
    /// the sessions of its own rooms, as its UDP socket does.
    pub wt: Vec<SocketAddr>,
    /// The admin console, when enabled.
    pub console: Option<SocketAddr>,
    /// The operator's HTTP listener (`admin.listen`): `/metrics`, the admin API, the
    /// operator's extra routes, health.
    pub admin: SocketAddr,
}

/// Where the server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Taking players.
    Running,
    /// Taking no new players; rooms in progress continue, and the server shuts down when
    /// the last player has left.
    Draining,
    /// Shutting down: players are told, rooms run their last tick, the process exits.
    ShuttingDown,
}

impl Phase {
    /// `running`, `draining` or `shutting_down`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Draining => "draining",
            Self::ShuttingDown => "shutting_down",
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A configured room kind is not one this build hosts.
    #[error("rooms.kinds.{0}: no such room kind (this server hosts: {1})")]
    UnknownKind(String, String),
    /// A socket could not be bound.
    #[error("cannot listen on {address} ({what}): {source}")]
    Bind {
        /// What was to listen there.
        what: &'static str,
        /// The address.
        address: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The TLS certificate or key could not be used.
    #[error("tls: {0}")]
    Tls(#[from] tickwire_net::ws::TlsError),
    /// A shard's WebTransport sessions could not start.
    #[error(transparent)]
    WebTransport(#[from] tickwire_net::wt::WtError),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// One shard as the HTTP side sees it.
struct ShardLink {
    control: mpsc::Sender<Control>,
    udp_public: SocketAddr,
    /// Its WebTransport port as players reach it, and the certificate it presents.
    wt: Option<ShardWt>,
    view: SharedView,
    /// False once the worker's thread has ended: readiness reports the shard degraded.
    running: crate::worker::Running,
}

/// A shard's WebTransport port as matchmaking hands it out.
struct ShardWt {
    public: SocketAddr,
    /// Where its socket is bound: which family (and address) a name must resolve to for
    /// the socket to hear it.
    bound: SocketAddr,
    cert: crate::worker::CertHash,
}

/// Traffic rates, sampled once a second from the workers' and the endpoint's counters.
#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    totals: [u64; 4],
    per_second: [f64; 4],
}

/// What every part of the HTTP side shares.
pub(crate) struct App {
    config: ServeConfig,
    kinds: RoomKinds,
    key: Key,
    identities: Identities,
    matchmaker: Mutex<Matchmaker>,
    shards: Vec<ShardLink>,
    http_public: SocketAddr,
    https_public: Option<SocketAddr>,
    ws: WsEndpoint,
    /// The WebTransport transport's counters (every shard's), when enabled.
    wt: Option<WtMeters>,
    phase: watch::Sender<Phase>,
    /// The console password and admin API token, and the throttle on guessing it.
    credentials: Arc<crate::credentials::Credentials>,
    matchmake_limiter: Mutex<IpLimiter>,
    /// Rooms placed and not yet confirmed by their shard: players placed in one meanwhile
    /// wait for the confirmation (`true`: created) before they get their token.
    creating: Mutex<HashMap<RoomId, watch::Receiver<Option<bool>>>>,
    metrics: metrics::Metrics,
    extras_metrics: Vec<extras::MetricsWriter>,
    extras_readiness: Vec<extras::ReadinessNote>,
    memory_outside_heap: Vec<extras::MemoryOutsideHeap>,
    rates: Mutex<Rates>,
    /// The HTTP and HTTPS listeners' counters.
    http_metrics: Vec<ListenMetrics>,
    /// This node's part in a cluster, when `[cluster]` is on.
    cluster: Option<Arc<cluster::ClusterNode>>,
}

impl App {
    fn matchmaker(&self) -> MutexGuard<'_, Matchmaker> {
        self.matchmaker
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn creating(&self) -> MutexGuard<'_, HashMap<RoomId, watch::Receiver<Option<bool>>>> {
        self.creating
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Stops taking players; rooms in progress continue.
    fn drain(&self) {
        self.matchmaker().drain();
        self.phase.send_if_modified(|phase| {
            let running = *phase == Phase::Running;
            if running {
                *phase = Phase::Draining;
            }
            running
        });
        // The directory learns at once: no other node sends players here any more.
        if let Some(node) = &self.cluster {
            node.renew();
        }
    }

    fn shutdown(&self) {
        self.matchmaker().drain();
        self.phase.send_if_modified(|phase| {
            let changed = *phase != Phase::ShuttingDown;
            *phase = Phase::ShuttingDown;
            changed
        });
    }
}

/// Asks a running server to drain or shut down; cheap to clone.
#[derive(Clone)]
pub struct ServerHandle {
    app: Arc<App>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("phase", &self.phase())
            .finish()
    }
}

impl ServerHandle {
    /// Starts a graceful shutdown (what SIGTERM does).
    pub fn shutdown(&self) {
        self.app.shutdown();
    }

    /// Stops taking players; the server shuts down once the last one has left.
    pub fn drain(&self) {
        self.app.drain();
    }

    /// Where the server is in its life.
    pub fn phase(&self) -> Phase {
        self.app.phase()
    }

    /// Players and rooms now, and each shard's count of published views (which moves
    /// every 250 ms while the shard's loop turns): for a health check and load labels.
    pub fn pulse(&self) -> Pulse {
        let mut pulse = Pulse::default();
        for shard in &self.app.shards {
            let view = shard.view.read();
            pulse.players += view.players.len() as u64 + view.players_held;
            pulse.rooms += view.rooms.len() as u64;
            pulse.publications.push(view.publications);
        }
        pulse
    }
}

/// A running server's load and liveness, from [`ServerHandle::pulse`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pulse {
    /// Players connected or holding a seat.
    pub players: u64,
    /// Rooms hosted.
    pub rooms: u64,
    /// Each shard's count of published views.
    pub publications: Vec<u64>,
}

/// What a shutdown did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Each worker's report.
    pub workers: Vec<WorkerReport>,
}

/// A running server.
pub struct Runtime {
    app: Arc<App>,
    addresses: Addresses,
    workers: Vec<ShardWorker>,
    tasks: JoinSet<()>,
    stop_listeners: watch::Sender<bool>,
    /// Where this run's generated admin token was written; removed at shutdown, since the
    /// token dies with the run.
    token_file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

fn bind_error(what: &'static str, address: SocketAddr) -> impl FnOnce(io::Error) -> StartError {
    move |source| StartError::Bind {
        what,
        address,
        source,
    }
}

impl Runtime {
    /// Binds every socket, starts the shard workers and serves. Returns once the server is
    /// taking players.
    pub async fn start(config: ServeConfig, kinds: RoomKinds) -> Result<Self, StartError> {
        Self::start_with(config, kinds, Extras::default()).await
    }

    /// [`Runtime::start`], also serving what the embedding program adds: routes on the same
    /// HTTP and HTTPS ports (the persistence API, the web client) and lines on `/metrics`.
    pub async fn start_with(
        config: ServeConfig,
        mut kinds: RoomKinds,
        extras: Extras,
    ) -> Result<Self, StartError> {
        config.validate()?;
        for (kind, settings) in &config.rooms.kinds {
            if !kinds.set_capacity(kind, settings.capacity) {
                let known: Vec<&str> = kinds.iter().map(|(name, _)| name).collect();
                return Err(StartError::UnknownKind(kind.clone(), known.join(", ")));
            }
        }
        // A cluster's nodes share the connect-token key (derived from its secret), so one node
        // issues tokens another admits; a single server makes one of its own.
        let key = if config.cluster.enabled() {
            cluster::token_key(&config.cluster.secret)
        } else {
            Key::random(&mut rand::rng())
        };
        let cluster_node = if config.cluster.enabled() {
            Some(Arc::new(
                cluster::ClusterNode::new(&config.cluster)
                    .map_err(|error| StartError::Other(format!("cluster.redis_url: {error}")))?,
            ))
        } else {
            None
        };
        let public_ip = config.public_ip;

        let http = tokio::net::TcpListener::bind(config.http.listen)
            .await
            .map_err(bind_error("http", config.http.listen))?;
        let http_address = http
            .local_addr()
            .map_err(bind_error("http", config.http.listen))?;
        let https = match config.tls.listen {
            Some(address) => {
                let listener = tokio::net::TcpListener::bind(address)
                    .await
                    .map_err(bind_error("https", address))?;
                let bound = listener
                    .local_addr()
                    .map_err(bind_error("https", address))?;
                Some((listener, bound))
            }
            None => None,
        };
        let http_public = SocketAddr::new(public_ip, http_address.port());
        let https_public = https
            .as_ref()
            .map(|(_, bound)| SocketAddr::new(public_ip, bound.port()));

        let ip_limiter = SharedIpLimiter::new(
            IpLimiter::new(config.ip_limits()),
            config.limits.exempt.clone(),
        );
        let metrics = metrics::Metrics::new();
        let (events_in, events) = mpsc::unbounded_channel();
        // One used-token set for every transport: a token opens one connection, over UDP on
        // one shard or over WebSocket/WebTransport, never both (docs/ARCHITECTURE.md).
        let used_tokens = UsedTokens::new(USED_TOKENS_REMEMBERED);
        let mut workers = Vec::new();
        for index in 0..config.shard_count() {
            let listen = shard_address(config.udp.listen, index);
            let view = SharedView::default();
            let links = WorkerLinks {
                events: Some(events_in.clone()),
                view,
                limiter: Some(ip_limiter.clone()),
                tick_observer: Some(metrics.tick_observer()),
            };
            let server_key = key.clone();
            let shard_used_tokens = used_tokens.clone();
            let protocol_id = config.udp.protocol_id;
            let max_clients = config.limits.max_udp_connections_per_shard;
            let params = config.connection_params();
            let worker = ShardWorker::spawn_linked(listen, config.shard_config(), links, |bound| {
                let mut server = ServerConfig::new(
                    protocol_id,
                    server_key,
                    vec![SocketAddr::new(public_ip, bound.port())],
                );
                server.max_clients = max_clients;
                server.params = params;
                server.used_tokens = shard_used_tokens;
                server
            })
            .map_err(bind_error("udp", listen))?;
            workers.push(worker);
        }
        drop(events_in);

        let (handoff, connections) = mpsc::channel(HANDOFF_QUEUE);
        // A token names the UDP address of its room's shard, the only address a UDP client
        // may try with it; the browser transports find their endpoints in the matchmaking
        // answer and accept a token that names any of this server's shards.
        let admission = Admission::new(
            config.udp.protocol_id,
            &key,
            workers
                .iter()
                .map(|worker| SocketAddr::new(public_ip, worker.udp_address().port()))
                .collect(),
            used_tokens,
        );
        let ws_config = WsConfig {
            params: config.connection_params(),
            max_connections: config.limits.max_ws_connections,
            allowed_origins: config.security.origin_allow_list(),
            ..WsConfig::default()
        };
        let ws = WsEndpoint::new(ws_config.clone(), admission, handoff)
            .map_err(|error| StartError::Other(error.to_string()))?;
        let (wt_meters, wt_shards) = if config.webtransport.enabled {
            let (meters, shards) =
                serve_webtransport(&config, public_ip, &workers, &ws, &ws_config).await?;
            (Some(meters), shards)
        } else {
            (None, Vec::new())
        };

        let (admin_token, token_file) = if config.admin.token.is_empty() {
            let path = &config.admin.token_file;
            (generate_admin_token(path)?, Some(path.clone()))
        } else {
            (config.admin.token.clone(), None)
        };

        let wt_addresses: Vec<SocketAddr> = wt_shards.iter().map(|(bound, _)| *bound).collect();
        let mut wt_shards = wt_shards.into_iter();
        let shards = workers
            .iter()
            .map(|worker| ShardLink {
                control: worker.control(),
                udp_public: SocketAddr::new(public_ip, worker.udp_address().port()),
                wt: wt_shards.next().map(|(_, wt)| wt),
                view: worker.shared_view(),
                running: worker.running(),
            })
            .collect();
        let reservation_ttl = Duration::from_secs(config.udp.token_validity_secs);
        let matchmaker = Matchmaker::new(
            workers.len(),
            kinds
                .iter()
                .map(|(name, capacity)| (name.to_string(), capacity)),
            reservation_ttl,
        );
        let settings = &config.http;
        let listen = ListenConfig {
            tcp_send_buffer: Some(settings.tcp_send_buffer_bytes).filter(|bytes| *bytes > 0),
            body_read_timeout: Duration::from_millis(settings.body_timeout_ms),
            request_timeout: Duration::from_millis(settings.request_timeout_ms),
            max_connections_per_ip: settings.max_connections_per_ip,
            exempt: config.limits.exempt.clone(),
            ..ListenConfig::default()
        };
        let http_listener = HttpListener::from_listener(http, None, listen.clone());
        let https_listener = match https {
            Some((listener, bound)) => {
                let identity = match (&config.tls.cert, &config.tls.key) {
                    (Some(cert), Some(key)) => TlsIdentity::from_pem_files(cert, key)?,
                    _ => TlsIdentity::self_signed(&["localhost", &public_ip.to_string()])?,
                };
                let tls = identity.server_config()?;
                Some((
                    HttpListener::from_listener(listener, Some(tls), listen.clone()),
                    bound,
                ))
            }
            None => None,
        };
        // The operator's doors on a listener of their own, loopback by default: the public
        // port is plain HTTP to the whole network, and a bearer token must not cross it.
        let operator_listener = {
            let address = config.admin.listen;
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(bind_error("admin", address))?;
            let operator = ListenConfig {
                reserve_descriptor: true,
                ..listen.clone()
            };
            HttpListener::from_listener(listener, None, operator)
        };
        let mut http_metrics = vec![http_listener.metrics()];
        http_metrics.extend(
            https_listener
                .as_ref()
                .map(|(listener, _)| listener.metrics()),
        );
        http_metrics.push(operator_listener.metrics());

        let credentials = crate::credentials::Credentials::new(admin_token)
            .with_metrics_secret(config.admin.metrics_token.clone())
            .with_trusted_proxies(config.admin.trusted_proxies.clone());
        let matchmake_rate = config.limits.matchmake_rate;
        let (phase, _) = watch::channel(Phase::Running);
        let app = Arc::new(App {
            identities: Identities::new(
                &config.auth,
                config
                    .cluster
                    .enabled()
                    .then(|| cluster::session_secret(&config.cluster.secret)),
            ),
            creating: Mutex::new(HashMap::new()),
            matchmake_limiter: Mutex::new(IpLimiter::new(IpLimitConfig {
                connect_rate: matchmake_rate,
                connect_burst: (matchmake_rate * 10.0).ceil() as u32,
                max_connections: u32::MAX,
                ..IpLimitConfig::default()
            })),
            config,
            kinds,
            key,
            matchmaker: Mutex::new(matchmaker),
            shards,
            http_public,
            https_public,
            ws: ws.clone(),
            wt: wt_meters,
            phase,
            credentials: Arc::new(credentials),
            metrics,
            extras_metrics: extras.metrics,
            extras_readiness: extras.readiness,
            memory_outside_heap: extras.memory_outside_heap,
            rates: Mutex::new(Rates::default()),
            http_metrics,
            cluster: cluster_node,
        });

        let mut tasks = JoinSet::new();
        tasks.spawn(hand_off(app.clone(), connections));
        tasks.spawn(apply_events(app.clone(), events));
        tasks.spawn(sample_rates(app.clone()));
        tasks.spawn(return_freed_memory(app.clone()));
        tasks.spawn(finish_drain(app.clone()));
        tasks.spawn(cluster::run(app.clone()));

        let (stop_listeners, stopped) = watch::channel(false);
        let router = api::router(app.clone())
            .merge(ws.router())
            .merge(extras.routes);
        let admin_address = operator_listener
            .local_addr()
            .map_err(bind_error("admin", app.config.admin.listen))?;
        let operator_router = api::operator_router(app.clone()).merge(extras.operator_routes);
        tasks.spawn(serve(operator_listener, operator_router, stopped.clone()));
        tasks.spawn(serve(http_listener, router.clone(), stopped.clone()));
        let mut https_address = None;
        if let Some((listener, bound)) = https_listener {
            tasks.spawn(serve(listener, router, stopped.clone()));
            https_address = Some(bound);
        }

        let console = if app.config.console.enabled {
            let listener =
                crate::console::bind(app.config.console.listen, app.config.console.allow_remote)
                    .await
                    .map_err(bind_error("console", app.config.console.listen))?;
            let address = listener
                .local_addr()
                .map_err(bind_error("console", app.config.console.listen))?;
            let ops: Arc<dyn crate::console::AdminOps> = Arc::new(admin::Ops(app.clone()));
            let credentials = app.credentials.clone();
            let mut stopped = stopped.clone();
            tasks.spawn(async move {
                tokio::select! {
                    () = crate::console::serve(listener, credentials, ops) => {}
                    _ = stopped.wait_for(|stop| *stop) => {}
                }
            });
            Some(address)
        } else {
            None
        };

        let addresses = Addresses {
            http: http_address,
            https: https_address,
            udp: workers.iter().map(ShardWorker::udp_address).collect(),
            wt: wt_addresses,
            console,
            admin: admin_address,
        };
        Ok(Self {
            app,
            addresses,
            workers,
            tasks,
            stop_listeners,
            token_file,
        })
    }

    /// Where the server listens.
    pub fn addresses(&self) -> &Addresses {
        &self.addresses
    }

    /// A handle to drain or shut the server down from elsewhere (a signal handler).
    pub fn handle(&self) -> ServerHandle {
        ServerHandle {
            app: self.app.clone(),
        }
    }

    /// The console password and admin API bearer token in force.
    pub fn admin_token(&self) -> &str {
        self.app.credentials.secret()
    }

    /// Serves until a shutdown is asked for (a signal through a [`ServerHandle`], the
    /// console, the admin API, or a drain that emptied the server), then shuts down
    /// gracefully within `drain.grace_secs`; past that, a `TimedOut` error.
    pub async fn run(self) -> io::Result<ShutdownReport> {
        let mut phase = self.app.phase.subscribe();
        let _ = phase.wait_for(|phase| *phase == Phase::ShuttingDown).await;
        let grace = Duration::from_secs(self.app.config.drain.grace_secs);
        tokio::time::timeout(grace, self.shut_down())
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("shutdown took longer than the {grace:?} grace period"),
                )
            })?
    }

    /// Shuts down now: matchmaking refuses players and readiness fails, every worker's
    /// rooms run their last tick and every player is told the server is shutting down,
    /// then the listeners close. [`run`](Self::run) bounds how long this may take by the
    /// grace period; a caller of this bounds it themselves.
    pub async fn shut_down(mut self) -> io::Result<ShutdownReport> {
        self.app.shutdown();
        // Out of the cluster's directory first: no node sends players here any more.
        if let Some(node) = &self.app.cluster {
            node.leave().await;
        }
        let mut report = ShutdownReport::default();
        // Every worker at once: each closes its players' connections and waits (within the
        // close timeout) for their answers, and one worker's wait must not leave the
        // others' players with no word from the server meanwhile.
        let stops = self.workers.drain(..).map(ShardWorker::stop);
        for stopped in futures_util::future::join_all(stops).await {
            report.workers.push(stopped?);
        }
        // WebSocket connections still in their handshake, and any not yet attached: closed
        // with 4003 on their own tasks. Closing the listeners under them would turn that
        // into a bare "connection lost", or nothing at all once the process exits. (Each
        // worker closed its WebTransport sessions, in whatever state, as it stopped.)
        self.app.ws.shutdown();
        self.app.ws.handshakes_closed().await;
        let _ = self.stop_listeners.send(true);
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        if let Some(path) = &self.token_file {
            let _ = std::fs::remove_file(path);
        }
        Ok(report)
    }
}

/// Binds each shard's WebTransport port (the configured one, moved up by the shard's index
/// as its UDP port is) and hands the shard its sessions to serve: the bound address and
/// the address and certificate matchmaking names, per shard, and the counters they share.
async fn serve_webtransport(
    config: &ServeConfig,
    public_ip: IpAddr,
    workers: &[ShardWorker],
    ws: &WsEndpoint,
    ws_config: &WsConfig,
) -> Result<(WtMeters, Vec<(SocketAddr, ShardWt)>), StartError> {
    let settings = &config.webtransport;
    let certificate = match (&settings.cert, &settings.key) {
        (Some(cert), Some(key)) => WtCertificate::PemFiles {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => WtCertificate::SelfSigned(
            ["localhost", "127.0.0.1", "::1"]
                .into_iter()
                .map(str::to_owned)
                .chain((!public_ip.is_loopback()).then(|| public_ip.to_string()))
                .collect(),
        ),
    };
    let wt_config = WtConfig {
        max_sessions: settings.max_sessions,
        max_sessions_per_ip: settings.max_sessions_per_ip,
        exempt: config.limits.exempt.clone(),
        handshake_timeout: WsConfig::default().handshake_timeout,
        retry: settings.retry,
        renew_self_signed_every: Duration::from_secs(settings.renew_self_signed_secs),
    };
    let meters = WtMeters::default();
    let mut shards = Vec::new();
    for (index, worker) in workers.iter().enumerate() {
        let address = shard_address(settings.listen, index);
        // The UDP port's large buffers, not the kernel's 208 KiB default: a connect storm's
        // Initials overflowed that (hundreds of drops per thousand handshakes, each one a
        // QUIC retransmission a second later).
        let socket =
            tickwire_net::udp::bind(address).map_err(bind_error("webtransport", address))?;
        let bound = socket
            .local_addr()
            .map_err(bind_error("webtransport", address))?;
        let links = WtLinks::with_meters(
            socket,
            wt_config.clone(),
            certificate.clone(),
            ws_config,
            meters.clone(),
        )?;
        let cert = crate::worker::CertHash::default();
        let serve = crate::worker::WebTransport {
            links,
            doorman: ws.clone(),
            cert: cert.clone(),
        };
        worker
            .send(Control::WebTransport(Box::new(serve)))
            .await
            .map_err(|error| StartError::Other(error.to_string()))?;
        let public = SocketAddr::new(public_ip, bound.port());
        shards.push((
            bound,
            ShardWt {
                public,
                bound,
                cert,
            },
        ));
    }
    Ok((meters, shards))
}

/// A random admin token for this run, written to `path` (mode 0600) and never logged: a
/// log store is read by more people than the operators, and keeps what it is given.
fn generate_admin_token(path: &std::path::Path) -> Result<String, StartError> {
    let mut bytes = [0u8; 16];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    let token = hex::encode(bytes);
    let shown = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    crate::credentials::write_token_file(path, &token).map_err(|error| {
        StartError::Other(format!(
            "admin.token is not set and the generated one cannot be written to admin.token_file {}: {error}",
            shown.display()
        ))
    })?;
    tracing::warn!(
        "admin.token is not set; this run's console password and admin API token is in {} (readable by this user only)",
        shown.display()
    );
    Ok(token)
}

/// Shard `index`'s UDP address: the configured one, its port moved up by `index` (port 0
/// stays 0: the system picks).
fn shard_address(base: SocketAddr, index: usize) -> SocketAddr {
    let port = match base.port() {
        0 => 0,
        port => port.saturating_add(u16::try_from(index).unwrap_or(u16::MAX)),
    };
    SocketAddr::new(base.ip(), port)
}

async fn serve(listener: HttpListener, router: axum::Router, mut stopped: watch::Receiver<bool>) {
    let shutdown = async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    if let Err(error) = listener.serve(router, shutdown).await {
        tracing::error!(%error, "http listener failed");
    }
}

/// Hands each admitted WebSocket or WebTransport player to the shard hosting its room.
async fn hand_off(app: Arc<App>, mut arrivals: mpsc::Receiver<WsSocket>) {
    while let Some(socket) = arrivals.recv().await {
        let shard = SeatTicket::decode(socket.client().user_data())
            .and_then(|ticket| app.matchmaker().shard_of(ticket.room));
        match shard.and_then(|shard| app.shards.get(shard)) {
            Some(link) => {
                if let Err(mpsc::error::SendError(Control::Attach(socket))) =
                    link.control.send(Control::Attach(socket)).await
                {
                    socket.refuse(
                        tickwire_net::ws::CloseCode::ServerShutdown,
                        "server shutting down",
                    );
                }
            }
            None => socket.refuse(tickwire_net::ws::CloseCode::Kicked, "no such room"),
        }
    }
}

/// Keeps the matchmaker's seats in step with the shards.
async fn apply_events(app: Arc<App>, mut events: mpsc::UnboundedReceiver<SeatChange>) {
    while let Some(event) = events.recv().await {
        {
            let mut matchmaker = app.matchmaker();
            match &event {
                SeatChange::Seated { player, room } => matchmaker.joined(*player, *room),
                SeatChange::Unseated { player, .. } => matchmaker.left(*player),
                SeatChange::RoomDisposed { room } => matchmaker.room_closed(*room),
                SeatChange::Listed { room, listing } => {
                    matchmaker.listed(*room, listing.as_ref().clone());
                }
            }
        }
        if let Some(node) = &app.cluster {
            node.seat_change(event);
        }
    }
}

/// Once a second: packets and bytes per second for the console and the admin API, and the
/// metrics recorder's upkeep.
async fn sample_rates(app: Arc<App>) {
    let mut interval = tokio::time::interval(Duration::from_secs(1));
    let mut last = Instant::now();
    loop {
        interval.tick().await;
        app.metrics.upkeep();
        let now = Instant::now();
        let totals = admin::traffic_totals(&app);
        let elapsed = now.duration_since(last).as_secs_f64().max(1e-3);
        last = now;
        let mut rates = app
            .rates
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        for (index, total) in totals.iter().enumerate() {
            rates.per_second[index] = total.saturating_sub(rates.totals[index]) as f64 / elapsed;
        }
        rates.totals = totals;
    }
}

/// Every few seconds: hands freed memory back to the kernel when much of the resident set
/// is free ([`memory`]); counted in `/metrics`.
async fn return_freed_memory(app: Arc<App>) {
    if !tickwire_alloc_count::is_active() {
        // Without the heap-in-use figure there is no telling free from used.
        return;
    }
    let mut interval = tokio::time::interval(memory::CHECK_INTERVAL);
    loop {
        interval.tick().await;
        let heap = u64::try_from(tickwire_alloc_count::live_bytes()).unwrap_or(0);
        let in_use = heap
            + app
                .memory_outside_heap
                .iter()
                .map(|bytes| bytes())
                .sum::<u64>();
        let Some(anonymous) = memory::anonymous_resident_bytes() else {
            return;
        };
        if !memory::worth_trimming(anonymous, in_use) {
            continue;
        }
        if let Ok(Some(trimmed)) = tokio::task::spawn_blocking(memory::trim).await {
            app.metrics.memory_trimmed(trimmed);
        }
    }
}

/// A draining server shuts down once no player holds a seat or a reservation.
async fn finish_drain(app: Arc<App>) {
    let mut phase = app.phase.subscribe();
    if phase
        .wait_for(|phase| *phase != Phase::Running)
        .await
        .is_err()
    {
        return;
    }
    let mut interval = tokio::time::interval(crate::worker::PUBLISH_INTERVAL);
    loop {
        interval.tick().await;
        if app.phase() == Phase::ShuttingDown {
            return;
        }
        let seated: u64 = app
            .shards
            .iter()
            .map(|shard| {
                let view = shard.view.read();
                view.players.len() as u64 + view.players_held
            })
            .sum();
        if seated == 0 && app.matchmaker().placed(Instant::now()) == 0 {
            tracing::info!("drained: the last player has left");
            app.shutdown();
            return;
        }
    }
}
