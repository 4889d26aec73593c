//! `/metrics`: Prometheus text. Tick durations are recorded by the workers as ticks run
//! (a histogram per room kind); everything else is read from the workers' published views
//! and the endpoint's counters when scraped, so the tick path only ever touches the
//! histogram's lock-free buckets.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{Key, Label, Level, Metadata, Recorder};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};

use super::{App, Phase};
use crate::console::PlayerTransport;
use crate::replicate::ReplicationProfile;
use crate::shard::TickObserver;

const TICK_DURATION: &str = "tickwire_tick_duration_seconds";
/// Tick duration buckets: from 100 µs up to past a 30 Hz step. Between 2 ms and a 60 Hz step
/// they are at most 4.2 ms apart, so a p99 there (a burst's tick, the budget's edge) reads
/// within a few milliseconds, not as an interpolation across 8–16.7 ms; 4 ms and 16.7 ms
/// stay edges, the targets' lines.
const TICK_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.006, 0.008, 0.010, 0.0125, 0.0167,
    0.025, 0.0333, 0.1, 1.0,
];
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The server's Prometheus recorder, not installed globally: each runtime has its own, so
/// several can live in one process (tests).
pub(super) struct Metrics {
    recorder: Arc<PrometheusRecorder>,
    handle: PrometheusHandle,
    matchmade: AtomicU64,
    matchmake_rate_limited: AtomicU64,
    memory_trims: AtomicU64,
    memory_returned_bytes: AtomicU64,
}

impl Metrics {
    pub(super) fn new() -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(TICK_DURATION.into()), &TICK_BUCKETS)
            .expect("constant buckets are not empty")
            .build_recorder();
        let handle = recorder.handle();
        Self {
            recorder: Arc::new(recorder),
            handle,
            matchmade: AtomicU64::new(0),
            matchmake_rate_limited: AtomicU64::new(0),
            memory_trims: AtomicU64::new(0),
            memory_returned_bytes: AtomicU64::new(0),
        }
    }

    /// An observer for one worker's shard: records each tick's duration under its kind.
    pub(super) fn tick_observer(&self) -> TickObserver {
        let recorder = self.recorder.clone();
        let mut by_kind: HashMap<String, metrics::Histogram> = HashMap::new();
        Box::new(move |kind, duration, ticks| {
            let histogram = match by_kind.get(kind) {
                Some(histogram) => histogram,
                None => {
                    let key =
                        Key::from_parts(TICK_DURATION, vec![Label::new("kind", kind.to_string())]);
                    let histogram = recorder.register_histogram(&key, &METADATA);
                    by_kind.entry(kind.to_string()).or_insert(histogram)
                }
            };
            histogram.record_many(duration.as_secs_f64(), ticks as usize);
        })
    }

    /// Folds recorded tick durations into their histograms. Recorded samples wait in
    /// buckets until this (or a scrape) runs, so it must run periodically even when nothing
    /// scrapes, or they would pile up.
    pub(super) fn upkeep(&self) {
        self.handle.run_upkeep();
    }

    pub(super) fn matchmade(&self) {
        self.matchmade.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn matchmake_rate_limited(&self) {
        self.matchmake_rate_limited.fetch_add(1, Ordering::Relaxed);
    }

    /// A trim handed freed memory back to the kernel.
    pub(super) fn memory_trimmed(&self, trimmed: super::memory::Trimmed) {
        self.memory_trims.fetch_add(1, Ordering::Relaxed);
        self.memory_returned_bytes.fetch_add(
            trimmed.before.saturating_sub(trimmed.after),
            Ordering::Relaxed,
        );
    }

    fn counter(&self, name: &'static str, labels: &[(&'static str, &str)], value: u64) {
        self.recorder
            .register_counter(&key(name, labels), &METADATA)
            .absolute(value);
    }

    fn gauge(&self, name: &'static str, labels: &[(&'static str, &str)], value: f64) {
        self.recorder
            .register_gauge(&key(name, labels), &METADATA)
            .set(value);
    }

    /// Brings every scraped figure up to date and renders the text format.
    pub(super) fn render(&self, app: &App) -> String {
        let mut players = [0u64; 3];
        let mut held = 0;
        // Every hosted kind, so a kind whose last room closed reads 0 rather than its
        // last count.
        let mut rooms: HashMap<String, u64> = app
            .kinds
            .iter()
            .map(|(kind, _)| (kind.to_string(), 0))
            .collect();
        let mut udp = tickwire_proto::ServerStats::default();
        let mut too_long = 0;
        let mut shard = crate::shard::ShardStats::default();
        let mut overruns: HashMap<String, u64> = HashMap::new();
        let mut refused = [0u64; 2];
        let mut replication: HashMap<String, ReplicationProfile> = HashMap::new();
        for (index, link) in app.shards.iter().enumerate() {
            let view = link.view.read();
            // Per shard, so that one stalled shard shows (the totals would hide it): its
            // ticks stop while it still holds rooms.
            let shard_label = index.to_string();
            let labels = [("shard", shard_label.as_str())];
            self.counter("tickwire_shard_ticks_total", &labels, view.shard.ticks);
            self.gauge("tickwire_shard_rooms", &labels, view.rooms.len() as f64);
            for player in &view.players {
                players[match player.transport {
                    PlayerTransport::Udp => 0,
                    PlayerTransport::Ws => 1,
                    PlayerTransport::Wt => 2,
                }] += 1;
            }
            held += view.players_held;
            for room in &view.rooms {
                *rooms.entry(room.kind.clone()).or_default() += 1;
            }
            for (kind, times) in &view.tick_times {
                *overruns.entry(kind.clone()).or_default() += times.overruns();
            }
            for (kind, profile) in &view.replication {
                replication.entry(kind.clone()).or_default().merge(profile);
            }
            refused[0] += view.joins_refused;
            refused[1] += view.refused_by_address;
            add_udp(&mut udp, &view.udp);
            too_long += view.recv.dropped_truncated;
            add_shard(&mut shard, &view.shard);
        }
        let ws = app.ws.stats();

        self.gauge(
            "tickwire_ready",
            &[],
            f64::from(u8::from(app.phase() == Phase::Running)),
        );
        self.gauge(
            "tickwire_players",
            &[("transport", "udp")],
            players[0] as f64,
        );
        self.gauge(
            "tickwire_players",
            &[("transport", "ws")],
            players[1] as f64,
        );
        self.gauge(
            "tickwire_players",
            &[("transport", "wt")],
            players[2] as f64,
        );
        self.gauge("tickwire_players_reconnecting", &[], held as f64);
        // The runtime that renders this also runs every HTTP connection and every
        // WebSocket and WebTransport player's tasks: a leak of any of them shows as growth.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let tasks = runtime.metrics().num_alive_tasks();
            self.gauge("tickwire_runtime_tasks", &[], tasks as f64);
        }
        for (kind, count) in &rooms {
            self.gauge("tickwire_rooms", &[("kind", kind)], *count as f64);
        }
        for (kind, profile) in &replication {
            for (entity, field, bytes) in replication_rows(profile) {
                let labels = [
                    ("kind", kind.as_str()),
                    ("entity", entity),
                    ("field", field),
                ];
                self.counter("tickwire_replication_bytes_total", &labels, bytes as u64);
            }
        }
        for (transport, received, sent, bytes_in, bytes_out) in [
            (
                "udp",
                udp.datagrams_received,
                udp.datagrams_sent,
                udp.bytes_received,
                udp.bytes_sent,
            ),
            (
                "ws",
                ws.messages_received,
                ws.messages_sent,
                ws.bytes_received,
                ws.bytes_sent,
            ),
        ] {
            let labels = [("transport", transport)];
            self.counter("tickwire_packets_received_total", &labels, received);
            self.counter("tickwire_packets_sent_total", &labels, sent);
            self.counter("tickwire_bytes_received_total", &labels, bytes_in);
            self.counter("tickwire_bytes_sent_total", &labels, bytes_out);
        }
        self.counter(
            "tickwire_connections_accepted_total",
            &[("transport", "udp")],
            udp.connections_accepted,
        );
        self.counter(
            "tickwire_connections_accepted_total",
            &[("transport", "ws")],
            ws.connections_accepted,
        );
        self.counter(
            "tickwire_connections_replaced_total",
            &[("transport", "udp")],
            udp.connections_replaced,
        );
        self.counter(
            "tickwire_connections_replaced_total",
            &[("transport", "ws")],
            ws.connections_replaced,
        );
        let drops = &udp.dropped;
        for (reason, count) in [
            ("malformed", drops.malformed),
            ("wrong_protocol", drops.wrong_protocol),
            ("token_expired", drops.token_expired),
            ("token_tampered", drops.token_tampered),
            ("token_wrong_server", drops.token_wrong_server),
            ("token_replayed", drops.token_replayed),
            ("challenge_invalid", drops.challenge_invalid),
            ("unknown_address", drops.unknown_address),
            ("packet_replayed", drops.packet_replayed),
            ("unauthenticated", drops.unauthenticated),
            ("overloaded", drops.overloaded),
            ("too_large", too_long),
        ] {
            self.counter(
                "tickwire_udp_datagrams_dropped_total",
                &[("reason", reason)],
                count,
            );
        }
        for (transport, count) in [("udp", udp.messages_too_large), ("ws", ws.sends_too_large)] {
            self.counter(
                "tickwire_messages_too_large_total",
                &[("transport", transport)],
                count,
            );
        }
        for (reason, count) in [
            ("malformed", ws.refused_malformed),
            ("bad_token", ws.refused_bad_token),
            ("expired", ws.refused_expired),
            ("replayed", ws.refused_replayed),
            ("full", ws.refused_full),
            ("shutdown", ws.refused_shutdown),
            ("handshake_timeout", ws.handshake_timeouts),
        ] {
            self.counter(
                "tickwire_ws_connections_refused_total",
                &[("reason", reason)],
                count,
            );
        }
        for (kind, count) in [
            ("sequenced_replaced", ws.sequenced_replaced),
            ("unreliable_dropped", ws.unreliable_dropped),
        ] {
            self.counter("tickwire_send_queue_drops_total", &[("kind", kind)], count);
        }
        for (reason, count) in [
            ("slow_client", ws.closed_slow_client),
            ("too_large", ws.closed_too_large),
            ("protocol_violation", ws.closed_protocol_violation),
            ("idle", ws.closed_idle),
        ] {
            self.counter("tickwire_ws_closed_total", &[("reason", reason)], count);
        }
        for (limit, count) in [
            ("messages", shard.messages_rate_limited),
            ("connections_per_address", refused[1]),
            (
                "matchmake",
                self.matchmake_rate_limited.load(Ordering::Relaxed),
            ),
        ] {
            self.counter("tickwire_rate_limited_total", &[("limit", limit)], count);
        }
        self.counter(
            "tickwire_players_kicked_for_flooding_total",
            &[],
            shard.players_flooding,
        );
        self.counter("tickwire_joins_refused_total", &[], refused[0]);
        self.counter(
            "tickwire_matchmade_total",
            &[],
            self.matchmade.load(Ordering::Relaxed),
        );
        self.counter(
            "tickwire_memory_trims_total",
            &[],
            self.memory_trims.load(Ordering::Relaxed),
        );
        self.counter(
            "tickwire_memory_returned_bytes_total",
            &[],
            self.memory_returned_bytes.load(Ordering::Relaxed),
        );
        // Heap in use beside the RSS tells a leak (both grow) from fragmentation (only
        // the RSS grows). Known only when the binary counts its allocations.
        if tickwire_alloc_count::is_active() {
            let heap = tickwire_alloc_count::live_bytes().max(0);
            self.gauge("tickwire_heap_bytes", &[], heap as f64);
            self.counter(
                "tickwire_allocations_total",
                &[],
                tickwire_alloc_count::allocations(),
            );
        }
        if let Some(wt) = &app.wt {
            self.render_wt(wt);
        }
        self.render_http(app);
        let credentials = app.credentials.stats();
        for (index, via) in crate::credentials::Via::ALL.into_iter().enumerate() {
            let labels = [("via", via.name())];
            let failures = credentials.failures[index];
            self.counter("tickwire_admin_auth_failures_total", &labels, failures);
            let locked = credentials.locked_out[index];
            self.counter("tickwire_admin_auth_locked_out_total", &labels, locked);
        }
        self.counter("tickwire_admin_lockouts_total", &[], credentials.lockouts);
        self.counter("tickwire_ticks_total", &[], shard.ticks);
        self.counter("tickwire_ticks_skipped_total", &[], shard.ticks_skipped);
        self.counter(
            "tickwire_publishes_waited_total",
            &[],
            shard.publishes_waited,
        );
        for (kind, count) in &overruns {
            self.counter("tickwire_tick_overruns_total", &[("kind", kind)], *count);
        }
        self.counter("tickwire_rooms_disposed_total", &[], shard.rooms_disposed);
        self.counter("tickwire_rooms_crashed_total", &[], shard.rooms_crashed);
        self.counter(
            "tickwire_messages_unencodable_total",
            &[],
            shard.messages_unencodable,
        );
        self.counter("tickwire_seats_expired_total", &[], shard.seats_expired);
        self.handle.render()
    }
}

impl Metrics {
    /// The HTTP and HTTPS listeners' counters, added together.
    fn render_http(&self, app: &App) {
        let mut total = tickwire_net::ws::ListenStats::default();
        for listener in &app.http_metrics {
            let one = listener.snapshot();
            total.connections_accepted += one.connections_accepted;
            total.accept_errors += one.accept_errors;
            total.refused_per_ip += one.refused_per_ip;
            total.tls_accept_timeouts += one.tls_accept_timeouts;
            total.header_timeouts += one.header_timeouts;
            total.body_timeouts += one.body_timeouts;
            total.request_timeouts += one.request_timeouts;
            total.bad_host += one.bad_host;
        }
        self.counter(
            "tickwire_http_connections_accepted_total",
            &[],
            total.connections_accepted,
        );
        self.counter(
            "tickwire_http_accept_errors_total",
            &[],
            total.accept_errors,
        );
        for (reason, count) in [
            ("per_ip", total.refused_per_ip),
            ("tls_timeout", total.tls_accept_timeouts),
            ("header_timeout", total.header_timeouts),
            ("body_timeout", total.body_timeouts),
            ("request_timeout", total.request_timeouts),
            ("bad_host", total.bad_host),
        ] {
            self.counter("tickwire_http_refused_total", &[("reason", reason)], count);
        }
    }

    /// The WebTransport endpoint's counters (`docs/OPERATIONS.md`, metrics).
    fn render_wt(&self, wt: &tickwire_net::wt::WtMeters) {
        let stats = wt.stats();
        let counts = wt.counts();
        self.counter("tickwire_wt_sessions_total", &[], counts.sessions_opened);
        self.gauge(
            "tickwire_wt_sessions_open",
            &[],
            counts
                .sessions_opened
                .saturating_sub(counts.sessions_closed) as f64,
        );
        for (name, value) in [
            (
                "tickwire_wt_datagrams_received_total",
                counts.datagrams_received,
            ),
            (
                "tickwire_wt_datagrams_dropped_total",
                counts.datagrams_dropped,
            ),
            ("tickwire_wt_datagrams_sent_total", counts.datagrams_sent),
            (
                "tickwire_wt_datagrams_too_large_total",
                counts.datagrams_too_large,
            ),
            (
                "tickwire_wt_stream_frames_received_total",
                counts.stream_frames_received,
            ),
            (
                "tickwire_wt_stream_frames_sent_total",
                counts.stream_frames_sent,
            ),
            ("tickwire_wt_extra_streams_total", counts.extra_streams),
            ("tickwire_wt_retries_total", counts.retries_sent),
        ] {
            self.counter(name, &[], value);
        }
        for (reason, count) in [
            ("per_ip", counts.refused_per_ip),
            ("total", counts.refused_total),
            ("handshake_failed", counts.handshakes_failed),
            ("path", counts.refused_path),
            ("handshake_timeout", counts.handshake_timeouts),
            ("malformed", stats.refused_malformed),
            ("bad_token", stats.refused_bad_token),
            ("expired", stats.refused_expired),
            ("replayed", stats.refused_replayed),
            ("full", stats.refused_full),
            ("shutdown", stats.refused_shutdown),
            ("too_large", stats.closed_too_large),
        ] {
            self.counter("tickwire_wt_refused_total", &[("reason", reason)], count);
        }
        let labels = [("transport", "wt")];
        self.counter(
            "tickwire_messages_too_large_total",
            &labels,
            stats.sends_too_large,
        );
        self.counter(
            "tickwire_packets_received_total",
            &labels,
            stats.messages_received,
        );
        self.counter("tickwire_packets_sent_total", &labels, stats.messages_sent);
        self.counter(
            "tickwire_bytes_received_total",
            &labels,
            stats.bytes_received,
        );
        self.counter("tickwire_bytes_sent_total", &labels, stats.bytes_sent);
        self.counter(
            "tickwire_connections_accepted_total",
            &labels,
            stats.connections_accepted,
        );
        self.counter(
            "tickwire_connections_replaced_total",
            &labels,
            stats.connections_replaced,
        );
    }
}

fn key(name: &'static str, labels: &[(&'static str, &str)]) -> Key {
    Key::from_parts(
        name,
        labels
            .iter()
            .map(|(label, value)| Label::new(*label, value.to_string()))
            .collect::<Vec<_>>(),
    )
}

fn add_udp(total: &mut tickwire_proto::ServerStats, one: &tickwire_proto::ServerStats) {
    total.datagrams_received += one.datagrams_received;
    total.datagrams_sent += one.datagrams_sent;
    total.bytes_received += one.bytes_received;
    total.bytes_sent += one.bytes_sent;
    total.connections_accepted += one.connections_accepted;
    total.connections_denied += one.connections_denied;
    total.connections_replaced += one.connections_replaced;
    total.messages_too_large += one.messages_too_large;
    let (t, o) = (&mut total.dropped, &one.dropped);
    t.malformed += o.malformed;
    t.wrong_protocol += o.wrong_protocol;
    t.token_expired += o.token_expired;
    t.token_tampered += o.token_tampered;
    t.token_wrong_server += o.token_wrong_server;
    t.token_replayed += o.token_replayed;
    t.challenge_invalid += o.challenge_invalid;
    t.unknown_address += o.unknown_address;
    t.packet_replayed += o.packet_replayed;
    t.unauthenticated += o.unauthenticated;
    t.overloaded += o.overloaded;
}

/// A profile as (entity kind, field, bytes) rows: each field of each kind, each kind's
/// framing (ids, kinds, field masks) as field `_framing`, the roster as entity `_roster`,
/// headers and counts as entity `_snapshot`.
pub(super) fn replication_rows(
    profile: &ReplicationProfile,
) -> impl Iterator<Item = (&'static str, &'static str, f64)> + '_ {
    let kinds = profile.kinds.iter().flat_map(|kind| {
        std::iter::once((kind.kind, "_framing", kind.framing_bytes)).chain(
            kind.fields
                .iter()
                .map(move |(field, bytes)| (kind.kind, *field, *bytes)),
        )
    });
    let roster = std::iter::once(("_roster", "_framing", profile.roster.framing_bytes)).chain(
        profile
            .roster
            .fields
            .iter()
            .map(|(field, bytes)| ("_roster", *field, *bytes)),
    );
    kinds.chain(roster).chain(std::iter::once((
        "_snapshot",
        "_header",
        profile.overhead_bytes,
    )))
}

fn add_shard(total: &mut crate::shard::ShardStats, one: &crate::shard::ShardStats) {
    total.ticks += one.ticks;
    total.ticks_skipped += one.ticks_skipped;
    total.publishes_waited += one.publishes_waited;
    total.rooms_disposed += one.rooms_disposed;
    total.rooms_crashed += one.rooms_crashed;
    total.messages_unencodable += one.messages_unencodable;
    total.seats_expired += one.seats_expired;
    total.messages_unrouted += one.messages_unrouted;
    total.messages_rate_limited += one.messages_rate_limited;
    total.players_flooding += one.players_flooding;
}

#[cfg(test)]
mod tick_bucket_tests {
    use super::TICK_BUCKETS;

    #[test]
    fn tick_buckets_ascend_keep_the_target_lines_and_are_fine_up_to_a_60_hz_step() {
        assert!(TICK_BUCKETS.windows(2).all(|pair| pair[0] < pair[1]));
        // Hobo's tick p99 line and the 60 Hz step read exactly only as edges.
        for line in [0.004, 0.0167] {
            assert!(TICK_BUCKETS.contains(&line), "{line} s is not an edge");
        }
        for pair in TICK_BUCKETS.windows(2) {
            if pair[0] >= 0.002 && pair[1] <= 0.0167 {
                assert!(pair[1] - pair[0] <= 0.0042 + 1e-9, "{pair:?} too far apart");
            }
        }
    }
}
