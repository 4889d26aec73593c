//! What a group that drives all of its bots from one task (the UDP, WebTransport and WebSocket
//! engines) keeps besides the bots themselves: the plan, the figures, the generator, and
//! the reports to the run. One place decides what a connection, a message, a send and an
//! ending count as, whatever carries them.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::{Counted, Counts, GroupResult, GroupSpec, Live, Queue, rtt_histogram};
use crate::meter::Meter;
use crate::plan::Plan;
use crate::scenario::{BotCx, BotLogic};

/// A group's plan, figures and reports.
pub(super) struct Ledger {
    pub(super) spec: Rc<GroupSpec>,
    /// Known once every bot has connected (or failed to).
    pub(super) plan: Option<Arc<Plan>>,
    meter: Meter,
    rng: SmallRng,
    rtt_us: hdrhistogram::Histogram<u64>,
    next_rtt_sample_ns: u64,
    /// Since the group started; what the live counters have been given of it.
    pub(super) total: Counts,
    published: Counts,
    /// In the measured window.
    pub(super) window: Counts,
    disconnects: u64,
    first_disconnect: Option<String>,
    send_errors: u64,
}

impl Ledger {
    pub(super) fn new(spec: Rc<GroupSpec>) -> Self {
        let rng = SmallRng::seed_from_u64(spec.config.seed ^ ((spec.index as u64 + 1) << 32));
        Self {
            spec,
            plan: None,
            meter: Meter::default(),
            rng,
            rtt_us: rtt_histogram(),
            next_rtt_sample_ns: 0,
            total: Counts::default(),
            published: Counts::default(),
            window: Counts::default(),
            disconnects: 0,
            first_disconnect: None,
            send_errors: 0,
        }
    }

    /// Nanoseconds since the plan's epoch (0 before the plan).
    pub(super) fn now_ns(&self, now: Instant) -> u64 {
        self.plan.as_ref().map_or(0, |plan| plan.ns(now))
    }

    pub(super) fn in_window(&self, now_ns: u64) -> bool {
        self.plan
            .as_ref()
            .is_some_and(|plan| plan.window().contains(now_ns))
    }

    /// The run's plan is known: the connected bots' `logics` plan their sends.
    pub(super) fn start<'a>(
        &mut self,
        plan: Arc<Plan>,
        logics: impl Iterator<Item = &'a mut Box<dyn BotLogic>>,
    ) {
        for logic in logics {
            logic.start(&plan, &mut self.rng);
        }
        self.meter.start(plan.window());
        self.next_rtt_sample_ns = plan.window().start_ns;
        self.plan = Some(plan);
    }

    /// Bot `id` connected (into `room`): counted and reported; its logic.
    pub(super) fn connected(&mut self, id: u32, room: u64) -> Box<dyn BotLogic> {
        let mut logic = self.spec.scenario.bot(id);
        if let Some(plan) = &self.plan {
            logic.start(plan, &mut self.rng);
        }
        self.spec.connected(id, room);
        logic
    }

    /// Bot `id` could not connect: counted and reported with `error`.
    pub(super) fn fail(&self, id: u32, error: String) {
        self.spec.connect_failed(id, error);
    }

    /// Bot `id`'s connection ended: a disconnect if it had `connected`, else a failed
    /// handshake.
    pub(super) fn ended(&mut self, id: u32, connected: bool, why: &str) {
        if connected {
            self.disconnects += 1;
            Live::add(&self.spec.live.disconnects, 1);
            self.first_disconnect
                .get_or_insert_with(|| format!("bot {id}: {why}"));
        } else {
            self.fail(id, format!("handshake: {why}"));
        }
    }

    /// A message for a bot (whose `logic` exists once it connected), counted.
    pub(super) fn arrived(
        &mut self,
        logic: Option<&mut Box<dyn BotLogic>>,
        channel: u8,
        message: &[u8],
        now_ns: u64,
    ) {
        self.total.messages_in += 1;
        if self.in_window(now_ns) {
            self.window.messages_in += 1;
        }
        let Some(logic) = logic else {
            return;
        };
        let mut cx = BotCx {
            plan: self.plan.as_deref(),
            meter: &mut self.meter,
            rng: &mut self.rng,
        };
        logic.on_message(channel, message, now_ns, &mut cx);
    }

    /// Runs `logic`'s sends into `queue` if one is due at `now_ns`; how many were queued.
    pub(super) fn send_due<Q: Queue + ?Sized>(
        &mut self,
        logic: &mut dyn BotLogic,
        queue: &mut Q,
        now_ns: u64,
    ) -> u64 {
        let Some(plan) = self.plan.as_deref() else {
            return 0;
        };
        let due_ns = logic.next_send_ns();
        if due_ns > now_ns {
            return 0;
        }
        self.meter.send_lag(due_ns, now_ns);
        let mut cx = BotCx {
            plan: Some(plan),
            meter: &mut self.meter,
            rng: &mut self.rng,
        };
        let mut out = Counted::new(queue);
        logic.send_due(now_ns, &mut cx, &mut out);
        let (sent, refused) = (out.sent, out.refused);
        self.send_errors += refused;
        self.total.messages_out += sent;
        if plan.window().contains(now_ns) {
            self.window.messages_out += sent;
        }
        sent
    }

    /// A datagram that reached the host at `arrived_ns` was taken in at `now_ns`.
    pub(super) fn recv_lag(&mut self, arrived_ns: u64, now_ns: u64) {
        self.meter.recv_lag(arrived_ns, now_ns);
    }

    /// Whether round trips are sampled now (once a second in the window).
    pub(super) fn rtt_sample_due(&mut self, now_ns: u64) -> bool {
        let due = self.in_window(now_ns) && now_ns >= self.next_rtt_sample_ns;
        if due {
            self.next_rtt_sample_ns = now_ns + 1_000_000_000;
        }
        due
    }

    /// One bot's round trip.
    pub(super) fn record_rtt(&mut self, rtt_us: u64) {
        self.rtt_us.saturating_record(rtt_us.max(1));
        Live::add(&self.spec.live.rtt_us_sum, rtt_us);
        Live::add(&self.spec.live.rtt_samples, 1);
    }

    /// UDP datagrams received (`inbound`) or sent at `now_ns`.
    pub(super) fn datagrams(&mut self, inbound: bool, count: u64, now_ns: u64) {
        let in_window = self.in_window(now_ns);
        let (total, window) = if inbound {
            (&mut self.total.datagrams_in, &mut self.window.datagrams_in)
        } else {
            (
                &mut self.total.datagrams_out,
                &mut self.window.datagrams_out,
            )
        };
        *total += count;
        if in_window {
            *window += count;
        }
    }

    /// Gives the live counters what the totals gained.
    pub(super) fn publish(&mut self) {
        self.total.publish(&mut self.published, &self.spec.live);
    }

    /// Counts messages the protocol refused to send (a broken shared socket).
    pub(super) fn send_failed(&mut self, count: u64) {
        self.send_errors += count;
    }

    /// The group's figures for the run.
    pub(super) fn into_result(self) -> GroupResult {
        GroupResult {
            meter: self.meter,
            rtt_us: self.rtt_us,
            window: self.window,
            disconnects: self.disconnects,
            first_disconnect: self.first_disconnect,
            send_errors: self.send_errors,
        }
    }
}
