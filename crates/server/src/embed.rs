//! A game's own server in a few lines: [`Server::builder`] registers the game's room kinds,
//! listens on loopback for development unless told otherwise, logs to stderr (so the
//! addresses and where a generated admin token was written are seen), and runs until
//! SIGINT or SIGTERM, then
//! shuts down gracefully as `tickwire serve` does.
//!
//! ```no_run
//! use tickwire_server::Server;
//! use tickwire_server::rooms::relay::RelayRoom;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! Server::builder().room::<RelayRoom>("relay", 16).run().await?;
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::config::ServeConfig;
use crate::room::Room;
use crate::runtime::{Addresses, Extras, RoomKinds, Runtime, ShutdownReport, StartError};

/// The entry point of an embedded server: see [`Server::builder`].
#[derive(Debug)]
pub struct Server;

impl Server {
    /// A builder with the development configuration ([`development_config`]) and logs on.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            config: development_config(),
            kinds: RoomKinds::new(),
            extras: Extras::default(),
            logs: true,
        }
    }
}

/// Why an embedded server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// It could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// It did not shut down within its grace period, or a worker failed.
    #[error("shutdown: {0}")]
    Shutdown(#[from] io::Error),
}

/// Builds an embedded server; see [`Server::builder`].
pub struct ServerBuilder {
    config: ServeConfig,
    kinds: RoomKinds,
    extras: Extras,
    logs: bool,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("kinds", &self.kinds)
            .field("logs", &self.logs)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// Hosts rooms of kind `name`, `capacity` seats each (configuration may override it),
    /// each made with `R::default()`.
    pub fn room<R: Room + Default>(mut self, name: &str, capacity: u16) -> Self {
        self.kinds
            .register(name, capacity, || Box::new(R::default()));
        self
    }

    /// Hosts rooms of kind `name`, each made by `factory`.
    pub fn room_with(
        mut self,
        name: &str,
        capacity: u16,
        factory: impl Fn() -> Box<dyn Room> + Send + Sync + 'static,
    ) -> Self {
        self.kinds.register(name, capacity, factory);
        self
    }

    /// Replaces the whole configuration (a production deployment's, loaded by the
    /// embedding program); the default is [`development_config`].
    pub fn config(mut self, config: ServeConfig) -> Self {
        self.config = config;
        self
    }

    /// Changes the configuration in place (a port, a token).
    pub fn configure(mut self, change: impl FnOnce(&mut ServeConfig)) -> Self {
        change(&mut self.config);
        self
    }

    /// Also serves `extras`: the game's own routes (its web page), `/metrics` lines,
    /// readiness notes.
    pub fn extras(mut self, extras: Extras) -> Self {
        self.extras = extras;
        self
    }

    /// Installs no log subscriber: the embedding program has its own.
    pub fn without_logs(mut self) -> Self {
        self.logs = false;
        self
    }

    /// Starts serving and returns the running server; logs where it listens.
    pub async fn start(self) -> Result<Runtime, StartError> {
        if self.logs {
            init_logging();
        }
        let runtime = Runtime::start_with(self.config, self.kinds, self.extras).await?;
        tracing::info!("{}", listening_line(runtime.addresses()));
        Ok(runtime)
    }

    /// Starts, serves until SIGINT or SIGTERM (a second one exits at once), then shuts
    /// down gracefully.
    pub async fn run(self) -> Result<ShutdownReport, RunError> {
        self.run_until(next_signal()).await
    }

    /// Starts, serves until `stop` completes (or a shutdown is asked for otherwise: the
    /// console, the admin API, the end of a drain), then shuts down gracefully.
    pub async fn run_until(
        self,
        stop: impl Future + Send + 'static,
    ) -> Result<ShutdownReport, RunError> {
        let runtime = self.start().await?;
        let handle = runtime.handle();
        tokio::spawn(async move {
            stop.await;
            tracing::info!("shutting down");
            handle.shutdown();
        });
        Ok(runtime.run().await?)
    }
}

/// [`ServeConfig::default`] on loopback: every listener on 127.0.0.1 (HTTP 8080, UDP
/// 7777, WebTransport 4433, the console 7000, the operator listener 9090), so a development server is not reachable
/// from the network until its configuration says so.
pub fn development_config() -> ServeConfig {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut config = ServeConfig {
        public_ip: loopback,
        ..ServeConfig::default()
    };
    for listen in [
        &mut config.http.listen,
        &mut config.udp.listen,
        &mut config.webtransport.listen,
        &mut config.console.listen,
        &mut config.admin.listen,
    ] {
        *listen = SocketAddr::new(loopback, listen.port());
    }
    config
}

/// [`development_config`] with every listener on port 0, the system choosing free ones
/// (read them back from [`Runtime::addresses`](crate::runtime::Runtime::addresses)): for
/// tests, and for several servers on one machine. A generated admin token goes to a file
/// of this configuration's own in the temporary directory, so servers started side by side
/// do not overwrite each other's, nor write into the working directory.
pub fn free_ports_config() -> ServeConfig {
    static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let mut config = development_config();
    config.admin.token_file = std::env::temp_dir().join(format!(
        "tickwire-admin-token-{}-{}",
        std::process::id(),
        MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    for listen in [
        &mut config.http.listen,
        &mut config.udp.listen,
        &mut config.webtransport.listen,
        &mut config.console.listen,
        &mut config.admin.listen,
    ] {
        listen.set_port(0);
    }
    config
}

/// Logs to stderr: `RUST_LOG` picks what (default: info for tickwire, warnings otherwise).
/// False if the program had a subscriber already (it is kept).
pub fn init_logging() -> bool {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,tickwire=info,tickwire_server=info")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init()
        .is_ok()
}

/// `listening http=… https=… udp=…,… wt=…,… console=… admin=…` (absent parts left out;
/// `admin` is the operator listener: `/metrics`, the admin API and page).
pub fn listening_line(addresses: &Addresses) -> String {
    let mut line = format!("listening http={}", addresses.http);
    if let Some(https) = addresses.https {
        line.push_str(&format!(" https={https}"));
    }
    let udp: Vec<String> = addresses.udp.iter().map(ToString::to_string).collect();
    line.push_str(&format!(" udp={}", udp.join(",")));
    if !addresses.wt.is_empty() {
        let wt: Vec<String> = addresses.wt.iter().map(ToString::to_string).collect();
        line.push_str(&format!(" wt={}", wt.join(",")));
    }
    if let Some(console) = addresses.console {
        line.push_str(&format!(" console={console}"));
    }
    line.push_str(&format!(" admin={}", addresses.admin));
    line
}

/// The next SIGTERM or SIGINT, by name; never, where signals cannot be listened to.
pub async fn next_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_development_configuration_listens_on_loopback_only() {
        let config = development_config();
        for (what, listen) in [
            ("http", config.http.listen),
            ("udp", config.udp.listen),
            ("webtransport", config.webtransport.listen),
            ("console", config.console.listen),
            ("admin", config.admin.listen),
        ] {
            assert!(listen.ip().is_loopback(), "{what} listens on {listen}");
        }
        assert!(config.public_ip.is_loopback());
        assert_eq!(
            config.http.listen.port(),
            ServeConfig::default().http.listen.port()
        );
        assert!(config.validate().is_ok());
    }
}
