//! Per-player snapshots: what the server tells each client about the world every tick.
//!
//! Once per tick the room captures a [`Frame`] from the [`World`](crate::World): every
//! player quantized to the wire grid ([`SnapshotSchema`]), every bullet, and a coarse
//! interest grid over both. Then, for each connected player, the [`SnapshotEncoder`] picks
//! what that player sees and writes it as a delta against the last snapshot the player
//! acknowledged ([`ClientSnapshots`] remembers what was sent); the client's
//! [`SnapshotDecoder`] applies the delta to its copy of that baseline and ends with exactly
//! the server's view of it.
//!
//! # Selection, per recipient (O(K), never O(N))
//!
//! - **Interest**: candidates come from the interest cells around the recipient, nearest
//!   ring of cells first, at most [`SnapshotConfig::candidates`] per tick. A crowded cell
//!   is read from an offset that rotates with the tick and the recipient, so every member
//!   of a crowd of thousands is looked at within a few ticks without ever sorting the crowd.
//! - **Cap**: the view keeps the [`SnapshotConfig::max_entities`] nearest candidates
//!   (entities already in view count as 20% nearer, so the edge does not flicker). Out of
//!   range (radius + 10%), departed or displaced entities are destroyed.
//! - **Priority**: an entity whose quantized state equals what the client has costs
//!   nothing. Changed ones are ranked by `age × weight(distance)`, `age` being the ticks
//!   since the client's acknowledged copy was refreshed, so the priority of an entity left
//!   out grows every tick until it wins (the accumulator lives in the acknowledged record,
//!   and a lost packet therefore does not reset it).
//! - **Budget**: header, the recipient's own state and destroys always go; then up to
//!   [`SnapshotConfig::max_bullets`] nearest bullets; then creates and updates in priority
//!   order while they fit in `min(packet budget, bandwidth tokens)`. What does not fit
//!   waits: a new entity is not created yet, a changed one keeps its acknowledged state.
//!
//! The wire format is specified bit by bit in `docs/ARENA.md`.

mod decode;
mod encode;
mod frame;
mod history;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use tickwire_wire::Quantize;

use crate::geom::Vec2;
use crate::input::{AIM_LIMIT, AIM_RESOLUTION};
use crate::player::PlayerKey;

pub use decode::{
    BulletView, DecodedSnapshot, SelfView, SnapshotDecoder, SnapshotError, SnapshotHeader,
};
pub use encode::{AckError, ClientSnapshots, SnapshotEncoder};
pub use frame::Frame;

/// An entity's id on the wire (players only; bullets are sent whole every snapshot).
pub type EntityId = u16;

/// Ids are `0..=MAX_ENTITY_ID`; `u16::MAX` means "none" (a bullet whose owner left).
pub const MAX_ENTITY_ID: EntityId = u16::MAX - 1;

/// Position grid: 1/64 m (6 fractional bits), over `0..=map size` per axis.
pub const POSITION_RESOLUTION: f64 = 1.0 / 64.0;

/// Largest map side a snapshot can address: its steps must fit a `u16`.
pub const MAX_MAP_SIDE: f32 = 1023.0;

/// Most entities a snapshot's view may hold; counts are 8-bit on the wire.
pub const MAX_VIEW: usize = 255;

/// Most bullets one snapshot carries; the count is 6-bit on the wire.
pub const MAX_BULLETS: usize = 63;

/// The aim grid, the same as [`InputCommand`](crate::InputCommand)'s: 10 bits.
pub const AIM: Quantize = Quantize::new(-AIM_LIMIT as f64, AIM_LIMIT as f64, AIM_RESOLUTION);

/// A player as a snapshot carries it, quantized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct EntityState {
    /// Position step on the x grid ([`SnapshotSchema::position_x`]).
    pub x: u16,
    /// Position step on the y grid.
    pub y: u16,
    /// Aim step on [`AIM`].
    pub aim: u16,
    /// Health, `0..=max_health`.
    pub health: u16,
    /// In play (false while waiting to respawn).
    pub alive: bool,
}

/// An [`EntityState`] in 8 bytes, as the encoder keeps it (in a frame, in the room's
/// copies of its last captures, and in a history's waiting records): health and the
/// in-play bit share a `u16`, so "has anything changed" is one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PackedState {
    pub(crate) x: u16,
    pub(crate) y: u16,
    pub(crate) aim: u16,
    /// Health (at most 1,023: [`SnapshotSchema::new`]) with [`PackedState::ALIVE`] set
    /// while in play.
    pub(crate) vitals: u16,
}

impl PackedState {
    /// [`PackedState::vitals`]' in-play bit.
    const ALIVE: u16 = 1 << 15;

    pub(crate) fn health(&self) -> u16 {
        self.vitals & !Self::ALIVE
    }

    pub(crate) fn alive(&self) -> bool {
        self.vitals & Self::ALIVE != 0
    }
}

impl From<&EntityState> for PackedState {
    fn from(state: &EntityState) -> Self {
        Self {
            x: state.x,
            y: state.y,
            aim: state.aim,
            vitals: state.health | if state.alive { Self::ALIVE } else { 0 },
        }
    }
}

impl From<PackedState> for EntityState {
    fn from(state: PackedState) -> Self {
        Self {
            x: state.x,
            y: state.y,
            aim: state.aim,
            health: state.health(),
            alive: state.alive(),
        }
    }
}

/// One entity of a view: its id and quantized state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntityView {
    /// Wire id.
    pub id: EntityId,
    /// Quantized state.
    pub state: EntityState,
}

/// The grids both ends quantize with; built from what the welcome message carries (map
/// size, max health), so a client never mirrors server settings by hand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SnapshotSchema {
    position_x: Quantize,
    position_y: Quantize,
    max_health: u16,
    health_bits: u32,
}

/// Why a schema cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// A map side is not in `1..=1023` metres.
    #[error("map size {width}x{height} m is outside 1..=1023 m per side")]
    MapSize {
        /// Width in metres.
        width: f32,
        /// Height in metres.
        height: f32,
    },
    /// Max health is 0 or above 1023.
    #[error("max health {0} is outside 1..=1023")]
    MaxHealth(u16),
}

impl SnapshotSchema {
    /// The grids for a map of `map_size` metres and players of `max_health`.
    pub fn new(map_size: Vec2, max_health: u16) -> Result<Self, SchemaError> {
        let side_ok = |side: f32| side.is_finite() && (1.0..=MAX_MAP_SIDE).contains(&side);
        if !side_ok(map_size.x) || !side_ok(map_size.y) {
            return Err(SchemaError::MapSize {
                width: map_size.x,
                height: map_size.y,
            });
        }
        if !(1..=1023).contains(&max_health) {
            return Err(SchemaError::MaxHealth(max_health));
        }
        Ok(Self {
            position_x: Quantize::new(0.0, f64::from(map_size.x), POSITION_RESOLUTION),
            position_y: Quantize::new(0.0, f64::from(map_size.y), POSITION_RESOLUTION),
            max_health,
            health_bits: tickwire_wire::bits_for_span(u64::from(max_health)),
        })
    }

    /// The x grid: `0..=width`, 1/64 m.
    pub fn position_x(&self) -> &Quantize {
        &self.position_x
    }

    /// The y grid: `0..=height`, 1/64 m.
    pub fn position_y(&self) -> &Quantize {
        &self.position_y
    }

    /// Largest health.
    pub fn max_health(&self) -> u16 {
        self.max_health
    }

    /// Bits a health takes.
    pub fn health_bits(&self) -> u32 {
        self.health_bits
    }

    /// A position's steps; positions outside the map are clamped to it.
    pub fn quantize_position(&self, position: Vec2) -> (u16, u16) {
        (
            quantize_clamped(&self.position_x, position.x),
            quantize_clamped(&self.position_y, position.y),
        )
    }

    /// The position a state stands for.
    pub fn position(&self, state: &EntityState) -> Vec2 {
        Vec2::new(
            dequantize(&self.position_x, state.x),
            dequantize(&self.position_y, state.y),
        )
    }

    /// The aim a state stands for, radians.
    pub fn aim(&self, state: &EntityState) -> f32 {
        dequantize(&AIM, state.aim)
    }

    /// An angle's step on [`AIM`] (angles are wrapped into `-π..=π` first).
    pub fn quantize_angle(angle: f32) -> u16 {
        let mut angle = angle;
        if angle.is_finite() && !(-AIM_LIMIT..=AIM_LIMIT).contains(&angle) {
            angle = (angle + AIM_LIMIT).rem_euclid(2.0 * AIM_LIMIT) - AIM_LIMIT;
        }
        quantize_clamped(&AIM, angle)
    }

    /// Bits a position step takes on each axis.
    pub(crate) fn position_bits(&self) -> (u32, u32) {
        (self.position_x.bits(), self.position_y.bits())
    }
}

/// The step for `value`, clamped into the grid (NaN goes to step 0).
fn quantize_clamped(grid: &Quantize, value: f32) -> u16 {
    let clamped = (f64::from(value)).clamp(grid.min(), grid.max());
    // The clamp keeps the value in range and NaN fails the check, so the fallback only
    // catches NaN.
    grid.step_of(clamped as f32).unwrap_or(0) as u16
}

fn dequantize(grid: &Quantize, step: u16) -> f32 {
    grid.value_of(u64::from(step).min(grid.last_step()))
        .unwrap_or(0.0)
}

/// Snapshot tunables. Public fields with [`Default`]; [`SnapshotConfig::validate`] refuses
/// values the encoder cannot work with.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotConfig {
    /// Most bytes one snapshot may take. Default 1,100: with the protocol's headers it
    /// fits one 1,200-byte datagram, so a snapshot is never fragmented.
    pub packet_budget: usize,
    /// Most bytes per second of snapshots to one client. Default 48,000 (800 bytes per
    /// tick at 60 Hz): a mobile link shared with voice still keeps up.
    pub bandwidth_bytes_per_sec: u32,
    /// Most entities (other players) in one client's view. Default 64.
    pub max_entities: usize,
    /// Most new candidates looked at per recipient per tick. Default 128: bounds the
    /// per-recipient cost in a crowd of any size.
    pub candidates: usize,
    /// Most bullets per snapshot, nearest first. Default 24.
    pub max_bullets: usize,
    /// Radius of a player's interest, metres. Default 20.
    pub interest_radius: f32,
    /// Side of an interest grid cell, metres. Default 8.
    pub interest_cell_size: f32,
    /// Snapshots remembered per client (and by the decoder) as possible baselines.
    /// Default 32: an ack up to about half a second old at 60 Hz still gives a delta.
    pub history: usize,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        Self {
            packet_budget: 1100,
            bandwidth_bytes_per_sec: 48_000,
            max_entities: 64,
            candidates: 128,
            max_bullets: 24,
            interest_radius: 20.0,
            interest_cell_size: 8.0,
            history: 32,
        }
    }
}

/// A [`SnapshotConfig`] field the encoder cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("snapshot config: {field} {value}: {reason}")]
pub struct SnapshotConfigError {
    /// The field.
    pub field: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub reason: &'static str,
}

impl SnapshotConfig {
    /// Checks every field against what the encoder and the wire format allow.
    pub fn validate(&self) -> Result<(), SnapshotConfigError> {
        let error = |field, value: &dyn ToString, reason| SnapshotConfigError {
            field,
            value: value.to_string(),
            reason,
        };
        if !(1..=MAX_VIEW).contains(&self.max_entities) {
            return Err(error("max_entities", &self.max_entities, "must be 1..=255"));
        }
        if self.max_bullets > MAX_BULLETS {
            return Err(error("max_bullets", &self.max_bullets, "must be 0..=63"));
        }
        // Header, own state and a destroy for every entity in view always fit.
        let floor = 64 + self.max_entities * 3 + self.max_bullets * 6;
        if self.packet_budget < floor || self.packet_budget > 65_000 {
            return Err(error(
                "packet_budget",
                &self.packet_budget,
                "must hold the header, own state, a destroy per entity and the bullets (64 + 3 × max_entities + 6 × max_bullets bytes), and at most 65,000",
            ));
        }
        if self.bandwidth_bytes_per_sec == 0 {
            return Err(error(
                "bandwidth_bytes_per_sec",
                &self.bandwidth_bytes_per_sec,
                "must be positive",
            ));
        }
        if !(1..=4096).contains(&self.candidates) {
            return Err(error("candidates", &self.candidates, "must be 1..=4096"));
        }
        if !(self.interest_radius.is_finite() && self.interest_radius > 0.0) {
            return Err(error(
                "interest_radius",
                &self.interest_radius,
                "must be positive",
            ));
        }
        if !(self.interest_cell_size.is_finite() && self.interest_cell_size >= 1.0) {
            return Err(error(
                "interest_cell_size",
                &self.interest_cell_size,
                "must be at least 1 m",
            ));
        }
        if self.interest_radius / self.interest_cell_size > 16.0 {
            return Err(error(
                "interest_radius",
                &self.interest_radius,
                "spans more than 16 interest cells; use larger cells",
            ));
        }
        if !(2..=255).contains(&self.history) {
            return Err(error("history", &self.history, "must be 2..=255"));
        }
        Ok(())
    }
}

/// Ticks a released id rests before it is handed out again: more than any snapshot
/// history (`SnapshotConfig::history` is at most 255), so no baseline a client may still
/// ack holds the player who left under a newcomer's id. About 4 s at 60 Hz.
pub const ID_REST_TICKS: u64 = 256;

/// Wire ids for players: assigned on join, released on leave. A released id rests
/// [`ID_REST_TICKS`] ticks (as [`set_tick`](Self::set_tick) tells them) and is then handed
/// out again, lowest first; a new one is taken only when none is free. So the ids, and every
/// array indexed by them, stay as large as the room's crowd: handed out round-robin, they
/// grew with every join for the room's life (toward 65,536 entries in each frame of a busy
/// room, 20 bytes a visit in an hour's soak), and larger ids cost more bits on the wire.
#[derive(Debug, Clone, Default)]
pub struct EntityIds {
    by_key: HashMap<PlayerKey, EntityId>,
    used: Vec<bool>,
    /// Released ids and the tick of their release, oldest first.
    resting: VecDeque<(u64, EntityId)>,
    /// Ids done resting, lowest first.
    free: BinaryHeap<Reverse<EntityId>>,
    tick: u64,
}

impl EntityIds {
    /// No ids assigned.
    pub fn new() -> Self {
        Self::default()
    }

    /// The room's tick now: ids released [`ID_REST_TICKS`] before it may be handed out.
    pub fn set_tick(&mut self, tick: u64) {
        self.tick = tick;
        while let Some(&(released, id)) = self.resting.front() {
            if released + ID_REST_TICKS > tick {
                break;
            }
            self.resting.pop_front();
            self.free.push(Reverse(id));
        }
    }

    /// Assigns `key` an id (its existing one if it has one); `None` when all 65,535 are taken.
    pub fn insert(&mut self, key: PlayerKey) -> Option<EntityId> {
        if let Some(id) = self.by_key.get(&key) {
            return Some(*id);
        }
        if self.by_key.len() > usize::from(MAX_ENTITY_ID) {
            return None;
        }
        let id = if let Some(Reverse(id)) = self.free.pop() {
            id
        } else if self.used.len() <= usize::from(MAX_ENTITY_ID) {
            self.used.push(false);
            (self.used.len() - 1) as EntityId
        } else {
            // Every id is taken or resting: the one resting longest.
            self.resting.pop_front()?.1
        };
        self.used[usize::from(id)] = true;
        self.by_key.insert(key, id);
        Some(id)
    }

    /// Releases `key`'s id (to rest, then be handed out again); returns it.
    pub fn remove(&mut self, key: PlayerKey) -> Option<EntityId> {
        let id = self.by_key.remove(&key)?;
        self.used[usize::from(id)] = false;
        self.resting.push_back((self.tick, id));
        Some(id)
    }

    /// `key`'s id.
    pub fn get(&self, key: PlayerKey) -> Option<EntityId> {
        self.by_key.get(&key).copied()
    }

    /// One past the largest id ever assigned: the size of an array indexed by id.
    pub fn id_bound(&self) -> usize {
        self.used.len()
    }

    /// Ids assigned.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether none is assigned.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// The most an id can take (ids are gaps from the previous one: `0`+4 bits below 16,
/// `10`+8 bits below 272, `11`+16 bits): what the selection assumes before ids are sorted.
pub(crate) const ID_BITS_MAX: usize = 18;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_id_rests_then_the_lowest_free_one_is_handed_out() {
        let mut ids = EntityIds::new();
        for key in 0..4 {
            assert_eq!(ids.insert(PlayerKey(key)), Some(key as EntityId));
        }
        ids.set_tick(10);
        ids.remove(PlayerKey(2));
        ids.remove(PlayerKey(1));
        // Resting: a newcomer gets a new id, not one a baseline may still hold.
        ids.set_tick(10 + ID_REST_TICKS - 1);
        assert_eq!(ids.insert(PlayerKey(10)), Some(4));
        ids.set_tick(10 + ID_REST_TICKS);
        assert_eq!(ids.insert(PlayerKey(11)), Some(1), "the lowest rested id");
        assert_eq!(ids.insert(PlayerKey(12)), Some(2));
        assert_eq!(ids.insert(PlayerKey(13)), Some(5), "none free: a new one");
        assert_eq!(ids.get(PlayerKey(11)), Some(1));
    }

    /// A room whose crowd comes and goes for hours: its ids, and the arrays they index,
    /// stay as many as the crowd and those resting, not one per join.
    #[test]
    fn churn_keeps_the_id_bound_at_the_crowd_not_the_joins() {
        let mut ids = EntityIds::new();
        let crowd = 150u64;
        for key in 0..crowd {
            ids.insert(PlayerKey(key)).unwrap();
        }
        // A join and a leave every 10 ticks for 100,000 joins (about 4.6 hours at 60 Hz).
        for n in 0..100_000u64 {
            ids.set_tick(n * 10);
            ids.remove(PlayerKey(n));
            ids.insert(PlayerKey(crowd + n)).unwrap();
        }
        let resting_at_most = (ID_REST_TICKS / 10 + 1) as usize;
        assert!(
            ids.id_bound() <= crowd as usize + resting_at_most,
            "{} ids for a crowd of {crowd}",
            ids.id_bound()
        );
        assert_eq!(ids.len(), crowd as usize);
    }

    #[test]
    fn with_every_id_taken_or_resting_the_longest_resting_is_reused() {
        let mut ids = EntityIds::new();
        for key in 0..=u64::from(MAX_ENTITY_ID) {
            ids.insert(PlayerKey(key)).unwrap();
        }
        assert_eq!(ids.insert(PlayerKey(u64::MAX)), None, "all 65,535 taken");
        ids.remove(PlayerKey(7));
        ids.remove(PlayerKey(3));
        assert_eq!(ids.insert(PlayerKey(u64::MAX)), Some(7));
    }
}
