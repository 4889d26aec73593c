//! `tickwire bench hobo --transport ws --against colyseus`: the hobo load against Colyseus
//! 0.18 (`bench/colyseus/server.js`, issue 17), measured the way [`super::load`] measures
//! tickwire: the server pinned to its CPU with `taskset`, its CPU time and RSS read from
//! `/proc` at the window's edges, the same bots (speaking Colyseus' protocol) pinned to the
//! other CPU, and the same report.
//!
//! Colyseus exposes no packet counters and no tick histogram: those report fields are 0.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::bail;

use super::load::{Reaped, start_listening};

/// The Node project, as the source tree holds it (the default when `bench/colyseus` is not
/// under the working directory).
const SOURCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/colyseus");

/// What `LoadBenchReport::pps_source` says for a Colyseus run.
pub const PPS_SOURCE: &str = "not measured (Colyseus exposes no packet counters)";

/// `node server.js` under `taskset -c cpu` on a free loopback port, stopped (SIGTERM,
/// then SIGKILL) when dropped.
pub(super) struct ColyseusServer {
    _child: Reaped,
    /// Its HTTP address (`127.0.0.1:port`).
    pub(super) http: String,
    /// Its process id.
    pub(super) pid: u32,
}

impl ColyseusServer {
    /// The Node project's directory: `dir` if given, else `bench/colyseus` under the working
    /// directory, else the source tree's. Fails when its dependencies are not installed.
    pub(super) fn project(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
        let dir = match dir {
            Some(dir) => dir.to_path_buf(),
            None if Path::new("bench/colyseus/server.js").is_file() => "bench/colyseus".into(),
            None => PathBuf::from(SOURCE_DIR),
        };
        if !dir.join("server.js").is_file() {
            bail!("no Colyseus bench server at {}", dir.display());
        }
        if !dir.join("node_modules").is_dir() {
            bail!(
                "{} has no node_modules: run `npm ci --prefix bench/colyseus` first",
                dir.display()
            );
        }
        Ok(dir)
    }

    /// Starts the server in `dir` pinned to `cpu`, its rooms holding `players_per_room`.
    pub(super) fn start(dir: &Path, cpu: usize, players_per_room: usize) -> anyhow::Result<Self> {
        let mut server = Command::new("taskset");
        server
            .arg("-c")
            .arg(cpu.to_string())
            .arg("node")
            .arg(dir.join("server.js"))
            .args(["--port", "0", "--host", "127.0.0.1", "--players-per-room"])
            .arg(players_per_room.to_string())
            .env("NODE_ENV", "production")
            .stdout(Stdio::piped())
            .stdin(Stdio::null());
        let (child, pid, _, http) = start_listening(&mut server)?;
        Ok(Self {
            _child: child,
            http,
            pid,
        })
    }
}
