//! Agones: `tickwire serve` as a GameServer of an Agones Fleet, speaking the SDK sidecar's
//! REST contract (the HTTP gateway every Agones game-server pod has on
//! `localhost:$AGONES_SDK_HTTP_PORT`, 9358 by default): nothing is linked but plain HTTP/1.1
//! on loopback.
//!
//! | when | call |
//! |---|---|
//! | before listening | `GET /gameserver`: the address and the ports Agones gave the pod (`http`, `udp`, `wt` by name), which the server then listens on and names in tokens |
//! | listening | `POST /ready` |
//! | every `health_interval_ms` while every shard's loop turns | `POST /health` |
//! | every `label_interval_ms` | `PUT /metadata/label` `players` (count) and `accepting` (`true` until a drain) |
//! | the first player while the GameServer is `Ready` | `POST /allocate`: a server with players is not scaled down |
//! | after the drain (or SIGTERM), once the server has stopped | `POST /shutdown` |
//!
//! A GameServer that is `Reserved` is left so (no allocate until it is Ready or Allocated
//! by the allocator).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tickwire_server::config::ServeConfig;
use tickwire_server::runtime::{Phase, ServerHandle};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// The `[agones]` section of `tickwire.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgonesSettings {
    /// Speak to the Agones SDK sidecar. Also on, whatever this says, when the sidecar's
    /// `AGONES_SDK_HTTP_PORT` is in the environment.
    pub enabled: bool,
    /// The sidecar's HTTP port; 0: `AGONES_SDK_HTTP_PORT`, else 9358.
    pub sdk_port: u16,
    /// How often a health ping goes out while the shards turn (the Fleet's
    /// `health.periodSeconds` must be longer).
    pub health_interval_ms: u64,
    /// How often the load labels are written.
    pub label_interval_ms: u64,
}

impl Default for AgonesSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            sdk_port: 0,
            health_interval_ms: 2000,
            label_interval_ms: 5000,
        }
    }
}

impl AgonesSettings {
    /// The sidecar to speak to, when Agones is on.
    pub fn sdk(&self) -> Option<Sdk> {
        let from_env = std::env::var("AGONES_SDK_HTTP_PORT")
            .ok()
            .and_then(|port| port.parse::<u16>().ok());
        if !self.enabled && from_env.is_none() {
            return None;
        }
        let port = match self.sdk_port {
            0 => from_env.unwrap_or(9358),
            port => port,
        };
        Some(Sdk {
            address: SocketAddr::from(([127, 0, 0, 1], port)),
        })
    }
}

/// The SDK sidecar's REST gateway.
#[derive(Debug, Clone, Copy)]
pub struct Sdk {
    address: SocketAddr,
}

impl Sdk {
    async fn call(&self, method: &str, path: &str, body: &str) -> anyhow::Result<Value> {
        let exchange = async {
            let mut stream = TcpStream::connect(self.address).await?;
            let request = format!(
                "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(request.as_bytes()).await?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await?;
            Ok::<_, std::io::Error>(answer)
        };
        let answer = tokio::time::timeout(Duration::from_secs(5), exchange)
            .await
            .context("the Agones SDK sidecar did not answer in 5 s")?
            .with_context(|| format!("the Agones SDK sidecar at {}", self.address))?;
        let answer = String::from_utf8_lossy(&answer);
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head.split(' ').nth(1).unwrap_or_default();
        anyhow::ensure!(
            status == "200",
            "{method} {path}: the sidecar answered {status}"
        );
        Ok(serde_json::from_str(body.trim()).unwrap_or(Value::Null))
    }

    /// `GET /gameserver`.
    pub async fn game_server(&self) -> anyhow::Result<Value> {
        self.call("GET", "/gameserver", "").await
    }

    /// `POST /ready`.
    pub async fn ready(&self) -> anyhow::Result<()> {
        self.call("POST", "/ready", "{}").await.map(drop)
    }

    /// `POST /health`.
    pub async fn health(&self) -> anyhow::Result<()> {
        self.call("POST", "/health", "{}").await.map(drop)
    }

    /// `POST /allocate`.
    pub async fn allocate(&self) -> anyhow::Result<()> {
        self.call("POST", "/allocate", "{}").await.map(drop)
    }

    /// `POST /shutdown`.
    pub async fn shutdown(&self) -> anyhow::Result<()> {
        self.call("POST", "/shutdown", "{}").await.map(drop)
    }

    /// `PUT /metadata/label` (Agones stores it as `agones.dev/sdk-{key}`).
    pub async fn label(&self, key: &str, value: &str) -> anyhow::Result<()> {
        let body = serde_json::json!({ "key": key, "value": value }).to_string();
        self.call("PUT", "/metadata/label", &body).await.map(drop)
    }

    /// Waits (up to 30 s) for the GameServer's address and ports, and makes the server
    /// listen on them and name them: `public_ip` from `status.address`, the ports named
    /// `http`, `udp` (one shard: Agones gives ports one by one) and `wt`.
    pub async fn configure(&self, config: &mut ServeConfig) -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        let status = loop {
            match self.game_server().await {
                Ok(server) if !server["status"]["ports"].is_null() => {
                    break server["status"].clone();
                }
                Ok(_) | Err(_) if start.elapsed() < Duration::from_secs(30) => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Ok(_) => anyhow::bail!("the GameServer has no ports after 30 s"),
                Err(error) => return Err(error),
            }
        };
        if let Some(address) = status["address"]
            .as_str()
            .and_then(|address| address.parse::<IpAddr>().ok())
        {
            config.public_ip = address;
        }
        let port = |name: &str| -> Option<u16> {
            status["ports"].as_array()?.iter().find_map(|port| {
                (port["name"].as_str() == Some(name))
                    .then(|| {
                        port["port"]
                            .as_u64()
                            .and_then(|port| u16::try_from(port).ok())
                    })
                    .flatten()
            })
        };
        if let Some(port) = port("http") {
            config.http.listen.set_port(port);
        }
        if let Some(port) = port("udp") {
            config.udp.listen.set_port(port);
            if config.shards != 1 {
                tracing::warn!(
                    shards = config.shards,
                    "Agones gives one UDP port: running one shard (scale with more GameServers)"
                );
                config.shards = 1;
            }
        }
        if let Some(port) = port("wt") {
            config.webtransport.listen.set_port(port);
        }
        tracing::info!(
            public_ip = %config.public_ip,
            http = %config.http.listen,
            udp = %config.udp.listen,
            "listening where Agones says"
        );
        Ok(())
    }

    /// While the server runs: health pings while every shard turns, load labels, and an
    /// allocation when the first player arrives on a Ready GameServer.
    pub async fn run(self, server: ServerHandle, settings: AgonesSettings) {
        let mut health =
            tokio::time::interval(Duration::from_millis(settings.health_interval_ms.max(100)));
        let mut labels =
            tokio::time::interval(Duration::from_millis(settings.label_interval_ms.max(100)));
        let mut last_publications: Vec<u64> = Vec::new();
        let mut last_labels: Option<(u64, bool)> = None;
        loop {
            tokio::select! {
                _ = health.tick() => {
                    let pulse = server.pulse();
                    // Every shard published since the last ping: their loops turn.
                    let turning = last_publications.len() != pulse.publications.len()
                        || pulse.publications.iter().zip(&last_publications).all(|(now, then)| now > then);
                    last_publications = pulse.publications.clone();
                    if turning && server.phase() != Phase::ShuttingDown {
                        if let Err(error) = self.health().await {
                            tracing::warn!(%error, "agones health ping");
                        }
                    } else if !turning {
                        tracing::warn!("a shard has stopped turning: no Agones health ping");
                    }
                    if pulse.players > 0 {
                        self.allocate_if_ready().await;
                    }
                }
                _ = labels.tick() => {
                    let pulse = server.pulse();
                    let accepting = server.phase() == Phase::Running;
                    if last_labels != Some((pulse.players, accepting)) {
                        let written = async {
                            self.label("players", &pulse.players.to_string()).await?;
                            self.label("accepting", if accepting { "true" } else { "false" }).await
                        };
                        match written.await {
                            Ok(()) => last_labels = Some((pulse.players, accepting)),
                            Err(error) => tracing::warn!(%error, "agones labels"),
                        }
                    }
                }
            }
        }
    }

    async fn allocate_if_ready(&self) {
        let state = match self.game_server().await {
            Ok(server) => server["status"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            Err(error) => {
                tracing::warn!(%error, "agones: reading the GameServer");
                return;
            }
        };
        // Reserved stays reserved; Allocated is already protected from scale-down.
        if state == "Ready" {
            match self.allocate().await {
                Ok(()) => tracing::info!("agones: allocated (players are here)"),
                Err(error) => tracing::warn!(%error, "agones allocate"),
            }
        }
    }
}
