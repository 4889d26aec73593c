//! The engine: connects a scenario's bots at a bounded rate, starts them on one schedule,
//! measures a window, drains, and reports.
//!
//! # Threads and I/O
//!
//! Bots are split into groups, one per thread (default: one per CPU the process may run
//! on, so one when pinned with `taskset -c 0`). Each group thread runs a current-thread
//! tokio runtime:
//!
//! - **UDP** ([`udp`]): one task drives every bot of the group. Each bot has its own
//!   socket (the server tells clients apart by address) and a sans-IO
//!   [`tickwire_proto::Client`]; all of the group's sockets sit in one epoll set that a
//!   1 ms tick asks without waiting, and the task receives only from the sockets it names,
//!   each with one `recvmmsg` ([`BatchSocket::try_recv_batch`]) into the group's single
//!   receive batch. Nothing sleeps on the sockets, so the server's `sendmmsg` never pays
//!   for waking a bot (on loopback the sender pays for the receiver's wake-up; remote
//!   players would pay their own); bots add at most 1 ms to what they measure. The same
//!   tick paces sends and protocol timers; each bot's datagrams go out with one
//!   `sendmmsg` from the group's single send batch. Buffers exist once per group, not per
//!   bot.
//! - **WebTransport** ([`wt`]): one task drives every bot of the group as the server's
//!   `WtLinks` drives its sessions: each bot is a sans-IO `quinn-proto` client connection
//!   with its HTTP/3 session on top, hundreds share one socket and its QUIC endpoint, and
//!   the same 1 ms tick (never sleeping on a socket) reads with `recvmmsg`, runs QUIC's
//!   timers and due sends from one timer heap, and sends with `sendmmsg`. (A `wtransport`
//!   client per bot, a quinn connection with its tokio tasks each, filled its core with
//!   1,000 bots at 1.5–2.3 times the server's CPU, and each got 15 of 60 snapshots a
//!   second.)
//! - **WebSocket** ([`ws_bulk`]): one task drives every bot of the group as the UDP one
//!   does: each bot's non-blocking TCP socket sits in the group's epoll set, asked
//!   without waiting on the same 1 ms tick; reads go to one group scratch buffer, frames
//!   are parsed with `tickwire_proto::websocket`, and each bot's queued (masked) frames
//!   leave with one `write` per tick. (A task per bot around a [`tickwire_client::Link`],
//!   [`ws`], still serves `wss` and the Colyseus bots; for plain WebSocket it cost 1.16–1.18
//!   times the server's CPU at 1,500 players.)
//! - **Colyseus** ([`colyseus`]): the same task per bot, speaking Colyseus 0.18's
//!   matchmaking and room protocol instead of tickwire's ([`ServerKind::Colyseus`]), so
//!   that the same load tool measures a Colyseus server beside tickwire (issue 17).
//!
//! # Rooms
//!
//! Bot `b` goes to room `b % rooms`: the first bot of each room matchmakes with
//! `"create": true` (a new room, whatever is open) and the others join that room by id, so
//! a run gets exactly the rooms its scenario names on any server whose capacity is large
//! enough. A single-room scenario joins or creates by kind.
//!
//! # Schedule and measurement
//!
//! What a bot sends and how it counts what arrives is its scenario's
//! [`BotLogic`](crate::scenario::BotLogic); the engine calls it when a send is due and for
//! every message. Load is open-loop: a bot sends on its schedule (random phase, fixed
//! period, no drift) whatever came back, and a late sender catches up by sending every due
//! message at once. Latency runs from the *scheduled* send time into the group's HDR
//! histograms, so time a message waited in the sender counts against the figure. What is
//! scheduled in the measured window is counted: expected versus delivered.
//!
//! [`BatchSocket::try_recv_batch`]: tickwire_net::udp::BatchSocket::try_recv_batch

mod colyseus;
mod ledger;
mod udp;
mod ws;
mod ws_bulk;
mod wt;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use tickwire_client::{MatchAnswer, MatchmakeRequest, Transport, matchmake};
use tokio::sync::{Notify, Semaphore, watch};

use crate::meter::{ArenaFigures, Meter};
use crate::plan::Plan;
use crate::proc_stat;
use crate::scenario::{Outbox, Scenario};
use crate::tally::Delivery;

/// How a run goes.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The server's HTTP address, `http://host:port`.
    pub server: String,
    /// UDP, WebSocket or WebTransport (`wss` is refused: the bots carry no certificate
    /// trust for it yet).
    pub transport: Transport,
    /// Sending before the measured window starts.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Receiving after the last send, for messages still in flight.
    pub drain: Duration,
    /// Bots connected per second at most (matchmaking plus handshake).
    pub connect_rate: f64,
    /// Bots connecting at once at most.
    pub connect_concurrency: usize,
    /// One bot's bound for matchmaking, and again for its handshake.
    pub connect_timeout: Duration,
    /// Group threads; 0 means one per CPU this process may run on.
    pub threads: usize,
    /// Seeds the send phases and message bodies.
    pub seed: u64,
    /// Which server the bots speak to: tickwire, or Colyseus (WebSocket only).
    pub server_kind: ServerKind,
}

/// The server the bots speak to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerKind {
    /// tickwire: its matchmaking, then its UDP, WebSocket or WebTransport protocol.
    #[default]
    Tickwire,
    /// A Colyseus 0.18 server (`bench/colyseus`): its matchmaking and room protocol over
    /// WebSocket, room kind named after the scenario ([`colyseus`] has the details).
    Colyseus,
}

impl ServerKind {
    /// The name used on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tickwire => "tickwire",
            Self::Colyseus => "colyseus",
        }
    }
}

impl std::str::FromStr for ServerKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "tickwire" => Ok(Self::Tickwire),
            "colyseus" => Ok(Self::Colyseus),
            other => Err(format!("unknown server {other:?} (tickwire or colyseus)")),
        }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            server: "http://127.0.0.1:8080".into(),
            transport: Transport::Udp,
            warmup: Duration::from_secs(3),
            duration: Duration::from_secs(20),
            drain: Duration::from_secs(2),
            connect_rate: 500.0,
            connect_concurrency: 64,
            connect_timeout: Duration::from_secs(10),
            threads: 0,
            seed: 1,
            server_kind: ServerKind::Tickwire,
        }
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Matchmaking and handshaking.
    Connecting,
    /// Every bot connected; sending, not yet counted.
    Warmup,
    /// The measured window.
    Measuring,
    /// Sends stopped; waiting for what is in flight.
    Draining,
    /// Over.
    Done,
}

/// Counters the groups keep current for a live display.
#[derive(Debug, Default)]
pub struct Live {
    connected: AtomicU64,
    connect_failed: AtomicU64,
    disconnects: AtomicU64,
    datagrams_out: AtomicU64,
    datagrams_in: AtomicU64,
    messages_out: AtomicU64,
    messages_in: AtomicU64,
    rtt_us_sum: AtomicU64,
    rtt_samples: AtomicU64,
}

/// A reading of [`Live`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveSnapshot {
    /// Bots connected.
    pub connected: u64,
    /// Bots that failed to connect.
    pub connect_failed: u64,
    /// Bots whose connection ended after it was made.
    pub disconnects: u64,
    /// UDP datagrams (UDP and WebTransport: QUIC packets) or WebSocket messages sent by all
    /// bots so far.
    pub datagrams_out: u64,
    /// Datagrams or WebSocket messages received.
    pub datagrams_in: u64,
    /// Stamped messages sent.
    pub messages_out: u64,
    /// Messages received.
    pub messages_in: u64,
    /// Mean round trip of the last samples, when any.
    pub rtt: Option<Duration>,
}

impl Live {
    /// The counters now.
    pub fn snapshot(&self) -> LiveSnapshot {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let samples = load(&self.rtt_samples);
        LiveSnapshot {
            connected: load(&self.connected),
            connect_failed: load(&self.connect_failed),
            disconnects: load(&self.disconnects),
            datagrams_out: load(&self.datagrams_out),
            datagrams_in: load(&self.datagrams_in),
            messages_out: load(&self.messages_out),
            messages_in: load(&self.messages_in),
            rtt: (samples > 0)
                .then(|| Duration::from_micros(load(&self.rtt_us_sum) / samples.max(1))),
        }
    }

    fn add(counter: &AtomicU64, value: u64) {
        if value > 0 {
            counter.fetch_add(value, Ordering::Relaxed);
        }
    }
}

/// What the run's owner hears while it runs (a progress display, a benchmark harness).
pub trait Observer {
    /// The run entered `phase`; called as the phase starts.
    fn phase(&mut self, phase: Phase);
    /// Every quarter second or so, the live counters.
    fn progress(&mut self, _live: &LiveSnapshot) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Observer for Quiet {
    fn phase(&mut self, _phase: Phase) {}
}

/// Why a run produced no figures.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No bot could connect: there is nothing to measure.
    #[error("{failed} of {players} bots failed to connect (first: {first})")]
    ConnectFailed {
        /// Bots that failed.
        failed: usize,
        /// Bots in the run.
        players: usize,
        /// The first failure's reason.
        first: String,
    },
    /// The configuration cannot run.
    #[error("{0}")]
    Config(String),
    /// A group thread failed.
    #[error("bot group failed: {0}")]
    Group(String),
}

/// A run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Scenario name.
    pub scenario: String,
    /// `udp`, `ws` or `wt`.
    pub transport: &'static str,
    /// `tickwire` or `colyseus`: the server the bots spoke to.
    pub server: &'static str,
    /// Bots connected and measured (the scenario's, less `connect_failed`).
    pub players: usize,
    /// Bots that could not connect; the run went on without them.
    pub connect_failed: u64,
    /// Why, grouped by reason (at most [`FAILURE_REASONS_KEPT`] reasons, then "other").
    pub connect_failures: Vec<ConnectFailure>,
    /// Rooms the bots landed in.
    pub rooms: usize,
    /// Fewest bots in one room.
    pub room_size_min: usize,
    /// Most bots in one room.
    pub room_size_max: usize,
    /// Seconds of warm-up.
    pub warmup_s: f64,
    /// Seconds measured.
    pub duration_s: f64,
    /// Deliveries of the window's messages.
    #[serde(flatten)]
    pub delivery: Delivery,
    /// `delivered / duration_s`.
    pub delivered_per_s: f64,
    /// Round trips sampled once a second per bot during the window (protocol acks over
    /// UDP, pings over WebSocket): median.
    pub rtt_p50_ms: f64,
    /// 99th percentile round trip.
    pub rtt_p99_ms: f64,
    /// Round-trip samples.
    pub rtt_samples: u64,
    /// Connections that ended before the run did.
    pub disconnects: u64,
    /// The first of those endings.
    pub first_disconnect: Option<String>,
    /// Messages that were not a bot's or came from another room.
    pub foreign_messages: u64,
    /// Messages the protocol refused to queue.
    pub send_errors: u64,
    /// UDP datagrams (UDP and WebTransport: QUIC packets) or WebSocket messages the bots
    /// sent in the window, per second.
    pub bot_out_pps: f64,
    /// Datagrams or WebSocket messages the bots received in the window, per second.
    pub bot_in_pps: f64,
    /// The bots' own CPU time in the window (all threads), seconds.
    pub bots_cpu_s: f64,
    /// How late due sends left the bots in the window (their schedule kept or not):
    /// median, ms.
    pub send_lag_p50_ms: f64,
    /// 99th percentile.
    pub send_lag_p99_ms: f64,
    /// Highest.
    pub send_lag_max_ms: f64,
    /// How long datagrams waited at the bots' sockets before the bots took them in
    /// (their receive pace kept or not): median, ms. Known where the kernel stamps
    /// arrivals (UDP bots against a server on this host); there, every latency is timed
    /// from a datagram's arrival, so this wait is not in them.
    pub recv_lag_p50_ms: Option<f64>,
    /// 99th percentile.
    pub recv_lag_p99_ms: Option<f64>,
    /// Highest.
    pub recv_lag_max_ms: Option<f64>,
    /// The bot process's RSS at the end of the window.
    pub bots_rss_bytes: u64,
    /// The arena scenarios' figures (snapshots, decoding, kills, warps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arena: Option<ArenaFigures>,
}

/// Bots that failed to connect for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectFailure {
    /// What failed (matchmaking, the handshake, a timeout), as the client said it.
    pub reason: String,
    /// Bots that failed so.
    pub bots: u64,
    /// The first of them, when a single bot failed (not a whole group).
    pub first_bot: Option<u32>,
}

/// Distinct failure reasons a report lists before lumping the rest together.
pub const FAILURE_REASONS_KEPT: usize = 8;

/// Counts failures by reason, keeping at most [`FAILURE_REASONS_KEPT`] distinct ones.
#[derive(Debug, Default)]
struct Failures {
    count: u64,
    by_reason: Vec<ConnectFailure>,
}

impl Failures {
    fn add(&mut self, bots: u64, bot: Option<u32>, reason: String) {
        self.count += bots;
        let reason = if self.by_reason.len() >= FAILURE_REASONS_KEPT
            && !self.by_reason.iter().any(|f| f.reason == reason)
        {
            "other reasons".to_string()
        } else {
            reason
        };
        match self.by_reason.iter_mut().find(|f| f.reason == reason) {
            Some(failure) => failure.bots += bots,
            None => self.by_reason.push(ConnectFailure {
                reason,
                bots,
                first_bot: bot,
            }),
        }
    }
}

#[derive(Debug, Clone)]
enum Command {
    Wait,
    Run(Arc<Plan>),
    Abort,
}

enum Report {
    Connected {
        bot: u32,
        room: u64,
    },
    /// A bot (or, with `None`, a whole group) could not connect.
    Failed {
        bot: Option<u32>,
        error: String,
    },
    Finished(Box<GroupResult>),
}

/// Counts a group keeps over the window.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    datagrams_out: u64,
    datagrams_in: u64,
    messages_out: u64,
    messages_in: u64,
}

impl Counts {
    /// Adds what these totals gained since `published` to the live counters.
    fn publish(&self, published: &mut Counts, live: &Live) {
        Live::add(
            &live.datagrams_out,
            self.datagrams_out - published.datagrams_out,
        );
        Live::add(
            &live.datagrams_in,
            self.datagrams_in - published.datagrams_in,
        );
        Live::add(
            &live.messages_out,
            self.messages_out - published.messages_out,
        );
        Live::add(&live.messages_in, self.messages_in - published.messages_in);
        *published = *self;
    }
}

struct GroupResult {
    meter: Meter,
    rtt_us: Histogram<u64>,
    window: Counts,
    disconnects: u64,
    first_disconnect: Option<String>,
    send_errors: u64,
}

/// What a group thread is given.
struct GroupSpec {
    index: usize,
    bots: Vec<u32>,
    config: RunConfig,
    scenario: Arc<dyn Scenario>,
    live: Arc<Live>,
    directory: Arc<RoomDirectory>,
    reports: mpsc::Sender<Report>,
    command: watch::Receiver<Command>,
}

impl GroupSpec {
    /// Bot `bot` could not connect: counted live and reported with `error`.
    fn connect_failed(&self, bot: u32, error: String) {
        Live::add(&self.live.connect_failed, 1);
        let _ = self.reports.send(Report::Failed {
            bot: Some(bot),
            error,
        });
    }

    /// Bot `bot` is in server room `room`: counted live and reported.
    fn connected(&self, bot: u32, room: u64) {
        Live::add(&self.live.connected, 1);
        let _ = self.reports.send(Report::Connected { bot, room });
    }
}

fn rtt_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("constant bounds are valid")
}

/// Runs `scenario` against the configured server; returns once the bots are disconnected.
/// `observer` hears the phases and live counters (on the calling thread).
pub fn run(
    config: &RunConfig,
    scenario: Arc<dyn Scenario>,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    let players = scenario.players();
    if players == 0 || players > u32::MAX as usize / 2 {
        return Err(RunError::Config(format!(
            "{players} bots: need at least one"
        )));
    }
    if scenario.rooms() == 0 || scenario.rooms() > players {
        return Err(RunError::Config(format!(
            "{} rooms for {players} bots: need 1 to {players}",
            scenario.rooms()
        )));
    }
    scenario.validate().map_err(RunError::Config)?;
    if config.transport == Transport::Wss {
        return Err(RunError::Config(
            "wss bots are not supported yet; use ws or udp".into(),
        ));
    }
    if config.server_kind == ServerKind::Colyseus
        && (config.transport != Transport::Ws || scenario.room_kind() != "arena")
    {
        return Err(RunError::Config(format!(
            "Colyseus bots play the arena scenarios over ws only, not {} over {}",
            scenario.name(),
            config.transport.name()
        )));
    }
    let threads = if config.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        config.threads
    }
    .clamp(1, players);

    let live = Arc::new(Live::default());
    let directory = Arc::new(RoomDirectory::new(scenario.rooms()));
    let (reports_in, reports) = mpsc::channel();
    let (command, command_rx) = watch::channel(Command::Wait);
    let mut handles = Vec::with_capacity(threads);
    for index in 0..threads {
        let spec = GroupSpec {
            index,
            bots: (0..players as u32)
                .filter(|bot| *bot as usize % threads == index)
                .collect(),
            config: config.clone(),
            scenario: scenario.clone(),
            live: live.clone(),
            directory: directory.clone(),
            reports: reports_in.clone(),
            command: command_rx.clone(),
        };
        let handle = std::thread::Builder::new()
            .name(format!("tw-bots-{index}"))
            .spawn(move || run_group(spec))
            .map_err(|error| RunError::Group(error.to_string()))?;
        handles.push(handle);
    }
    drop(reports_in);
    let abort = |command: &watch::Sender<Command>, handles: Vec<std::thread::JoinHandle<()>>| {
        let _ = command.send(Command::Abort);
        for handle in handles {
            let _ = handle.join();
        }
    };

    // Connect every bot that can; a run goes on without those that cannot (counted, by
    // reason) unless none could.
    observer.phase(Phase::Connecting);
    let connect_bound = Duration::from_secs_f64(players as f64 / config.connect_rate.max(1.0))
        + config.connect_timeout * 3;
    let connect_deadline = Instant::now() + connect_bound;
    let mut rooms_of: Vec<Option<u64>> = vec![None; players];
    let mut failures = Failures::default();
    let mut heard = 0;
    while heard < players {
        let now = Instant::now();
        if now >= connect_deadline {
            failures.add(
                (players - heard) as u64,
                None,
                format!("not connected within {connect_bound:?}"),
            );
            break;
        }
        match reports.recv_timeout((connect_deadline - now).min(Duration::from_millis(250))) {
            Ok(Report::Connected { bot, room }) => {
                rooms_of[bot as usize] = Some(room);
                heard += 1;
            }
            Ok(Report::Failed { bot, error }) => {
                failures.add(1, bot, error);
                heard += 1;
            }
            Ok(Report::Finished(_)) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                abort(&command, handles);
                return Err(RunError::Group("every group ended while connecting".into()));
            }
        }
        observer.progress(&live.snapshot());
    }
    if failures.count as usize >= players {
        abort(&command, handles);
        return Err(RunError::ConnectFailed {
            failed: players,
            players,
            first: failures
                .by_reason
                .first()
                .map(|f| f.reason.clone())
                .unwrap_or_default(),
        });
    }

    let plan = Arc::new(Plan::new(
        &rooms_of,
        config.warmup,
        config.duration,
        config.drain,
    ));
    let rooms = plan.room_size.len();
    let room_size_min = plan.room_size.iter().min().copied().unwrap_or(0) as usize;
    let room_size_max = plan.room_size.iter().max().copied().unwrap_or(0) as usize;
    let _ = command.send(Command::Run(plan.clone()));

    // Follow the schedule; sample this process's CPU at the window's edges.
    let phases = [
        (plan.start_ns, Phase::Warmup),
        (plan.window.start_ns, Phase::Measuring),
        (plan.window.end_ns, Phase::Draining),
    ];
    let mut cpu = [0.0f64; 2];
    let mut rss = 0;
    for (index, (at_ns, phase)) in phases.into_iter().enumerate() {
        loop {
            let now = Instant::now();
            let at = plan.at(at_ns);
            if now >= at {
                break;
            }
            std::thread::sleep((at - now).min(Duration::from_millis(250)));
            observer.progress(&live.snapshot());
        }
        if index >= 1 {
            let sample = proc_stat::sample(0).unwrap_or_default();
            cpu[index - 1] = sample.cpu_s;
            rss = sample.rss_bytes;
        }
        observer.phase(phase);
    }

    // Collect the groups' results.
    let finish_deadline = plan.at(plan.drain_end_ns) + Duration::from_secs(10);
    let mut results = Vec::with_capacity(threads);
    while results.len() < threads {
        let now = Instant::now();
        if now >= finish_deadline {
            abort(&command, handles);
            return Err(RunError::Group(
                "groups did not finish after draining".into(),
            ));
        }
        match reports.recv_timeout((finish_deadline - now).min(Duration::from_millis(250))) {
            Ok(Report::Finished(result)) => results.push(result),
            Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        observer.progress(&live.snapshot());
    }
    for handle in handles {
        handle
            .join()
            .map_err(|_| RunError::Group("a group thread panicked".into()))?;
    }
    if results.len() < threads {
        return Err(RunError::Group(format!(
            "{} of {threads} groups ended without a result",
            threads - results.len()
        )));
    }
    observer.phase(Phase::Done);

    let mut meter = Meter::default();
    meter.start(plan.window);
    let mut rtt_us = rtt_histogram();
    let mut window = Counts::default();
    let mut disconnects = 0;
    let mut first_disconnect = None;
    let mut send_errors = 0;
    for result in &results {
        meter.merge(&result.meter);
        let _ = rtt_us.add(&result.rtt_us);
        window.datagrams_out += result.window.datagrams_out;
        window.datagrams_in += result.window.datagrams_in;
        window.messages_out += result.window.messages_out;
        window.messages_in += result.window.messages_in;
        disconnects += result.disconnects;
        if first_disconnect.is_none() {
            first_disconnect.clone_from(&result.first_disconnect);
        }
        send_errors += result.send_errors;
    }
    let duration_s = config.duration.as_secs_f64();
    let delivery = meter
        .tally
        .as_ref()
        .map(|tally| tally.summary())
        .unwrap_or_default();
    let rtt_ms = |quantile: f64| rtt_us.value_at_quantile(quantile) as f64 / 1_000.0;
    let lag_ms = |quantile: f64| {
        meter
            .send_lag_us
            .as_ref()
            .map_or(0.0, |lag| lag.value_at_quantile(quantile) as f64 / 1_000.0)
    };
    let recv_lag_ms = |quantile: f64| {
        meter
            .recv_lag_us
            .as_ref()
            .map(|lag| lag.value_at_quantile(quantile) as f64 / 1_000.0)
    };
    Ok(RunReport {
        scenario: scenario.name().to_string(),
        transport: config.transport.name(),
        server: config.server_kind.name(),
        players: players - failures.count as usize,
        connect_failed: failures.count,
        connect_failures: failures.by_reason,
        rooms,
        room_size_min,
        room_size_max,
        warmup_s: config.warmup.as_secs_f64(),
        duration_s,
        delivered_per_s: delivery.delivered as f64 / duration_s,
        delivery,
        rtt_p50_ms: rtt_ms(0.5),
        rtt_p99_ms: rtt_ms(0.99),
        rtt_samples: rtt_us.len(),
        disconnects,
        first_disconnect,
        foreign_messages: meter.foreign,
        send_errors,
        bot_out_pps: window.datagrams_out as f64 / duration_s,
        bot_in_pps: window.datagrams_in as f64 / duration_s,
        bots_cpu_s: cpu[1] - cpu[0],
        send_lag_p50_ms: lag_ms(0.5),
        send_lag_p99_ms: lag_ms(0.99),
        send_lag_max_ms: lag_ms(1.0),
        recv_lag_p50_ms: recv_lag_ms(0.5),
        recv_lag_p99_ms: recv_lag_ms(0.99),
        recv_lag_max_ms: recv_lag_ms(1.0),
        bots_rss_bytes: rss,
        arena: (scenario.room_kind() == "arena").then(|| meter.arena.figures(duration_s)),
    })
}

fn run_group(spec: GroupSpec) {
    let reports = spec.reports.clone();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            for _ in &spec.bots {
                let _ = reports.send(Report::Failed {
                    bot: None,
                    error: format!("cannot start a bot runtime: {error}"),
                });
            }
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    let result = match (spec.config.server_kind, spec.config.transport) {
        (ServerKind::Colyseus, _) => local.block_on(&runtime, colyseus::run(spec)),
        (ServerKind::Tickwire, Transport::Udp) => local.block_on(&runtime, udp::run(spec)),
        (ServerKind::Tickwire, Transport::Wt) => local.block_on(&runtime, wt::run(spec)),
        (ServerKind::Tickwire, Transport::Ws) => local.block_on(&runtime, ws_bulk::run(spec)),
        (ServerKind::Tickwire, Transport::Wss) => local.block_on(&runtime, ws::run(spec)),
    };
    if let Some(result) = result {
        let _ = reports.send(Report::Finished(Box::new(result)));
    }
}

/// Where each room's first bot put it, for the bots that join it. Shared by every group.
pub(crate) struct RoomDirectory {
    rooms: Mutex<Vec<RoomSlot>>,
    changed: Notify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoomSlot {
    Pending,
    Created(u64),
    Failed,
}

impl RoomDirectory {
    fn new(rooms: usize) -> Self {
        Self {
            rooms: Mutex::new(vec![RoomSlot::Pending; rooms]),
            changed: Notify::new(),
        }
    }

    fn set(&self, index: usize, slot: RoomSlot) {
        if let Some(entry) = self
            .rooms
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .get_mut(index)
        {
            *entry = slot;
        }
        self.changed.notify_waiters();
    }

    fn get(&self, index: usize) -> RoomSlot {
        self.rooms
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(index)
            .copied()
            .unwrap_or(RoomSlot::Failed)
    }

    /// The id of room `index`, once its first bot has created it.
    async fn room(&self, index: usize) -> Result<u64, String> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.get(index) {
                RoomSlot::Created(room) => return Ok(room),
                RoomSlot::Failed => return Err(format!("room {index} could not be created")),
                RoomSlot::Pending => changed.await,
            }
        }
    }
}

/// Matchmakes bot `bot` into its room (see the module docs): create it, join it, or join
/// or create by kind when the scenario has one room.
async fn place(spec: &GroupSpec, bot: u32) -> Result<MatchAnswer, String> {
    let scenario = spec.scenario.as_ref();
    let rooms = scenario.rooms();
    let index = bot as usize % rooms;
    let request = if rooms == 1 {
        MatchmakeRequest::kind(scenario.room_kind())
    } else if (bot as usize) < rooms {
        MatchmakeRequest::create(scenario.room_kind())
    } else {
        let room =
            tokio::time::timeout(spec.config.connect_timeout * 3, spec.directory.room(index))
                .await
                .map_err(|_| format!("room {index} was not created in time"))??;
        MatchmakeRequest::room(room)
    }
    .named(format!("bot{bot}"));
    let answer = matchmake(&spec.config.server, &request, spec.config.connect_timeout).await;
    if rooms > 1 && (bot as usize) < rooms {
        spec.directory.set(
            index,
            match &answer {
                Ok(answer) => RoomSlot::Created(answer.room),
                Err(_) => RoomSlot::Failed,
            },
        );
    }
    answer.map_err(|error| format!("matchmaking: {error}"))
}

/// Matchmade bots waiting for their group task to connect them.
type Pending = Rc<RefCell<Vec<(u32, MatchAnswer)>>>;

/// Matchmakes the group's bots at the group's share of the connect rate, at most
/// `connect_concurrency` at once; answers go to `pending` for the group task to connect
/// (the engines that drive every bot from one task).
async fn matchmake_all(spec: Rc<GroupSpec>, pending: Pending) {
    let interval = connect_interval(&spec.config, spec.bots.len(), spec.scenario.players());
    let permits = Arc::new(Semaphore::new(spec.config.connect_concurrency.max(1)));
    let mut pace = tokio::time::interval(interval);
    for bot in spec.bots.iter().copied() {
        pace.tick().await;
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let spec = spec.clone();
        let pending = pending.clone();
        tokio::task::spawn_local(async move {
            match place(&spec, bot).await {
                Ok(answer) => pending.borrow_mut().push((bot, answer)),
                Err(error) => spec.connect_failed(bot, error),
            }
            drop(permit);
        });
    }
}

/// A group whose one task drives all of its bots (the UDP, WebTransport and plain
/// WebSocket engines): what
/// [`drive`] asks of it.
trait OneTask {
    /// The group's plan and figures.
    fn ledger(&mut self) -> &mut ledger::Ledger;
    /// One 1 ms tick: connect the matchmade bots in `pending`, receive, run what is due,
    /// send.
    async fn tick(&mut self, pending: &Pending);
    /// The plan is known: every bot looks at its sends.
    fn start(&mut self, plan: Arc<Plan>);
    /// Every bot leaves, paced.
    async fn close(&mut self);
    /// The figures, once closed.
    fn into_ledger(self) -> ledger::Ledger;
}

/// How often a single-task group looks at its sockets and timers: never sleeping on a
/// socket (see the module docs), bots add at most this much to what they measure.
const TICK: Duration = Duration::from_millis(1);

/// Bots of a single-task group that say goodbye together when a run ends, a batch every
/// [`CLOSE_PACE`]: every bot's goodbye at once overflowed the server's socket at 5,000
/// bots, and the bots whose goodbyes were lost held their seats (and rooms) until the
/// server timed them out.
const CLOSE_BATCH: usize = 100;
/// Between two batches of goodbyes (the server reads its sockets at least once a tick).
const CLOSE_PACE: Duration = Duration::from_millis(2);

/// A group's bot keys in batches of [`CLOSE_BATCH`], for its paced goodbyes.
fn close_batches(bots: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..bots)
        .step_by(CLOSE_BATCH)
        .map(move |start| start..(start + CLOSE_BATCH).min(bots))
}

/// Runs `group` tick by tick through the run's commands until the drain ends (its figures)
/// or the run is aborted (`None`); bots are matchmade meanwhile into `pending`.
async fn drive(mut group: impl OneTask, pending: Pending) -> Option<GroupResult> {
    let spec = group.ledger().spec.clone();
    tokio::task::spawn_local(matchmake_all(spec.clone(), pending.clone()));
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut command = spec.command.clone();
    loop {
        tokio::select! {
            _ = tick.tick() => group.tick(&pending).await,
            changed = command.changed() => {
                let next = if changed.is_ok() { command.borrow_and_update().clone() } else { Command::Abort };
                match next {
                    Command::Run(plan) => group.start(plan),
                    Command::Abort => {
                        group.close().await;
                        return None;
                    }
                    Command::Wait => {}
                }
            }
        }
        if let Some(plan) = &group.ledger().plan
            && plan.ns(Instant::now()) >= plan.drain_end_ns
        {
            group.ledger().publish();
            group.close().await;
            return Some(group.into_ledger().into_result());
        }
    }
}

/// Counts a bot's sends into its connection; what the logic calls [`Outbox`].
pub(crate) struct Counted<'a, L: ?Sized> {
    link: &'a mut L,
    sent: u64,
    refused: u64,
}

impl<'a, L: ?Sized> Counted<'a, L> {
    fn new(link: &'a mut L) -> Self {
        Self {
            link,
            sent: 0,
            refused: 0,
        }
    }
}

/// A connection a bot's messages can be queued on.
pub(crate) trait Queue {
    /// Queues `message`; false when the connection refused it.
    fn queue(&mut self, channel: u8, message: bytes::Bytes) -> bool;
}

impl Queue for tickwire_proto::Client {
    fn queue(&mut self, channel: u8, message: bytes::Bytes) -> bool {
        self.send(channel, message).is_ok()
    }
}

impl Queue for tickwire_client::Link {
    fn queue(&mut self, channel: u8, message: bytes::Bytes) -> bool {
        self.send(channel, message).is_ok()
    }
}

impl<L: Queue + ?Sized> Outbox for Counted<'_, L> {
    fn send(&mut self, channel: u8, message: bytes::Bytes) -> bool {
        let accepted = self.link.queue(channel, message);
        if accepted {
            self.sent += 1;
        } else {
            self.refused += 1;
        }
        accepted
    }
}

/// Spaces out connection attempts: one every `interval` for this group.
fn connect_interval(config: &RunConfig, groups_bots: usize, players: usize) -> Duration {
    let share = groups_bots as f64 / players.max(1) as f64;
    Duration::from_secs_f64(1.0 / (config.connect_rate.max(0.001) * share).max(0.001))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn joiners_wait_for_their_rooms_creator() {
        let directory = Arc::new(RoomDirectory::new(2));
        let waiting = tokio::spawn({
            let directory = directory.clone();
            async move { directory.room(1).await }
        });
        tokio::task::yield_now().await;
        directory.set(0, RoomSlot::Failed);
        directory.set(1, RoomSlot::Created(42));
        assert_eq!(waiting.await.unwrap(), Ok(42));
        assert!(
            directory.room(0).await.is_err(),
            "a failed creator fails its joiners"
        );
    }
}
