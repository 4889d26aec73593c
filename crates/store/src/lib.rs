//! tickwire's persistence: players, their totals, match history and leaderboards, on SQLite
//! (embedded, the default), PostgreSQL or MySQL/MariaDB, chosen by URL — written behind the
//! tick path so a room never waits for its database.
//!
//! Rooms hand [`StatEvent`]s to a [`StatWriter`] with [`StatWriter::try_record`], which never
//! blocks; one task commits them in batches (by size or interval), and [`StatWriter::close`]
//! commits everything queued before the server exits. Reads ([`Store::leaderboard`],
//! [`Store::player`], [`Store::matches`]) run on the pool and are served by [`http::router`].
//!
//! ```no_run
//! use tickwire_store::{MatchResult, Outcome, StatEvent, Store, StoreConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = StoreConfig { url: "sqlite://tickwire.db".into(), ..StoreConfig::default() };
//! let store = Store::connect_with(&config).await?; // creates the file, migrates
//! let writer = store.writer(&config.writer);
//!
//! // On the tick path: never waits; a full queue is refused and counted.
//! writer.try_record(StatEvent::PlayerSeen { player: 7, name: "Casey".into(), at_ms: 1_000 })?;
//! writer.try_record(StatEvent::MatchEnded(MatchResult {
//!     room: "arena-1".into(),
//!     started_ms: 1_000,
//!     ended_ms: 61_000,
//!     outcomes: vec![Outcome { player: 7, kills: 3, deaths: 1, score: 31, play_time_ms: 60_000 }],
//! }))?;
//!
//! // On drain: everything queued is committed before this returns.
//! writer.close().await;
//! let top = store.leaderboard(10).await?;
//! assert_eq!(top[0].player, 7);
//! # Ok(()) }
//! ```
//!
//! | type | what it is |
//! |---|---|
//! | [`Store`] | the repository: connect (and migrate), apply a batch, query |
//! | [`StoreConfig`], [`WriterConfig`] | deployment config (`[store]`, `[store.writer]`) |
//! | [`StatEvent`], [`MatchResult`], [`Outcome`] | what rooms report |
//! | [`StatWriter`], [`WriterStats`] | the write-behind queue and its counters |
//! | [`PlayerProfile`], [`LeaderboardEntry`], [`MatchSummary`] | what queries return |
//! | [`http::router`] | `GET /api/leaderboard`, `/api/players/{id}`, `/api/players/{id}/matches` |
//! | [`bench::run`], [`bench::BenchReport`] | `tickwire bench-db` |
//!
//! Ranks are competition ranks ("1224"): a player's rank is one more than the number of
//! players with a strictly higher score; the leaderboard lists equal scores in id order.

#![warn(missing_docs)]

pub mod bench;
mod event;
pub mod http;
mod migrate;
mod nodelay;
mod rows;
mod sql;
mod store;
mod throttle;
mod writer;

pub use event::{
    InvalidEvent, MAX_NAME_CHARS, MAX_OUTCOMES, MatchResult, Outcome, PlayerId, StatEvent, unix_ms,
};
pub use sql::Backend;
pub use store::{
    ConnectError, LeaderboardEntry, MAX_PREFIX_LEN, MIN_SQLITE_CACHE_KIB, MatchSummary,
    PlayerProfile, PlayerStats, SqliteSync, Store, StoreConfig, StoreError, sqlite_memory_used,
    write_sqlite_memory,
};
pub use writer::{
    FLUSH_BUCKETS_US, RecordError, StatWriter, WriterClosed, WriterConfig, WriterStats,
};
