//! tickwire's server runtime: the [`Room`](room::Room) trait a game implements, fixed-rate
//! ticks, and the built-in room kinds.
//!
//! | type | role |
//! |---|---|
//! | [`room::Room`] | game logic: join, leave, messages, ticks |
//! | [`room::RoomContext`] | what a room sees and how it answers (send, broadcast, kick) |
//! | [`host::RoomHost`] | runs one room: seats, reconnection, ticks on schedule |
//! | [`timestep::FixedTimestep`] | drift-free fixed-rate ticks |
//! | [`shard::Shard`] | one worker's rooms and players, reconnection grace, room disposal |
//! | [`console`] | the telnet-compatible admin console, over [`console::AdminOps`] |
//! | [`limits`] | connection rate and count per IP, message rate per player |
//! | [`matchmaker::Matchmaker`] | join-or-create placement, seat reservations, shard balancing |
//! | [`rooms`] | built-in kinds: `relay` and `chat` |
//! | [`worker::ShardWorker`] | a shard on its own thread and UDP port, players connected over the protocol |
//! | [`runtime::Runtime`] | the whole server: workers, matchmaking and the HTTP API, console, metrics, drain |
//! | [`config::ServeConfig`] | the deployment configuration `tickwire serve` loads |

pub mod config;
pub mod console;
pub mod host;
pub mod limits;
pub mod matchmaker;
pub mod room;
pub mod rooms;
pub mod runtime;
pub mod shard;
pub mod timestep;
pub mod worker;
