//! `tickwire serve`: loads the configuration (defaults < `tickwire.toml` or `--config` <
//! `TICKWIRE_*` environment < flags), starts the runtime, and turns signals into a
//! graceful shutdown.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use figment::Figment;
use figment::providers::{Env, Format as _, Serialized, Toml};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tickwire_server::config::ServeConfig;
use tickwire_server::rooms::chat::ChatRoom;
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{Extras, RoomKinds, Runtime};
use tickwire_store::{StatWriter, Store, StoreConfig};

use crate::agones::AgonesSettings;
use crate::arena::ArenaSettings;
use crate::web::WebSettings;

/// The configuration file read when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG_FILE: &str = "tickwire.toml";
/// The environment variable prefix; `__` separates nesting (`TICKWIRE_HTTP__LISTEN`).
pub const ENV_PREFIX: &str = "TICKWIRE_";

/// The configuration's top-level keys: other `TICKWIRE_*` variables (a test's
/// `TICKWIRE_BLESS`) are not configuration.
const TOP_LEVEL_KEYS: [&str; 19] = [
    "store",
    "agones",
    "arena",
    "web",
    "shards",
    "public_ip",
    "http",
    "tls",
    "udp",
    "webtransport",
    "connection",
    "console",
    "admin",
    "auth",
    "security",
    "rooms",
    "limits",
    "drain",
    "cluster",
];

/// `tickwire serve`'s flags; each overrides its configuration key.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// A TOML configuration file (default: ./tickwire.toml when present).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
    /// HTTP and WebSocket address (http.listen).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// HTTPS and wss address (tls.listen).
    #[arg(long, value_name = "ADDR")]
    pub https: Option<SocketAddr>,
    /// PEM certificate chain for HTTPS (tls.cert).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for HTTPS (tls.key).
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Serve HTTPS with a generated self-signed certificate (tls.self_signed; development).
    #[arg(long)]
    pub self_signed: bool,
    /// First shard's UDP address; shard i listens on its port + i (udp.listen).
    #[arg(long, value_name = "ADDR")]
    pub udp: Option<SocketAddr>,
    /// WebTransport UDP address (webtransport.listen).
    #[arg(long, value_name = "ADDR")]
    pub wt: Option<SocketAddr>,
    /// Serve no WebTransport (webtransport.enabled = false).
    #[arg(long)]
    pub no_wt: bool,
    /// Admin console address (console.listen).
    #[arg(long, value_name = "ADDR")]
    pub console: Option<SocketAddr>,
    /// Operator listener address: `/metrics`, the admin API and page (admin.listen).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Shard worker threads, 0 for one per core (shards).
    #[arg(long)]
    pub shards: Option<usize>,
    /// The address clients reach this server at (public_ip).
    #[arg(long, value_name = "IP")]
    pub public_ip: Option<IpAddr>,
}

impl ServeArgs {
    /// The flags given, as a partial configuration.
    fn overrides(&self) -> Value {
        let mut root = Map::new();
        let mut set = |section: Option<&str>, key: &str, value: Value| match section {
            None => {
                root.insert(key.into(), value);
            }
            Some(section) => {
                let table = root.entry(section).or_insert_with(|| json!({}));
                if let Value::Object(table) = table {
                    table.insert(key.into(), value);
                }
            }
        };
        if let Some(http) = self.http {
            set(Some("http"), "listen", json!(http));
        }
        if let Some(https) = self.https {
            set(Some("tls"), "listen", json!(https));
        }
        if let Some(cert) = &self.tls_cert {
            set(Some("tls"), "cert", json!(cert));
        }
        if let Some(key) = &self.tls_key {
            set(Some("tls"), "key", json!(key));
        }
        if self.self_signed {
            set(Some("tls"), "self_signed", json!(true));
        }
        if let Some(udp) = self.udp {
            set(Some("udp"), "listen", json!(udp));
        }
        if let Some(wt) = self.wt {
            set(Some("webtransport"), "listen", json!(wt));
        }
        if self.no_wt {
            set(Some("webtransport"), "enabled", json!(false));
        }
        if let Some(console) = self.console {
            set(Some("console"), "listen", json!(console));
        }
        if let Some(admin) = self.admin {
            set(Some("admin"), "listen", json!(admin));
        }
        if let Some(shards) = self.shards {
            set(None, "shards", json!(shards));
        }
        if let Some(ip) = self.public_ip {
            set(None, "public_ip", json!(ip));
        }
        Value::Object(root)
    }
}

/// Everything `tickwire.toml` holds: the runtime's settings at the top level, and the
/// sections the binary adds (`[store]`, `[arena]`, `[web]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// The runtime: listeners, shards, rooms, limits, drain.
    pub serve: ServeConfig,
    /// Persistence: players, stats, leaderboards (`url = ""` turns it off).
    pub store: StoreConfig,
    /// The arena game: its map and seed.
    pub arena: ArenaSettings,
    /// The browser client served at `/`.
    pub web: WebSettings,
    /// Agones: the SDK sidecar's contract, when the server runs as a GameServer.
    pub agones: AgonesSettings,
}

/// The effective configuration: defaults, the file, `TICKWIRE_*` variables, the flags.
pub fn load_config(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut figment = Figment::from(Serialized::defaults(ServeConfig::default())).merge(
        Serialized::defaults(json!({
            "store": StoreConfig::default(),
            "arena": ArenaSettings::default(),
            "web": WebSettings::default(),
            "agones": AgonesSettings::default(),
        })),
    );
    match &args.config {
        Some(path) => {
            anyhow::ensure!(
                path.is_file(),
                "config file {} does not exist",
                path.display()
            );
            figment = figment.merge(Toml::file_exact(path));
        }
        None if Path::new(DEFAULT_CONFIG_FILE).is_file() => {
            figment = figment.merge(Toml::file_exact(DEFAULT_CONFIG_FILE));
        }
        None => {}
    }
    let environment = Env::prefixed(ENV_PREFIX).split("__").filter(|key| {
        let top = key.as_str().split('.').next().unwrap_or_default();
        TOP_LEVEL_KEYS
            .iter()
            .any(|known| top.eq_ignore_ascii_case(known))
    });
    let figment = figment
        .merge(environment)
        .merge(Serialized::defaults(args.overrides()));
    let invalid = |error: figment::Error| anyhow::anyhow!("invalid configuration: {error}");
    let store: StoreConfig = figment.extract_inner("store").map_err(invalid)?;
    let arena: ArenaSettings = figment.extract_inner("arena").map_err(invalid)?;
    let web: WebSettings = figment.extract_inner("web").map_err(invalid)?;
    let agones: AgonesSettings = figment.extract_inner("agones").map_err(invalid)?;
    // The runtime's settings are the rest: taken apart so `ServeConfig` keeps refusing
    // unknown keys by name.
    let mut rest: figment::value::Dict = figment.extract().map_err(invalid)?;
    rest.remove("store");
    rest.remove("arena");
    rest.remove("web");
    rest.remove("agones");
    let serve: ServeConfig = Figment::from(Serialized::defaults(rest))
        .extract()
        .map_err(invalid)?;
    serve.validate()?;
    Ok(Config {
        serve,
        store,
        arena,
        web,
        agones,
    })
}

/// The configuration as TOML, for `--print-config`.
pub fn render_config(config: &Config) -> anyhow::Result<String> {
    let mut table = toml::Table::try_from(&config.serve)?;
    table.insert("store".into(), toml::Value::try_from(&config.store)?);
    table.insert("arena".into(), toml::Value::try_from(&config.arena)?);
    table.insert("web".into(), toml::Value::try_from(&config.web)?);
    table.insert("agones".into(), toml::Value::try_from(&config.agones)?);
    Ok(toml::to_string_pretty(&table)?)
}

/// A database URL with any password replaced, for logs.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// Opens the store (creating and migrating it) unless persistence is off.
async fn open_store(config: &StoreConfig) -> anyhow::Result<Option<(Store, StatWriter)>> {
    if config.url.is_empty() {
        tracing::info!("persistence is off (store.url is empty)");
        return Ok(None);
    }
    let store = Store::connect_with(config)
        .await
        .with_context(|| format!("cannot open the store at {}", redacted(&config.url)))?;
    let writer = store.writer(&config.writer);
    tracing::info!(url = %redacted(&config.url), backend = ?store.backend(), "persistence");
    Ok(Some((store, writer)))
}

/// The room kinds the binary hosts: the arena game (32 seats), `relay` (16 seats, ticking
/// at `relay_tick_rate_hz`: `rooms.relay_tick_rate_hz`) and `chat` (100);
/// `rooms.kinds.<kind>.capacity` changes a capacity.
pub fn room_kinds(
    arena: &ArenaSettings,
    stats: Option<StatWriter>,
    relay_tick_rate_hz: u32,
) -> anyhow::Result<RoomKinds> {
    Ok(room_kinds_with_arena(
        arena.factory(stats)?,
        relay_tick_rate_hz,
    ))
}

/// [`room_kinds`] with the arena's factory made by the caller (its own stat sink, say).
pub fn room_kinds_with_arena(
    arena: tickwire_arena::room::ArenaRoomFactory,
    relay_tick_rate_hz: u32,
) -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds
        .register("arena", 32, arena.into_factory())
        .register("relay", 16, move || {
            Box::new(RelayRoom::new(relay_tick_rate_hz))
        })
        .register("chat", 100, || Box::new(ChatRoom::default()));
    kinds
}

/// Runs the server until it has shut down; `Ok` is a clean exit.
pub fn run(config: Config) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("tickwire-http")
        .build()?;
    runtime.block_on(async move {
        let store = open_store(&config.store).await?;
        let mut extras = Extras::default();
        if let Some((store, writer)) = &store {
            let (metrics, readiness) = (writer.clone(), writer.clone());
            extras = extras
                .routes(tickwire_store::http::router(store.clone()))
                .metrics(move |text| metrics.stats().write_prometheus(text))
                .readiness(move || readiness.stats().degraded());
            if store.backend() == tickwire_store::Backend::Sqlite {
                // A full page cache is memory in use, not free memory to trim.
                extras = extras
                    .metrics(tickwire_store::write_sqlite_memory)
                    .memory_outside_heap(tickwire_store::sqlite_memory_used);
            }
        }
        // The browser client and the map it draws (a second parse of the map: it is small,
        // and the rooms keep their own).
        let map = config.arena.load_map()?;
        let client = config.web.locate();
        // (The admin page is the server's own, on the operator listener.)
        extras = extras.routes(crate::web::routes(&client, &map));
        let grace = std::time::Duration::from_secs(config.serve.drain.grace_secs);
        let kinds = room_kinds(
            &config.arena,
            store.as_ref().map(|(_, writer)| writer.clone()),
            config.serve.rooms.relay_tick_rate_hz,
        )?;
        // Under Agones: listen on the address and ports the GameServer was given.
        let sdk = config.agones.sdk();
        let mut serve_config = config.serve;
        if let Some(sdk) = &sdk {
            sdk.configure(&mut serve_config)
                .await
                .context("agones: the SDK sidecar")?;
        }
        if let Some(warning) = serve_config.plain_http_warning() {
            tracing::warn!("{warning}");
        }
        let server = Runtime::start_with(serve_config, kinds, extras)
            .await
            .context("cannot start the server")?;
        let addresses = server.addresses().clone();
        // One line on stdout for scripts and tests to read the bound addresses from.
        println!("{}", listening_line(&addresses));
        tracing::info!(http = %addresses.http, "serving HTTP, matchmaking and ws");
        if let Some(https) = addresses.https {
            tracing::info!(%https, "serving HTTPS and wss");
        }
        tracing::info!(
            udp = ?addresses.udp,
            sealing = ?tickwire_proto::crypto::SealBackend::detect(),
            "serving the UDP protocol"
        );
        if let Some(console) = addresses.console {
            tracing::info!(%console, "admin console");
        }
        tracing::info!(
            admin = %addresses.admin,
            "operator listener: the admin page at http://{}/admin/, the admin API, /metrics",
            addresses.admin
        );
        if let Some(sdk) = sdk {
            match sdk.ready().await {
                Ok(()) => tracing::info!("agones: ready"),
                Err(error) => tracing::error!(%error, "agones: ready"),
            }
            tokio::spawn(sdk.run(server.handle(), config.agones.clone()));
        }
        let handle = server.handle();
        tokio::spawn(async move {
            let mut first = true;
            loop {
                let signal = next_signal().await;
                if first {
                    tracing::info!(signal, "shutting down; signal again to exit at once");
                    handle.shutdown();
                    first = false;
                } else {
                    tracing::warn!(signal, "second signal: exiting now");
                    std::process::exit(130);
                }
            }
        });
        let report = match server.run().await {
            Ok(report) => report,
            Err(error) => {
                // Dropping the runtime would wait for the stuck worker it is past waiting for.
                tracing::error!(%error, "exiting without a clean shutdown");
                std::process::exit(1);
            }
        };
        let refused: u64 = report
            .workers
            .iter()
            .map(|worker| worker.joins_refused)
            .sum();
        tracing::info!(
            workers = report.workers.len(),
            joins_refused = refused,
            "stopped"
        );
        if let Some((store, writer)) = store {
            // The rooms have stopped, so nothing more is queued: commit what is, within a
            // grace of its own (a database that is down keeps the writer retrying).
            let flushed = tokio::time::timeout(grace, writer.close()).await;
            let stats = writer.stats();
            match flushed {
                Ok(()) => tracing::info!(
                    accepted = stats.events_accepted,
                    committed = stats.events_committed,
                    rejected_full = stats.rejected_full,
                    "persistence flushed"
                ),
                Err(_) => {
                    tracing::error!(
                        queued = stats.queue_depth,
                        "persistence did not flush within the drain grace; exiting anyway"
                    );
                    std::process::exit(1);
                }
            }
            store.close().await;
        }
        // Stopped and flushed: Agones may delete the pod now.
        if let Some(sdk) = sdk {
            match sdk.shutdown().await {
                Ok(()) => tracing::info!("agones: shutdown"),
                Err(error) => tracing::error!(%error, "agones: shutdown"),
            }
        }
        Ok(())
    })
}

pub use tickwire_server::embed::listening_line;
use tickwire_server::embed::next_signal;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_rooms_tick_at_the_configured_rate() {
        for rate in [1, 30, 60, 128] {
            let kinds = room_kinds(&ArenaSettings::default(), None, rate).unwrap();
            let relay = kinds.create("relay").unwrap();
            assert_eq!(relay.tick_rate_hz(), rate);
        }
    }

    #[test]
    fn logged_database_urls_keep_the_user_and_lose_the_password() {
        assert_eq!(
            redacted("postgres://app:hunter2@db.internal:5432/game"),
            "postgres://app:***@db.internal:5432/game"
        );
        assert_eq!(
            redacted("mysql://root@127.0.0.1/game"),
            "mysql://root@127.0.0.1/game"
        );
        assert_eq!(redacted("sqlite://tickwire.db"), "sqlite://tickwire.db");
    }
}
