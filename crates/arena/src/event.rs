//! What happened during a step, for the room to broadcast and the persistence layer to store.

use crate::geom::Vec2;
use crate::player::PlayerKey;

/// Something that happened in a step; read with [`World::poll_event`](crate::World::poll_event).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GameEvent {
    /// A bullet hit a player.
    Hit {
        /// Who fired.
        attacker: PlayerKey,
        /// Who was hit.
        victim: PlayerKey,
        /// Health taken.
        damage: u16,
        /// The victim's health after the hit (0 means a [`GameEvent::Kill`] follows).
        health: u16,
    },
    /// A hit took a player's last health.
    Kill {
        /// Who fired the last bullet.
        killer: PlayerKey,
        /// Who died.
        victim: PlayerKey,
    },
    /// A dead player is back in play.
    Respawn {
        /// Who.
        player: PlayerKey,
        /// Where.
        position: Vec2,
    },
    /// A player stepped on a teleport pad and moved to its destination.
    Teleported {
        /// Who.
        player: PlayerKey,
        /// Index of the teleport in [`ArenaMap::teleports`](crate::map::ArenaMap::teleports).
        teleport: u16,
        /// Where the player stood on the pad.
        from: Vec2,
        /// Where the player landed.
        to: Vec2,
    },
}
