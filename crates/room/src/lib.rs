//! What a tickwire game is built on, without I/O: the [`Room`](room::Room) trait a game
//! implements, the host that seats players and ticks a room on schedule, the shard that
//! routes a worker's players and rooms, matchmaking, limits and the built-in rooms. Nothing
//! here reads a clock, spawns or touches a socket: the server's worker threads feed a
//! [`Shard`](shard::Shard) players and messages with the time, and carry out what it outputs.
//! A test drives it the same way, with a clock of its own.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use bytes::Bytes;
//! use tickwire_room::room::PlayerId;
//! use tickwire_room::rooms::relay::RelayRoom;
//! use tickwire_room::shard::{RoomId, Shard, ShardConfig, ShardOutput};
//!
//! let start = Instant::now();
//! let mut shard = Shard::new(ShardConfig::default());
//! shard.create_room(start, RoomId(1), "relay", Box::new(RelayRoom::default()), 16)?;
//! shard.join(start, RoomId(1), PlayerId(1), "ada".into())?;
//! shard.join(start, RoomId(1), PlayerId(2), "bob".into())?;
//!
//! // A worker's turn: what arrived, then due ticks, then the sends to carry out.
//! let now = start + Duration::from_millis(16);
//! shard.message(now, PlayerId(1), 0, Bytes::from_static(b"hello"));
//! shard.run(now);
//! let delivered = shard.drain_outputs().any(|output| {
//!     matches!(output, ShardOutput::Send { to: PlayerId(2), ref message, .. } if message == "hello")
//! });
//! assert!(delivered, "the relay forwards to the other member");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`room::Room`] | game logic: join, leave, messages, ticks, publish, its replicated world |
//! | [`replicate`] | replicated state: a `ServerWorld` of the game's `#[derive(Replicate)]` entities, sent as deltas; the client `Mirror` |
//! | [`room::RoomContext`] | what a room sees and how it answers: send, broadcast, kick, typed messages (`decode`, `send_message`), lock, label, metadata, timers, dispose |
//! | [`host::RoomHost`] | runs one room: seats, reconnection, ticks and timers on schedule, a panic contained; how a game is tested (docs/GUIDE.md) |
//! | [`listing`] | a room's create options, label and metadata, and the label filters matchmaking and listings use, all bounded |
//! | [`timers::TimerId`] | a room's delayed and repeated calls, on its clock |
//! | [`timestep::FixedTimestep`] | drift-free fixed-rate ticks |
//! | [`shard::Shard`] | one worker's rooms and players, reconnection grace, room disposal (empty, asked for, crashed) |
//! | [`sessions::Sessions`] | the one owner of player ↔ link: admission, replacement, leave or hold on close, kicks and shutdown as link closes |
//! | [`matchmaker::Matchmaker`] | join-or-create placement, seat reservations, shard balancing |
//! | [`limits`] | connection rate and count per IP, message rate per player |
//! | [`ticket::SeatTicket`] | where a connect token sends its player: room and name |
//! | [`rooms`] | built-in kinds: `relay` and `chat` |

pub mod host;
pub mod limits;
pub mod listing;
pub mod matchmaker;
pub mod room;
/// Replicated state ([`tickwire_replicate`]): a room's world of entities, sent to each member
/// as deltas; see [`Room::replication`](room::Room::replication).
pub use tickwire_replicate as replicate;
pub mod rooms;
pub mod sessions;
pub mod shard;
pub mod ticket;
pub mod timers;
pub mod timestep;
