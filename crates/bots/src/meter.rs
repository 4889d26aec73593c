//! What a bot group measures over a run, merged across groups at the end: deliveries and
//! their latency ([`Tally`]), how late the bots themselves ran ([`Meter::send_lag_us`],
//! [`Meter::recv_lag_us`]),
//! and what the arena scenarios add ([`ArenaMeter`]).

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::tally::{Delivery, Seen, Tally, Window};

/// One group's measurements. The bots' logic writes into it through
/// [`BotCx`](crate::scenario::BotCx); nothing is counted before the plan exists.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    /// Expected versus delivered in the window, and latency: relay messages at each
    /// member, or arena inputs confirmed by a snapshot.
    pub tally: Option<Tally>,
    /// Messages that were not a bot's or came from another room.
    pub foreign: u64,
    /// The arena scenarios' figures.
    pub arena: ArenaMeter,
    /// How late each due send left the bot, in the window, microseconds: whether the bots
    /// kept their schedule. A group that falls behind (its CPU full) shows here before
    /// anywhere else, and a run whose bots fell behind measured the bots.
    pub send_lag_us: Option<Histogram<u64>>,
    /// How long datagrams that arrived in the window waited at the bots' sockets before
    /// the bots took them in, microseconds: whether they kept their receive pace. Known
    /// where the kernel stamps arrivals (UDP bots on loopback), else empty.
    pub recv_lag_us: Option<Histogram<u64>>,
}

impl Meter {
    /// Starts counting over `window`.
    pub fn start(&mut self, window: Window) {
        self.send_lag_us = Some(lag_histogram());
        self.tally = Some(Tally::new(window));
        self.arena.teleport_confirmed = Some(Tally::new(window));
        self.arena.teleport_seen = Some(Tally::new(window));
        self.arena.teleport_scheduled = Some(Tally::new(window));
        self.arena.teleport_left = Some(Tally::new(window));
        self.arena.window = Some(window);
    }

    /// A send due at `due_ns` went out at `now_ns`; counted when it was due in the window.
    pub fn send_lag(&mut self, due_ns: u64, now_ns: u64) {
        if self.arena.in_window(due_ns)
            && let Some(lag) = &mut self.send_lag_us
        {
            lag.saturating_record((now_ns.saturating_sub(due_ns) / 1_000).max(1));
        }
    }

    /// A datagram that reached the bots' host at `arrived_ns` was taken in at `now_ns`;
    /// counted when it arrived in the window.
    pub fn recv_lag(&mut self, arrived_ns: u64, now_ns: u64) {
        if self.arena.in_window(arrived_ns) {
            self.recv_lag_us
                .get_or_insert_with(lag_histogram)
                .saturating_record((now_ns.saturating_sub(arrived_ns) / 1_000).max(1));
        }
    }

    /// Adds `other`'s counts (same window).
    pub fn merge(&mut self, other: &Meter) {
        merge_histogram(&mut self.send_lag_us, &other.send_lag_us);
        merge_histogram(&mut self.recv_lag_us, &other.recv_lag_us);
        merge_tally(&mut self.tally, &other.tally);
        self.foreign += other.foreign;
        self.arena.merge(&other.arena);
    }
}

/// Lags from 1 µs to a minute, to 1 %.
fn lag_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 2).expect("constant bounds are valid")
}

fn merge_histogram(into: &mut Option<Histogram<u64>>, from: &Option<Histogram<u64>>) {
    match (into, from) {
        (Some(into), Some(from)) => {
            // Same bounds on both sides, so adding cannot fail.
            let _ = into.add(from);
        }
        (into @ None, Some(from)) => *into = Some(from.clone()),
        _ => {}
    }
}

fn merge_tally(into: &mut Option<Tally>, from: &Option<Tally>) {
    match (into.as_mut(), from) {
        (Some(into), Some(from)) => into.merge(from),
        (None, Some(from)) => *into = Some(from.clone()),
        _ => {}
    }
}

/// What arena bots count besides their inputs' confirmations.
#[derive(Debug, Clone, Default)]
pub struct ArenaMeter {
    window: Option<Window>,
    /// Welcomes received (one per join).
    pub welcomes: u64,
    /// Snapshots received in the window.
    pub snapshots: u64,
    /// Their bytes.
    pub snapshot_bytes: u64,
    /// Snapshots decoded in full (entities and baselines) in the window.
    pub full_decodes: u64,
    /// Snapshots or messages that failed to decode, over the whole run.
    pub decode_errors: u64,
    /// The first such failure.
    pub first_decode_error: Option<String>,
    /// Kills by a bot, heard by that bot, in the window.
    pub kills: u64,
    /// Deaths of a bot, heard by that bot, in the window.
    pub deaths: u64,
    /// Respawns in the window.
    pub respawns: u64,
    /// Warp requests, from when each left the bot, → the `Teleported` confirmation.
    pub teleport_confirmed: Option<Tally>,
    /// The same, → the first snapshot showing the bot in the destination zone.
    pub teleport_seen: Option<Tally>,
    /// Warp requests, from the instant they were all scheduled for, → the confirmation:
    /// the bots' own lag in sending the burst included.
    pub teleport_scheduled: Option<Tally>,
    /// Warp requests, from the instant they were scheduled for, → when each left the bot.
    pub teleport_left: Option<Tally>,
}

impl ArenaMeter {
    /// Whether `ns` is in the window (false before the plan).
    pub fn in_window(&self, ns: u64) -> bool {
        self.window.is_some_and(|window| window.contains(ns))
    }

    /// A decode failure: counted, the first one kept.
    pub fn decode_error(&mut self, what: impl FnOnce() -> String) {
        self.decode_errors += 1;
        if self.first_decode_error.is_none() {
            self.first_decode_error = Some(what());
        }
    }

    /// A warp requested at `scheduled_ns`.
    pub fn teleport_requested(&mut self, scheduled_ns: u64) {
        for tally in [
            &mut self.teleport_confirmed,
            &mut self.teleport_seen,
            &mut self.teleport_scheduled,
            &mut self.teleport_left,
        ]
        .into_iter()
        .flatten()
        {
            tally.on_sent(scheduled_ns, 1);
        }
    }

    /// The warp scheduled at `scheduled_ns`, which left the bot at `left_ns`, was
    /// confirmed at `now_ns`.
    pub fn teleport_confirm(&mut self, scheduled_ns: u64, left_ns: u64, now_ns: u64) {
        if let Some(tally) = &mut self.teleport_confirmed {
            tally.on_arrival(left_ns, now_ns, Seen::InOrder);
        }
        if let Some(tally) = &mut self.teleport_scheduled {
            tally.on_arrival(scheduled_ns, now_ns, Seen::InOrder);
        }
        if let Some(tally) = &mut self.teleport_left {
            tally.on_arrival(scheduled_ns, left_ns, Seen::InOrder);
        }
    }

    /// A snapshot first showed the bot, whose warp left at `left_ns`, in the zone at
    /// `now_ns`.
    pub fn teleport_in_zone(&mut self, left_ns: u64, now_ns: u64) {
        if let Some(tally) = &mut self.teleport_seen {
            tally.on_arrival(left_ns, now_ns, Seen::InOrder);
        }
    }

    fn merge(&mut self, other: &ArenaMeter) {
        self.window = self.window.or(other.window);
        self.welcomes += other.welcomes;
        self.snapshots += other.snapshots;
        self.snapshot_bytes += other.snapshot_bytes;
        self.full_decodes += other.full_decodes;
        self.decode_errors += other.decode_errors;
        if self.first_decode_error.is_none() {
            self.first_decode_error
                .clone_from(&other.first_decode_error);
        }
        self.kills += other.kills;
        self.deaths += other.deaths;
        self.respawns += other.respawns;
        merge_tally(&mut self.teleport_confirmed, &other.teleport_confirmed);
        merge_tally(&mut self.teleport_seen, &other.teleport_seen);
        merge_tally(&mut self.teleport_scheduled, &other.teleport_scheduled);
        merge_tally(&mut self.teleport_left, &other.teleport_left);
    }

    /// The figures over a window of `duration_s`.
    pub fn figures(&self, duration_s: f64) -> ArenaFigures {
        let summary =
            |tally: &Option<Tally>| tally.as_ref().map(Tally::summary).unwrap_or_default();
        ArenaFigures {
            welcomes: self.welcomes,
            snapshots_per_s: self.snapshots as f64 / duration_s.max(1e-9),
            snapshot_bytes_mean: self.snapshot_bytes as f64 / self.snapshots.max(1) as f64,
            full_decodes: self.full_decodes,
            decode_errors: self.decode_errors,
            first_decode_error: self.first_decode_error.clone(),
            kills: self.kills,
            deaths: self.deaths,
            respawns: self.respawns,
            teleport: summary(&self.teleport_confirmed),
            teleport_seen: summary(&self.teleport_seen),
            teleport_scheduled: summary(&self.teleport_scheduled),
            teleport_left: summary(&self.teleport_left),
        }
    }
}

/// The arena figures of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ArenaFigures {
    /// Welcomes received (one per join).
    pub welcomes: u64,
    /// Snapshots received per second, all bots together.
    pub snapshots_per_s: f64,
    /// Mean snapshot size, bytes.
    pub snapshot_bytes_mean: f64,
    /// Snapshots decoded in full (entities, deltas against acked baselines).
    pub full_decodes: u64,
    /// Snapshots or messages that failed to decode; should be 0.
    pub decode_errors: u64,
    /// The first failure.
    pub first_decode_error: Option<String>,
    /// Kills by bots, as they heard them.
    pub kills: u64,
    /// Deaths of bots.
    pub deaths: u64,
    /// Respawns.
    pub respawns: u64,
    /// Warp requests (`sent`) and their `Teleported` confirmations (`delivered`), latency
    /// from when each request left its bot to when the confirmation reached the bot's
    /// socket: what each player of a real crowd, on a machine of its own, would see.
    pub teleport: Delivery,
    /// The same requests, to the first snapshot showing the bot in the destination zone.
    pub teleport_seen: Delivery,
    /// The confirmations again, latency from the instant every request was scheduled for:
    /// the bots' time to send the burst from one core included.
    pub teleport_scheduled: Delivery,
    /// The requests, from the instant they were scheduled for to when each left its bot:
    /// the bots' time to send the burst.
    pub teleport_left: Delivery,
}
