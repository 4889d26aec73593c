//! Replicated state for any tickwire game, without I/O.
//!
//! A game declares its entity types with `#[derive(Replicate)]` (fields with their wire
//! bounds, as for a message), keeps them in a [`ServerWorld`] it owns, and spawns, mutates
//! and despawns them as it runs. Once per tick the world writes each viewer a snapshot: the
//! entities its interest, audience and cap select, as a delta against the last snapshot
//! that viewer acknowledged, field by field, within its bandwidth budget and in priority
//! order. A client's [`Mirror`] applies the snapshots, answers with acknowledgements and
//! lists what changed. The room never learns the transport; the world never learns the room.
//!
//! ```
//! use tickwire_replicate::{Change, Mirror, ReplicationConfig, ServerWorld, ViewerId, ack_message};
//! use tickwire_wire::Replicate;
//!
//! #[derive(Debug, Clone, PartialEq, Replicate)]
//! struct Runner {
//!     #[wire(quantize(min = 0.0, max = 100.0, resolution = 0.01))]
//!     x: f32,
//!     #[wire(max_len = 16)]
//!     name: String,
//! }
//!
//! let mut world = ServerWorld::<Runner>::default();
//! let ada = world.spawn(Runner { x: 1.0, name: "ada".into() })?;
//! world.add_viewer(ViewerId(7));
//!
//! let mut mirror = Mirror::<Runner>::new();
//! let mut deliver = |world: &mut ServerWorld<Runner>, tick| {
//!     let mut sent = Vec::new();
//!     world.snapshots(tick, |_, bytes| sent.push(bytes.to_vec()));
//!     let acked = mirror.apply(&sent[0]).unwrap();
//!     world.ack(ViewerId(7), &ack_message(acked)).unwrap();
//!     mirror.changes().to_vec()
//! };
//! assert_eq!(deliver(&mut world, 1), [Change::Added(ada)]);
//! world.get_mut(ada).unwrap().x = 2.5;
//! assert_eq!(deliver(&mut world, 2), [Change::Changed(ada, 0b01)]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | module | role |
//! |---|---|
//! | [`ServerWorld`] | entities, owners, audiences, viewers; the snapshots |
//! | `encode` | one viewer's selection, priority, budget and bits |
//! | `viewer` | what is remembered per viewer: sent views, the acknowledged one |
//! | [`Mirror`] | the client's copy, with its changes |
//!
//! The wire format is specified in `docs/REPLICATION.md`.

#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod config;
mod encode;
mod gaps;
mod grid;
mod ids;
mod mirror;
mod profile;
mod roster;
mod viewer;
mod world;

pub use config::{ConfigError, Interest, MAX_HISTORY, MAX_VIEW, ReplicationConfig};
pub use ids::{ID_REST_TICKS, MAX_ENTITY_ID};
pub use mirror::{Change, Mirror, MirrorError};
pub use profile::{KindProfile, PROFILE_EVERY, ReplicationProfile};
pub use roster::Member;
pub use tickwire_wire::replicate::{FieldMask, KindOf, Replicate};
pub use viewer::{AckError, ack_message, parse_ack};
pub use world::{Audience, Replicated, ReplicationStats, ServerWorld, WorldFull};

/// An entity's id on the wire.
pub type EntityId = u16;

/// A member of the room, as the world knows it: the room's player id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ViewerId(pub u64);
