//! `tickwire bench soak`: players arriving and leaving every second for as long as asked, on
//! all three transports, in arena and chat rooms (rooms created and disposed as crowds come
//! and go, stats written as arena players leave), some of them reconnecting mid-stay as after
//! a network change. The server's resident memory, descriptors, threads, runtime tasks and
//! tick p99 are sampled at a fixed interval and printed as a series.
//!
//! Flat means: the server's anonymous memory (`RssAnon`: its heap, stacks, buffers and the
//! embedded SQLite's page cache) grows at most `--max-rss-slope` MB per hour after the
//! warm-up (least squares over the samples); SQLite's memory stays within the cache budget
//! the server was given (`--sqlite-cache-mib`); and once the last player has left, the
//! server's descriptors and tasks are back where they were before the first one came.
//!
//! SQLite's page cache grows by design until it holds its budget: every visit adds rows
//! (about 3 MB of database an hour here), and the cache keeps the pages it has read. At the
//! server's default (16 MiB, 2 MiB a connection) the hour's churn fills the writer's share
//! only after about 40 minutes, and until then the cache, and the allocator's pages around
//! its allocations, look like growth. So the soak gives its server a small budget by default,
//! full within the warm-up: what grows after it is not the cache. SQLite's own count
//! (`tickwire_store_sqlite_memory_bytes`) is sampled and its slope reported, and so is the
//! anonymous memory less it, and the whole RSS, which also counts the executable's own
//! pages, mapped from the file as code paths run for the first time (an hour's churn
//! reaches cold paths late): clean, shared, bounded by the binary and reclaimable by the
//! kernel, they are no leak.
//!
//! The server runs as a child process pinned to one CPU; the players are the SDK's own
//! sessions in this process, pinned to another.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use rand::SeedableRng as _;
use serde::Serialize;
use tickwire_arena::InputCommand;
use tickwire_arena::messages::{ClientInput, ClientMessage, INPUT, RELIABLE};
use tickwire_bots::proc_stat;
use tickwire_client::{ConnectOptions, MatchmakeRequest, Session, SessionEvent, Transport};
use tokio::time::{Instant, MissedTickBehavior, interval, sleep_until};

use super::load::{ServerProcess, bucket_difference, buckets, metric, quantile, scrape};
use super::raw::pin_current_thread;
use crate::bots::parse_duration;

/// What SQLite holds beyond its page cache budget: schemas, prepared statements and each
/// connection's own state (about 0.3 MB for the server's pool, measured).
const SQLITE_BEYOND_CACHE: u64 = 4 << 20;
/// Descriptors or tasks more than this above the idle server's, once everyone has left,
/// count as growth (an HTTP keep-alive or a scrape in flight may hold one for a moment).
const SETTLED_SLACK: u64 = 2;
/// How long the server gets, after the last player left, to close what they held: the
/// WebSocket close handshakes, the WebTransport sessions' drains, the empty rooms'
/// disposal (the bench server's 5 s) and a memory trim.
const SETTLE: Duration = Duration::from_secs(12);

/// `tickwire bench soak`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// How long players keep arriving (`3600s` for the hour).
    #[arg(long, default_value = "3600s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Time between two samples of the server.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub sample: Duration,
    /// Samples before this are the warm-up: shown, but not in the slope. Long enough for
    /// SQLite's page cache (`--sqlite-cache-mib`) to fill.
    #[arg(long, default_value = "600s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Players arriving per second, in turn over UDP, WebSocket and WebTransport, every other
    /// one to an arena room and the rest to a chat room.
    #[arg(long, default_value_t = 10.0)]
    pub joins_per_second: f64,
    /// Shortest stay.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub min_stay: Duration,
    /// Longest stay (drawn evenly between the two).
    #[arg(long, default_value = "25s", value_parser = parse_duration)]
    pub max_stay: Duration,
    /// One player in this many reconnects halfway through their stay.
    #[arg(long, default_value_t = 5)]
    pub reconnect_every: u32,
    /// Flat means anonymous memory (`RssAnon`) grows at most this many MB per hour after the
    /// warm-up.
    #[arg(long, default_value_t = 1.0)]
    pub max_rss_slope: f64,
    /// The server's SQLite page cache (`store.sqlite_cache_mib`): what SQLite's memory is to
    /// stay within. Small, so that it is full within the warm-up (the module's docs).
    #[arg(long, default_value_t = 2)]
    pub sqlite_cache_mib: u32,
    /// Seeds stays, transports and who reconnects.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object instead of the series and a summary.
    #[arg(long)]
    pub json: bool,
    /// CPU the server is pinned to.
    #[arg(long, default_value_t = 1)]
    pub server_cpu: usize,
    /// CPU the players are pinned to.
    #[arg(long, default_value_t = 0)]
    pub players_cpu: usize,
}

/// The server at one moment.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SoakSample {
    /// Seconds since the first player arrived.
    pub at_s: f64,
    /// Resident set size.
    pub rss_bytes: u64,
    /// Of it, anonymous memory (`RssAnon`): what a leak would grow.
    pub anon_bytes: u64,
    /// Heap in use (`tickwire_heap_bytes`): growing with the RSS is a leak, the RSS alone
    /// growing is the allocator's.
    pub heap_bytes: u64,
    /// SQLite's own allocations (`tickwire_store_sqlite_memory_bytes`), outside the heap figure
    /// but inside the anonymous one: its page cache filling as the database grows.
    pub sqlite_bytes: u64,
    /// Open file descriptors.
    pub fds: u64,
    /// Threads.
    pub threads: u64,
    /// Tasks alive on the server's runtime (`tickwire_runtime_tasks`).
    pub tasks: u64,
    /// Players connected.
    pub players: u64,
    /// Rooms open.
    pub rooms: u64,
    /// Arena rooms' tick duration p99 since the previous sample, in milliseconds.
    pub tick_p99_ms: f64,
}

/// What the players did, counted as they went.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Churn {
    /// Players who got in, by transport.
    pub joined: BTreeMap<&'static str, u64>,
    /// Players who left when their stay was over.
    pub left: u64,
    /// Reconnections asked for (a network change) and completed.
    pub reconnected: u64,
    /// Chat lines and arena inputs sent.
    pub messages_sent: u64,
    /// Players who could not get in, came back, or stay, by what went wrong.
    pub failures: BTreeMap<String, u64>,
}

/// The figures, one JSON object with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// The samples, in order.
    pub samples: Vec<SoakSample>,
    /// The idle server before the first player.
    pub idle: SoakSample,
    /// The server once the last player had left and [`SETTLE`] had passed.
    pub settled: SoakSample,
    /// Anonymous memory's growth after the warm-up, least squares, MB per hour: what
    /// `--max-rss-slope` bounds.
    pub anon_slope_mb_per_hour: f64,
    /// Anonymous memory less SQLite's count, over the same samples.
    pub anon_without_sqlite_slope_mb_per_hour: f64,
    /// SQLite's memory's growth over the same samples.
    pub sqlite_slope_mb_per_hour: f64,
    /// The most SQLite held at any sample, bytes.
    pub sqlite_peak_bytes: u64,
    /// The whole resident set's growth over the same samples (the executable's pages
    /// included).
    pub rss_slope_mb_per_hour: f64,
    /// The heap in use's growth over the same samples: what of the RSS's is live data.
    pub heap_slope_mb_per_hour: f64,
    /// The players' side.
    pub churn: Churn,
    /// Whether memory, descriptors and tasks held flat.
    pub flat: bool,
    /// Why not, when not.
    pub not_flat_because: Vec<String>,
}

/// Runs the soak.
pub fn run(args: &SoakArgs) -> anyhow::Result<SoakReport> {
    crate::bots::raise_fd_limit();
    anyhow::ensure!(
        args.joins_per_second > 0.0 && args.joins_per_second <= 1_000.0,
        "--joins-per-second must be above 0 and at most 1000"
    );
    anyhow::ensure!(
        args.min_stay <= args.max_stay && !args.max_stay.is_zero(),
        "--min-stay must not exceed --max-stay, which must be above 0"
    );
    anyhow::ensure!(!args.sample.is_zero(), "--sample must be above 0");
    let server = ServerProcess::start(
        args.server_cpu,
        &[(
            "TICKWIRE_STORE__SQLITE_CACHE_MIB".to_owned(),
            args.sqlite_cache_mib.to_string(),
        )],
    )?;
    pin_current_thread(args.players_cpu).context("pinning the players")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(soak(args, &server))
}

async fn soak(args: &SoakArgs, server: &ServerProcess) -> anyhow::Result<SoakReport> {
    let url: Arc<str> = format!("http://{}", server.http).into();
    let mut sampler = Sampler::new(server.pid, &server.admin)?;
    let idle = sampler.sample(0.0)?;
    let churn = Arc::new(Mutex::new(Churn::default()));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let started = Instant::now();
    let ends = started + args.duration;
    let mut arrivals = interval(Duration::from_secs_f64(1.0 / args.joins_per_second));
    arrivals.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut samples_due = interval(args.sample);
    samples_due.reset();
    let mut players = tokio::task::JoinSet::new();
    let mut samples = Vec::new();
    let mut index: u64 = 0;
    loop {
        tokio::select! {
            _ = arrivals.tick(), if Instant::now() < ends => {
                let plan = Plan::draw(args, index, &mut rng);
                players.spawn(play(url.clone(), plan, churn.clone()));
                index += 1;
            }
            _ = samples_due.tick() => {
                let sample = sampler.sample(started.elapsed().as_secs_f64())?;
                if !args.json {
                    eprintln!("{}", render_sample(&sample));
                }
                samples.push(sample);
                if Instant::now() >= ends {
                    break;
                }
            }
            Some(_) = players.join_next() => {}
        }
    }
    // The last arrivals finish their stays; then the server gets its time to settle.
    while players.join_next().await.is_some() {}
    tokio::time::sleep(SETTLE).await;
    let settled = sampler.sample(started.elapsed().as_secs_f64())?;
    let churn = churn.lock().expect("churn tally").clone();
    let warm = |figure: fn(&SoakSample) -> u64| -> Vec<(f64, f64)> {
        samples
            .iter()
            .filter(|sample| sample.at_s >= args.warmup.as_secs_f64())
            .map(|sample| (sample.at_s, figure(sample) as f64))
            .collect()
    };
    let mb_per_hour = |series: &[(f64, f64)]| slope(series) * 3600.0 / 1e6;
    let warm_anon = warm(|sample| sample.anon_bytes);
    let anon_slope_mb_per_hour = mb_per_hour(&warm_anon);
    let anon_without_sqlite_slope_mb_per_hour = mb_per_hour(&warm(|sample| {
        sample.anon_bytes.saturating_sub(sample.sqlite_bytes)
    }));
    let rss_slope_mb_per_hour = mb_per_hour(&warm(|sample| sample.rss_bytes));
    let heap_slope_mb_per_hour = mb_per_hour(&warm(|sample| sample.heap_bytes));
    let sqlite_slope_mb_per_hour = mb_per_hour(&warm(|sample| sample.sqlite_bytes));
    let sqlite_peak_bytes = samples
        .iter()
        .chain([&settled])
        .map(|sample| sample.sqlite_bytes)
        .max()
        .unwrap_or(0);
    let mut not_flat_because = Vec::new();
    if warm_anon.len() < 3 {
        not_flat_because.push(format!(
            "only {} samples after the warm-up: too few for a slope",
            warm_anon.len()
        ));
    }
    if anon_slope_mb_per_hour > args.max_rss_slope {
        not_flat_because.push(format!(
            "anonymous memory grew {anon_slope_mb_per_hour:.2} MB/h after the warm-up (at most {})",
            args.max_rss_slope
        ));
    }
    let sqlite_bound = (u64::from(args.sqlite_cache_mib) << 20) + SQLITE_BEYOND_CACHE;
    if sqlite_peak_bytes > sqlite_bound {
        not_flat_because.push(format!(
            "SQLite held {sqlite_peak_bytes} bytes, beyond its {} MiB cache and {} MiB more",
            args.sqlite_cache_mib,
            SQLITE_BEYOND_CACHE >> 20
        ));
    }
    for (what, before, after) in [
        ("descriptors", idle.fds, settled.fds),
        ("tasks", idle.tasks, settled.tasks),
    ] {
        if after > before + SETTLED_SLACK {
            not_flat_because.push(format!(
                "{what}: {after} once everyone had left, {before} before anyone came"
            ));
        }
    }
    Ok(SoakReport {
        samples,
        idle,
        settled,
        anon_slope_mb_per_hour,
        anon_without_sqlite_slope_mb_per_hour,
        sqlite_slope_mb_per_hour,
        sqlite_peak_bytes,
        rss_slope_mb_per_hour,
        heap_slope_mb_per_hour,
        churn,
        flat: not_flat_because.is_empty(),
        not_flat_because,
    })
}

/// Least-squares slope of `y` over `x` (0 for fewer than two points).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mean_x = points.iter().map(|(x, _)| x).sum::<f64>() / n;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / n;
    let covariance: f64 = points
        .iter()
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let variance: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    if variance > 0.0 {
        covariance / variance
    } else {
        0.0
    }
}

/// One player's visit, drawn up front from the seeded generator.
struct Plan {
    name: String,
    transport: Transport,
    arena: bool,
    stay: Duration,
    /// Into the stay, when this player's network changes and they come back.
    reconnect_after: Option<Duration>,
}

impl Plan {
    fn draw(args: &SoakArgs, index: u64, rng: &mut impl rand::Rng) -> Self {
        let transport = [Transport::Udp, Transport::Ws, Transport::Wt][(index % 3) as usize];
        let stay = args.min_stay + (args.max_stay - args.min_stay).mul_f64(rng.random::<f64>());
        let reconnects = args.reconnect_every > 0 && rng.random_range(0..args.reconnect_every) == 0;
        Self {
            name: format!("soak{index}"),
            transport,
            arena: index.is_multiple_of(2),
            stay,
            reconnect_after: reconnects.then_some(stay / 2),
        }
    }
}

/// A player's whole visit: matchmake, connect, send (arena inputs every 100 ms and a chat
/// line every 2 s), perhaps reconnect, leave.
async fn play(url: Arc<str>, plan: Plan, churn: Arc<Mutex<Churn>>) {
    let fail = |why: String| {
        *churn
            .lock()
            .expect("churn tally")
            .failures
            .entry(why)
            .or_default() += 1;
    };
    let kind = if plan.arena { "arena" } else { "chat" };
    let request = MatchmakeRequest::kind(kind).named(plan.name.clone());
    let mut session =
        match Session::start(&url, request, plan.transport, ConnectOptions::default()).await {
            Ok(session) => session,
            Err(error) => return fail(format!("join over {}: {error}", plan.transport.name())),
        };
    *churn
        .lock()
        .expect("churn tally")
        .joined
        .entry(plan.transport.name())
        .or_default() += 1;
    let arrived = Instant::now();
    let leave_at = arrived + plan.stay;
    let mut reconnect_at = plan.reconnect_after.map(|after| arrived + after);
    let mut inputs = interval(Duration::from_millis(100));
    let mut sequence: u16 = 0;
    loop {
        tokio::select! {
            event = session.next_event() => match event {
                SessionEvent::Message { .. } | SessionEvent::Reconnected { .. } => {}
                SessionEvent::Ended(why) => return fail(format!("ended early: {why}")),
            },
            _ = inputs.tick() => {
                sequence = sequence.wrapping_add(1);
                let Some((channel, message)) = next_message(plan.arena, sequence) else {
                    continue;
                };
                if let Err(error) = session.send(channel, message) {
                    return fail(format!("send: {error}"));
                }
                churn.lock().expect("churn tally").messages_sent += 1;
            }
            () = sleep_until(reconnect_at.unwrap_or(leave_at)), if reconnect_at.is_some() => {
                reconnect_at = None;
                match session.reconnect().await {
                    Ok(_) => churn.lock().expect("churn tally").reconnected += 1,
                    Err(error) => return fail(format!("reconnect: {error}")),
                }
            }
            () = sleep_until(leave_at) => {
                session.close().await;
                churn.lock().expect("churn tally").left += 1;
                return;
            }
        }
    }
}

/// What a player sends on its `sequence`th 100 ms: an arena player an input every time and
/// a chat line every 20th; a chat player a line every 20th.
fn next_message(arena: bool, sequence: u16) -> Option<(u8, Bytes)> {
    let chat = sequence.is_multiple_of(20);
    if !arena {
        return chat.then(|| (0, Bytes::from(format!("line {sequence}"))));
    }
    if chat {
        let message = ClientMessage::Chat {
            text: format!("line {sequence}"),
        };
        let bytes = tickwire_wire::encode_to_vec(&message).ok()?;
        return Some((RELIABLE, bytes.into()));
    }
    let turn = f32::from(sequence % 64) / 64.0 * std::f32::consts::TAU - std::f32::consts::PI;
    let mut input = ClientInput::new(None);
    input.push(InputCommand {
        sequence,
        move_x: turn.cos(),
        move_y: turn.sin(),
        aim: turn,
        buttons: if sequence.is_multiple_of(10) {
            InputCommand::FIRE
        } else {
            0
        },
    });
    let bytes = tickwire_wire::encode_to_vec(&input).ok()?;
    Some((INPUT, bytes.into()))
}

/// Reads the server's `/proc` and `/metrics`.
struct Sampler {
    pid: u32,
    /// The operator listener, where `/metrics` is.
    admin: String,
    /// The arena tick histogram at the previous sample.
    ticks: Vec<(f64, f64)>,
}

impl Sampler {
    fn new(pid: u32, admin: &str) -> anyhow::Result<Self> {
        let text = scrape(admin).context("scraping /metrics")?;
        Ok(Self {
            pid,
            admin: admin.to_string(),
            ticks: buckets(&text, "tickwire_tick_duration_seconds_bucket", "arena"),
        })
    }

    fn sample(&mut self, at_s: f64) -> anyhow::Result<SoakSample> {
        let process = proc_stat::sample(self.pid).context("reading the server's /proc")?;
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .context("reading the server's descriptors")?
            .count() as u64;
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        let threads = status
            .lines()
            .find_map(|line| line.strip_prefix("Threads:"))
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or(0);
        let text = scrape(&self.admin).context("scraping /metrics")?;
        let sum = |prefix: &str| -> f64 {
            text.lines()
                .filter(|line| line.starts_with(prefix))
                .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        let ticks = buckets(&text, "tickwire_tick_duration_seconds_bucket", "arena");
        let window = bucket_difference(&self.ticks, &ticks);
        self.ticks = ticks;
        Ok(SoakSample {
            at_s,
            rss_bytes: process.rss_bytes,
            anon_bytes: process.anon_bytes,
            heap_bytes: metric(&text, "tickwire_heap_bytes").unwrap_or(0.0) as u64,
            sqlite_bytes: metric(&text, "tickwire_store_sqlite_memory_bytes").unwrap_or(0.0) as u64,
            fds,
            threads,
            tasks: metric(&text, "tickwire_runtime_tasks").unwrap_or(0.0) as u64,
            players: sum("tickwire_players{") as u64,
            rooms: sum("tickwire_rooms{") as u64,
            tick_p99_ms: quantile(&window, 0.99) * 1e3,
        })
    }
}

fn render_sample(sample: &SoakSample) -> String {
    format!(
        "{:>7.0} s  rss {:>7.1} MB  anon {:>7.1} MB  heap {:>7.1} MB  sqlite {:>6.1} MB  fds {:>5}  threads {:>3}  tasks {:>5}  players {:>5}  rooms {:>4}  tick p99 {:>6.2} ms",
        sample.at_s,
        sample.rss_bytes as f64 / 1e6,
        sample.anon_bytes as f64 / 1e6,
        sample.heap_bytes as f64 / 1e6,
        sample.sqlite_bytes as f64 / 1e6,
        sample.fds,
        sample.threads,
        sample.tasks,
        sample.players,
        sample.rooms,
        sample.tick_p99_ms
    )
}

/// The summary after the series.
pub fn render(report: &SoakReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("idle     {}\n", render_sample(&report.idle)));
    out.push_str(&format!("settled  {}\n", render_sample(&report.settled)));
    let churn = &report.churn;
    out.push_str(&format!(
        "players joined {:?}, left {}, reconnected {}, messages sent {}\n",
        churn.joined, churn.left, churn.reconnected, churn.messages_sent
    ));
    for (why, count) in &churn.failures {
        out.push_str(&format!("  {count} × {why}\n"));
    }
    out.push_str(&format!(
        "after the warm-up: anonymous memory {:+.2} MB/h (less SQLite's {:+.2}, whole RSS {:+.2}, heap in use {:+.2}, SQLite {:+.2}, SQLite at most {:.1} MB)\n",
        report.anon_slope_mb_per_hour,
        report.anon_without_sqlite_slope_mb_per_hour,
        report.rss_slope_mb_per_hour,
        report.heap_slope_mb_per_hour,
        report.sqlite_slope_mb_per_hour,
        report.sqlite_peak_bytes as f64 / 1e6
    ));
    if report.flat {
        out.push_str("flat: memory, descriptors and tasks\n");
    } else {
        for why in &report.not_flat_because {
            out.push_str(&format!("NOT FLAT: {why}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_is_least_squares_per_second() {
        let points: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 3.0 * x as f64 + 7.0)).collect();
        assert!((slope(&points) - 3.0).abs() < 1e-9);
        assert_eq!(slope(&[(1.0, 5.0)]), 0.0);
        assert_eq!(slope(&[(1.0, 5.0), (1.0, 9.0)]), 0.0);
    }

    #[test]
    fn every_message_a_player_sends_is_one_its_room_reads() {
        for sequence in 0..200u16 {
            if let Some((channel, bytes)) = next_message(true, sequence) {
                if channel == INPUT {
                    tickwire_wire::decode_exact::<ClientInput>(&bytes).expect("an input");
                } else {
                    tickwire_wire::decode_exact::<ClientMessage>(&bytes).expect("a chat line");
                }
            }
            if let Some((channel, bytes)) = next_message(false, sequence) {
                assert_eq!(channel, 0);
                assert!(std::str::from_utf8(&bytes).is_ok());
            }
        }
    }
}
