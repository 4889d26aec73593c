//! tickwire's arena game, its sans-IO core: Tiled maps, 2D physics and the gameplay
//! simulation that a room steps at a fixed rate.
//!
//! Players are circles that move, aim and fire; bullets are small fast circles; walls are
//! boxes merged from a Tiled tile layer; teleport pads move a player into a destination zone.
//! Nothing here touches a clock, a socket or global randomness: the driver passes inputs in,
//! calls [`World::step`] once per tick and polls [`GameEvent`]s out; the world's own seeded
//! generator makes every random choice, so the same seed and inputs give the same world.
//!
//! ```
//! use std::sync::Arc;
//! use tickwire_arena::{BuiltinMap, GameEvent, InputCommand, PlayerKey, World, WorldConfig};
//!
//! let map = Arc::new(BuiltinMap::Courtyard.load()?);
//! let mut world = World::new(map, WorldConfig::default(), 1)?;
//! world.join(PlayerKey(1))?;
//! world.join(PlayerKey(2))?;
//!
//! // The room's tick: inputs that arrived since the last tick, one step, then the events.
//! let mut inputs = Vec::new();
//! for sequence in 0..60u16 {
//!     inputs.clear();
//!     inputs.push((PlayerKey(1), InputCommand { sequence, move_x: 1.0, buttons: InputCommand::FIRE, ..Default::default() }));
//!     world.step(&inputs);
//!     while let Some(event) = world.poll_event() {
//!         if let GameEvent::Kill { killer, victim } = event {
//!             println!("{killer} killed {victim}");
//!         }
//!     }
//! }
//! assert_eq!(world.tick(), 60);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`World`] | the simulation: join, leave, inputs, `step`, events, state for snapshots |
//! | [`WorldConfig`] | tunables (speeds, radii, fire rate, damage, respawn delay, grid cell) |
//! | [`InputCommand`] | what a client sends per tick: sequence, movement, aim, buttons (wire-encoded) |
//! | [`GameEvent`] | hits, kills, respawns, teleports, for broadcasting and persistence |
//! | [`Player`], [`Bullet`] | read-only state for snapshots |
//! | [`ArenaMap`], [`BuiltinMap`] | a loaded `.tmx` map: merged walls, spawn points, teleports |
//! | [`movement::step_movement`] | the movement step the client ports for prediction |
//! | [`physics`] | contacts, swept tests, the [`SpatialGrid`](physics::SpatialGrid) broadphase |
//! | [`snapshot`] | per-player delta snapshots: interest, view cap, priorities, byte budget; the decoder |
//! | [`messages`] | what clients and the server send on channels 0, 1 and 2 |
//! | [`room::ArenaRoom`] | the game as a `tickwire-room` room; [`room::ArenaRoomFactory`] registers it |
//!
//! The wire format of snapshots and messages is specified in `docs/ARENA.md`.
//!
//! Units: one tile is one metre; positions are `f32` metres from the map's top-left corner,
//! `+y` down (Tiled's orientation); angles are radians from `+x` towards `+y`.

#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod config;
pub mod event;
pub mod geom;
pub mod input;
pub mod map;
pub mod messages;
pub mod movement;
pub mod physics;
pub mod player;
pub mod room;
pub mod snapshot;
pub mod world;

pub use config::{ConfigError, WorldConfig};
pub use event::GameEvent;
pub use input::{InputCommand, InputError, InputStats};
pub use map::{ArenaMap, BuiltinMap, MapError, Teleport};
pub use player::{Bullet, Player, PlayerKey, PlayerStats};
pub use world::{JoinError, PlaceError, World};
