//! What the world holds per player and per bullet, read-only to everyone else.

use std::fmt;

use crate::geom::Vec2;
use crate::input::PendingInput;

/// A player's key in the world, chosen by whoever drives it (the room adapter uses the
/// server's player id). The world never interprets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlayerKey(pub u64);

impl fmt::Display for PlayerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Running totals a persistence layer stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlayerStats {
    /// Players this one killed.
    pub kills: u32,
    /// Times this player died.
    pub deaths: u32,
    /// Points: [`WorldConfig::score_per_kill`](crate::WorldConfig::score_per_kill) per kill
    /// plus [`WorldConfig::score_per_hit`](crate::WorldConfig::score_per_hit) per hit.
    pub score: u32,
    /// Shots fired.
    pub shots: u32,
    /// Shots that hit a player.
    pub hits: u32,
}

/// One player's state.
#[derive(Debug, Clone)]
pub struct Player {
    pub(crate) key: PlayerKey,
    pub(crate) position: Vec2,
    /// Movement intent being applied (from the newest input).
    pub(crate) movement: Vec2,
    pub(crate) aim: f32,
    pub(crate) health: u16,
    /// `Some(tick)` while dead: the tick at which the player respawns.
    pub(crate) respawn_tick: Option<u64>,
    /// First tick at which the player may fire again.
    pub(crate) next_fire_tick: u64,
    /// First tick at which the player may warp again.
    pub(crate) next_warp_tick: u64,
    /// Ticks since the last input arrived.
    pub(crate) idle_ticks: u32,
    pub(crate) input: PendingInput,
    pub(crate) stats: PlayerStats,
}

impl Player {
    /// The key the player joined with.
    pub fn key(&self) -> PlayerKey {
        self.key
    }

    /// Centre, in metres (where the player died, while dead).
    pub fn position(&self) -> Vec2 {
        self.position
    }

    /// The movement intent applied in the last step (`-1..=1` per axis).
    pub fn movement(&self) -> Vec2 {
        self.movement
    }

    /// Aim angle, radians from `+x` towards `+y`.
    pub fn aim(&self) -> f32 {
        self.aim
    }

    /// Health left (0 while dead).
    pub fn health(&self) -> u16 {
        self.health
    }

    /// Whether the player is in play (not waiting to respawn).
    pub fn is_alive(&self) -> bool {
        self.respawn_tick.is_none()
    }

    /// While dead, the tick at which the player respawns.
    pub fn respawn_tick(&self) -> Option<u64> {
        self.respawn_tick
    }

    /// Kills, deaths, score, shots and hits so far.
    pub fn stats(&self) -> PlayerStats {
        self.stats
    }

    /// The newest input sequence a step has applied, `None` before the first. A snapshot
    /// carries it so the client can reconcile its prediction.
    pub fn last_input_sequence(&self) -> Option<u16> {
        self.input.applied()
    }
}

/// A bullet in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bullet {
    pub(crate) owner: PlayerKey,
    pub(crate) position: Vec2,
    pub(crate) velocity: Vec2,
    pub(crate) ticks_left: u32,
}

impl Bullet {
    /// Who fired it (possibly a player who has since left).
    pub fn owner(&self) -> PlayerKey {
        self.owner
    }

    /// Centre, in metres.
    pub fn position(&self) -> Vec2 {
        self.position
    }

    /// Metres per second.
    pub fn velocity(&self) -> Vec2 {
        self.velocity
    }

    /// Ticks before it vanishes if it hits nothing.
    pub fn ticks_left(&self) -> u32 {
        self.ticks_left
    }
}
