//! The arena scenarios (seeds 000 and 003): bots that play the arena game. Each sends a
//! [`ClientInput`] on a fixed schedule (its newest command, the one before it again in case
//! a packet is lost, and an ack of the newest snapshot it holds), reads every snapshot and
//! message the room sends, and measures:
//!
//! - **input → effect**: an input counts as delivered when the first snapshot whose
//!   `last_input` reaches its sequence arrives (the server applied it and says so); latency
//!   runs from the input's *scheduled* send time (open-loop), so it includes the wait for
//!   the room's next tick;
//! - **warps** (`teleport`): from when each request left its bot to the `Teleported`
//!   confirmation, and to the first snapshot showing the bot inside the destination zone
//!   (what each player of a real crowd, on a machine of its own, would see); and again
//!   from the instant every request was scheduled for, with how late each left: one core
//!   takes milliseconds to send 5,000 requests, and that is the load tool's time;
//! - snapshots and their bytes, kills, deaths and respawns as the bots heard them, and
//!   every snapshot or message that fails to decode.
//!
//! Decoding: every `full_decode_every`-th bot decodes its snapshots in full
//! ([`SnapshotDecoder`]: entities, deltas against the baselines it acked), so the stream is
//! checked end to end; the others read only the header and their own state
//! ([`SnapshotHeader`]), which come first, and ack what they received. The server's work is
//! the same either way; a bot that reads everything would need more CPU than the server it
//! tests.

use std::collections::VecDeque;
use std::f32::consts::PI;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use rand::Rng;
use rand::rngs::SmallRng;
use tickwire_arena::geom::{Aabb, Vec2};
use tickwire_arena::messages::{ClientInput, INPUT, RELIABLE, SNAPSHOT, ServerMessage};
use tickwire_arena::snapshot::{SnapshotConfig, SnapshotDecoder, SnapshotHeader, SnapshotSchema};
use tickwire_arena::{BuiltinMap, InputCommand};
use tickwire_proto::reliable::sequence_newer;
use tickwire_wire::{decode_exact, encode_to_slice};

use super::{BotCx, BotLogic, Outbox, Scenario};
use crate::plan::Plan;

/// What the bots of an arena scenario do between inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArenaBehaviour {
    /// Seed 000: walk, and once a second turn to a random direction and fire.
    Hobo,
    /// Seed 003: wander; at the middle of the measured window every bot warps at once.
    Teleport,
    /// Play: aim at the nearest player in view, close in and fire; wander when alone.
    Play,
}

/// An arena scenario: `players` bots over `rooms` arena rooms.
#[derive(Debug, Clone, PartialEq)]
pub struct ArenaScenario {
    /// `hobo`, `teleport` or `arena`.
    pub name: String,
    /// What the bots do.
    pub behaviour: ArenaBehaviour,
    /// Bots in the run.
    pub players: usize,
    /// Rooms they are spread over.
    pub rooms: usize,
    /// Between two inputs of one bot.
    pub input_interval: Duration,
    /// Every this many bots decodes snapshots in full (1: all of them).
    pub full_decode_every: u32,
}

impl ArenaScenario {
    /// Seed 000: 250 players over 100 rooms at 60 Hz, each sending an input every 40 ms and
    /// turning and firing once a second.
    pub fn hobo() -> Self {
        Self {
            name: "hobo".into(),
            behaviour: ArenaBehaviour::Hobo,
            players: 250,
            rooms: 100,
            input_interval: Duration::from_millis(40),
            full_decode_every: 16,
        }
    }

    /// Seed 003: 5,000 players in one room on the large map; at one moment they all ask to
    /// warp into the 200 m² plaza.
    pub fn teleport() -> Self {
        Self {
            name: "teleport".into(),
            behaviour: ArenaBehaviour::Teleport,
            players: 5000,
            rooms: 1,
            input_interval: Duration::from_millis(100),
            full_decode_every: 50,
        }
    }

    /// A soak: 64 bots playing in two rooms, every snapshot decoded in full.
    pub fn arena() -> Self {
        Self {
            name: "arena".into(),
            behaviour: ArenaBehaviour::Play,
            players: 64,
            rooms: 2,
            input_interval: Duration::from_micros(33_333),
            full_decode_every: 1,
        }
    }

    /// The scenario named `name` with its default shape.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "hobo" => Some(Self::hobo()),
            "teleport" => Some(Self::teleport()),
            "arena" => Some(Self::arena()),
            _ => None,
        }
    }
}

impl Scenario for ArenaScenario {
    fn name(&self) -> &str {
        &self.name
    }

    fn room_kind(&self) -> &str {
        "arena"
    }

    fn players(&self) -> usize {
        self.players
    }

    fn rooms(&self) -> usize {
        self.rooms
    }

    fn validate(&self) -> Result<(), String> {
        let interval = self.input_interval;
        if interval < Duration::from_millis(1) || interval > Duration::from_secs(10) {
            return Err(format!(
                "input interval {interval:?} is outside 1 ms to 10 s"
            ));
        }
        if self.full_decode_every == 0 {
            return Err("full decode every 0 bots: give 1 for all of them".into());
        }
        Ok(())
    }

    fn bot(&self, bot: u32) -> Box<dyn BotLogic> {
        Box::new(ArenaBot {
            id: bot,
            behaviour: self.behaviour,
            full: bot.is_multiple_of(self.full_decode_every),
            period_ns: self.input_interval.as_nanos() as u64,
            next_send_ns: u64::MAX,
            send_end_ns: 0,
            view: None,
            newest: None,
            seq: 0,
            previous: None,
            heading: Vec2::ZERO,
            aim: 0.0,
            fire: false,
            next_turn_ns: u64::MAX,
            pending: VecDeque::new(),
            warp: Warp::None,
            me: Vec2::ZERO,
            target: None,
        })
    }
}

/// Inputs awaiting confirmation per bot at most; older ones are dropped (never counted as
/// delivered). At 25 inputs a second this is over 5 s of silence.
const MAX_PENDING: usize = 128;

/// What a bot learned from its welcome.
struct View {
    schema: SnapshotSchema,
    you: u16,
    /// The full decoder, for bots that decode in full.
    decoder: Option<Box<SnapshotDecoder>>,
    /// Destination zones of the map's teleports, when it is a built-in map.
    zones: &'static [Aabb],
}

/// A warp request's progress (`teleport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Warp {
    /// Not this scenario.
    None,
    /// To be pressed in the first input scheduled at or after this time.
    Due(u64),
    /// Pressed in the input scheduled at `at`, which left the bot at `left` (queued then,
    /// until the engine says when it was written: `on_wire`).
    Requested {
        at: u64,
        left: u64,
        on_wire: bool,
        confirmed: bool,
        seen: bool,
    },
}

struct ArenaBot {
    id: u32,
    behaviour: ArenaBehaviour,
    full: bool,
    period_ns: u64,
    next_send_ns: u64,
    send_end_ns: u64,
    view: Option<View>,
    /// The newest snapshot tick held: what inputs acknowledge.
    newest: Option<u32>,
    seq: u16,
    previous: Option<InputCommand>,
    heading: Vec2,
    aim: f32,
    fire: bool,
    next_turn_ns: u64,
    /// `(sequence, scheduled_ns)` of inputs sent and not yet confirmed, oldest first.
    pending: VecDeque<(u16, u64)>,
    warp: Warp,
    /// Own position in the newest snapshot.
    me: Vec2,
    /// The nearest other player in view (`Play`).
    target: Option<Vec2>,
}

/// The destination zones of each built-in map's teleports, loaded once per process.
fn builtin_zones(map: &str) -> &'static [Aabb] {
    static ZONES: OnceLock<Vec<(String, Vec<Aabb>)>> = OnceLock::new();
    let all = ZONES.get_or_init(|| {
        BuiltinMap::ALL
            .into_iter()
            .filter_map(|builtin| builtin.load().ok())
            .map(|map| {
                let zones = map.teleports().iter().map(|t| t.destination).collect();
                (map.name().to_string(), zones)
            })
            .collect()
    });
    // Built-ins are named after their file (`metropolis.tmx`); take either form.
    let stem = |name: &str| name.trim_end_matches(".tmx").to_string();
    all.iter()
        .find(|(name, _)| stem(name) == stem(map))
        .map_or(&[], |(_, zones)| zones.as_slice())
}

impl ArenaBot {
    fn random_heading(rng: &mut SmallRng) -> Vec2 {
        let angle = rng.random_range(-PI..PI);
        Vec2::new(angle.cos(), angle.sin())
    }

    /// Decides the next command's intent at `at_ns`.
    fn think(&mut self, at_ns: u64, rng: &mut SmallRng) {
        match self.behaviour {
            ArenaBehaviour::Hobo => {
                if at_ns >= self.next_turn_ns {
                    self.next_turn_ns += 1_000_000_000;
                    self.heading = Self::random_heading(rng);
                    self.aim = rng.random_range(-PI..PI);
                    self.fire = true;
                }
            }
            ArenaBehaviour::Teleport => {
                if at_ns >= self.next_turn_ns {
                    self.next_turn_ns += 2_000_000_000;
                    self.heading = Self::random_heading(rng) * 0.5;
                }
            }
            ArenaBehaviour::Play => match self.target {
                Some(target) => {
                    let to = target - self.me;
                    let distance = to.length();
                    self.aim = to.y.atan2(to.x);
                    self.fire = distance < 15.0;
                    // Close in from afar, circle when near.
                    let along = if distance > 6.0 { 1.0 } else { 0.0 };
                    let side = if self.id.is_multiple_of(2) { 0.7 } else { -0.7 };
                    let across = Vec2::new(-to.y, to.x) * side;
                    self.heading = (to * along + across) * (1.0 / distance.max(1e-3));
                }
                None => {
                    self.fire = false;
                    if at_ns >= self.next_turn_ns {
                        self.next_turn_ns += 1_000_000_000;
                        self.heading = Self::random_heading(rng);
                        self.aim = self.heading.y.atan2(self.heading.x);
                    }
                }
            },
        }
    }

    fn on_server_message(&mut self, message: &[u8], now_ns: u64, cx: &mut BotCx<'_>) {
        let message = match decode_exact::<ServerMessage>(message) {
            Ok(message) => message,
            Err(error) => {
                return cx
                    .meter
                    .arena
                    .decode_error(|| format!("bot {}: server message: {error}", self.id));
            }
        };
        let arena = &mut cx.meter.arena;
        let in_window = arena.in_window(now_ns);
        match message {
            ServerMessage::Welcome {
                you,
                map,
                map_width,
                map_height,
                max_health,
                snapshot_history,
                ..
            } => {
                arena.welcomes += 1;
                let schema = match SnapshotSchema::new(Vec2::new(map_width, map_height), max_health)
                {
                    Ok(schema) => schema,
                    Err(error) => {
                        return arena.decode_error(|| format!("bot {}: welcome: {error}", self.id));
                    }
                };
                let config = SnapshotConfig {
                    history: usize::from(snapshot_history).max(2),
                    ..SnapshotConfig::default()
                };
                self.view = Some(View {
                    schema,
                    you,
                    decoder: self
                        .full
                        .then(|| Box::new(SnapshotDecoder::new(schema, &config))),
                    zones: builtin_zones(&map),
                });
                // A welcome starts the stream anew (a join, or a reconnect): nothing is
                // acknowledged yet.
                self.newest = None;
            }
            ServerMessage::Kill { killer, victim } => {
                let you = self.view.as_ref().map(|view| view.you);
                if in_window && Some(killer) == you {
                    arena.kills += 1;
                }
                if in_window && Some(victim) == you {
                    arena.deaths += 1;
                }
            }
            ServerMessage::Respawn { .. } if in_window => arena.respawns += 1,
            ServerMessage::Teleported { .. } => {
                if let Warp::Requested {
                    at,
                    left,
                    confirmed: confirmed @ false,
                    ..
                } = &mut self.warp
                {
                    *confirmed = true;
                    arena.teleport_confirm(*at, *left, now_ns);
                }
            }
            _ => {}
        }
    }

    fn on_snapshot(&mut self, bytes: &[u8], now_ns: u64, cx: &mut BotCx<'_>) {
        // Snapshots can overtake the welcome (another channel); they are useless before it.
        let Some(view) = self.view.as_mut() else {
            return;
        };
        let arena = &mut cx.meter.arena;
        let header = match &mut view.decoder {
            Some(decoder) => match decoder.decode(bytes) {
                Ok(decoded) => {
                    self.target = decoded
                        .entities
                        .iter()
                        .filter(|entity| entity.state.alive)
                        .map(|entity| view.schema.position(&entity.state))
                        .min_by(|a, b| {
                            (*a - decoded.me.position)
                                .length_squared()
                                .total_cmp(&(*b - decoded.me.position).length_squared())
                        });
                    if arena.in_window(now_ns) {
                        arena.full_decodes += 1;
                    }
                    SnapshotHeader {
                        tick: decoded.tick,
                        baseline_age: None,
                        last_input: decoded.last_input,
                        me: decoded.me,
                    }
                }
                Err(error) => {
                    return arena.decode_error(|| format!("bot {}: snapshot: {error}", self.id));
                }
            },
            None => match SnapshotHeader::read(&view.schema, bytes) {
                Ok(header) => header,
                Err(error) => {
                    return arena.decode_error(|| format!("bot {}: snapshot: {error}", self.id));
                }
            },
        };
        if arena.in_window(now_ns) {
            arena.snapshots += 1;
            arena.snapshot_bytes += bytes.len() as u64;
        }
        let newer = self.newest.is_none_or(|newest| {
            let ahead = header.tick.wrapping_sub(newest);
            ahead != 0 && ahead < 1 << 31
        });
        if newer {
            self.newest = Some(header.tick);
        }
        self.me = header.me.position;
        if let Some(applied) = header.last_input {
            while let Some(&(sequence, scheduled_ns)) = self.pending.front() {
                if sequence_newer(sequence, applied) {
                    break;
                }
                self.pending.pop_front();
                if let Some(tally) = cx.meter.tally.as_mut() {
                    tally.on_arrival(scheduled_ns, now_ns, crate::tally::Seen::InOrder);
                }
            }
        }
        if let Warp::Requested {
            left,
            seen: seen @ false,
            ..
        } = &mut self.warp
            && view
                .zones
                .iter()
                .any(|zone| zone.contains(header.me.position))
        {
            *seen = true;
            arena.teleport_in_zone(*left, now_ns);
        }
    }
}

impl BotLogic for ArenaBot {
    fn start(&mut self, plan: &Plan, rng: &mut SmallRng) {
        self.next_send_ns = plan.start_ns() + rng.random_range(0..self.period_ns.max(1));
        self.send_end_ns = plan.send_end_ns();
        self.next_turn_ns = plan.start_ns() + rng.random_range(0..1_000_000_000);
        self.heading = Self::random_heading(rng);
        if self.behaviour == ArenaBehaviour::Teleport {
            let window = plan.window();
            // Every bot at the same instant: the middle of the window, so ticks before and
            // after the burst are measured too.
            self.warp = Warp::Due(window.start_ns + (window.end_ns - window.start_ns) / 2);
        }
    }

    fn next_send_ns(&self) -> u64 {
        let next = match self.warp {
            Warp::Due(at) => self.next_send_ns.min(at),
            _ => self.next_send_ns,
        };
        if next < self.send_end_ns {
            next
        } else {
            u64::MAX
        }
    }

    fn send_due(&mut self, now_ns: u64, cx: &mut BotCx<'_>, out: &mut dyn Outbox) {
        loop {
            // The warp goes out at its own instant, outside the input schedule, so every
            // bot asks within the same millisecond.
            let (scheduled_ns, warp) = match self.warp {
                Warp::Due(at) if at <= self.next_send_ns => (at, true),
                _ => (self.next_send_ns, false),
            };
            if scheduled_ns > now_ns || scheduled_ns >= self.send_end_ns {
                return;
            }
            if warp {
                self.warp = Warp::Requested {
                    at: scheduled_ns,
                    left: now_ns,
                    on_wire: false,
                    confirmed: false,
                    seen: false,
                };
                cx.meter.arena.teleport_requested(scheduled_ns);
            } else {
                self.next_send_ns += self.period_ns;
            }
            self.think(scheduled_ns, cx.rng);
            self.seq = self.seq.wrapping_add(1);
            let mut buttons = 0;
            if std::mem::take(&mut self.fire) && self.behaviour != ArenaBehaviour::Teleport {
                buttons |= InputCommand::FIRE;
            }
            if warp {
                buttons |= InputCommand::WARP;
            }
            let heading = if self.heading.length() > 1.0 {
                self.heading * (1.0 / self.heading.length())
            } else {
                self.heading
            };
            let command = InputCommand {
                sequence: self.seq,
                move_x: heading.x.clamp(-1.0, 1.0),
                move_y: heading.y.clamp(-1.0, 1.0),
                aim: self.aim.clamp(-PI, PI),
                buttons,
            };
            let mut input = ClientInput::new(self.newest);
            input.push(command);
            if let Some(previous) = self.previous {
                input.push(previous);
            }
            self.previous = Some(command);
            let mut buffer = [0u8; 32];
            let Ok(len) = encode_to_slice(&input, &mut buffer) else {
                // Values are clamped into their ranges above; nothing else can fail.
                continue;
            };
            if out.send(INPUT, Bytes::copy_from_slice(&buffer[..len])) {
                if let Some(tally) = cx.meter.tally.as_mut() {
                    tally.on_sent(scheduled_ns, 1);
                }
                if self.pending.len() == MAX_PENDING {
                    self.pending.pop_front();
                }
                self.pending.push_back((self.seq, scheduled_ns));
            }
        }
    }

    fn left(&mut self, now_ns: u64) {
        if let Warp::Requested {
            left,
            on_wire: on_wire @ false,
            ..
        } = &mut self.warp
        {
            *left = now_ns;
            *on_wire = true;
        }
    }

    fn on_message(&mut self, channel: u8, message: &[u8], now_ns: u64, cx: &mut BotCx<'_>) {
        match channel {
            RELIABLE => self.on_server_message(message, now_ns, cx),
            SNAPSHOT => self.on_snapshot(message, now_ns, cx),
            _ => cx.meter.foreign += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_scenarios_have_their_seeds_shapes() {
        let hobo = ArenaScenario::hobo();
        assert_eq!((hobo.players, hobo.rooms), (250, 100));
        assert_eq!(hobo.input_interval, Duration::from_millis(40));
        let teleport = ArenaScenario::teleport();
        assert_eq!((teleport.players, teleport.rooms), (5000, 1));
        assert!(ArenaScenario::by_name("sfs").is_none());
        let mut bad = ArenaScenario::arena();
        bad.full_decode_every = 0;
        assert!(bad.validate().is_err());
    }

    #[test]
    fn the_plaza_is_a_destination_of_the_large_map() {
        let zones = builtin_zones("metropolis.tmx");
        assert_eq!(zones, builtin_zones("metropolis"));
        assert!(!zones.is_empty(), "metropolis has teleports");
        assert!(
            zones
                .iter()
                .all(|zone| zone.contains(Vec2::new(200.0, 200.0)))
        );
        assert!(builtin_zones("no such map").is_empty());
    }
}
