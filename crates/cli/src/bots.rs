//! `tickwire bots`: a scenario's bots against any server, with a live progress display and
//! a table (or one JSON object) at the end. `tickwire bench <scenario>` runs this same
//! command as a child process, pinned to its own CPU.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use tickwire_bots::engine::{
    self, LiveSnapshot, Observer, Phase, RunConfig, RunReport, ServerKind,
};
use tickwire_bots::scenario::{ArenaScenario, Body, RelayScenario, Scenario};
use tickwire_client::Transport;

/// A duration on the command line: `20`, `20s`, `1.5s` or `500ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (20, 20s, 500ms)"))?;
    if !(0.0..=86_400.0).contains(&(value * scale)) {
        return Err(format!("{text:?} is outside 0 s to a day"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

/// The scenario's shape and the run's pacing; every flag overrides the scenario default.
#[derive(Debug, Clone, clap::Args)]
pub struct ScenarioArgs {
    /// udp, ws or wt (WebTransport).
    #[arg(long, default_value = "udp")]
    pub transport: Transport,
    /// The server the bots speak to: tickwire, or colyseus (`bench/colyseus`, the hobo
    /// scenario over ws; issue 17).
    #[arg(long, default_value = "tickwire")]
    pub against: ServerKind,
    /// Rooms (sfs: 138, nettest: 1, hobo: 100, teleport: 1, arena: 2).
    #[arg(long)]
    pub rooms: Option<usize>,
    /// Arena scenarios: bots in all (hobo: 250, teleport: 5000, arena: 64).
    #[arg(long)]
    pub players: Option<usize>,
    /// Relay scenarios: bots per room (sfs: 16, nettest: 300).
    #[arg(long)]
    pub players_per_room: Option<usize>,
    /// Relay scenarios: messages per second per bot (sfs: 30, nettest: 1).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Relay scenarios: channel, 0 reliable, 1 unreliable, 2 unreliable-sequenced (sfs: 1,
    /// nettest: 0).
    #[arg(long)]
    pub channel: Option<u8>,
    /// sfs message size in bytes, stamp included (default 32).
    #[arg(long)]
    pub size: Option<usize>,
    /// Arena scenarios: time between two inputs of a bot (hobo: 40ms, teleport: 100ms,
    /// arena: 33ms).
    #[arg(long, value_parser = parse_duration)]
    pub input_interval: Option<Duration>,
    /// Arena scenarios: every Nth bot decodes snapshots in full, the others read their own
    /// state only (hobo: 16, teleport: 50, arena: 1).
    #[arg(long)]
    pub full_decode_every: Option<u32>,
    /// The measured window (20, 20s, 500ms).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Sending before the window.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Receiving after the last send.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub drain: Duration,
    /// Bots connected per second at most.
    #[arg(long, default_value_t = 500.0)]
    pub connect_rate: f64,
    /// Bot threads (0: one per CPU this process may use).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Seeds send phases and message bodies.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// A scenario with this command line's overrides applied.
#[derive(Debug, Clone)]
pub enum Shape {
    /// `sfs`, `nettest`.
    Relay(RelayScenario),
    /// `hobo`, `teleport`, `arena`.
    Arena(ArenaScenario),
}

impl Shape {
    /// The scenario for the engine.
    pub fn into_scenario(self) -> Arc<dyn Scenario> {
        match self {
            Shape::Relay(relay) => Arc::new(relay),
            Shape::Arena(arena) => Arc::new(arena),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            Shape::Relay(relay) => &relay.name,
            Shape::Arena(arena) => &arena.name,
        }
    }

    /// Bots in all.
    pub fn players(&self) -> usize {
        match self {
            Shape::Relay(relay) => relay.players(),
            Shape::Arena(arena) => arena.players,
        }
    }

    /// Rooms.
    pub fn rooms(&self) -> usize {
        match self {
            Shape::Relay(relay) => relay.rooms,
            Shape::Arena(arena) => arena.rooms,
        }
    }

    /// The room kind.
    pub fn room_kind(&self) -> &'static str {
        match self {
            Shape::Relay(_) => "relay",
            Shape::Arena(_) => "arena",
        }
    }

    /// The bots' flags that reproduce this shape.
    pub fn flags(&self) -> Vec<String> {
        let mut flags = vec!["--rooms".to_string(), self.rooms().to_string()];
        match self {
            Shape::Relay(relay) => {
                flags.extend([
                    "--players-per-room".into(),
                    relay.players_per_room.to_string(),
                    "--rate".into(),
                    relay.rate_hz.to_string(),
                    "--channel".into(),
                    relay.channel.to_string(),
                ]);
                if let Body::Padded(size) = relay.body {
                    flags.extend(["--size".into(), size.to_string()]);
                }
            }
            Shape::Arena(arena) => flags.extend([
                "--players".into(),
                arena.players.to_string(),
                "--input-interval".into(),
                format!("{}ms", arena.input_interval.as_secs_f64() * 1e3),
                "--full-decode-every".into(),
                arena.full_decode_every.to_string(),
            ]),
        }
        flags
    }
}

impl ScenarioArgs {
    /// The named scenario with this command line's overrides.
    pub fn scenario(&self, name: &str) -> anyhow::Result<Shape> {
        if let Some(mut scenario) = RelayScenario::by_name(name) {
            if self.players.is_some()
                || self.input_interval.is_some()
                || self.full_decode_every.is_some()
            {
                bail!(
                    "--players, --input-interval and --full-decode-every are for the arena scenarios; {name} takes --rooms and --players-per-room"
                );
            }
            if let Some(rooms) = self.rooms {
                scenario.rooms = rooms;
            }
            if let Some(players) = self.players_per_room {
                scenario.players_per_room = players;
            }
            if let Some(rate) = self.rate {
                scenario.rate_hz = rate;
            }
            if let Some(channel) = self.channel {
                scenario.channel = channel;
            }
            if let Some(size) = self.size {
                scenario.body = Body::Padded(size);
            }
            return Ok(Shape::Relay(scenario));
        }
        let Some(mut scenario) = ArenaScenario::by_name(name) else {
            bail!(
                "unknown scenario {name:?}: {}",
                tickwire_bots::scenario::NAMES.join(", ")
            );
        };
        if self.players_per_room.is_some()
            || self.rate.is_some()
            || self.channel.is_some()
            || self.size.is_some()
        {
            bail!(
                "--players-per-room, --rate, --channel and --size are for the relay scenarios; {name} takes --players, --rooms and --input-interval"
            );
        }
        if let Some(rooms) = self.rooms {
            scenario.rooms = rooms;
        }
        if let Some(players) = self.players {
            scenario.players = players;
        }
        if let Some(interval) = self.input_interval {
            scenario.input_interval = interval;
        }
        if let Some(every) = self.full_decode_every {
            scenario.full_decode_every = every;
        }
        Ok(Shape::Arena(scenario))
    }

    /// The engine's configuration against `server`.
    pub fn run_config(&self, server: &str) -> RunConfig {
        RunConfig {
            server: server.to_string(),
            transport: self.transport,
            warmup: self.warmup,
            duration: self.duration,
            drain: self.drain,
            connect_rate: self.connect_rate,
            threads: self.threads,
            seed: self.seed,
            server_kind: self.against,
            ..RunConfig::default()
        }
    }
}

/// `tickwire bots`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BotsArgs {
    /// The server's HTTP address.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// sfs, nettest, hobo, teleport or arena.
    #[arg(long)]
    pub scenario: String,
    /// The scenario and pacing.
    #[command(flatten)]
    pub run: ScenarioArgs,
    /// Print one JSON object instead of a table (and no progress display).
    #[arg(long)]
    pub json: bool,
    /// With --json: also print `{"event":"measuring"}` and `{"event":"draining"}` lines as
    /// the window opens and closes (what `tickwire bench` listens for).
    #[arg(long, hide = true)]
    pub events: bool,
}

/// The live display: phase, bots connected, packets per second each way, mean RTT.
struct Display {
    bar: Option<ProgressBar>,
    events: bool,
    players: usize,
    phase: Phase,
    last: Option<(Instant, LiveSnapshot)>,
}

impl Observer for Display {
    fn phase(&mut self, phase: Phase) {
        self.phase = phase;
        if self.events {
            let name = match phase {
                Phase::Connecting => "connecting",
                Phase::Warmup => "warmup",
                Phase::Measuring => "measuring",
                Phase::Draining => "draining",
                Phase::Done => "done",
            };
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{{\"event\":\"{name}\"}}");
            let _ = stdout.flush();
        }
    }

    fn progress(&mut self, live: &LiveSnapshot) {
        let Some(bar) = &self.bar else {
            return;
        };
        let now = Instant::now();
        let (out_pps, in_pps) = match self.last {
            Some((at, last)) if now > at => {
                let seconds = (now - at).as_secs_f64();
                (
                    (live.datagrams_out - last.datagrams_out) as f64 / seconds,
                    (live.datagrams_in - last.datagrams_in) as f64 / seconds,
                )
            }
            _ => (0.0, 0.0),
        };
        if self
            .last
            .is_none_or(|(at, _)| now - at >= Duration::from_millis(500))
        {
            self.last = Some((now, *live));
            let rtt = live.rtt.map_or_else(
                || "-".to_string(),
                |rtt| format!("{:.1} ms", rtt.as_secs_f64() * 1e3),
            );
            bar.set_message(format!(
                "{:?}: connected {}/{} (failed {}, dropped {}), out {:.0} pkt/s, in {:.0} pkt/s, rtt {rtt}",
                self.phase,
                live.connected,
                self.players,
                live.connect_failed,
                live.disconnects,
                out_pps,
                in_pps,
            ));
        }
        bar.tick();
    }
}

/// Runs `tickwire bots`; an error (bots that failed to connect) exits non-zero.
pub fn run(args: &BotsArgs) -> anyhow::Result<()> {
    raise_fd_limit();
    let scenario = args.run.scenario(&args.scenario)?;
    let players = scenario.players();
    let config = args.run.run_config(&args.server);
    let bar = (!args.json).then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar
    });
    let mut display = Display {
        bar,
        events: args.json && args.events,
        players,
        phase: Phase::Connecting,
        last: None,
    };
    let result = engine::run(&config, scenario.into_scenario(), &mut display);
    if let Some(bar) = &display.bar {
        bar.finish_and_clear();
    }
    let report = result.context("the run produced no figures")?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// The report as a table.
pub fn render(report: &RunReport) -> String {
    let d = &report.delivery;
    let mut out = format!(
        "{} over {}: {} bots in {} rooms ({}-{} per room), {:.0} s measured after {:.0} s warm-up\n\n",
        report.scenario,
        report.transport,
        report.players,
        report.rooms,
        report.room_size_min,
        report.room_size_max,
        report.duration_s,
        report.warmup_s,
    );
    let mut row = |name: &str, value: String| out.push_str(&format!("{name:<34} {value}\n"));
    // Arena bots count their inputs, confirmed by the snapshots; relay bots each message at
    // each member.
    let (sent, expected, counted, latency) = match report.arena {
        Some(_) => (
            "inputs sent",
            "confirmations expected",
            "inputs confirmed",
            "input → snapshot p50 / p90 / p99 / max",
        ),
        None => (
            "messages sent",
            "deliveries expected",
            "deliveries counted",
            "latency p50 / p90 / p99 / max",
        ),
    };
    row(sent, d.sent.to_string());
    row(expected, d.expected.to_string());
    row(
        counted,
        format!("{} ({:.0}/s)", d.delivered, report.delivered_per_s),
    );
    row(
        "lost",
        format!(
            "{} ({:.4} %)",
            d.lost,
            100.0 * d.lost as f64 / d.expected.max(1) as f64
        ),
    );
    row(
        "duplicates / reordered",
        format!("{} / {}", d.duplicates, d.reordered),
    );
    row(
        latency,
        format!(
            "{:.2} / {:.2} / {:.2} / {:.2} ms",
            d.latency_p50_ms, d.latency_p90_ms, d.latency_p99_ms, d.latency_max_ms
        ),
    );
    row(
        "rtt p50 / p99",
        format!(
            "{:.2} / {:.2} ms ({} samples)",
            report.rtt_p50_ms, report.rtt_p99_ms, report.rtt_samples
        ),
    );
    row(
        "bots' packets out / in",
        format!("{:.0} / {:.0} per s", report.bot_out_pps, report.bot_in_pps),
    );
    row(
        "disconnects",
        match &report.first_disconnect {
            Some(first) => format!("{} (first: {first})", report.disconnects),
            None => report.disconnects.to_string(),
        },
    );
    row(
        "foreign messages / send errors",
        format!("{} / {}", report.foreign_messages, report.send_errors),
    );
    row(
        "bots' CPU / RSS",
        format!(
            "{:.2} s / {:.1} MB",
            report.bots_cpu_s,
            report.bots_rss_bytes as f64 / 1e6
        ),
    );
    if let Some(arena) = &report.arena {
        row(
            "snapshots received",
            format!(
                "{:.0}/s, {:.0} bytes each; {} decoded in full",
                arena.snapshots_per_s, arena.snapshot_bytes_mean, arena.full_decodes
            ),
        );
        row(
            "decode errors",
            match &arena.first_decode_error {
                Some(first) => format!("{} (first: {first})", arena.decode_errors),
                None => arena.decode_errors.to_string(),
            },
        );
        row(
            "kills / deaths / respawns heard",
            format!("{} / {} / {}", arena.kills, arena.deaths, arena.respawns),
        );
        if arena.teleport.sent > 0 {
            let (confirm, seen) = (&arena.teleport, &arena.teleport_seen);
            row(
                "warps requested / confirmed / seen",
                format!(
                    "{} / {} / {}",
                    confirm.sent, confirm.delivered, seen.delivered
                ),
            );
            row(
                "warp → confirmation p50 / p99 / max",
                format!(
                    "{:.2} / {:.2} / {:.2} ms",
                    confirm.latency_p50_ms, confirm.latency_p99_ms, confirm.latency_max_ms
                ),
            );
            row(
                "warp → in zone p50 / p99 / max",
                format!(
                    "{:.2} / {:.2} / {:.2} ms",
                    seen.latency_p50_ms, seen.latency_p99_ms, seen.latency_max_ms
                ),
            );
        }
    }
    out
}

/// Thousands of sockets: lift the soft descriptor limit to the hard one.
pub fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_or_without_a_unit() {
        assert_eq!(parse_duration("20"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1").is_err());
    }
}
