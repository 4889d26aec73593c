//! The repository: one [`Store`] over SQLite, PostgreSQL or MySQL/MariaDB, chosen by URL.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool};
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqliteSynchronous};
use sqlx::{AssertSqlSafe, ConnectOptions as _, Row};

use crate::event::{InvalidEvent, MatchResult, PlayerId, StatEvent};
use crate::rows::{self, Columns};
use crate::sql::{Backend, Statements, shaped_chunks};
use crate::writer::{StatWriter, WriterConfig};

/// Longest table prefix, in bytes.
pub const MAX_PREFIX_LEN: usize = 32;

/// What SQLite's `synchronous` pragma is set to (the store always runs SQLite in WAL mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SqliteSync {
    /// `synchronous = FULL`, the default: every commit fsyncs the WAL, so a committed batch
    /// survives a power loss or an OS crash, not only `kill -9`. Costs one fsync per batch,
    /// which the writer's batching makes a few per second.
    #[default]
    Full,
    /// `synchronous = NORMAL`: commits reach the OS, fsync happens at checkpoints. A committed
    /// batch survives `kill -9` of the process; a power loss may roll back the last batches.
    Normal,
}

/// Where and how to store. Deployment config: load it from the server's config file under
/// `[store]`; every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `sqlite://path` (created on first run), `sqlite::memory:`, `postgres://user@host/db`,
    /// `mysql://user@host/db` or `mariadb://…`. Default `sqlite://tickwire.db`.
    pub url: String,
    /// Put before every table name, so several servers (or tests) can share one database.
    /// At most 32 bytes of `a-z`, `0-9` and `_`. Default `tickwire_`.
    pub table_prefix: String,
    /// Pool size for reads and the writer. Default 8 (SQLite in memory always uses 1).
    pub max_connections: u32,
    /// SQLite durability, see [`SqliteSync`]. Default `full`.
    pub sqlite_synchronous: SqliteSync,
    /// SQLite's page cache for the whole pool, MiB, shared evenly among the connections
    /// (`cache_size`; at least [`MIN_SQLITE_CACHE_KIB`] each). Default 16: SQLite's own 2 MiB
    /// per connection at the default pool size. The cache fills as the database grows and
    /// stays full, so this is what an embedded store holds of the process's memory
    /// (`tickwire_store_sqlite_memory_bytes`); pages beyond it are read from the OS's file cache.
    pub sqlite_cache_mib: u32,
    /// How long connecting, or waiting for a pooled connection, may take before it is an
    /// error, in milliseconds. Default 10,000.
    pub connect_timeout_ms: u64,
    /// The write-behind queue.
    pub writer: WriterConfig,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://tickwire.db".to_owned(),
            table_prefix: "tickwire_".to_owned(),
            max_connections: 8,
            sqlite_synchronous: SqliteSync::Full,
            sqlite_cache_mib: 16,
            connect_timeout_ms: 10_000,
            writer: WriterConfig::default(),
        }
    }
}

/// Why [`Store::connect`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL names no backend the store knows.
    #[error(
        "unknown database url scheme {0:?}: expected sqlite://, postgres://, mysql:// or mariadb://"
    )]
    UnknownScheme(String),
    /// The URL has a known scheme but does not parse.
    #[error("bad {backend} url: {source}")]
    BadUrl {
        /// The backend its scheme names.
        backend: Backend,
        /// What the driver said.
        source: sqlx::Error,
    },
    /// The table prefix has characters other than `a-z`, `0-9`, `_`, or is too long.
    #[error("table prefix {0:?} must be at most {MAX_PREFIX_LEN} bytes of a-z, 0-9 and _")]
    BadPrefix(String),
    /// The database did not accept a connection.
    #[error("cannot connect to {backend}: {source}")]
    Connect {
        /// Which backend.
        backend: Backend,
        /// What the driver said.
        source: sqlx::Error,
    },
    /// A migration failed; the schema is left at the version before it.
    #[error("migration {version} ({description}) failed: {source}")]
    Migrate {
        /// The version that failed.
        version: i64,
        /// What it does.
        description: &'static str,
        /// What the database said.
        source: sqlx::Error,
    },
    /// The database was migrated by a newer tickwire.
    #[error("database schema version {found} is newer than this build's {known}")]
    SchemaTooNew {
        /// The version in the database.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
}

/// Why a query or a write failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database refused or could not be reached.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// An event could never be committed.
    #[error("invalid event: {0}")]
    Invalid(#[from] InvalidEvent),
    /// A player id above `i64::MAX` was asked for.
    #[error("player id {0} exceeds max {max}", max = i64::MAX)]
    PlayerId(u64),
    /// A read stepped on SQLite's own handle failed (see `rows`).
    #[error("sqlite error {code}: {message}")]
    Sqlite {
        /// SQLite's result code.
        code: i32,
        /// What SQLite said.
        message: String,
    },
}

/// A player's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PlayerStats {
    /// Kills over all matches.
    pub kills: i64,
    /// Deaths over all matches.
    pub deaths: i64,
    /// Score over all matches; the leaderboard's key.
    pub score: i64,
    /// Milliseconds played.
    pub play_time_ms: i64,
    /// Matches (or sessions) finished.
    pub matches: i64,
}

/// A player's profile: who, since when, totals and rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlayerProfile {
    /// Player id.
    pub id: PlayerId,
    /// Display name (empty if the player was never seen by name, only in a match).
    pub name: String,
    /// First seen, Unix milliseconds.
    pub created_ms: i64,
    /// Last seen, Unix milliseconds.
    pub last_seen_ms: i64,
    /// Totals.
    pub stats: PlayerStats,
    /// Competition rank by score: 1 + the number of players with a higher score.
    pub rank: u64,
}

/// One line of the leaderboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderboardEntry {
    /// Competition rank ("1224"): equal scores share a rank, the next rank skips.
    pub rank: u64,
    /// Player id.
    pub player: PlayerId,
    /// Display name.
    pub name: String,
    /// Totals.
    pub stats: PlayerStats,
}

/// One match in a player's history, with their own outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchSummary {
    /// The match's id (increasing in commit order).
    pub match_id: u64,
    /// The room it was played in.
    pub room: String,
    /// Start, Unix milliseconds.
    pub started_ms: i64,
    /// End, Unix milliseconds.
    pub ended_ms: i64,
    /// How many players had an outcome in it.
    pub players: u64,
    /// This player's kills in it.
    pub kills: i64,
    /// This player's deaths in it.
    pub deaths: i64,
    /// This player's score in it.
    pub score: i64,
    /// This player's time in it, milliseconds.
    pub play_time_ms: i64,
}

#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    MySql(MySqlPool),
}

/// Which batch of which writer a transaction writes: recorded in it (a row of `sequences`
/// named after the writer, holding its last committed batch), so a retry after an attempt
/// whose answer was lost (the connection broke or the commit timed out after `COMMIT` was
/// sent) can tell whether that attempt committed, and then applies nothing.
#[derive(Debug)]
pub(crate) struct BatchMark<'a> {
    /// The writer's row name: unique per writer (`w` and 16 random hex digits).
    pub(crate) writer: &'a str,
    /// The batch's number, from 1, increasing by one per batch.
    pub(crate) seq: i64,
    /// Whether an earlier attempt at this batch failed, so it may have committed.
    pub(crate) retry: bool,
}

/// A connection taken from the store's pool; back to the pool when dropped.
#[derive(Debug)]
pub(crate) enum Connection {
    Sqlite(sqlx::pool::PoolConnection<sqlx::Sqlite>),
    Postgres(sqlx::pool::PoolConnection<sqlx::Postgres>),
    MySql(sqlx::pool::PoolConnection<sqlx::MySql>),
}

impl Connection {
    /// Closes the connection when dropped instead of returning it to the pool: after a
    /// failed statement it may be broken, and the pool's test of a returned connection logs
    /// a warning per failure, a flood while the database is down.
    pub(crate) fn close_on_drop(&mut self) {
        match self {
            Self::Sqlite(conn) => conn.close_on_drop(),
            Self::Postgres(conn) => conn.close_on_drop(),
            Self::MySql(conn) => conn.close_on_drop(),
        }
    }
}

/// Runs `$body` with `$p` bound to the concrete pool: sqlx's query API is the same on each,
/// only the types differ.
macro_rules! with_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            Pool::Sqlite($p) => $body,
            Pool::Postgres($p) => $body,
            Pool::MySql($p) => $body,
        }
    };
}
pub(crate) use with_pool;

/// The store: cheap to clone, safe to share. Queries run on a connection pool; writes go
/// through [`Store::apply`] or, off the tick path, a [`StatWriter`].
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pool: Pool,
    sql: Statements,
    /// Failed reads logged at most once a minute ([`Store::log_read_failure`]).
    read_failure_lines: std::sync::Mutex<crate::throttle::Throttle>,
}

/// sqlx logs each statement slower than this at WARN by default: a database that is slow
/// for a while would log a line per statement. The writer's own counters
/// (`tickwire_store_last_flush_seconds`, `_max_flush_seconds`) and a full queue on `/readyz`
/// report a slow database; the statements stay visible at debug.
const SLOW_STATEMENT: Duration = Duration::from_secs(1);
const SLOW_STATEMENT_LOG: log::LevelFilter = log::LevelFilter::Debug;

/// A pooled connection used within this long is taken as alive without a ping.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// The smallest page cache a SQLite connection gets, KiB: a few dozen pages, enough for a
/// statement's path from the root of each B-tree it touches.
pub const MIN_SQLITE_CACHE_KIB: u64 = 256;

/// Each SQLite connection's share of [`StoreConfig::sqlite_cache_mib`], KiB (an in-memory
/// database has one connection, which takes it all).
fn sqlite_cache_kib(config: &StoreConfig, in_memory: bool) -> u64 {
    let connections = if in_memory {
        1
    } else {
        u64::from(config.max_connections.max(1))
    };
    (u64::from(config.sqlite_cache_mib) * 1024 / connections).max(MIN_SQLITE_CACHE_KIB)
}

/// Bytes SQLite holds from the allocator now, in this whole process: its page caches,
/// prepared statements and schemas. Outside the Rust heap (`tickwire_heap_bytes`), so a
/// memory figure that leaves it out takes a full cache for a leak or for free memory.
pub fn sqlite_memory_used() -> u64 {
    // SAFETY: reads SQLite's own counter; no precondition, safe from any thread.
    let used = unsafe { libsqlite3_sys::sqlite3_memory_used() };
    u64::try_from(used).unwrap_or(0)
}

/// Appends [`sqlite_memory_used`] as the gauge `tickwire_store_sqlite_memory_bytes`.
pub fn write_sqlite_memory(out: &mut String) {
    use std::fmt::Write as _;
    const NAME: &str = "tickwire_store_sqlite_memory_bytes";
    let _ = writeln!(
        out,
        "# HELP {NAME} What SQLite holds from the allocator: page cache, statements, schemas."
    );
    let _ = writeln!(out, "# TYPE {NAME} gauge");
    let _ = writeln!(out, "{NAME} {}", sqlite_memory_used());
}

/// Pool settings shared by every backend. sqlx pings each connection it hands out by default:
/// a round trip before every query (about 0.06 ms on MariaDB here, as much as the query). A
/// connection back in the pool within [`PING_IF_IDLE_FOR`] has just worked, so only one idle
/// longer is pinged (sqlx's own suggestion); a query on one that died since fails once and
/// the pool drops it.
fn pool_options<DB: sqlx::Database>(timeout: Duration, max: u32) -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::new()
        .acquire_timeout(timeout)
        .max_connections(max)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > PING_IF_IDLE_FOR {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

fn check_prefix(prefix: &str) -> Result<(), ConnectError> {
    let ok = prefix.len() <= MAX_PREFIX_LEN
        && prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ConnectError::BadPrefix(prefix.to_owned()))
    }
}

fn to_i64(player: PlayerId) -> Result<i64, StoreError> {
    i64::try_from(player).map_err(|_| StoreError::PlayerId(player))
}

/// Decodes the `players` columns every player query selects, in `Statements`' order.
fn player_from(row: &dyn Columns) -> Result<PlayerProfile, StoreError> {
    Ok(PlayerProfile {
        id: row.int(0)? as u64,
        name: row.text_not_null(1)?,
        created_ms: row.int(2)?,
        last_seen_ms: row.int(3)?,
        stats: PlayerStats {
            kills: row.int(4)?,
            deaths: row.int(5)?,
            score: row.int(6)?,
            play_time_ms: row.int(7)?,
            matches: row.int(8)?,
        },
        rank: 0,
    })
}

/// What one batch changes for one player, summed over its events.
#[derive(Debug)]
struct PlayerDelta<'a> {
    name: Option<&'a str>,
    first_ms: i64,
    last_ms: i64,
    stats: PlayerStats,
}

/// A batch folded into one row per player (in id order, so concurrent writers lock rows in
/// the same order) plus the matches to insert.
struct Plan<'a> {
    players: BTreeMap<i64, PlayerDelta<'a>>,
    matches: Vec<&'a MatchResult>,
    outcomes: usize,
}

impl<'a> Plan<'a> {
    fn new(events: &'a [StatEvent]) -> Self {
        let mut plan = Plan {
            players: BTreeMap::new(),
            matches: Vec::new(),
            outcomes: 0,
        };
        for event in events {
            match event {
                StatEvent::PlayerSeen {
                    player,
                    name,
                    at_ms,
                } => {
                    let delta = plan.player(*player as i64, *at_ms, *at_ms);
                    delta.name = Some(name);
                }
                StatEvent::MatchEnded(result) => {
                    plan.matches.push(result);
                    plan.outcomes += result.outcomes.len();
                    for outcome in &result.outcomes {
                        let delta =
                            plan.player(outcome.player as i64, result.started_ms, result.ended_ms);
                        delta.stats.kills += i64::from(outcome.kills);
                        delta.stats.deaths += i64::from(outcome.deaths);
                        delta.stats.score = delta.stats.score.saturating_add(outcome.score);
                        delta.stats.play_time_ms = delta
                            .stats
                            .play_time_ms
                            .saturating_add(outcome.play_time_ms as i64);
                        delta.stats.matches += 1;
                    }
                }
            }
        }
        plan
    }

    fn player(&mut self, id: i64, first_ms: i64, last_ms: i64) -> &mut PlayerDelta<'a> {
        let delta = self.players.entry(id).or_insert(PlayerDelta {
            name: None,
            first_ms,
            last_ms,
            stats: PlayerStats::default(),
        });
        delta.first_ms = delta.first_ms.min(first_ms);
        delta.last_ms = delta.last_ms.max(last_ms);
        delta
    }
}

/// Writes a [`Plan`] inside the open transaction `$tx`.
macro_rules! write_plan {
    ($sql:expr, $plan:expr, $tx:ident) => {{
        let sql: &Statements = $sql;
        let plan: &Plan<'_> = $plan;
        let players: Vec<(&i64, &PlayerDelta<'_>)> = plan.players.iter().collect();
        for chunk in shaped_chunks(&players) {
            let mut query = sqlx::query(AssertSqlSafe(sql.upsert_players.rows(chunk.len())));
            for (id, delta) in chunk {
                query = query
                    .bind(**id)
                    .bind(delta.name)
                    .bind(delta.first_ms)
                    .bind(delta.last_ms)
                    .bind(delta.stats.kills)
                    .bind(delta.stats.deaths)
                    .bind(delta.stats.score)
                    .bind(delta.stats.play_time_ms)
                    .bind(delta.stats.matches);
            }
            query.execute(&mut *$tx).await?;
        }
        if !plan.matches.is_empty() {
            let count = plan.matches.len() as i64;
            sqlx::query(AssertSqlSafe(sql.bump_match_sequence.clone()))
                .bind(count)
                .execute(&mut *$tx)
                .await?;
            let next: i64 = sqlx::query(AssertSqlSafe(sql.read_match_sequence.clone()))
                .fetch_one(&mut *$tx)
                .await?
                .try_get(0)?;
            let first_id = next - count;
            let numbered: Vec<(i64, &MatchResult)> = plan
                .matches
                .iter()
                .enumerate()
                .map(|(i, m)| (first_id + i as i64, *m))
                .collect();
            for chunk in shaped_chunks(&numbered) {
                let mut query = sqlx::query(AssertSqlSafe(sql.insert_matches.rows(chunk.len())));
                for (id, m) in chunk {
                    query = query
                        .bind(*id)
                        .bind(m.room.as_str())
                        .bind(m.started_ms)
                        .bind(m.ended_ms);
                }
                query.execute(&mut *$tx).await?;
            }
            let rows: Vec<(i64, &crate::event::Outcome)> = numbered
                .iter()
                .flat_map(|(id, m)| m.outcomes.iter().map(move |o| (*id, o)))
                .collect();
            for chunk in shaped_chunks(&rows) {
                let mut query =
                    sqlx::query(AssertSqlSafe(sql.insert_match_players.rows(chunk.len())));
                for (id, o) in chunk {
                    query = query
                        .bind(*id)
                        .bind(o.player as i64)
                        .bind(i64::from(o.kills))
                        .bind(i64::from(o.deaths))
                        .bind(o.score)
                        .bind(o.play_time_ms as i64);
                }
                query.execute(&mut *$tx).await?;
            }
        }
    }};
}

impl Store {
    /// Connects with the defaults of [`StoreConfig`] and `url`, and migrates the schema.
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        Self::connect_with(&StoreConfig {
            url: url.to_owned(),
            ..StoreConfig::default()
        })
        .await
    }

    /// Connects as `config` says and runs the migrations this build has that the database
    /// lacks (each backend's own SQL, embedded in the binary).
    pub async fn connect_with(config: &StoreConfig) -> Result<Self, ConnectError> {
        check_prefix(&config.table_prefix)?;
        let url = config.url.trim();
        let scheme = url.split(':').next().unwrap_or_default();
        let max = config.max_connections.max(1);
        let timeout = Duration::from_millis(config.connect_timeout_ms);
        let pool = match scheme {
            "sqlite" => {
                let backend = Backend::Sqlite;
                let in_memory = url.contains(":memory:") || url.contains("mode=memory");
                let options = SqliteConnectOptions::from_str(url)
                    .map_err(|source| ConnectError::BadUrl { backend, source })?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(match config.sqlite_synchronous {
                        SqliteSync::Full => SqliteSynchronous::Full,
                        SqliteSync::Normal => SqliteSynchronous::Normal,
                    })
                    .busy_timeout(Duration::from_secs(10))
                    .foreign_keys(true)
                    // A multi-row upsert inside a transaction keeps a statement journal (to
                    // undo just that statement); in memory it costs no file writes. Nothing
                    // durable lives there: it is gone at the statement's end either way.
                    .pragma("temp_store", "memory")
                    // Negative: a size in KiB rather than in pages.
                    .pragma(
                        "cache_size",
                        format!("-{}", sqlite_cache_kib(config, in_memory)),
                    )
                    // A leaderboard page is up to 1,000 rows: the connection's thread steps
                    // through all of them without waiting for the reader to take each batch
                    // of sqlx's default 50.
                    .row_buffer_size(1024)
                    .log_slow_statements(SLOW_STATEMENT_LOG, SLOW_STATEMENT);
                let pool = if in_memory {
                    // Every connection would see its own empty database: keep exactly one,
                    // forever.
                    pool_options::<sqlx::Sqlite>(timeout, 1)
                        .min_connections(1)
                        .idle_timeout(None)
                        .max_lifetime(None)
                } else {
                    pool_options::<sqlx::Sqlite>(timeout, max)
                };
                Pool::Sqlite(
                    pool.connect_with(options)
                        .await
                        .map_err(|source| ConnectError::Connect { backend, source })?,
                )
            }
            "postgres" | "postgresql" => {
                let backend = Backend::Postgres;
                let options = PgConnectOptions::from_str(url)
                    .map_err(|source| ConnectError::BadUrl { backend, source })?
                    .log_slow_statements(SLOW_STATEMENT_LOG, SLOW_STATEMENT);
                let port = options.get_port();
                Pool::Postgres(
                    pool_options::<sqlx::Postgres>(timeout, max)
                        .after_connect(move |_, _| {
                            Box::pin(async move {
                                crate::nodelay::set_on_sockets_to(port);
                                Ok(())
                            })
                        })
                        .connect_with(options)
                        .await
                        .map_err(|source| ConnectError::Connect { backend, source })?,
                )
            }
            "mysql" | "mariadb" => {
                let backend = Backend::MySql;
                let url = match url.strip_prefix("mariadb") {
                    Some(rest) => format!("mysql{rest}"),
                    None => url.to_owned(),
                };
                let options = MySqlConnectOptions::from_str(&url)
                    .map_err(|source| ConnectError::BadUrl { backend, source })?
                    .charset("utf8mb4")
                    .log_slow_statements(SLOW_STATEMENT_LOG, SLOW_STATEMENT);
                let port = options.get_port();
                Pool::MySql(
                    pool_options::<sqlx::MySql>(timeout, max)
                        .after_connect(move |_, _| {
                            Box::pin(async move {
                                crate::nodelay::set_on_sockets_to(port);
                                Ok(())
                            })
                        })
                        .connect_with(options)
                        .await
                        .map_err(|source| ConnectError::Connect { backend, source })?,
                )
            }
            other => return Err(ConnectError::UnknownScheme(other.to_owned())),
        };
        let backend = match pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
            Pool::MySql(_) => Backend::MySql,
        };
        crate::migrate::run(&pool, backend, &config.table_prefix).await?;
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                sql: Statements::new(backend, &config.table_prefix),
                read_failure_lines: Default::default(),
            }),
        })
    }

    /// Which backend this store talks to.
    pub fn backend(&self) -> Backend {
        self.inner.sql.backend
    }

    /// The table prefix.
    pub fn table_prefix(&self) -> &str {
        &self.inner.sql.prefix
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// Starts a write-behind [`StatWriter`] on the current tokio runtime.
    pub fn writer(&self, config: &WriterConfig) -> StatWriter {
        StatWriter::spawn(self.clone(), config)
    }

    /// Commits `events` in one transaction: all of them or none. Validates them first.
    pub async fn apply(&self, events: &[StatEvent]) -> Result<(), StoreError> {
        for event in events {
            event.validate()?;
        }
        self.apply_valid(events).await
    }

    /// [`Store::apply`] for events already validated (the writer validates on record).
    pub(crate) async fn apply_valid(&self, events: &[StatEvent]) -> Result<(), StoreError> {
        let mut conn = self.acquire().await?;
        self.apply_on(&mut conn, events, None).await.map(drop)
    }

    /// Logs a failed read (the HTTP API answers it 503): one line a minute at most, saying
    /// how many failed since the last, so a database that is down does not flood the log
    /// with one line per request.
    pub(crate) fn log_read_failure(&self, error: &StoreError) {
        let admitted = self
            .inner
            .read_failure_lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .admit(tokio::time::Instant::now());
        match admitted {
            Some(earlier_unlogged) => tracing::warn!(
                %error,
                earlier_unlogged,
                "store query failed; reads answer 503 until the database is back (at most one such line a minute)"
            ),
            None => tracing::debug!(%error, "store query failed"),
        }
    }

    /// A connection from the pool, for a caller that writes many batches in a row (the
    /// writer): on one connection its prepared statements and, on SQLite, its page cache
    /// stay warm, where the pool hands out its connections in turn.
    pub(crate) async fn acquire(&self) -> Result<Connection, StoreError> {
        Ok(match &self.inner.pool {
            Pool::Sqlite(pool) => Connection::Sqlite(pool.acquire().await?),
            Pool::Postgres(pool) => Connection::Postgres(pool.acquire().await?),
            Pool::MySql(pool) => Connection::MySql(pool.acquire().await?),
        })
    }

    /// Whether a writer may keep a connection between batches: not when it is the pool's
    /// only one (SQLite in memory), which readers need too.
    pub(crate) fn writer_keeps_connection(&self) -> bool {
        let size = with_pool!(&self.inner.pool, pool => pool.options().get_max_connections());
        size > 1
    }

    /// [`Store::apply_valid`] on `conn`, in one transaction, marked with `mark` when a
    /// writer applies it. `Ok(false)`: a retry found its batch already committed (an earlier
    /// attempt whose answer was lost), and applied nothing.
    pub(crate) async fn apply_on(
        &self,
        conn: &mut Connection,
        events: &[StatEvent],
        mark: Option<&BatchMark<'_>>,
    ) -> Result<bool, StoreError> {
        if events.is_empty() {
            return Ok(true);
        }
        let plan = Plan::new(events);
        let sql = &self.inner.sql;
        // The same steps on each backend's transaction type.
        macro_rules! marked_write {
            ($tx:ident) => {{
                if let Some(mark) = mark.filter(|mark| mark.retry) {
                    let committed: Option<i64> =
                        sqlx::query(AssertSqlSafe(sql.read_batch_mark.clone()))
                            .bind(mark.writer)
                            .fetch_optional(&mut *$tx)
                            .await?
                            .map(|row| row.try_get(0))
                            .transpose()?;
                    if committed.is_some_and(|seq| seq >= mark.seq) {
                        $tx.rollback().await?;
                        return Ok(false);
                    }
                }
                write_plan!(sql, &plan, $tx);
                if let Some(mark) = mark {
                    sqlx::query(AssertSqlSafe(sql.mark_batch.clone()))
                        .bind(mark.writer)
                        .bind(mark.seq)
                        .execute(&mut *$tx)
                        .await?;
                }
                $tx.commit().await?;
            }};
        }
        match conn {
            Connection::Sqlite(conn) => {
                // IMMEDIATE takes the write lock up front: a deferred transaction that read
                // first could fail to upgrade under another writer instead of waiting.
                let mut tx = sqlx::Connection::begin_with(&mut **conn, "BEGIN IMMEDIATE").await?;
                marked_write!(tx);
            }
            Connection::Postgres(conn) => {
                let mut tx = sqlx::Connection::begin(&mut **conn).await?;
                marked_write!(tx);
            }
            Connection::MySql(conn) => {
                let mut tx = sqlx::Connection::begin(&mut **conn).await?;
                marked_write!(tx);
            }
        }
        Ok(true)
    }

    /// Stat updates (player rows touched) a batch of `events` makes; what the bench counts.
    pub fn updates_in(events: &[StatEvent]) -> usize {
        let plan = Plan::new(events);
        plan.outcomes
            + events
                .iter()
                .filter(|e| matches!(e, StatEvent::PlayerSeen { .. }))
                .count()
    }

    /// A player's profile, totals and rank; `None` if the store has never heard of them.
    pub async fn player(&self, id: PlayerId) -> Result<Option<PlayerProfile>, StoreError> {
        let id = to_i64(id)?;
        let sql = &self.inner.sql;
        let found = with_pool!(&self.inner.pool, pool => {
            match sqlx::query(AssertSqlSafe(sql.player.clone())).bind(id).fetch_optional(pool).await? {
                Some(row) => Some(player_from(&row)?),
                None => None,
            }
        });
        let Some(mut profile) = found else {
            return Ok(None);
        };
        profile.rank = self.rank_of_score(profile.stats.score).await?;
        Ok(Some(profile))
    }

    /// A player's competition rank (1 + players with a strictly higher score); `None` if
    /// unknown.
    pub async fn rank(&self, id: PlayerId) -> Result<Option<u64>, StoreError> {
        Ok(self.player(id).await?.map(|p| p.rank))
    }

    async fn rank_of_score(&self, score: i64) -> Result<u64, StoreError> {
        let sql = &self.inner.sql;
        let above: i64 = with_pool!(&self.inner.pool, pool => {
            sqlx::query(AssertSqlSafe(sql.count_above_score.clone()))
                .bind(score)
                .fetch_one(pool)
                .await?
                .try_get(0)?
        });
        Ok(above as u64 + 1)
    }

    /// The top `limit` players by score, ties in id order, with competition ranks.
    pub async fn leaderboard(&self, limit: u32) -> Result<Vec<LeaderboardEntry>, StoreError> {
        let sql = &self.inner.sql;
        let rows = rows::fetch_all(
            &mut self.acquire().await?,
            &sql.top,
            &[i64::from(limit)],
            player_from,
        )
        .await?;
        // The list starts at the very top, so a player's rank is one more than the position
        // of the first entry with their score.
        Ok(ranked(rows, 1))
    }

    /// The player and up to `radius` players either side of them in leaderboard order, with
    /// competition ranks; `None` if the player is unknown.
    pub async fn around(
        &self,
        id: PlayerId,
        radius: u32,
    ) -> Result<Option<Vec<LeaderboardEntry>>, StoreError> {
        let Some(me) = self.player(id).await? else {
            return Ok(None);
        };
        let sql = &self.inner.sql;
        let (me_id, score) = (me.id as i64, me.stats.score);
        let binds = [score, score, me_id, i64::from(radius)];
        let (mut above, below) = {
            let mut conn = self.acquire().await?;
            let above = rows::fetch_all(&mut conn, &sql.above, &binds, player_from).await?;
            let below = rows::fetch_all(&mut conn, &sql.below, &binds, player_from).await?;
            (above, below)
        };
        above.reverse();
        let mut rows = above;
        rows.push(me);
        rows.extend(below);
        let first = &rows[0];
        let before: i64 = with_pool!(&self.inner.pool, pool => {
            sqlx::query(AssertSqlSafe(sql.count_before.clone()))
                .bind(first.stats.score)
                .bind(first.stats.score)
                .bind(first.id as i64)
                .fetch_one(pool)
                .await?
                .try_get(0)?
        });
        let first_rank = self.rank_of_score(first.stats.score).await?;
        let mut entries = ranked(rows, before as u64 + 1);
        // The first row may share its score with rows before the window.
        if let Some(head) = entries.first().map(|e| e.stats.score) {
            for entry in entries.iter_mut().take_while(|e| e.stats.score == head) {
                entry.rank = first_rank;
            }
        }
        Ok(Some(entries))
    }

    /// A player's most recent `limit` matches, newest first, with their own outcome.
    pub async fn matches(
        &self,
        player: PlayerId,
        limit: u32,
    ) -> Result<Vec<MatchSummary>, StoreError> {
        let player = to_i64(player)?;
        let sql = &self.inner.sql;
        let mut conn = self.acquire().await?;
        rows::fetch_all(
            &mut conn,
            &sql.matches_of,
            &[player, i64::from(limit)],
            |row| {
                Ok(MatchSummary {
                    match_id: row.int(0)? as u64,
                    room: row.text_not_null(1)?,
                    started_ms: row.int(2)?,
                    ended_ms: row.int(3)?,
                    kills: row.int(4)?,
                    deaths: row.int(5)?,
                    score: row.int(6)?,
                    play_time_ms: row.int(7)?,
                    players: row.int(8)? as u64,
                })
            },
        )
        .await
    }

    /// Drops every table this store created under its prefix, data included (plus `extra`
    /// tables under the same prefix). For tests and the benchmark: nothing in tickwire calls
    /// it on a real database.
    pub async fn drop_tables(&self, extra: &[&str]) -> Result<(), StoreError> {
        let tables = [
            "match_players",
            "matches",
            "players",
            "sequences",
            "schema_migrations",
        ];
        for table in extra.iter().chain(tables.iter()) {
            let sql = format!("DROP TABLE IF EXISTS {}{table}", self.inner.sql.prefix);
            with_pool!(&self.inner.pool, pool => {
                sqlx::query(AssertSqlSafe(sql)).execute(pool).await?;
            });
        }
        Ok(())
    }

    /// Closes the connection pool (waits for connections in use to be returned). Close this
    /// store's [`StatWriter`]s first: a writer keeps one connection until it stops.
    pub async fn close(&self) {
        with_pool!(&self.inner.pool, pool => pool.close().await)
    }
}

/// Competition ranks for consecutive leaderboard rows, the first at global position
/// `first_position` (1-based): a row ranks at its position unless it ties the row before it.
fn ranked(rows: Vec<PlayerProfile>, first_position: u64) -> Vec<LeaderboardEntry> {
    let mut out: Vec<LeaderboardEntry> = Vec::with_capacity(rows.len());
    for (i, row) in rows.into_iter().enumerate() {
        let rank = match out.last() {
            Some(prev) if prev.stats.score == row.stats.score => prev.rank,
            _ => first_position + i as u64,
        };
        out.push(LeaderboardEntry {
            rank,
            player: row.id,
            name: row.name,
            stats: row.stats,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sqlite_cache_budget_is_shared_among_the_pools_connections() {
        let config = |mib, connections| StoreConfig {
            sqlite_cache_mib: mib,
            max_connections: connections,
            ..StoreConfig::default()
        };
        assert_eq!(
            sqlite_cache_kib(&StoreConfig::default(), false),
            2048,
            "SQLite's own default per connection"
        );
        assert_eq!(sqlite_cache_kib(&config(16, 8), true), 16 * 1024);
        assert_eq!(sqlite_cache_kib(&config(3, 2), false), 1536);
        assert_eq!(
            sqlite_cache_kib(&config(1, 64), false),
            MIN_SQLITE_CACHE_KIB
        );
        assert_eq!(sqlite_cache_kib(&config(0, 0), false), MIN_SQLITE_CACHE_KIB);
    }
}
