//! `tickwire bench sfs|nettest|hobo|teleport|arena`: a server and the bots as two
//! processes pinned to different CPUs, the server's CPU time, RSS and tick times read over
//! the measured window.
//!
//! The harness starts `tickwire serve` (this executable) under `taskset -c <server cpu>` on
//! free loopback ports, one shard, its store in a fresh SQLite file, with the scenario's
//! room kind sized to hold its rooms (capacity = players per room) and, for the arena
//! scenarios, the scenario's map and snapshot interval; then `tickwire bots --json` under
//! `taskset -c <bots cpu>`. The bots print an event line as the window opens and closes; at
//! each, the harness reads the server's `/proc/<pid>/stat` (utime + stime),
//! `/proc/<pid>/status` (VmRSS) and `/metrics` (packet counters, the kind's tick-duration
//! histogram), so every server figure covers the same window as the bots'. The server
//! child is killed however the harness ends.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Serialize;
use tickwire_bots::engine::{RunReport, ServerKind};
use tickwire_bots::proc_stat::{self, ProcessSample};
use tickwire_client::Transport;
use tickwire_server::config::DEFAULT_RELAY_TICK_RATE_HZ;

use super::colyseus::{self, ColyseusServer};
use crate::bots::{ScenarioArgs, Shape};

/// Seed 001's anchor: SFS2X, 1.07M packets/s on a 4-core Xeon, per core.
pub const ANCHOR_SFS2X_PPS_PER_CORE: f64 = 268_000.0;
/// DESIGN.md's relay target: messages delivered per server core-second.
pub const TARGET_SFS_MSGS_PER_CORE: f64 = 2_000_000.0;

/// DESIGN.md's arena target: players per server core at 60 Hz (tick p99 ≤ 4 ms).
pub const TARGET_HOBO_PLAYERS_PER_CORE: f64 = 3_000.0;
/// Seed 003's anchor: p99 of the teleport burst after its Rust rewrite, on 2 vCPUs.
pub const ANCHOR_TELEPORT_P99_MS: f64 = 28.0;

/// A run is valid only while the bots stay under this share of their one CPU: past it they,
/// not the server, may be what the figures measure.
pub const VALID_BOTS_CORES_MAX: f64 = 0.9;
/// ... and while their due sends leave at most this late at the 99th percentile (a quarter
/// of a 60 Hz tick): later, they no longer load the server on the schedule they claim.
pub const VALID_SEND_LAG_P99_MS_MAX: f64 = 4.0;
/// The arena's tick rate (`WorldConfig::tick_rate_hz`'s default, which the harness keeps).
const ARENA_TICK_HZ: f64 = 60.0;
/// How long after the server last counted a player or a room its RSS is read again: past
/// the runtime's next check for freed memory (every 5 s) and its trim.
pub const AFTER_LEAVE: Duration = Duration::from_secs(6);
/// How long the server may take, once the bots have exited, to count no player and no room:
/// bots whose goodbye was lost are timed out and their held seats expire first.
pub const LEAVE_LIMIT: Duration = Duration::from_secs(90);
/// The bench server disposes of an empty room after this long (and so issues tokens valid
/// this long, which a room's life must cover): the default 30 s would keep the crowd's
/// rooms long past the bots' leaving. Bots use their tokens at once.
const EMPTY_ROOM_TTL_SECS: u64 = 5;

/// sfs's relay rooms tick at the rate its bots send at (seed 001's clients: 30 a second),
/// so each member gets the others' latest messages together once per round of sends.
const SFS_RELAY_TICK_RATE_HZ: u32 = 30;

/// `tickwire bench <scenario>`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadBenchArgs {
    /// The scenario and pacing (bots' flags).
    #[command(flatten)]
    pub run: ScenarioArgs,
    /// Arena scenarios: the server's map (hobo and arena: courtyard, teleport: metropolis).
    #[arg(long)]
    pub map: Option<String>,
    /// Arena scenarios: the server sends each player a snapshot every this many ticks
    /// (`arena.snapshot_interval_ticks`; teleport: 3, others: 1).
    #[arg(long)]
    pub snapshot_interval: Option<u32>,
    /// Relay scenarios: the relay rooms' ticks per second, on which they send what their
    /// members sent (`rooms.relay_tick_rate_hz`; sfs: 30, the rate its bots send at;
    /// nettest: the server's default, 60).
    #[arg(long)]
    pub relay_tick_rate: Option<u32>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// CPU the server is pinned to.
    #[arg(long, default_value_t = 1)]
    pub server_cpu: usize,
    /// CPU the bots are pinned to.
    #[arg(long, default_value_t = 0)]
    pub bots_cpu: usize,
    /// With `--against colyseus`: the Node project that serves the hobo room (default:
    /// `bench/colyseus` under the working directory, else the source tree's).
    #[arg(long)]
    pub colyseus_dir: Option<std::path::PathBuf>,
}

/// The figures, one JSON object with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadBenchReport {
    /// Scenario.
    pub scenario: String,
    /// `udp` or `ws`.
    pub transport: String,
    /// Bots connected.
    pub players: usize,
    /// Rooms they filled.
    pub rooms: usize,
    /// Wall seconds between the server samples (the window).
    pub duration_s: f64,
    /// Server CPU (user + system) in the window.
    pub server_cpu_s: f64,
    /// `server_cpu_s / duration_s`.
    pub server_cores_used: f64,
    /// Datagrams (UDP) or WebSocket messages the server sent per second, from its
    /// `/metrics` `tickwire_packets_sent_total{transport}`.
    pub out_pps: f64,
    /// Datagrams or WebSocket messages it received per second
    /// (`tickwire_packets_received_total{transport}`).
    pub in_pps: f64,
    /// Where the packet figures come from.
    pub pps_source: &'static str,
    /// `out_pps * duration_s / server_cpu_s`.
    pub out_pps_per_server_core: f64,
    /// Messages delivered to the bots in the window (counted at the bots).
    pub out_msgs: u64,
    /// `out_msgs / server_cpu_s`: messages delivered per server core-second.
    pub out_msgs_per_server_core: f64,
    /// Messages per datagram the server sent (`out_msgs / (out_pps * duration_s)`).
    pub msgs_per_packet: f64,
    /// `players / server_cores_used`.
    pub players_per_server_core: f64,
    /// Heap allocations the server made in the window per message delivered to the bots
    /// (`tickwire_allocations_total`; absent when the server does not count them): a
    /// per-message cost that, unlike the CPU figures, does not move with the machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_allocations_per_msg: Option<f64>,
    /// Arena scenarios: players served at the full snapshot rate per server core,
    /// `players × min(1, snapshots_per_player_s / (60 / interval)) / server_cores_used`:
    /// a server that keeps up with fewer snapshots than promised is not credited for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_per_server_core: Option<f64>,
    /// Tick duration, median, from the window's histogram buckets (interpolated).
    pub tick_p50_ms: f64,
    /// 99th percentile.
    pub tick_p99_ms: f64,
    /// Upper bound of the highest bucket with a tick in the window.
    pub tick_max_ms: f64,
    /// Round trip, median (bots' samples).
    pub rtt_p50_ms: f64,
    /// Round trip, 99th percentile.
    pub rtt_p99_ms: f64,
    /// Relay: scheduled send to arrival at another member; arena: scheduled input to the
    /// first snapshot that confirms it. Median.
    pub latency_p50_ms: f64,
    /// 99th percentile.
    pub latency_p99_ms: f64,
    /// teleport: warps requested (one per bot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teleports: Option<u64>,
    /// teleport: requests confirmed (`Teleported` received).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teleports_confirmed: Option<u64>,
    /// teleport: request → confirmation, 99th percentile: from when each request left
    /// its bot to when the confirmation reached the bot's socket (UDP; over WebSocket and
    /// WebTransport, to when the bot read it). What a crowd of players, each on a machine
    /// of its own, would see.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teleport_confirm_p99_ms: Option<f64>,
    /// teleport: request → the first snapshot showing the bot in the zone, 99th percentile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teleport_seen_p99_ms: Option<f64>,
    /// teleport: the confirmations' 99th percentile again, from the instant every request
    /// was scheduled for: the bots' own time to send 5,000 requests from one core
    /// (`teleport_request_lag_p99_ms`) included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teleport_confirm_from_schedule_p99_ms: Option<f64>,
    /// teleport: how late the requests left the bots, 99th percentile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teleport_request_lag_p99_ms: Option<f64>,
    /// teleport: tick durations from one second before the burst to one second after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_ticks: Option<TickFigures>,
    /// Relay scenarios: the relay rooms' ticks per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relay_tick_rate_hz: Option<u32>,
    /// Arena scenarios: snapshots each bot received per second (the tick rate divided by
    /// the snapshot interval when the server keeps up; less when it does not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshots_per_player_s: Option<f64>,
    /// Deliveries expected.
    pub expected: u64,
    /// Deliveries counted.
    pub delivered: u64,
    /// `expected - delivered`.
    pub lost: u64,
    /// Bot connections that ended during the run.
    pub disconnects: u64,
    /// Server RSS at the window's end.
    pub server_rss_bytes: u64,
    /// Server RSS before any bot connected.
    pub server_idle_rss_bytes: u64,
    /// `(server_rss_bytes - server_idle_rss_bytes) / players`.
    pub rss_per_player_bytes: u64,
    /// The same for the server's anonymous memory (`RssAnon`: the heap, stacks and
    /// buffers; the RSS also counts pages of the executable first run under load).
    pub anon_per_player_bytes: u64,
    /// The same for the server's heap in use (`tickwire_heap_bytes`): the live data. What
    /// the anonymous memory holds beyond it is the allocator's (free chunks, arenas).
    pub heap_per_player_bytes: u64,
    /// Server RSS once every bot had gone (no player, no seat held, no room: see
    /// `server_empty_after_s`) and [`AFTER_LEAVE`] more: what the crowd kept.
    pub server_rss_after_leave_bytes: u64,
    /// The server's heap in use at the same moment (`tickwire_heap_bytes`): what of that
    /// RSS is live data rather than the allocator's free pages.
    pub server_heap_after_leave_bytes: u64,
    /// Seconds from the bots' exit until the server counted no player and no room (bots
    /// whose goodbye was lost are timed out, and their held seats expire, first).
    pub server_empty_after_s: f64,
    /// Players and rooms the server still counted when the reading was taken: 0 unless it
    /// did not empty within [`LEAVE_LIMIT`].
    pub server_players_after_leave: u64,
    /// This machine's raw `sendmmsg` limit just before the run, in datagrams per second of
    /// the sending CPU (the server's): a bare loop, as `tickwire bench udp` measures it
    /// (about 1 s, to 256 loopback sockets, the draining thread on the bots' CPU). On a
    /// shared machine this moves by 2× and more from one hour to the next, and this
    /// report's throughputs with it: a run is compared with another at a similar limit.
    pub machine_raw_pps_per_core: f64,
    /// The bots' own CPU in the window (their process, other CPU).
    pub bots_cpu_s: f64,
    /// `bots_cpu_s / duration_s`: of their one CPU.
    pub bots_cores_used: f64,
    /// `bots_cpu_s / server_cpu_s`: what the load tool costs next to what it measures.
    pub bots_cpu_per_server_cpu: f64,
    /// How late the bots' due sends left, 99th percentile (their schedule kept or not).
    pub bots_send_lag_p99_ms: f64,
    /// How long datagrams waited at the bots' sockets before they read them, 99th
    /// percentile (their receive pace kept or not); known for UDP bots, whose latencies
    /// are timed from each datagram's arrival and so leave this wait out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bots_recv_lag_p99_ms: Option<f64>,
    /// Datagrams the kernel dropped at the bots' UDP sockets in the window (they did not
    /// read in time).
    pub bots_udp_drops: u64,
    /// Datagrams dropped at the server's UDP sockets in the window (it did not read in time).
    pub server_udp_drops: u64,
    /// Bots that could not connect (the run went on without them); reasons in `bots`.
    pub connect_failed: u64,
    /// Whether the bots kept up (their CPU under [`VALID_BOTS_CORES_MAX`], their send lag
    /// p99 under [`VALID_SEND_LAG_P99_MS_MAX`], nothing dropped at their sockets): only then
    /// are the figures the server's.
    pub valid: bool,
    /// Why not, when not.
    pub invalid_because: Vec<String>,
    /// The bots' full report.
    pub bots: serde_json::Value,
}

/// Tick durations over a span, from the difference of two scrapes of the histogram.
#[derive(Debug, Clone, Serialize)]
pub struct TickFigures {
    /// Wall seconds the span covered.
    pub span_s: f64,
    /// Ticks in the span.
    pub ticks: u64,
    /// Median, interpolated in its bucket.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Upper bound of the highest bucket with a tick in the span.
    pub max_ms: f64,
}

impl TickFigures {
    fn between(start: &ServerSample, end: &ServerSample) -> Self {
        let ticks = bucket_difference(&start.tick_buckets, &end.tick_buckets);
        Self {
            span_s: match (start.at, end.at) {
                (Some(a), Some(b)) => (b - a).as_secs_f64(),
                _ => 0.0,
            },
            ticks: ticks.last().map_or(0, |&(_, count)| count as u64),
            p50_ms: quantile(&ticks, 0.5) * 1e3,
            p99_ms: quantile(&ticks, 0.99) * 1e3,
            max_ms: highest_bound(&ticks) * 1e3,
        }
    }
}

/// Kills the child when dropped: the server never outlives the harness.
pub(super) struct Reaped(pub(super) Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        // Already reaped (killed on purpose): its pid may belong to someone else by now.
        if matches!(self.0.try_wait(), Ok(Some(_))) {
            return;
        }
        // SAFETY: signalling our own child by its pid.
        unsafe {
            libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `tickwire serve` child of this process on loopback ports, one shard, pinned to one
/// CPU, with an SQLite store in a directory of its own; stopped (SIGTERM, then SIGKILL) and
/// its directory removed when dropped.
pub(super) struct ServerProcess {
    // Field order is drop order: the server stops before its directory goes.
    child: Reaped,
    _store_dir: RemovedDir,
    /// Its HTTP address (`127.0.0.1:port`).
    pub(super) http: String,
    /// Its operator listener (`127.0.0.1:port`): `/metrics` and the admin API.
    pub(super) admin: String,
    /// Its process id.
    pub(super) pid: u32,
    /// The line it printed once listening (`listening http=… udp=…,… wt=…`).
    pub(super) listening: String,
}

impl ServerProcess {
    /// Starts this executable's `serve` under `taskset -c cpu`, with the bench's settings
    /// and then `env` (configuration keys as `TICKWIRE_…` variables) on top.
    pub(super) fn start(cpu: usize, env: &[(String, String)]) -> anyhow::Result<Self> {
        Self::start_on(&cpu.to_string(), env)
    }

    /// As [`ServerProcess::start`], on `cpus` in `taskset`'s list form (`0-1`, `0,2`).
    pub(super) fn start_on(cpus: &str, env: &[(String, String)]) -> anyhow::Result<Self> {
        // Several servers of one harness (a cluster) each get a directory of their own.
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let exe = std::env::current_exe().context("cannot find this executable")?;
        let store_dir = std::env::temp_dir().join(format!(
            "tickwire-bench-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&store_dir)
            .with_context(|| format!("cannot create {}", store_dir.display()))?;
        let store_dir = RemovedDir(store_dir);
        let mut server = Command::new("taskset");
        server
            .arg("-c")
            .arg(cpus)
            .arg(&exe)
            .args([
                "serve",
                "--http",
                "127.0.0.1:0",
                "--udp",
                "127.0.0.1:0",
                "--wt",
                "127.0.0.1:0",
                "--admin",
                "127.0.0.1:0",
                "--shards",
                "1",
            ])
            .env(
                "TICKWIRE_STORE__URL",
                format!("sqlite://{}", store_dir.0.join("bench.db").display()),
            )
            .env("TICKWIRE_CONSOLE__ENABLED", "false")
            .env(
                "TICKWIRE_ROOMS__EMPTY_ROOM_TTL_SECS",
                EMPTY_ROOM_TTL_SECS.to_string(),
            )
            .env(
                "TICKWIRE_UDP__TOKEN_VALIDITY_SECS",
                EMPTY_ROOM_TTL_SECS.to_string(),
            )
            // A token of our own: a generated one would be in a file in the working directory.
            .env("TICKWIRE_ADMIN__TOKEN", Self::admin_token())
            .env("RUST_LOG", "warn")
            .envs(env.iter().map(|(key, value)| (key, value)))
            .stdout(Stdio::piped())
            .stdin(Stdio::null());
        let (child, pid, listening, http) = start_listening(&mut server)?;
        let admin = listening
            .split_whitespace()
            .find_map(|part| part.strip_prefix("admin="))
            .with_context(|| format!("no admin address in {listening:?}"))?
            .to_string();
        Ok(Self {
            child,
            _store_dir: store_dir,
            http,
            admin,
            pid,
            listening,
        })
    }

    /// The admin token the harness gives its servers (one of its own keeps a server from
    /// writing a generated one to a file).
    pub(super) fn admin_token() -> String {
        format!("bench-{}", std::process::id())
    }

    /// `kill -9`: the server stops on the spot, with no drain (a crashed node).
    pub(super) fn kill_now(&mut self) -> anyhow::Result<()> {
        self.child.0.kill().context("kill -9 of the server")?;
        self.child.0.wait().context("reaping the killed server")?;
        Ok(())
    }
}

/// The server under test.
enum Server {
    Tickwire(ServerProcess),
    Colyseus(ColyseusServer),
}

/// Starts `server` (a `taskset … <server>` command with its stdout piped), reads its stdout
/// up to the line that names its HTTP address (`listening http=host:port …`) and keeps
/// draining it on a thread of its own, so that the server never blocks on a full pipe;
/// then gives it a moment to settle. The child, its pid, that line and the address.
pub(super) fn start_listening(
    server: &mut Command,
) -> anyhow::Result<(Reaped, u32, String, String)> {
    let mut server = server
        .spawn()
        .context("cannot start the server under taskset")?;
    let stdout = server.stdout.take().context("server stdout")?;
    // taskset execs the server in place: this is its pid.
    let pid = server.id();
    let child = Reaped(server);
    let mut lines = BufReader::new(stdout).lines();
    let (line, http) = loop {
        let line = lines
            .next()
            .context("the server exited before listening (its error is above)")??;
        let http = line
            .split_whitespace()
            .find_map(|part| part.strip_prefix("http="))
            .map(str::to_string);
        if let Some(http) = http {
            break (line, http);
        }
    };
    std::thread::spawn(move || for _ in lines {});
    std::thread::sleep(Duration::from_millis(300));
    Ok((child, pid, line, http))
}

/// The server's counters and histogram at one moment.
#[derive(Debug, Clone, Default)]
struct ServerSample {
    at: Option<Instant>,
    process: ProcessSample,
    /// Drops at the server's UDP sockets so far.
    udp_drops: u64,
    /// Drops at the bots' UDP sockets so far (sampled at the same moment).
    bots_udp_drops: u64,
    packets_sent: f64,
    packets_received: f64,
    /// Heap in use (`tickwire_heap_bytes`).
    heap_bytes: u64,
    /// Allocations so far (`tickwire_allocations_total`), if counted.
    allocations: Option<f64>,
    /// `(le, cumulative count)` of the scenario kind's tick-duration histogram.
    tick_buckets: Vec<(f64, f64)>,
}

/// Runs the benchmark for scenario `name`.
pub fn run(name: &str, args: &LoadBenchArgs) -> anyhow::Result<LoadBenchReport> {
    crate::bots::raise_fd_limit();
    let scenario = args.run.scenario(name)?;
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let transport = args.run.transport.name();
    let kind = scenario.room_kind();
    let mut env = vec![(
        format!("TICKWIRE_ROOMS__KINDS__{}__CAPACITY", kind.to_uppercase()),
        scenario
            .players()
            .div_ceil(scenario.rooms().max(1))
            .to_string(),
    )];
    // The arena's ticks between two snapshots to a player (relay scenarios: none).
    let snapshot_interval = match &scenario {
        Shape::Arena(_) => {
            Some(
                args.snapshot_interval
                    .unwrap_or(if name == "teleport" { 3 } else { 1 }),
            )
        }
        _ => None,
    };
    if let Some(interval) = snapshot_interval {
        let map = args.map.clone().unwrap_or_else(|| {
            if name == "teleport" {
                "metropolis"
            } else {
                "courtyard"
            }
            .to_string()
        });
        env.push(("TICKWIRE_ARENA__MAP".into(), map));
        env.push((
            "TICKWIRE_ARENA__SNAPSHOT_INTERVAL_TICKS".into(),
            interval.to_string(),
        ));
    } else if args.map.is_some() || args.snapshot_interval.is_some() {
        bail!("--map and --snapshot-interval are for the arena scenarios");
    }
    let relay_tick_rate = match &scenario {
        Shape::Relay(_) => Some(args.relay_tick_rate.unwrap_or(if name == "sfs" {
            SFS_RELAY_TICK_RATE_HZ
        } else {
            DEFAULT_RELAY_TICK_RATE_HZ
        })),
        Shape::Arena(_) if args.relay_tick_rate.is_some() => {
            bail!("--relay-tick-rate is for the relay scenarios")
        }
        Shape::Arena(_) => None,
    };
    if let Some(rate) = relay_tick_rate {
        env.push((
            "TICKWIRE_ROOMS__RELAY_TICK_RATE_HZ".into(),
            rate.to_string(),
        ));
    }
    let machine_raw_pps_per_core = machine_raw_limit(args.server_cpu, args.bots_cpu)?;
    // The server under test; `metrics` is its `/metrics` (tickwire's), which Colyseus has
    // not: its packet, tick, heap and occupancy figures stay 0.
    let server = match args.run.against {
        ServerKind::Tickwire => Server::Tickwire(ServerProcess::start(args.server_cpu, &env)?),
        ServerKind::Colyseus => {
            if name != "hobo" || args.run.transport != Transport::Ws {
                bail!("--against colyseus runs the hobo scenario over ws only");
            }
            if args
                .map
                .as_ref()
                .is_some_and(|map| map.trim_end_matches(".tmx") != "courtyard")
                || args.snapshot_interval.is_some_and(|interval| interval != 1)
            {
                bail!("the Colyseus room plays the courtyard map at 60 Hz only");
            }
            let dir = ColyseusServer::project(args.colyseus_dir.as_deref())?;
            let per_room = scenario.players().div_ceil(scenario.rooms().max(1));
            Server::Colyseus(ColyseusServer::start(&dir, args.server_cpu, per_room)?)
        }
    };
    let (http, server_pid) = match &server {
        Server::Tickwire(server) => (server.http.clone(), server.pid),
        Server::Colyseus(server) => (server.http.clone(), server.pid),
    };
    let admin = match &server {
        Server::Tickwire(server) => Some(server.admin.clone()),
        Server::Colyseus(_) => None,
    };
    let metrics = admin.as_deref();
    let idle = proc_stat::sample(server_pid).context("reading the server's /proc")?;
    let idle_heap = match metrics {
        Some(http) => metric(&scrape(http)?, "tickwire_heap_bytes").unwrap_or(0.0) as u64,
        None => 0,
    };

    let mut bots = Command::new("taskset");
    bots.arg("-c")
        .arg(args.bots_cpu.to_string())
        .arg(&exe)
        .args(["bots", "--json", "--events", "--scenario", name])
        .arg("--server")
        .arg(format!("http://{http}"))
        .args(run_flags(&args.run))
        .args(scenario.flags())
        .stdout(Stdio::piped())
        .stdin(Stdio::null());
    let mut bots = bots
        .spawn()
        .context("cannot start the bots under taskset")?;
    let bots_stdout: ChildStdout = bots.stdout.take().context("bots stdout")?;
    // taskset execs the bots in place: this is their pid.
    let bots_pid = bots.id();
    let bots = Reaped(bots);
    let mut start = None;
    let mut end = None;
    let mut report = None;
    let mut burst = None;
    for line in BufReader::new(bots_stdout).lines() {
        let line = line?;
        if line.contains("\"event\":\"measuring\"") {
            start = Some(sample_server(
                server_pid, bots_pid, metrics, transport, kind,
            )?);
            if name == "teleport" {
                burst = Some(sample_around_burst(
                    (server_pid, bots_pid),
                    metrics.unwrap_or_default().to_string(),
                    transport,
                    kind,
                    args.run.duration / 2,
                ));
            }
            if !args.json {
                eprintln!("measuring {} s …", args.run.duration.as_secs_f64());
            }
        } else if line.contains("\"event\":\"draining\"") {
            end = Some(sample_server(
                server_pid, bots_pid, metrics, transport, kind,
            )?);
        } else if line.contains("\"event\"") {
            if !args.json && line.contains("warmup") {
                eprintln!("bots connected; warming up");
            }
        } else if line.starts_with('{') {
            report = Some(line);
        }
    }
    let mut bots = bots;
    let status = bots.0.wait()?;
    let left_at = Instant::now();
    if let Some(http) = metrics {
        while server_occupancy(http)? > 0 && left_at.elapsed() < LEAVE_LIMIT {
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let empty_after = left_at.elapsed();
    std::thread::sleep(AFTER_LEAVE);
    let after_leave = proc_stat::sample(server_pid).context("reading the server's /proc")?;
    let after_leave_metrics = match metrics {
        Some(http) => scrape(http).context("scraping /metrics after the bots left")?,
        None => String::new(),
    };
    let (Some(start), Some(end), Some(report)) = (start, end, report) else {
        bail!("the bots produced no figures ({status}); see their error above");
    };
    if !status.success() {
        bail!("the bots failed ({status})");
    }
    let bots_json: serde_json::Value = serde_json::from_str(&report)?;
    let bots_report: BotsFigures = serde_json::from_str(&report)?;
    let burst_ticks = match burst.map(std::thread::JoinHandle::join) {
        Some(Ok(Ok((before, after)))) => Some(TickFigures::between(&before, &after)),
        Some(Ok(Err(error))) => return Err(error.context("sampling the server around the burst")),
        Some(Err(_)) => bail!("the burst sampler panicked"),
        None => None,
    };
    drop(server);
    let snapshot_rate =
        snapshot_interval.map(|interval| ARENA_TICK_HZ / f64::from(interval.max(1)));
    let mut report = figures(
        scenario.name(),
        transport,
        snapshot_rate,
        &idle,
        &start,
        &end,
        bots_report,
        bots_json,
    );
    report.burst_ticks = burst_ticks;
    report.relay_tick_rate_hz = relay_tick_rate;
    if metrics.is_none() {
        report.pps_source = colyseus::PPS_SOURCE;
    }
    report.heap_per_player_bytes =
        end.heap_bytes.saturating_sub(idle_heap) / report.players.max(1) as u64;
    report.server_rss_after_leave_bytes = after_leave.rss_bytes;
    report.server_heap_after_leave_bytes =
        metric(&after_leave_metrics, "tickwire_heap_bytes").unwrap_or(0.0) as u64;
    report.server_empty_after_s = empty_after.as_secs_f64();
    report.server_players_after_leave = occupancy(&after_leave_metrics);
    report.machine_raw_pps_per_core = machine_raw_pps_per_core;
    Ok(report)
}

/// The machine's raw `sendmmsg` limit on `server_cpu` now (see
/// [`LoadBenchReport::machine_raw_pps_per_core`]), nothing else running.
fn machine_raw_limit(server_cpu: usize, bots_cpu: usize) -> anyhow::Result<f64> {
    let config = super::raw::RawConfig {
        duration: Duration::from_secs(1),
        sender_cpu: Some(server_cpu),
        receiver_cpu: Some(bots_cpu),
        ..super::raw::RawConfig::default()
    };
    let figures = super::raw::raw_sendmmsg(&config).context("measuring the raw sendmmsg limit")?;
    Ok(figures.sent_pps_per_core())
}

/// Players connected, seats held for reconnection and rooms open, summed from `/metrics`.
fn occupancy(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|line| {
            line.starts_with("tickwire_players{")
                || line.starts_with("tickwire_players_reconnecting ")
                || line.starts_with("tickwire_rooms{")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn server_occupancy(http: &str) -> anyhow::Result<u64> {
    Ok(occupancy(
        &scrape(http).context("scraping /metrics after the bots left")?,
    ))
}

/// Samples the server one second before and one second after `middle` into the window
/// (the teleport burst: every bot warps at the window's middle), on a thread of its own
/// so the bots' output keeps being read.
fn sample_around_burst(
    (pid, bots_pid): (u32, u32),
    metrics: String,
    transport: &'static str,
    kind: &'static str,
    middle: Duration,
) -> std::thread::JoinHandle<anyhow::Result<(ServerSample, ServerSample)>> {
    let opened = Instant::now();
    let margin = Duration::from_secs(1).min(middle);
    std::thread::spawn(move || {
        std::thread::sleep((opened + middle - margin).saturating_duration_since(Instant::now()));
        let before = sample_server(pid, bots_pid, Some(&metrics), transport, kind)?;
        std::thread::sleep((opened + middle + margin).saturating_duration_since(Instant::now()));
        let after = sample_server(pid, bots_pid, Some(&metrics), transport, kind)?;
        Ok((before, after))
    })
}

/// Removes the benchmark's scratch directory (its database) when dropped.
struct RemovedDir(std::path::PathBuf);

impl Drop for RemovedDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bots' pacing flags: the harness passes its own overrides on.
fn run_flags(run: &ScenarioArgs) -> Vec<String> {
    vec![
        "--transport".into(),
        run.transport.name().into(),
        "--duration".into(),
        format!("{}s", run.duration.as_secs_f64()),
        "--warmup".into(),
        format!("{}s", run.warmup.as_secs_f64()),
        "--drain".into(),
        format!("{}s", run.drain.as_secs_f64()),
        "--connect-rate".into(),
        run.connect_rate.to_string(),
        "--threads".into(),
        run.threads.to_string(),
        "--seed".into(),
        run.seed.to_string(),
        "--against".into(),
        run.against.name().into(),
    ]
}

/// The subset of the bots' report the harness computes with.
#[derive(Debug, serde::Deserialize)]
struct BotsFigures {
    players: usize,
    rooms: usize,
    expected: u64,
    delivered: u64,
    lost: u64,
    disconnects: u64,
    latency_p50_ms: f64,
    latency_p99_ms: f64,
    rtt_p50_ms: f64,
    rtt_p99_ms: f64,
    bots_cpu_s: f64,
    send_lag_p99_ms: f64,
    recv_lag_p99_ms: Option<f64>,
    connect_failed: u64,
    arena: Option<ArenaFiguresSubset>,
}

/// The warp figures of the bots' `arena` object.
#[derive(Debug, serde::Deserialize)]
struct ArenaFiguresSubset {
    snapshots_per_s: f64,
    teleport: WarpSubset,
    teleport_seen: WarpSubset,
    teleport_scheduled: WarpSubset,
    teleport_left: WarpSubset,
}

#[derive(Debug, serde::Deserialize)]
struct WarpSubset {
    sent: u64,
    delivered: u64,
    latency_p99_ms: f64,
}

// `RunReport` is what the bots print; keep the field names the harness reads in step.
const _: fn(&RunReport) = |report| {
    let _ = (
        report.players,
        report.rooms,
        report.delivery.expected,
        report.delivery.delivered,
        report.delivery.lost,
        report.disconnects,
        report.delivery.latency_p50_ms,
        report.delivery.latency_p99_ms,
        report.rtt_p50_ms,
        report.rtt_p99_ms,
        report.bots_cpu_s,
        report.send_lag_p99_ms,
        report.recv_lag_p99_ms,
        report.connect_failed,
        report.arena.as_ref().map(|arena| {
            (
                arena.teleport.sent,
                arena.teleport.delivered,
                arena.teleport.latency_p99_ms,
                arena.teleport_seen.latency_p99_ms,
                arena.teleport_scheduled.latency_p99_ms,
                arena.teleport_left.latency_p99_ms,
            )
        }),
    );
};

#[allow(clippy::too_many_arguments)]
fn figures(
    scenario: &str,
    transport: &str,
    snapshot_rate: Option<f64>,
    idle: &ProcessSample,
    start: &ServerSample,
    end: &ServerSample,
    bots: BotsFigures,
    bots_json: serde_json::Value,
) -> LoadBenchReport {
    let duration_s = match (start.at, end.at) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => 0.0,
    }
    .max(1e-9);
    let server_cpu_s = (end.process.cpu_s - start.process.cpu_s).max(1e-9);
    let out_packets = end.packets_sent - start.packets_sent;
    let in_packets = end.packets_received - start.packets_received;
    let ticks = bucket_difference(&start.tick_buckets, &end.tick_buckets);
    let cores = server_cpu_s / duration_s;
    let warps = bots.arena.as_ref().filter(|arena| arena.teleport.sent > 0);
    let snapshots_per_player_s = bots
        .arena
        .as_ref()
        .map(|arena| arena.snapshots_per_s / bots.players.max(1) as f64);
    let served_per_server_core = snapshot_rate
        .zip(snapshots_per_player_s)
        .map(|(rate, got)| bots.players as f64 * (got / rate).min(1.0) / cores.max(1e-9));
    let bots_cores_used = bots.bots_cpu_s / duration_s;
    let bots_udp_drops = end.bots_udp_drops.saturating_sub(start.bots_udp_drops);
    let mut invalid_because = Vec::new();
    if bots_cores_used > VALID_BOTS_CORES_MAX {
        invalid_because.push(format!(
            "the bots used {bots_cores_used:.2} of their CPU (over {VALID_BOTS_CORES_MAX})"
        ));
    }
    if bots.send_lag_p99_ms > VALID_SEND_LAG_P99_MS_MAX {
        invalid_because.push(format!(
            "the bots' sends left {:.1} ms late at p99 (over {VALID_SEND_LAG_P99_MS_MAX} ms)",
            bots.send_lag_p99_ms
        ));
    }
    if bots_udp_drops > 0 {
        invalid_because.push(format!(
            "the kernel dropped {bots_udp_drops} datagrams at the bots' sockets"
        ));
    }
    LoadBenchReport {
        scenario: scenario.to_string(),
        transport: transport.to_string(),
        players: bots.players,
        rooms: bots.rooms,
        duration_s,
        server_cpu_s,
        server_cores_used: cores,
        out_pps: out_packets / duration_s,
        in_pps: in_packets / duration_s,
        pps_source: "server /metrics tickwire_packets_{sent,received}_total",
        out_pps_per_server_core: out_packets / server_cpu_s,
        out_msgs: bots.delivered,
        out_msgs_per_server_core: bots.delivered as f64 / server_cpu_s,
        msgs_per_packet: bots.delivered as f64 / out_packets.max(1.0),
        players_per_server_core: bots.players as f64 / cores.max(1e-9),
        server_allocations_per_msg: start
            .allocations
            .zip(end.allocations)
            .map(|(start, end)| (end - start) / bots.delivered.max(1) as f64),
        served_per_server_core,
        tick_p50_ms: quantile(&ticks, 0.5) * 1e3,
        tick_p99_ms: quantile(&ticks, 0.99) * 1e3,
        tick_max_ms: highest_bound(&ticks) * 1e3,
        rtt_p50_ms: bots.rtt_p50_ms,
        rtt_p99_ms: bots.rtt_p99_ms,
        latency_p50_ms: bots.latency_p50_ms,
        latency_p99_ms: bots.latency_p99_ms,
        teleports: warps.map(|arena| arena.teleport.sent),
        teleports_confirmed: warps.map(|arena| arena.teleport.delivered),
        teleport_confirm_p99_ms: warps.map(|arena| arena.teleport.latency_p99_ms),
        teleport_seen_p99_ms: warps.map(|arena| arena.teleport_seen.latency_p99_ms),
        teleport_confirm_from_schedule_p99_ms: warps
            .map(|arena| arena.teleport_scheduled.latency_p99_ms),
        teleport_request_lag_p99_ms: warps.map(|arena| arena.teleport_left.latency_p99_ms),
        burst_ticks: None,
        relay_tick_rate_hz: None,
        snapshots_per_player_s,
        expected: bots.expected,
        delivered: bots.delivered,
        lost: bots.lost,
        disconnects: bots.disconnects,
        server_rss_bytes: end.process.rss_bytes,
        server_idle_rss_bytes: idle.rss_bytes,
        rss_per_player_bytes: end.process.rss_bytes.saturating_sub(idle.rss_bytes)
            / bots.players.max(1) as u64,
        anon_per_player_bytes: end.process.anon_bytes.saturating_sub(idle.anon_bytes)
            / bots.players.max(1) as u64,
        // Set by the caller, which scraped the idle server's heap.
        heap_per_player_bytes: 0,
        server_rss_after_leave_bytes: 0,
        server_heap_after_leave_bytes: 0,
        server_empty_after_s: 0.0,
        server_players_after_leave: 0,
        // Set by the caller, which measured it before starting the server.
        machine_raw_pps_per_core: 0.0,
        bots_cpu_s: bots.bots_cpu_s,
        bots_cores_used,
        bots_cpu_per_server_cpu: bots.bots_cpu_s / server_cpu_s,
        bots_send_lag_p99_ms: bots.send_lag_p99_ms,
        bots_recv_lag_p99_ms: bots.recv_lag_p99_ms,
        bots_udp_drops,
        server_udp_drops: end.udp_drops.saturating_sub(start.udp_drops),
        connect_failed: bots.connect_failed,
        valid: invalid_because.is_empty(),
        invalid_because,
        bots: bots_json,
    }
}

/// The server's `/proc` now, and its `/metrics` when it has them (`metrics`: its operator
/// listener's address).
fn sample_server(
    pid: u32,
    bots_pid: u32,
    metrics: Option<&str>,
    transport: &str,
    kind: &str,
) -> anyhow::Result<ServerSample> {
    let process = proc_stat::sample(pid).context("reading the server's /proc")?;
    let udp_drops = proc_stat::udp_drops(pid).context("reading the server's UDP drops")?;
    let bots_udp_drops = proc_stat::udp_drops(bots_pid).context("reading the bots' UDP drops")?;
    let at = Some(Instant::now());
    let text = match metrics {
        Some(http) => scrape(http).context("scraping /metrics")?,
        None => String::new(),
    };
    let label = format!("{{transport=\"{transport}\"}}");
    Ok(ServerSample {
        at,
        process,
        udp_drops,
        bots_udp_drops,
        packets_sent: metric(&text, &format!("tickwire_packets_sent_total{label}")).unwrap_or(0.0),
        packets_received: metric(&text, &format!("tickwire_packets_received_total{label}"))
            .unwrap_or(0.0),
        heap_bytes: metric(&text, "tickwire_heap_bytes").unwrap_or(0.0) as u64,
        allocations: metric(&text, "tickwire_allocations_total"),
        tick_buckets: buckets(&text, "tickwire_tick_duration_seconds_bucket", kind),
    })
}

/// `GET /metrics` over plain HTTP/1.0 at `admin`, the operator listener.
pub(super) fn scrape(admin: &str) -> anyhow::Result<String> {
    Ok(get(admin, "/metrics", "")?.1)
}

/// `GET path` at `http` with `headers` (each ending in `\r\n`): the status and the body.
pub(super) fn get(http: &str, path: &str, headers: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect(http)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {http}\r\n{headers}\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .with_context(|| format!("no HTTP status in {response:?}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map_or(response.as_str(), |(_, body)| body);
    Ok((status, body.to_string()))
}

/// The value of the sample named exactly `name` (with its labels).
pub(super) fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
}

/// `(le, cumulative count)` of histogram `name` for `kind`, in the order exposed.
pub(super) fn buckets(text: &str, name: &str, kind: &str) -> Vec<(f64, f64)> {
    let kind_label = format!("kind=\"{kind}\"");
    text.lines()
        .filter(|line| line.starts_with(name) && line.contains(&kind_label))
        .filter_map(|line| {
            let le = line.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            let count = line.rsplit(' ').next()?.parse().ok()?;
            Some((le, count))
        })
        .collect()
}

/// The window's histogram: `end - start`, bucket by bucket (cumulative counts).
pub(super) fn bucket_difference(start: &[(f64, f64)], end: &[(f64, f64)]) -> Vec<(f64, f64)> {
    end.iter()
        .map(|(le, count)| {
            let before = start
                .iter()
                .find(|(start_le, _)| start_le == le)
                .map_or(0.0, |(_, count)| *count);
            (*le, count - before)
        })
        .collect()
}

/// `histogram_quantile` as Prometheus computes it: linear within the bucket; the +Inf
/// bucket reports the last finite bound.
pub(super) fn quantile(cumulative: &[(f64, f64)], q: f64) -> f64 {
    let Some(&(_, total)) = cumulative.last() else {
        return 0.0;
    };
    if total <= 0.0 {
        return 0.0;
    }
    let rank = q * total;
    let mut lower = 0.0;
    let mut below = 0.0;
    for &(le, count) in cumulative {
        if count >= rank {
            if le.is_infinite() {
                return lower;
            }
            let share = if count > below {
                (rank - below) / (count - below)
            } else {
                0.0
            };
            return lower + (le - lower) * share;
        }
        lower = le;
        below = count;
    }
    lower
}

/// The upper bound of the highest bucket that gained a tick (the last finite bound when
/// that is +Inf).
fn highest_bound(cumulative: &[(f64, f64)]) -> f64 {
    let mut below = 0.0;
    let mut lower = 0.0;
    let mut highest = 0.0;
    for &(le, count) in cumulative {
        if count > below {
            highest = if le.is_infinite() { lower } else { le };
        }
        below = count;
        if le.is_finite() {
            lower = le;
        }
    }
    highest
}

/// The figures as a table, next to the anchors and targets.
pub fn render(report: &LoadBenchReport) -> String {
    let colyseus = report.bots.get("server").and_then(|server| server.as_str()) == Some("colyseus");
    let mut out = format!(
        "{} over {}{}: {} bots in {} rooms; server pinned to its CPU, bots on the other; {:.1} s window\n\n",
        report.scenario,
        report.transport,
        if colyseus { " against Colyseus" } else { "" },
        report.players,
        report.rooms,
        report.duration_s
    );
    let mut row = |name: &str, value: String| out.push_str(&format!("{name:<40} {value}\n"));
    row(
        "server CPU in the window",
        format!(
            "{:.2} s ({:.2} cores)",
            report.server_cpu_s, report.server_cores_used
        ),
    );
    row(
        "messages delivered",
        format!(
            "{} of {} expected (lost {})",
            report.delivered, report.expected, report.lost
        ),
    );
    row(
        "messages delivered per server core-s",
        format!("{:.0}", report.out_msgs_per_server_core),
    );
    row(
        "server packets out / in per s",
        format!("{:.0} / {:.0}", report.out_pps, report.in_pps),
    );
    row(
        "server packets out per core-s",
        format!(
            "{:.0} ({:.1} messages each)",
            report.out_pps_per_server_core, report.msgs_per_packet
        ),
    );
    let arena = report.bots.get("arena").is_some();
    row(
        if arena {
            "input → snapshot p50 / p99"
        } else {
            "relay latency p50 / p99"
        },
        format!(
            "{:.2} / {:.2} ms",
            report.latency_p50_ms, report.latency_p99_ms
        ),
    );
    row(
        "players per server core",
        format!("{:.0}", report.players_per_server_core),
    );
    if let Some(served) = report.served_per_server_core {
        row(
            "served at the full snapshot rate per core",
            format!("{served:.0}"),
        );
    }
    if let (Some(sent), Some(confirmed), Some(confirm), Some(seen)) = (
        report.teleports,
        report.teleports_confirmed,
        report.teleport_confirm_p99_ms,
        report.teleport_seen_p99_ms,
    ) {
        row("warps confirmed", format!("{confirmed} of {sent}"));
        row(
            "warp → confirmation / in zone p99",
            format!("{confirm:.2} / {seen:.2} ms"),
        );
        if let (Some(scheduled), Some(lag)) = (
            report.teleport_confirm_from_schedule_p99_ms,
            report.teleport_request_lag_p99_ms,
        ) {
            row(
                "from the schedule: confirmation / requests left p99",
                format!("{scheduled:.2} / {lag:.2} ms"),
            );
        }
    }
    if let Some(burst) = &report.burst_ticks {
        row(
            "tick p50 / p99 / max, burst ± 1 s",
            format!(
                "{:.3} / {:.3} / ≤ {:.3} ms ({} ticks)",
                burst.p50_ms, burst.p99_ms, burst.max_ms, burst.ticks
            ),
        );
    }
    if let Some(rate) = report.snapshots_per_player_s {
        row("snapshots per player per s", format!("{rate:.1}"));
    }
    if let Some(rate) = report.relay_tick_rate_hz {
        row("relay rooms' tick rate", format!("{rate} Hz"));
    }
    row(
        "rtt p50 / p99",
        format!("{:.2} / {:.2} ms", report.rtt_p50_ms, report.rtt_p99_ms),
    );
    row(
        "tick p50 / p99 / max (bucket bound)",
        format!(
            "{:.3} / {:.3} / ≤ {:.3} ms",
            report.tick_p50_ms, report.tick_p99_ms, report.tick_max_ms
        ),
    );
    row("disconnects", report.disconnects.to_string());
    row(
        "server RSS (idle → end → bots gone), per player",
        format!(
            "{:.1} → {:.1} → {:.1} MB, {} B",
            report.server_idle_rss_bytes as f64 / 1e6,
            report.server_rss_bytes as f64 / 1e6,
            report.server_rss_after_leave_bytes as f64 / 1e6,
            report.rss_per_player_bytes
        ),
    );
    if let Some(allocations) = report.server_allocations_per_msg {
        row(
            "server allocations per message delivered",
            format!("{allocations:.2}"),
        );
    }
    row(
        "server memory per player: anonymous, of it heap in use",
        format!(
            "{} B, {} B",
            report.anon_per_player_bytes, report.heap_per_player_bytes
        ),
    );
    row(
        "server empty after; then heap in use",
        format!(
            "{:.1} s{}; {:.1} MB",
            report.server_empty_after_s,
            if report.server_players_after_leave > 0 {
                format!(
                    " (not empty: {} players, seats and rooms)",
                    report.server_players_after_leave
                )
            } else {
                String::new()
            },
            report.server_heap_after_leave_bytes as f64 / 1e6,
        ),
    );
    row(
        "machine: raw sendmmsg limit before the run",
        format!(
            "{:.0}K datagrams/s per core",
            report.machine_raw_pps_per_core / 1e3
        ),
    );
    row(
        "bots' CPU in the window",
        format!(
            "{:.2} s ({:.2} of their CPU, {:.2}× the server's)",
            report.bots_cpu_s, report.bots_cores_used, report.bots_cpu_per_server_cpu
        ),
    );
    row(
        "bots' send lag p99",
        format!("{:.2} ms", report.bots_send_lag_p99_ms),
    );
    if let Some(lag) = report.bots_recv_lag_p99_ms {
        row("bots' receive lag p99", format!("{lag:.2} ms"));
    }
    row(
        "UDP drops at the bots / the server",
        format!("{} / {}", report.bots_udp_drops, report.server_udp_drops),
    );
    if report.connect_failed > 0 {
        row(
            "bots that failed to connect",
            format!("{} (reasons in the JSON)", report.connect_failed),
        );
    }
    row(
        "valid (the bots kept up)",
        if report.valid {
            "yes".to_string()
        } else {
            format!("NO: {}", report.invalid_because.join("; "))
        },
    );
    if report.scenario == "sfs" {
        out.push_str(&format!(
            "\nanchor: SFS2X ≈ {:.0}K packets/s per core (seed 001); target ≥ {:.1}M messages per server core-s\n",
            ANCHOR_SFS2X_PPS_PER_CORE / 1e3,
            TARGET_SFS_MSGS_PER_CORE / 1e6
        ));
    } else if report.scenario == "nettest" {
        out.push_str("\ntarget: delivered == expected, zero disconnects (seed 004 delivered 24.5K of 40K packets/s at 200 clients)\n");
    } else if colyseus {
        out.push_str("\nColyseus 0.18 (bench/colyseus), the same load: tickwire's WebSocket target is ≥ 2× its served figure per core (issue 17); no tick, packet or input-latency figures (Colyseus has no counters, the bots do not decode its patches)\n");
    } else if report.scenario == "hobo" {
        out.push_str(&format!(
            "\nanchor: 250 players on seed 000's 1-core box, Colyseus ≈ 1,500 per core here; target ≥ {TARGET_HOBO_PLAYERS_PER_CORE:.0} players per server core with tick p99 ≤ 4 ms\n"
        ));
    } else if report.scenario == "teleport" {
        out.push_str(&format!(
            "\nanchor: seed 003's p99 {ANCHOR_TELEPORT_P99_MS:.0} ms on 2 vCPUs; target: confirmation p99 ≤ 25 ms\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "\
tickwire_packets_sent_total{transport=\"udp\"} 1200
tickwire_packets_sent_total{transport=\"ws\"} 7
tickwire_tick_duration_seconds_bucket{kind=\"relay\",le=\"0.0001\"} 50
tickwire_tick_duration_seconds_bucket{kind=\"relay\",le=\"0.00025\"} 90
tickwire_tick_duration_seconds_bucket{kind=\"relay\",le=\"0.0005\"} 100
tickwire_tick_duration_seconds_bucket{kind=\"relay\",le=\"+Inf\"} 100
tickwire_tick_duration_seconds_bucket{kind=\"chat\",le=\"0.0001\"} 5
";

    #[test]
    fn counters_and_window_percentiles_come_from_the_scrape() {
        assert_eq!(
            metric(SCRAPE, "tickwire_packets_sent_total{transport=\"udp\"}"),
            Some(1200.0)
        );
        let before = vec![
            (0.0001, 10.0),
            (0.00025, 10.0),
            (0.0005, 10.0),
            (f64::INFINITY, 10.0),
        ];
        let after = buckets(SCRAPE, "tickwire_tick_duration_seconds_bucket", "relay");
        assert_eq!(after.len(), 4);
        let window = bucket_difference(&before, &after);
        // 40 ticks under 100 µs, 40 in (100, 250], 10 in (250, 500].
        assert_eq!(window.last().unwrap().1, 90.0);
        assert!((quantile(&window, 0.5) - 0.000_118_75).abs() < 1e-9);
        assert!((quantile(&window, 0.99) - 0.000_477_5).abs() < 1e-9);
        assert_eq!(highest_bound(&window), 0.0005);
    }
}
