//! Scenarios: what the bots do once connected. A [`Scenario`] names the room kind the bots
//! matchmake into, how many bots and rooms, and makes each bot's [`BotLogic`]: what it
//! sends and when, and how it counts what arrives. The engine does the rest (connecting,
//! pacing, the transports, collecting the figures).
//!
//! | scenario | seed | logic |
//! |---|---|---|
//! | `sfs`, `nettest` | 001, 004 | [`RelayScenario`]: stamped messages through `relay` rooms |
//! | `hobo`, `teleport`, `arena` | 000, 003 | [`ArenaScenario`]: players of the arena game |

pub mod arena;
pub mod relay;

use bytes::Bytes;
use rand::rngs::SmallRng;

pub use arena::{ArenaBehaviour, ArenaScenario};
pub use relay::{Body, RelayScenario};

use crate::meter::Meter;
use crate::plan::Plan;

/// Every scenario `tickwire bots` knows, by name.
pub const NAMES: [&str; 5] = ["sfs", "nettest", "hobo", "teleport", "arena"];

/// What a scenario tells the engine.
pub trait Scenario: Send + Sync + 'static {
    /// The scenario's name (`sfs`, `hobo`, …).
    fn name(&self) -> &str;
    /// The room kind bots matchmake into.
    fn room_kind(&self) -> &str;
    /// Bots in the run.
    fn players(&self) -> usize;
    /// Rooms the bots are spread over: bot `b` goes to room `b % rooms`, whose first bot
    /// creates it.
    fn rooms(&self) -> usize;
    /// Refuses parameters the scenario cannot run with, before any bot connects.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
    /// Bot `bot`'s logic, made when it has connected (before the plan exists: what the
    /// server sends on joining, such as a welcome, goes to it).
    fn bot(&self, bot: u32) -> Box<dyn BotLogic>;
}

/// One bot's behaviour. The engine owns the connection and the clock; it calls
/// [`on_message`](Self::on_message) for everything that arrives, [`start`](Self::start)
/// once when the plan is known, and [`send_due`](Self::send_due) whenever
/// [`next_send_ns`](Self::next_send_ns) has come (late calls send everything overdue: the
/// load is open-loop).
pub trait BotLogic {
    /// The run's schedule is known: plan the sends.
    fn start(&mut self, plan: &Plan, rng: &mut SmallRng);
    /// When the next send is due, nanoseconds since the plan's epoch; `u64::MAX` for none.
    fn next_send_ns(&self) -> u64;
    /// Sends what is due at `now_ns` through `out`.
    fn send_due(&mut self, now_ns: u64, cx: &mut BotCx<'_>, out: &mut dyn Outbox);
    /// What `send_due` queued was handed to the socket at `now_ns`. The engines that queue
    /// many bots' sends and write them together say so; where a send is written as it is
    /// queued, `send_due`'s own time is that moment and this is not called.
    fn left(&mut self, _now_ns: u64) {}
    /// A message arrived on `channel` at `now_ns` (0 before the plan).
    fn on_message(&mut self, channel: u8, message: &[u8], now_ns: u64, cx: &mut BotCx<'_>);
}

/// What a bot's logic may use besides its own state: the plan (once it exists), its
/// group's meter and random generator.
pub struct BotCx<'a> {
    /// The run's plan; `None` while bots are still connecting.
    pub plan: Option<&'a Plan>,
    /// Where the figures go.
    pub meter: &'a mut Meter,
    /// The group's generator (seeded from the run's seed).
    pub rng: &'a mut SmallRng,
}

/// Where a bot's messages go: its connection, whatever the transport.
pub trait Outbox {
    /// Queues `message` on `channel`; false when the connection refused it (the engine
    /// counts refusals).
    fn send(&mut self, channel: u8, message: Bytes) -> bool;
}

/// The named scenario with its default shape.
pub fn by_name(name: &str) -> Option<Box<dyn Scenario>> {
    if let Some(relay) = RelayScenario::by_name(name) {
        return Some(Box::new(relay));
    }
    ArenaScenario::by_name(name).map(|arena| Box::new(arena) as Box<dyn Scenario>)
}
