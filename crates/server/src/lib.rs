//! tickwire's server runtime: the process around the rooms. Shard workers (a thread, a UDP
//! port and a tokio runtime each), matchmaking and the HTTP API, the admin console, metrics,
//! drain and configuration. The room logic they drive — the [`Room`](room::Room) trait,
//! hosts, shards, the matchmaker, limits and the built-in rooms — is `tickwire-room`,
//! re-exported here under its old paths.
//!
//! ```no_run
//! use tickwire_server::Server;
//! use tickwire_server::rooms::chat::ChatRoom;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // Loopback ports, logs on stderr, until Ctrl-C.
//! Server::builder().room::<ChatRoom>("chat", 100).run().await?;
//! # Ok(())
//! # }
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`Server::builder`] | a game's own server: its room kinds, loopback defaults, logs, run until a signal |
//! | [`worker::ShardWorker`] | a shard on its own thread and UDP port, players connected over the protocol |
//! | [`runtime::Runtime`] | the whole server: workers, matchmaking and the HTTP API, console, metrics, drain |
//! | [`runtime::RoomKinds`] | the room kinds matchmaking may create, by name |
//! | [`console`] | the telnet-compatible admin console, over [`console::AdminOps`] |
//! | [`credentials::Credentials`] | the admin secrets, checked in constant time and throttled per source (an IPv4 address, an IPv6 /64, a trusted proxy's client) |
//! | [`config::ServeConfig`] | the deployment configuration `tickwire serve` loads |
//! | [`room`], [`shard`], [`host`], [`matchmaker`], [`limits`], [`rooms`], [`timestep`] | re-exported from `tickwire-room` |
//! | [`axum`] | the HTTP framework of [`runtime::Extras`]' routes, re-exported |

pub mod cluster;
pub mod config;
pub mod console;
pub mod credentials;
pub mod embed;
pub mod runtime;
pub mod worker;

// The room logic lives in `tickwire-room`, which a game builds on without compiling the
// server; these keep `tickwire_server::room::Room` and the server's own `crate::shard::…`
// paths working.
/// The HTTP framework of [`runtime::Extras`]'s routes, re-exported so that a game's own
/// routes use the very version the server was built with, with no version to match by hand.
pub use axum;
pub use embed::{Server, ServerBuilder};
pub use tickwire_room::{
    host, limits, listing, matchmaker, replicate, room, rooms, sessions, shard, timers, timestep,
};
