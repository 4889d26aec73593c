//! A group of WebSocket bots: one small task per bot, each owning a
//! [`Link`](tickwire_client::Link), all on the group thread's runtime and sharing the
//! group's tally (no locks: one thread). [`run_tasks`] is the group's driver whatever the
//! bots speak; the Colyseus bots ([`super::colyseus`]) use it with their own task.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tickwire_client::{ConnectOptions, Link, LinkEvent};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{
    Command, Counted, Counts, GroupResult, GroupSpec, Live, connect_interval, place, rtt_histogram,
};
use crate::meter::Meter;
use crate::plan::Plan;
use crate::scenario::{BotCx, BotLogic};

/// What the group's bot tasks share.
pub(super) struct Shared {
    pub(super) meter: Meter,
    pub(super) rtt_us: hdrhistogram::Histogram<u64>,
    pub(super) window: Counts,
    disconnects: u64,
    first_disconnect: Option<String>,
    pub(super) send_errors: u64,
    pub(super) rng: SmallRng,
}

impl Shared {
    /// A message for `logic`, counted.
    fn arrived(
        &mut self,
        logic: &mut dyn BotLogic,
        plan: Option<&Plan>,
        channel: u8,
        message: &[u8],
        now_ns: u64,
    ) {
        if plan.is_some_and(|plan| plan.window().contains(now_ns)) {
            self.window.messages_in += 1;
            self.window.datagrams_in += 1;
        }
        let mut cx = BotCx {
            plan,
            meter: &mut self.meter,
            rng: &mut self.rng,
        };
        logic.on_message(channel, message, now_ns, &mut cx);
    }
}

pub(super) async fn run(spec: GroupSpec) -> Option<GroupResult> {
    run_tasks(spec, bot_task).await
}

/// Runs the group: starts `bot(id, spec, shared, permit)` for each of its bots, paced and
/// at most `connect_concurrency` connecting at once (the task drops its permit once
/// connected), starts the meter when the plan comes, and collects the figures once every
/// task has ended.
pub(super) async fn run_tasks<F, T>(spec: GroupSpec, bot: F) -> Option<GroupResult>
where
    F: Fn(u32, Rc<GroupSpec>, Rc<RefCell<Shared>>, OwnedSemaphorePermit) -> T,
    T: Future<Output = ()> + 'static,
{
    let shared = Rc::new(RefCell::new(Shared {
        meter: Meter::default(),
        rtt_us: rtt_histogram(),
        window: Counts::default(),
        disconnects: 0,
        first_disconnect: None,
        send_errors: 0,
        rng: SmallRng::seed_from_u64(spec.config.seed ^ ((spec.index as u64 + 1) << 32)),
    }));
    let spec = Rc::new(spec);
    let interval = connect_interval(&spec.config, spec.bots.len(), spec.scenario.players());
    let permits = Arc::new(Semaphore::new(spec.config.connect_concurrency.max(1)));
    let mut command = spec.command.clone();
    let mut tasks = Vec::with_capacity(spec.bots.len());
    let connecting = async {
        let mut pace = tokio::time::interval(interval);
        for id in spec.bots.iter().copied() {
            pace.tick().await;
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            tasks.push(tokio::task::spawn_local(bot(
                id,
                spec.clone(),
                shared.clone(),
                permit,
            )));
        }
    };
    // Connect (paced), then wait for the plan. On an abort the group returns and dropping
    // the thread's LocalSet ends the bot tasks.
    connecting.await;
    let plan = loop {
        match command.borrow_and_update().clone() {
            Command::Run(plan) => break plan,
            Command::Abort => return None,
            Command::Wait => {}
        }
        if command.changed().await.is_err() {
            return None;
        }
    };
    shared.borrow_mut().meter.start(plan.window());
    for task in tasks {
        let _ = task.await;
    }
    let shared = Rc::try_unwrap(shared).ok()?.into_inner();
    Some(GroupResult {
        meter: shared.meter,
        rtt_us: shared.rtt_us,
        window: shared.window,
        disconnects: shared.disconnects,
        first_disconnect: shared.first_disconnect,
        send_errors: shared.send_errors,
    })
}

/// One bot: matchmake, connect, wait for the plan, then send on schedule and count what
/// arrives until the drain ends.
async fn bot_task(
    bot: u32,
    spec: Rc<GroupSpec>,
    shared: Rc<RefCell<Shared>>,
    permit: OwnedSemaphorePermit,
) {
    let live = &spec.live;
    let answer = match place(&spec, bot).await {
        Ok(answer) => answer,
        Err(error) => return spec.connect_failed(bot, error),
    };
    let options = ConnectOptions {
        timeout: spec.config.connect_timeout,
        ..ConnectOptions::default()
    };
    let mut link = match Link::connect(&answer, spec.config.transport, &options).await {
        Ok(link) => link,
        Err(error) => return spec.connect_failed(bot, format!("connect: {error}")),
    };
    drop(permit);
    let mut logic = spec.scenario.bot(bot);
    spec.connected(bot, answer.room);

    let mut command = spec.command.clone();
    let plan: Arc<Plan> = loop {
        // Keep the connection serviced (pings) while the others connect; what the room
        // sends meanwhile (a welcome) goes to the logic.
        let next = command.borrow_and_update().clone();
        match next {
            Command::Run(plan) => break plan,
            Command::Abort => return link.close().await,
            Command::Wait => {}
        }
        tokio::select! {
            changed = command.changed() => if changed.is_err() { return link.close().await },
            event = link.next_event() => match event {
                LinkEvent::Message { channel, message } => {
                    shared.borrow_mut().arrived(logic.as_mut(), None, channel, &message, 0);
                }
                LinkEvent::Ended(ended) => {
                    record_disconnect(&shared, live, bot, ended.to_string());
                    return;
                }
            },
        }
    };

    logic.start(&plan, &mut shared.borrow_mut().rng);
    let mut next_rtt_ns = plan.window().start_ns;
    let drain_end = plan.at(plan.drain_end_ns);
    let mut last_messages = 0u64;
    // Two timers for the bot's whole run, moved rather than made anew for every message
    // that arrives (a timer-wheel insertion and removal each, which at 60 snapshots a
    // second per bot was a good part of the load tool's CPU).
    let drained = tokio::time::sleep_until(drain_end.into());
    tokio::pin!(drained);
    let send_timer = tokio::time::sleep_until(drain_end.into());
    tokio::pin!(send_timer);
    let mut armed_for = u64::MAX;
    loop {
        let next_send_ns = logic.next_send_ns();
        if next_send_ns != armed_for && next_send_ns != u64::MAX {
            send_timer.as_mut().reset(plan.at(next_send_ns).into());
        }
        armed_for = next_send_ns;
        tokio::select! {
            event = link.next_event() => match event {
                LinkEvent::Message { channel, message } => {
                    let now_ns = plan.ns(Instant::now());
                    shared.borrow_mut().arrived(logic.as_mut(), Some(&plan), channel, &message, now_ns);
                }
                LinkEvent::Ended(ended) => {
                    record_disconnect(&shared, live, bot, ended.to_string());
                    return;
                }
            },
            () = &mut send_timer, if next_send_ns != u64::MAX => {
                let now_ns = plan.ns(Instant::now());
                let mut shared = shared.borrow_mut();
                let shared = &mut *shared;
                shared.meter.send_lag(next_send_ns, now_ns);
                let mut cx = BotCx { plan: Some(&plan), meter: &mut shared.meter, rng: &mut shared.rng };
                let mut out = Counted::new(&mut link);
                logic.send_due(now_ns, &mut cx, &mut out);
                let (sent, refused) = (out.sent, out.refused);
                shared.send_errors += refused;
                Live::add(&live.messages_out, sent);
                Live::add(&live.datagrams_out, sent);
                if plan.window().contains(now_ns) {
                    shared.window.messages_out += sent;
                    shared.window.datagrams_out += sent;
                }
            },
            () = &mut drained => break,
        }
        let now_ns = plan.ns(Instant::now());
        if plan.window().contains(now_ns) && now_ns >= next_rtt_ns {
            next_rtt_ns = now_ns + 1_000_000_000;
            if let Some(rtt) = link.stats().rtt {
                let rtt_us = rtt.as_micros() as u64;
                shared.borrow_mut().rtt_us.saturating_record(rtt_us.max(1));
                Live::add(&live.rtt_us_sum, rtt_us);
                Live::add(&live.rtt_samples, 1);
            }
        }
        let received = link.stats().messages_received;
        Live::add(&live.messages_in, received - last_messages);
        Live::add(&live.datagrams_in, received - last_messages);
        last_messages = received;
    }
    // Give the close a bound: a server that stopped reading must not hold the run.
    let _ = tokio::time::timeout(Duration::from_secs(2), link.close()).await;
}

/// A bot's connection ended before the run did: counted, the first reason kept.
pub(super) fn record_disconnect(shared: &RefCell<Shared>, live: &Live, bot: u32, why: String) {
    let mut shared = shared.borrow_mut();
    shared.disconnects += 1;
    shared
        .first_disconnect
        .get_or_insert_with(|| format!("bot {bot}: {why}"));
    Live::add(&live.disconnects, 1);
}
