//! Write-behind: rooms hand [`StatEvent`]s to a [`StatWriter`] without waiting; one task
//! commits them in batches.
//!
//! Order is kept: events are committed in the order they were accepted, a batch at a time,
//! each batch in one transaction. So `events_committed = n` means the first `n` accepted
//! events are in the database, and a crash can lose only events not yet committed: at most
//! one batch interval's worth plus whatever was still queued.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use crate::event::{InvalidEvent, StatEvent};
use crate::store::{BatchMark, Connection, Store};
use crate::throttle::Throttle;

/// The writer's queue and batching. Deployment config, under `[store.writer]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WriterConfig {
    /// Events the queue holds before [`StatWriter::try_record`] refuses. Default 65,536:
    /// several seconds of a busy server's events, so a database hiccup shows up as queue
    /// depth, not as refusals.
    pub queue_capacity: usize,
    /// Most events in one transaction. Default 4,096: a transaction's cost is mostly the
    /// pages it touches (each written once to the WAL or log, however many rows changed
    /// in it) and its commit's flush, so bigger batches make each event cheaper; the flush
    /// interval still bounds how long an event waits.
    pub batch_max_events: usize,
    /// Longest an accepted event waits for its batch to commit, in milliseconds: the most a
    /// crash can lose. Default 100.
    pub flush_interval_ms: u64,
    /// Longest a batch's transaction may take before the writer gives up on its connection
    /// and retries on a fresh one, in milliseconds. Default 30,000: far above a healthy
    /// commit (milliseconds) or a slow one, so it fires only on a database that stopped
    /// answering without closing the connection (a network partition), which TCP alone
    /// would take many minutes to notice.
    pub commit_timeout_ms: u64,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            queue_capacity: 65_536,
            batch_max_events: 4096,
            flush_interval_ms: 100,
            commit_timeout_ms: 30_000,
        }
    }
}

/// Why an event was not queued. The event comes back, except an invalid one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The queue is full (backpressure); counted in [`WriterStats::rejected_full`].
    #[error("stat queue full ({capacity} events)")]
    Full {
        /// The event, to retry or account for.
        event: Box<StatEvent>,
        /// The queue's capacity.
        capacity: usize,
    },
    /// The writer was closed.
    #[error("stat writer closed")]
    Closed(Box<StatEvent>),
    /// The event could never be committed; counted in [`WriterStats::rejected_invalid`].
    #[error("invalid stat event: {0}")]
    Invalid(#[from] InvalidEvent),
}

/// The writer has stopped (closed, or its task ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stat writer closed")]
pub struct WriterClosed;

/// Upper bounds of the commit duration histogram (`tickwire_store_flush_duration_seconds`),
/// microseconds: from an embedded database's 1 ms to a struggling server's seconds.
pub const FLUSH_BUCKETS_US: [u64; 10] = [
    1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000, 5_000_000,
];

/// A snapshot of the writer's counters, for `/metrics` and the admin console.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WriterStats {
    /// Events and commands waiting in the queue now.
    pub queue_depth: u64,
    /// The queue's capacity.
    pub queue_capacity: u64,
    /// Events accepted into the queue.
    pub events_accepted: u64,
    /// Events whose transaction committed.
    pub events_committed: u64,
    /// Transactions committed.
    pub batches_committed: u64,
    /// `try_record` calls refused because the queue was full.
    pub rejected_full: u64,
    /// `record` calls that found the queue full and waited.
    pub waited_full: u64,
    /// Events refused as invalid.
    pub rejected_invalid: u64,
    /// Commit attempts that failed (each is retried with backoff; nothing is dropped).
    pub failed_commits: u64,
    /// Duration of the last committed transaction, microseconds.
    pub last_flush_us: u64,
    /// Longest committed transaction so far, microseconds.
    pub max_flush_us: u64,
    /// Events in the last committed transaction.
    pub last_batch_events: u64,
    /// Committed transactions by duration: `flush_buckets[i]` counts those that took at
    /// most [`FLUSH_BUCKETS_US`]`[i]` and more than the bound before; the last, longer ones.
    #[serde(default)]
    pub flush_buckets: [u64; FLUSH_BUCKETS_US.len() + 1],
    /// Total duration of the committed transactions, microseconds.
    #[serde(default)]
    pub flush_sum_us: u64,
    /// Outages begun: runs of failed commits ended by a successful one (or still going).
    pub outages: u64,
    /// How long the current outage has lasted, milliseconds; 0 while commits succeed.
    pub failing_for_ms: u64,
}

impl WriterStats {
    /// Whether the last commit attempt failed: the writer is retrying and events queue up.
    pub fn failing(&self) -> bool {
        self.failing_for_ms > 0
    }

    /// A line for the server's readiness answer while persistence is degraded: commits
    /// failing, or the queue full (the database is slower than the rooms' events).
    pub fn degraded(&self) -> Option<String> {
        if self.failing() {
            Some(format!(
                "persistence failing for {} s: {} stat events queued, {} refused so far; the writer retries (the log has the error)",
                self.failing_for_ms / 1000,
                self.queue_depth,
                self.rejected_full
            ))
        } else if self.queue_depth >= self.queue_capacity {
            Some(format!(
                "persistence behind: the stat queue is full ({} events), {} refused so far",
                self.queue_capacity, self.rejected_full
            ))
        } else {
            None
        }
    }

    /// Appends the counters in Prometheus text format, each named `tickwire_store_*`.
    pub fn write_prometheus(&self, out: &mut String) {
        let metrics: [(&str, &str, &str, u64); 15] = [
            (
                "queue_depth",
                "gauge",
                "Stat events waiting in the write queue.",
                self.queue_depth,
            ),
            (
                "queue_capacity",
                "gauge",
                "Capacity of the stat write queue.",
                self.queue_capacity,
            ),
            (
                "events_accepted_total",
                "counter",
                "Stat events accepted into the queue.",
                self.events_accepted,
            ),
            (
                "events_committed_total",
                "counter",
                "Stat events whose transaction committed.",
                self.events_committed,
            ),
            (
                "batches_committed_total",
                "counter",
                "Stat transactions committed.",
                self.batches_committed,
            ),
            (
                "rejected_full_total",
                "counter",
                "Stat events refused because the queue was full.",
                self.rejected_full,
            ),
            (
                "waited_full_total",
                "counter",
                "Stat events that waited for room in a full queue.",
                self.waited_full,
            ),
            (
                "rejected_invalid_total",
                "counter",
                "Stat events refused as invalid.",
                self.rejected_invalid,
            ),
            (
                "failed_commits_total",
                "counter",
                "Stat transactions that failed and were retried.",
                self.failed_commits,
            ),
            (
                "last_flush_seconds",
                "gauge",
                "Duration of the last stat transaction.",
                self.last_flush_us,
            ),
            (
                "max_flush_seconds",
                "gauge",
                "Longest stat transaction so far.",
                self.max_flush_us,
            ),
            (
                "last_batch_events",
                "gauge",
                "Stat events in the last transaction.",
                self.last_batch_events,
            ),
            (
                "failing",
                "gauge",
                "1 while stat commits fail and the writer retries, else 0.",
                u64::from(self.failing()),
            ),
            (
                "failing_seconds",
                "gauge",
                "How long stat commits have been failing, 0 while they succeed.",
                self.failing_for_ms * 1000,
            ),
            (
                "outages_total",
                "counter",
                "Runs of failed stat commits begun (each logged once, rate-limited).",
                self.outages,
            ),
        ];
        for (name, kind, help, value) in metrics {
            let _ = writeln!(out, "# HELP tickwire_store_{name} {help}");
            let _ = writeln!(out, "# TYPE tickwire_store_{name} {kind}");
            if name.ends_with("_seconds") {
                let _ = writeln!(out, "tickwire_store_{name} {}", value as f64 / 1e6);
            } else {
                let _ = writeln!(out, "tickwire_store_{name} {value}");
            }
        }
        self.write_flush_histogram(out);
    }

    fn write_flush_histogram(&self, out: &mut String) {
        const NAME: &str = "tickwire_store_flush_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {NAME} Duration of committed stat transactions."
        );
        let _ = writeln!(out, "# TYPE {NAME} histogram");
        let mut cumulative = 0;
        for (bound, count) in FLUSH_BUCKETS_US.iter().zip(self.flush_buckets) {
            cumulative += count;
            let _ = writeln!(
                out,
                "{NAME}_bucket{{le=\"{}\"}} {cumulative}",
                *bound as f64 / 1e6
            );
        }
        cumulative += self.flush_buckets[FLUSH_BUCKETS_US.len()];
        let _ = writeln!(out, "{NAME}_bucket{{le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(out, "{NAME}_sum {}", self.flush_sum_us as f64 / 1e6);
        let _ = writeln!(out, "{NAME}_count {cumulative}");
    }
}

enum Command {
    Event(StatEvent),
    Flush(oneshot::Sender<()>),
    Close(oneshot::Sender<()>),
}

#[derive(Default)]
struct Counters {
    events_accepted: AtomicU64,
    events_committed: AtomicU64,
    batches_committed: AtomicU64,
    rejected_full: AtomicU64,
    waited_full: AtomicU64,
    rejected_invalid: AtomicU64,
    failed_commits: AtomicU64,
    last_flush_us: AtomicU64,
    max_flush_us: AtomicU64,
    last_batch_events: AtomicU64,
    flush_buckets: [AtomicU64; FLUSH_BUCKETS_US.len() + 1],
    flush_sum_us: AtomicU64,
    outages: AtomicU64,
    /// Milliseconds since `Shared::epoch` when the current outage began, plus one; 0 while
    /// commits succeed.
    failing_since: AtomicU64,
}

struct Shared {
    counters: Counters,
    epoch: Instant,
    /// True while commits fail (see [`StatWriter::failing`]).
    failing: watch::Sender<bool>,
    committed: watch::Sender<u64>,
    stopped: watch::Sender<bool>,
}

/// The handle rooms record stat events with: cheap to clone, never blocks the caller in
/// [`try_record`](Self::try_record). Created by [`Store::writer`].
///
/// Call [`close`](Self::close) on drain: it commits everything queued, then stops the task.
/// Dropping every handle without closing also commits what is queued, but nobody waits.
#[derive(Clone)]
pub struct StatWriter {
    queue: mpsc::Sender<Command>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StatWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatWriter")
            .field("stats", &self.stats())
            .finish()
    }
}

impl StatWriter {
    pub(crate) fn spawn(store: Store, config: &WriterConfig) -> Self {
        let capacity = config.queue_capacity.max(1);
        let (queue, rx) = mpsc::channel(capacity);
        let shared = Arc::new(Shared {
            counters: Counters::default(),
            epoch: Instant::now(),
            failing: watch::Sender::new(false),
            committed: watch::Sender::new(0),
            stopped: watch::Sender::new(false),
        });
        let task = Task {
            store,
            conn: None,
            rx,
            shared: shared.clone(),
            batch_max: config.batch_max_events.max(1),
            interval: Duration::from_millis(config.flush_interval_ms),
            commit_timeout: Duration::from_millis(config.commit_timeout_ms.max(1)),
            outage: None,
            outage_lines: Throttle::default(),
            name: format!("w{:016x}", rand::random::<u64>()),
            batches: 0,
        };
        tokio::spawn(task.run());
        Self { queue, shared }
    }

    /// Queues `event` if there is room, without waiting: the call for the tick path.
    pub fn try_record(&self, event: StatEvent) -> Result<(), RecordError> {
        let counters = &self.shared.counters;
        if let Err(invalid) = event.validate() {
            counters.rejected_invalid.fetch_add(1, Ordering::Relaxed);
            return Err(invalid.into());
        }
        match self.queue.try_send(Command::Event(event)) {
            Ok(()) => {
                counters.events_accepted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(Command::Event(event))) => {
                counters.rejected_full.fetch_add(1, Ordering::Relaxed);
                Err(RecordError::Full {
                    event: Box::new(event),
                    capacity: self.queue.max_capacity(),
                })
            }
            Err(mpsc::error::TrySendError::Closed(Command::Event(event))) => {
                Err(RecordError::Closed(Box::new(event)))
            }
            Err(_) => unreachable!("the command sent is the event"),
        }
    }

    /// Queues `event`, waiting for room if the queue is full (counted in
    /// [`WriterStats::waited_full`]). For callers off the tick path.
    pub async fn record(&self, event: StatEvent) -> Result<(), RecordError> {
        let counters = &self.shared.counters;
        if let Err(invalid) = event.validate() {
            counters.rejected_invalid.fetch_add(1, Ordering::Relaxed);
            return Err(invalid.into());
        }
        let command = match self.queue.try_send(Command::Event(event)) {
            Ok(()) => {
                counters.events_accepted.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(mpsc::error::TrySendError::Full(command)) => {
                counters.waited_full.fetch_add(1, Ordering::Relaxed);
                command
            }
            Err(mpsc::error::TrySendError::Closed(command)) => command,
        };
        match self.queue.send(command).await {
            Ok(()) => {
                counters.events_accepted.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(mpsc::error::SendError(Command::Event(event))) => {
                Err(RecordError::Closed(Box::new(event)))
            }
            Err(_) => unreachable!("the command sent is the event"),
        }
    }

    /// Returns once every event accepted before this call is committed.
    pub async fn flush(&self) -> Result<(), WriterClosed> {
        let (done, wait) = oneshot::channel();
        self.queue
            .send(Command::Flush(done))
            .await
            .map_err(|_| WriterClosed)?;
        wait.await.map_err(|_| WriterClosed)
    }

    /// Drains: stops accepting events, commits everything queued, stops the task, and
    /// returns when that is done. Closing a closed writer returns once it has stopped.
    ///
    /// While the database is unreachable the writer keeps retrying, so this waits too: bound
    /// it with the server's drain grace period.
    pub async fn close(&self) {
        let (done, wait) = oneshot::channel();
        if self.queue.send(Command::Close(done)).await.is_ok() && wait.await.is_ok() {
            return;
        }
        // Already closing or closed (by another handle): wait for the task to finish.
        let mut stopped = self.shared.stopped.subscribe();
        let _ = stopped.wait_for(|stopped| *stopped).await;
    }

    /// The counters now.
    pub fn stats(&self) -> WriterStats {
        let c = &self.shared.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WriterStats {
            queue_depth: (self.queue.max_capacity() - self.queue.capacity()) as u64,
            queue_capacity: self.queue.max_capacity() as u64,
            events_accepted: get(&c.events_accepted),
            events_committed: get(&c.events_committed),
            batches_committed: get(&c.batches_committed),
            rejected_full: get(&c.rejected_full),
            waited_full: get(&c.waited_full),
            rejected_invalid: get(&c.rejected_invalid),
            failed_commits: get(&c.failed_commits),
            last_flush_us: get(&c.last_flush_us),
            max_flush_us: get(&c.max_flush_us),
            last_batch_events: get(&c.last_batch_events),
            flush_buckets: std::array::from_fn(|i| get(&c.flush_buckets[i])),
            flush_sum_us: get(&c.flush_sum_us),
            outages: get(&c.outages),
            failing_for_ms: match get(&c.failing_since) {
                0 => 0,
                since => {
                    let now = self.shared.epoch.elapsed().as_millis() as u64;
                    now.saturating_sub(since - 1).max(1)
                }
            },
        }
    }

    /// Watches whether commits are failing: true from the first failed attempt of an outage
    /// until the next commit succeeds.
    pub fn failing(&self) -> watch::Receiver<bool> {
        self.shared.failing.subscribe()
    }

    /// Watches the number of events committed so far (in acceptance order, so the first
    /// that many accepted events are durable). Changes once per committed batch.
    pub fn committed(&self) -> watch::Receiver<u64> {
        self.shared.committed.subscribe()
    }
}

struct Task {
    store: Store,
    /// The connection the writer keeps between batches (see [`Store::acquire`]).
    conn: Option<Connection>,
    rx: mpsc::Receiver<Command>,
    shared: Arc<Shared>,
    batch_max: usize,
    interval: Duration,
    commit_timeout: Duration,
    /// The outage under way: when it began, failed attempts, whether it was logged.
    outage: Option<Outage>,
    /// At most one outage logged a minute.
    outage_lines: Throttle,
    /// This writer's name in the `sequences` rows that mark its batches ([`BatchMark`]).
    name: String,
    /// Batches begun.
    batches: i64,
}

/// A run of failed commits.
struct Outage {
    began: Instant,
    attempts: u64,
    reported: bool,
}

/// Marks the writer stopped however its task ends.
struct StoppedOnDrop(Arc<Shared>);

impl Drop for StoppedOnDrop {
    fn drop(&mut self) {
        self.0.stopped.send_replace(true);
    }
}

impl Task {
    async fn run(mut self) {
        let _stopped = StoppedOnDrop(self.shared.clone());
        let mut batch: Vec<StatEvent> = Vec::with_capacity(self.batch_max);
        let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
        let mut closes: Vec<oneshot::Sender<()>> = Vec::new();
        let mut commands: Vec<Command> = Vec::with_capacity(self.batch_max);
        loop {
            // Wait for the first command of a batch, then collect until the batch is full,
            // the interval since that first command is over, or a flush or close asks.
            if self.rx.recv_many(&mut commands, self.batch_max).await == 0 {
                break; // every handle dropped and the queue is empty
            }
            let deadline = Instant::now() + self.interval;
            let mut open = true;
            loop {
                let mut urgent = false;
                for command in commands.drain(..) {
                    match command {
                        Command::Event(event) => batch.push(event),
                        Command::Flush(done) => {
                            flushes.push(done);
                            urgent = true;
                        }
                        Command::Close(done) => {
                            closes.push(done);
                            urgent = true;
                        }
                    }
                }
                if urgent || batch.len() >= self.batch_max || !open {
                    break;
                }
                tokio::select! {
                    n = self.rx.recv_many(&mut commands, self.batch_max - batch.len()) => {
                        open = n > 0;
                    }
                    () = tokio::time::sleep_until(deadline) => break,
                }
            }
            self.commit(&mut batch).await;
            for done in flushes.drain(..) {
                let _ = done.send(());
            }
            if !closes.is_empty() || !open {
                // Refuse new events, then commit everything still queued.
                self.rx.close();
                while self.rx.recv_many(&mut commands, self.batch_max).await > 0 {
                    for command in commands.drain(..) {
                        match command {
                            Command::Event(event) => batch.push(event),
                            Command::Flush(done) => flushes.push(done),
                            Command::Close(done) => closes.push(done),
                        }
                    }
                    if batch.len() >= self.batch_max {
                        self.commit(&mut batch).await;
                    }
                }
                self.commit(&mut batch).await;
                for done in flushes.drain(..).chain(closes.drain(..)) {
                    let _ = done.send(());
                }
                break;
            }
        }
    }

    /// Commits `batch`, retrying with backoff until it succeeds: accepted events are never
    /// dropped. Failures are counted; an outage is logged once as it begins and once as it
    /// ends ([`Task::failed`], [`Task::recovered`]).
    async fn commit(&mut self, batch: &mut Vec<StatEvent>) {
        if batch.is_empty() {
            return;
        }
        let shared = self.shared.clone();
        let counters = &shared.counters;
        let mut backoff = Duration::from_millis(50);
        self.batches += 1;
        let mut retry = false;
        loop {
            let started = Instant::now();
            let applied = match self.conn.take() {
                Some(conn) => Ok(conn),
                None => self.store.acquire().await,
            };
            let applied = match applied {
                Ok(mut conn) => {
                    let mark = BatchMark {
                        writer: &self.name,
                        seq: self.batches,
                        retry,
                    };
                    let applied = self.store.apply_on(&mut conn, batch, Some(&mark));
                    let result = match tokio::time::timeout(self.commit_timeout, applied).await {
                        Ok(result) => result.map_err(|error| error.to_string()),
                        Err(_) => Err(format!(
                            "the transaction took longer than the {:?} commit timeout",
                            self.commit_timeout
                        )),
                    };
                    // A connection that failed may be broken: the next attempt takes a
                    // fresh one.
                    if result.is_err() {
                        conn.close_on_drop();
                    } else if self.store.writer_keeps_connection() {
                        self.conn = Some(conn);
                    }
                    result
                }
                Err(error) => Err(error.to_string()),
            };
            match applied {
                Ok(applied_now) => {
                    if !applied_now {
                        tracing::debug!(
                            batch = self.batches,
                            "stat batch found committed by an attempt whose answer was lost"
                        );
                    }
                    let us = started.elapsed().as_micros() as u64;
                    counters.last_flush_us.store(us, Ordering::Relaxed);
                    counters.max_flush_us.fetch_max(us, Ordering::Relaxed);
                    let bucket = FLUSH_BUCKETS_US
                        .iter()
                        .position(|bound| us <= *bound)
                        .unwrap_or(FLUSH_BUCKETS_US.len());
                    counters.flush_buckets[bucket].fetch_add(1, Ordering::Relaxed);
                    counters.flush_sum_us.fetch_add(us, Ordering::Relaxed);
                    counters
                        .last_batch_events
                        .store(batch.len() as u64, Ordering::Relaxed);
                    counters.batches_committed.fetch_add(1, Ordering::Relaxed);
                    let total = counters
                        .events_committed
                        .fetch_add(batch.len() as u64, Ordering::Relaxed)
                        + batch.len() as u64;
                    self.shared.committed.send_replace(total);
                    self.recovered(batch.len());
                    batch.clear();
                    return;
                }
                Err(error) => {
                    counters.failed_commits.fetch_add(1, Ordering::Relaxed);
                    // The attempt may have committed all the same: the next one checks.
                    retry = true;
                    self.failed(&error, backoff);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

impl Task {
    /// Notes a failed attempt; the first of an outage is logged (one line, rate-limited),
    /// the rest only at debug level.
    fn failed(&mut self, error: &str, retry_in: Duration) {
        let counters = &self.shared.counters;
        let queued = self.rx.len();
        if let Some(outage) = &mut self.outage {
            outage.attempts += 1;
            tracing::debug!(%error, attempts = outage.attempts, ?retry_in, "stat batch commit failed again");
            return;
        }
        let now = Instant::now();
        counters.outages.fetch_add(1, Ordering::Relaxed);
        let since = now.duration_since(self.shared.epoch).as_millis() as u64 + 1;
        counters.failing_since.store(since, Ordering::Relaxed);
        self.shared.failing.send_replace(true);
        // Outages past the throttle are counted in `outages_total` and named in the next
        // logged one's line.
        let reported = match self.outage_lines.admit(now) {
            Some(earlier_unlogged_outages) => {
                tracing::error!(
                    %error,
                    queued,
                    earlier_unlogged_outages,
                    "persistence failing: stat events stay queued and the writer retries with backoff (up to 5 s) until the database takes them"
                );
                true
            }
            None => {
                tracing::debug!(%error, "stat batch commit failed (outage not logged: rate limit)");
                false
            }
        };
        self.outage = Some(Outage {
            began: now,
            attempts: 1,
            reported,
        });
    }

    /// Ends the outage, if one is under way, with one line if its start was logged.
    fn recovered(&mut self, events: usize) {
        let Some(outage) = self.outage.take() else {
            return;
        };
        self.shared
            .counters
            .failing_since
            .store(0, Ordering::Relaxed);
        self.shared.failing.send_replace(false);
        if outage.reported {
            tracing::warn!(
                after = ?outage.began.elapsed(),
                failed_attempts = outage.attempts,
                events,
                "persistence recovered: stat batches commit again"
            );
        }
    }
}
