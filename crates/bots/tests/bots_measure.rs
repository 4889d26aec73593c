//! The bots' measurement against fake servers with known behaviour, in virtual time: the
//! scenarios' own bot logic ([`Scenario::bot`]) sends on its open-loop schedule into a
//! fake server that answers after an injected delay and drops a known, seeded fraction;
//! the [`Meter`] must report exactly what was injected.
//!
//! - relay: every message forwarded to every other member (seeds 001 and 004);
//! - arena: every input confirmed by a snapshot whose `last_input` names it; warps
//!   confirmed by `Teleported` and a snapshot showing the bot in the zone.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tickwire_arena::InputCommand;
use tickwire_arena::messages::{ClientInput, INPUT, RELIABLE, SNAPSHOT, ServerMessage};
use tickwire_bots::meter::Meter;
use tickwire_bots::plan::Plan;
use tickwire_bots::scenario::{ArenaScenario, BotCx, BotLogic, Outbox, RelayScenario, Scenario};
use tickwire_bots::stamp::Stamp;
use tickwire_bots::tally::Delivery;
use tickwire_wire::{BitWrite, BitWriter, decode_exact, encode_to_vec};

const MS: u64 = 1_000_000;

/// The injected delay of the `n`th answer: 85 % take 2 ms, 13 % 10 ms, 2 % `slow`.
fn injected_delay_ns(n: u64, slow_ms: u64) -> u64 {
    match n % 100 {
        0..85 => 2 * MS,
        85..98 => 10 * MS,
        _ => slow_ms * MS,
    }
}

/// What a bot's logic sends, captured.
#[derive(Default)]
struct Captured(Vec<(u8, Bytes)>);

impl Outbox for Captured {
    fn send(&mut self, channel: u8, message: Bytes) -> bool {
        self.0.push((channel, message));
        true
    }
}

/// A message on its way to a bot: `(arrival, order, receiver, channel, bytes)`.
type InFlight = Reverse<(u64, u64, u32, u8, Vec<u8>)>;

/// Bots of one scenario and a fake server, in virtual time.
struct Sim {
    plan: Plan,
    meter: Meter,
    rng: SmallRng,
    bots: Vec<Box<dyn BotLogic>>,
    in_flight: BinaryHeap<InFlight>,
    order: u64,
    /// How long after `send_due` queued them the bots' messages leave (an engine's
    /// flush): the server hears them then, and the bots are told so (`left`).
    flush_delay_ns: u64,
}

impl Sim {
    /// `bots` of `scenario` in one room; 1 s of warm-up, a 5 s window, 1 s of drain.
    fn new(scenario: &dyn Scenario, bots: u32, seed: u64) -> Self {
        let plan = Plan::new(
            &vec![Some(1); bots as usize],
            Duration::from_secs(1),
            Duration::from_secs(5),
            Duration::from_secs(1),
        );
        Self {
            plan,
            meter: Meter::default(),
            rng: SmallRng::seed_from_u64(seed),
            bots: (0..bots).map(|bot| scenario.bot(bot)).collect(),
            in_flight: BinaryHeap::new(),
            order: 0,
            flush_delay_ns: 0,
        }
    }

    /// A message from the server to `bot`, arriving at `at_ns`.
    fn deliver(&mut self, at_ns: u64, bot: u32, channel: u8, bytes: Vec<u8>) {
        self.order += 1;
        self.in_flight
            .push(Reverse((at_ns, self.order, bot, channel, bytes)));
    }

    /// Hands every bot the messages queued so far, before the plan exists (a welcome).
    fn before_start(&mut self) {
        while let Some(Reverse((_, _, bot, channel, bytes))) = self.in_flight.pop() {
            let mut cx = BotCx {
                plan: None,
                meter: &mut self.meter,
                rng: &mut self.rng,
            };
            self.bots[bot as usize].on_message(channel, &bytes, 0, &mut cx);
        }
    }

    /// Starts the bots and runs until nothing is due before the drain ends; `server` hears
    /// every message a bot sends, at the instant it is sent.
    fn run(&mut self, mut server: impl FnMut(&mut Sim, u64, u32, u8, Bytes)) {
        self.before_start();
        self.meter.start(self.plan.window());
        for bot in &mut self.bots {
            bot.start(&self.plan, &mut self.rng);
        }
        let end_ns = self.plan.window().end_ns + 1_000 * MS;
        loop {
            let next_send = self
                .bots
                .iter()
                .map(|bot| bot.next_send_ns())
                .min()
                .unwrap_or(u64::MAX);
            let next_arrival = self.in_flight.peek().map_or(u64::MAX, |f| f.0.0);
            let now_ns = next_send.min(next_arrival);
            if now_ns > end_ns {
                return;
            }
            if next_arrival <= next_send {
                let Some(Reverse((_, _, bot, channel, bytes))) = self.in_flight.pop() else {
                    return;
                };
                let mut cx = BotCx {
                    plan: Some(&self.plan),
                    meter: &mut self.meter,
                    rng: &mut self.rng,
                };
                self.bots[bot as usize].on_message(channel, &bytes, now_ns, &mut cx);
                continue;
            }
            for bot in 0..self.bots.len() {
                if self.bots[bot].next_send_ns() > now_ns {
                    continue;
                }
                let mut captured = Captured::default();
                let mut cx = BotCx {
                    plan: Some(&self.plan),
                    meter: &mut self.meter,
                    rng: &mut self.rng,
                };
                self.bots[bot].send_due(now_ns, &mut cx, &mut captured);
                let left_ns = now_ns + self.flush_delay_ns;
                if self.flush_delay_ns > 0 && !captured.0.is_empty() {
                    self.bots[bot].left(left_ns);
                }
                for (channel, message) in captured.0 {
                    server(self, left_ns, bot as u32, channel, message);
                }
            }
        }
    }

    fn delivery(&self) -> Delivery {
        self.meter.tally.as_ref().expect("started").summary()
    }
}

fn assert_ms(what: &str, measured: f64, injected: f64) {
    // HDR histograms at 3 significant digits: within 0.1 %.
    assert!(
        (measured - injected).abs() <= injected * 0.001 + 0.001,
        "{what}: measured {measured} ms, injected {injected} ms"
    );
}

struct RelayOutcome {
    delivery: Delivery,
    sent_in_window: u64,
    dropped_in_window: u64,
}

/// One relay room of `members` bots; the fake relay forwards each message to every other
/// member after the injected delay, or drops it with probability `drop_fraction`.
fn run_fake_relay(
    members: u32,
    scenario: &RelayScenario,
    drop_fraction: f64,
    seed: u64,
) -> RelayOutcome {
    let mut sim = Sim::new(scenario, members, seed);
    let window = sim.plan.window();
    let mut copies = 0u64;
    let mut sent_in_window = 0;
    let mut dropped_in_window = 0;
    let mut drops = SmallRng::seed_from_u64(seed ^ 0xd7);
    sim.run(|sim, now_ns, sender, _channel, message| {
        let stamp = Stamp::read(&message).expect("relay bots stamp every message");
        assert_eq!(
            stamp.scheduled_ns, now_ns,
            "the virtual clock is never late"
        );
        let counted = window.contains(stamp.scheduled_ns);
        sent_in_window += u64::from(counted);
        for receiver in (0..members).filter(|receiver| *receiver != sender) {
            copies += 1;
            if drops.random_bool(drop_fraction) {
                dropped_in_window += u64::from(counted);
                continue;
            }
            let at = now_ns + injected_delay_ns(copies, 50);
            sim.deliver(at, receiver, 1, message.to_vec());
        }
    });
    RelayOutcome {
        delivery: sim.delivery(),
        sent_in_window,
        dropped_in_window,
    }
}

#[test]
fn relay_counts_and_percentiles_match_what_a_lossy_relay_injected() {
    let outcome = run_fake_relay(16, &RelayScenario::sfs(), 0.05, 1);
    let summary = outcome.delivery;
    assert_eq!(summary.sent, outcome.sent_in_window);
    // 16 bots × 30/s × 5 s, give or take a message per bot at the window's edges.
    assert!((2_384..=2_416).contains(&summary.sent), "{summary:?}");
    assert_eq!(summary.expected, outcome.sent_in_window * 15);
    assert_eq!(
        summary.delivered,
        summary.expected - outcome.dropped_in_window,
        "every copy not dropped is delivered, once"
    );
    assert_eq!(summary.lost, outcome.dropped_in_window);
    let loss = summary.lost as f64 / summary.expected as f64;
    assert!((0.04..0.06).contains(&loss), "loss {loss}, injected 0.05");
    assert_eq!(summary.duplicates, 0);
    assert!(summary.reordered > 0, "50 ms copies are overtaken");
    assert_ms("p50", summary.latency_p50_ms, 2.0);
    assert_ms("p90", summary.latency_p90_ms, 10.0);
    assert_ms("p99", summary.latency_p99_ms, 50.0);
    assert_ms("max", summary.latency_max_ms, 50.0);
}

#[test]
fn a_lossless_reliable_relay_reports_delivered_equal_to_expected() {
    let outcome = run_fake_relay(300, &RelayScenario::nettest(), 0.0, 4);
    let summary = outcome.delivery;
    // 300 bots × 1/s × 5 s, each line to 299 others.
    assert_eq!(summary.sent, 1_500);
    assert_eq!(summary.expected, 1_500 * 299);
    assert_eq!(summary.delivered, summary.expected);
    assert_eq!(summary.lost, 0);
    assert_ms("p50", summary.latency_p50_ms, 2.0);
}

#[test]
fn merged_group_meters_add_up() {
    let run = |seed| {
        let scenario = RelayScenario::sfs();
        let mut sim = Sim::new(&scenario, 8, seed);
        let mut n = 0;
        sim.run(|sim, now_ns, sender, _, message| {
            for receiver in (0..8).filter(|receiver| *receiver != sender) {
                n += 1;
                sim.deliver(
                    now_ns + injected_delay_ns(n, 50),
                    receiver,
                    1,
                    message.to_vec(),
                );
            }
        });
        sim.meter
    };
    let (a, b) = (run(7), run(8));
    let mut merged = a.clone();
    merged.merge(&b);
    let summary = |meter: &Meter| meter.tally.as_ref().unwrap().summary();
    let (a, b, merged) = (summary(&a), summary(&b), summary(&merged));
    assert_eq!(merged.expected, a.expected + b.expected);
    assert_eq!(merged.delivered, a.delivered + b.delivered);
    assert_ms("max", merged.latency_max_ms, 50.0);
}

/// The welcome of a map `width × height` named `map`.
fn welcome(you: u16, map: &str, width: f32, height: f32) -> Vec<u8> {
    encode_to_vec(&ServerMessage::Welcome {
        protocol: 1,
        you,
        map: map.into(),
        map_width: width,
        map_height: height,
        tick_rate_hz: 60,
        tick: 0,
        max_health: 100,
        max_speed: 6.0,
        player_radius: 0.4,
        snapshot_history: 32,
    })
    .unwrap()
}

/// A full snapshot with nothing in view: tick, the applied input, the bot at `position`.
fn snapshot(tick: u32, last_input: u16, position: (f32, f32)) -> Vec<u8> {
    let mut buf = [0u8; 64];
    let mut w = BitWriter::new(&mut buf);
    w.write_uint(u64::from(tick), 32).unwrap();
    w.write_bool(false).unwrap(); // no baseline
    w.write_bool(true).unwrap();
    w.write_uint(u64::from(last_input), 16).unwrap();
    w.write_bool(true).unwrap(); // alive
    w.write_f32(position.0).unwrap();
    w.write_f32(position.1).unwrap();
    w.write_uint(0, 10).unwrap(); // aim
    w.write_uint(100, 7).unwrap(); // health, 7 bits for 100
    for _ in 0..3 {
        w.write_varint(0).unwrap(); // kills, deaths, score
    }
    for _ in 0..3 {
        w.write_uint(0, 8).unwrap(); // destroys, creates, updates
    }
    w.write_uint(0, 6).unwrap(); // bullets
    let len = w.finish().unwrap();
    buf[..len].to_vec()
}

/// Arena bots against a fake room that confirms each input in a snapshot after the
/// injected delay (never more than an input interval, so answers keep their order), and
/// answers a warp with `Teleported` after `warp_ms` and a snapshot in the plaza.
fn run_fake_arena(scenario: &ArenaScenario, warp_ms: u64) -> Sim {
    run_fake_arena_flushed_after(scenario, warp_ms, 0)
}

/// [`run_fake_arena`] with bots whose messages leave `flush_ms` after they are queued.
fn run_fake_arena_flushed_after(scenario: &ArenaScenario, warp_ms: u64, flush_ms: u64) -> Sim {
    let mut sim = Sim::new(scenario, scenario.players as u32, 9);
    sim.flush_delay_ns = flush_ms * MS;
    for bot in 0..scenario.players as u32 {
        sim.deliver(
            0,
            bot,
            RELIABLE,
            welcome(bot as u16, "metropolis", 400.0, 400.0),
        );
    }
    let mut answers = 0u64;
    let mut tick = 0u32;
    let mut warped = vec![false; scenario.players];
    sim.run(|sim, now_ns, bot, channel, message| {
        assert_eq!(channel, INPUT, "arena bots send inputs only");
        let input: ClientInput = decode_exact(&message).expect("a valid input");
        let newest = input.inputs()[0];
        if newest.buttons & InputCommand::WARP != 0 {
            warped[bot as usize] = true;
            let teleported = ServerMessage::Teleported {
                teleport: 0,
                x: 200.0,
                y: 200.0,
            };
            let at = now_ns + warp_ms * MS;
            sim.deliver(at, bot, RELIABLE, encode_to_vec(&teleported).unwrap());
            tick += 1;
            sim.deliver(
                at,
                bot,
                SNAPSHOT,
                snapshot(tick, newest.sequence, (200.0, 200.0)),
            );
            return;
        }
        answers += 1;
        tick += 1;
        let position = if warped[bot as usize] {
            (200.0, 200.0)
        } else {
            (20.0, 20.0)
        };
        let at = now_ns + injected_delay_ns(answers, 30);
        sim.deliver(at, bot, SNAPSHOT, snapshot(tick, newest.sequence, position));
    });
    sim
}

#[test]
fn arena_inputs_are_confirmed_by_snapshots_with_the_injected_latency() {
    let mut scenario = ArenaScenario::hobo();
    scenario.players = 20;
    scenario.rooms = 1;
    // Bots 0 and 16 decode in full: the fake snapshots must satisfy the real decoder.
    let sim = run_fake_arena(&scenario, 0);
    let summary = sim.delivery();
    // 20 bots × 25 inputs/s × 5 s, give or take one per bot at the window's edges.
    assert!((2_480..=2_520).contains(&summary.sent), "{summary:?}");
    assert_eq!(summary.expected, summary.sent);
    assert_eq!(
        summary.delivered, summary.sent,
        "every input confirmed once"
    );
    assert_eq!(summary.duplicates, 0);
    assert_ms("p50", summary.latency_p50_ms, 2.0);
    assert_ms("p90", summary.latency_p90_ms, 10.0);
    assert_ms("p99", summary.latency_p99_ms, 30.0);
    let arena = sim.meter.arena.figures(5.0);
    assert_eq!(arena.decode_errors, 0, "{:?}", arena.first_decode_error);
    assert_eq!(arena.welcomes, 20);
    assert!(arena.full_decodes > 0, "bot 0 decodes in full");
    assert_eq!(arena.teleport.sent, 0, "hobo bots do not warp");
}

#[test]
fn a_lost_confirmation_is_made_good_by_the_next_snapshot() {
    let mut scenario = ArenaScenario::hobo();
    scenario.players = 4;
    scenario.rooms = 1;
    let mut sim = Sim::new(&scenario, 4, 3);
    for bot in 0..4 {
        sim.deliver(
            0,
            bot,
            RELIABLE,
            welcome(bot as u16, "courtyard", 40.0, 30.0),
        );
    }
    let mut n = 0u64;
    sim.run(|sim, now_ns, bot, _, message| {
        let input: ClientInput = decode_exact(&message).unwrap();
        n += 1;
        // Every tenth snapshot is lost: its input is confirmed by the next one, 40 ms on.
        if !n.is_multiple_of(10) {
            let sequence = input.inputs()[0].sequence;
            sim.deliver(
                now_ns + 2 * MS,
                bot,
                SNAPSHOT,
                snapshot(n as u32, sequence, (5.0, 5.0)),
            );
        }
    });
    let summary = sim.delivery();
    assert!(
        summary.sent - summary.delivered <= 4,
        "all but each bot's last input confirmed: {summary:?}"
    );
    assert_ms("p50", summary.latency_p50_ms, 2.0);
    assert_ms("max", summary.latency_max_ms, 42.0);
}

#[test]
fn warps_are_timed_to_their_confirmation_and_to_the_zone() {
    let mut scenario = ArenaScenario::teleport();
    scenario.players = 10;
    let sim = run_fake_arena(&scenario, 7);
    let arena = sim.meter.arena.figures(5.0);
    assert_eq!(arena.teleport.sent, 10, "one warp per bot, in the window");
    assert_eq!(arena.teleport.delivered, 10);
    assert_eq!(arena.teleport_seen.delivered, 10);
    assert_ms("confirmation p99", arena.teleport.latency_p99_ms, 7.0);
    assert_ms("in zone p50", arena.teleport_seen.latency_p50_ms, 7.0);
    assert_ms(
        "from the schedule",
        arena.teleport_scheduled.latency_p99_ms,
        7.0,
    );
    assert_eq!(arena.decode_errors, 0, "{:?}", arena.first_decode_error);
}

/// Bots that take 5 ms to get their warps out (one core sending a crowd's burst): the
/// confirmation is timed from when each request left, the bots' 5 ms shown apart, and the
/// figure from the schedule holds both.
#[test]
fn a_warp_that_leaves_late_is_timed_from_when_it_left() {
    let mut scenario = ArenaScenario::teleport();
    scenario.players = 10;
    let sim = run_fake_arena_flushed_after(&scenario, 7, 5);
    let arena = sim.meter.arena.figures(5.0);
    assert_eq!(arena.teleport.delivered, 10);
    assert_ms("confirmation p99", arena.teleport.latency_p99_ms, 7.0);
    assert_ms("in zone p99", arena.teleport_seen.latency_p99_ms, 7.0);
    assert_ms(
        "requests left, p99",
        arena.teleport_left.latency_p99_ms,
        5.0,
    );
    assert_ms(
        "from the schedule",
        arena.teleport_scheduled.latency_p99_ms,
        12.0,
    );
}
