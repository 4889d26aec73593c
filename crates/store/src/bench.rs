//! `tickwire bench-db`: seed 004's MySQL benchmark on any backend, plus the writer's
//! batched throughput.
//!
//! Seed 004 filled a table of 50,000 accounts (`ID`, `RandomNum`, `RandomIndexedNum`) and
//! measured, one statement at a time on one connection: updating 1,000 random accounts
//! (5 ms each), seeking 1,000 random accounts (0.18 ms each), and ranking the top 1,000 by an
//! unindexed (27 ms) and an indexed (0.84 ms) column. [`run`] does the same in tables
//! prefixed `tickwire_bench_` (dropped before and after), then measures what tickwire
//! actually does on the tick path's behalf: [`StatWriter`](crate::StatWriter) batches.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let report = tickwire_store::bench::run("sqlite:///tmp/bench.db", 50_000).await?;
//! println!("{report}"); // a table beside seed 004's figures
//! println!("{}", serde_json::to_string(&report)?); // `--json`
//! # Ok(()) }
//! ```

use std::time::Instant;

use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sqlx::{AssertSqlSafe, Row};

use crate::event::{MatchResult, Outcome, StatEvent};
use crate::rows;
use crate::sql::{Backend, placeholders};
use crate::store::{ConnectError, Pool, Store, StoreConfig, StoreError, with_pool};
use crate::writer::WriterConfig;

/// Table prefix the benchmark writes under.
pub const BENCH_PREFIX: &str = "tickwire_bench_";
/// Random players updated, and sought, one statement each (as in seed 004).
pub const SINGLE_OPS: usize = 1000;
/// Rows the rank queries return (seed 004's top 1,000).
pub const TOP: i64 = 1000;
/// Measured runs of each rank query, after one warm-up run.
pub const RANK_RUNS: usize = 5;
/// Stat updates pushed through the writer for the batched figure (or twice `records`, if
/// fewer).
pub const BATCHED_UPDATES: usize = 100_000;

/// Seed 004's figures (MySQL on a dedicated Linux server, 50,000 accounts).
pub mod seed004 {
    /// Update one record, ms.
    pub const UPDATE_MS: f64 = 5.0;
    /// Seek and read a random record, ms.
    pub const SEEK_MS: f64 = 0.18;
    /// Top 1,000 of an unindexed column, ms.
    pub const RANK_UNINDEXED_MS: f64 = 27.0;
    /// Top 1,000 of an indexed column, ms.
    pub const RANK_INDEXED_MS: f64 = 0.84;
}

/// What [`run`] measured. Serializes to the `--json` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// `sqlite`, `postgres` or `mysql`.
    pub backend: String,
    /// Rows in the accounts table.
    pub records: u64,
    /// Seconds to create and fill it (multi-row inserts, 500 rows each, one transaction).
    pub fill_s: f64,
    /// Mean ms to update one random account, one autocommit statement each.
    pub update_ms: f64,
    /// Mean ms to read one random account by id.
    pub seek_ms: f64,
    /// Mean ms to read the top 1,000 by an unindexed column.
    pub rank_top1000_unindexed_ms: f64,
    /// Mean ms to read the top 1,000 by an indexed column.
    pub rank_top1000_indexed_ms: f64,
    /// Player stat updates per second through the [`StatWriter`](crate::StatWriter):
    /// [`BATCHED_UPDATES`] match results of one player each (a drop-in room's session end:
    /// one totals upsert plus one history row each), from the first record to the flush.
    pub batched_updates_per_s: f64,
    /// Events per transaction the writer used.
    pub batch_events: usize,
    /// SQLite's `synchronous` setting, for SQLite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sqlite_synchronous: Option<String>,
}

/// Why the benchmark stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Could not connect or migrate.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A statement failed.
    #[error("benchmark query failed: {0}")]
    Database(#[from] sqlx::Error),
    /// The writer's store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `records` is 0 or too large.
    #[error("records {0} must be from 1 to 100000000")]
    Records(u64),
}

fn ms(start: Instant, n: usize) -> f64 {
    start.elapsed().as_secs_f64() * 1e3 / n as f64
}

/// Runs the benchmark against `url` with `records` accounts (and players). Uses tables
/// prefixed [`BENCH_PREFIX`], which it drops before and after; nothing else is touched.
pub async fn run(url: &str, records: u64) -> Result<BenchReport, BenchError> {
    run_with(
        &StoreConfig {
            url: url.to_owned(),
            ..StoreConfig::default()
        },
        records,
    )
    .await
}

/// [`run`] with the store's other settings (SQLite's `synchronous`, the writer's batching)
/// taken from `config`; its table prefix is replaced by [`BENCH_PREFIX`].
pub async fn run_with(config: &StoreConfig, records: u64) -> Result<BenchReport, BenchError> {
    if records == 0 || records > 100_000_000 {
        return Err(BenchError::Records(records));
    }
    let config = StoreConfig {
        table_prefix: BENCH_PREFIX.to_owned(),
        ..config.clone()
    };
    // Start from nothing, whatever an earlier run left.
    let store = Store::connect_with(&config).await?;
    store.drop_tables(&["accounts"]).await?;
    store.close().await;
    let store = Store::connect_with(&config).await?;
    let backend = store.backend();
    let p = BENCH_PREFIX;
    let mut rng = ChaCha8Rng::seed_from_u64(4);

    // Seed 004's table: an id, an unindexed and an indexed random number.
    // Each backend's own way to key a table by an integer id: on SQLite that is INTEGER
    // PRIMARY KEY, the rowid itself (as the store's own tables), so a secondary index
    // entry leads straight to its row; BIGINT PRIMARY KEY there would be a second index.
    let (id_type, engine) = match backend {
        Backend::Sqlite => ("INTEGER", ""),
        Backend::Postgres => ("BIGINT", ""),
        Backend::MySql => ("BIGINT", " ENGINE=InnoDB"),
    };
    let create = format!(
        "CREATE TABLE {p}accounts (id {id_type} NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, \
         random_num BIGINT NOT NULL, random_indexed_num BIGINT NOT NULL){engine}"
    );
    // Indexed in the order the ranking reads it, as the store's own score index is: InnoDB
    // walks an index backwards about a fifth slower than forwards (0.36 against 0.30 ms of
    // MariaDB's CPU for the top 1,000 here).
    let index =
        format!("CREATE INDEX {p}accounts_indexed ON {p}accounts (random_indexed_num DESC)");
    let fill_start = Instant::now();
    let rows_per_insert = 500usize;
    let values: Vec<(i64, i64, i64)> = (1..=records as i64)
        .map(|id| {
            (
                id,
                rng.random_range(0..2_000_000),
                rng.random_range(0..20_000_000),
            )
        })
        .collect();
    with_pool!(store.pool(), pool => {
        sqlx::query(AssertSqlSafe(create)).execute(pool).await?;
        sqlx::query(AssertSqlSafe(index)).execute(pool).await?;
        let mut tx = pool.begin().await?;
        for chunk in values.chunks(rows_per_insert) {
            let mut sql = format!(
                "INSERT INTO {p}accounts (id, name, random_num, random_indexed_num) VALUES "
            );
            for i in 0..chunk.len() {
                if i > 0 {
                    sql.push(',');
                }
                sql.push_str("(?,?,?,?)");
            }
            let mut query = sqlx::query(AssertSqlSafe(placeholders(backend, &sql)));
            for (id, a, b) in chunk {
                query = query.bind(*id).bind(format!("player{id}")).bind(*a).bind(*b);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
    });
    let fill_s = fill_start.elapsed().as_secs_f64();
    let random_ids: Vec<i64> = (0..SINGLE_OPS)
        .map(|_| rng.random_range(1..=records as i64))
        .collect();

    let update_sql = placeholders(
        backend,
        &format!("UPDATE {p}accounts SET random_num = ?, random_indexed_num = ? WHERE id = ?"),
    );
    let seek_sql = placeholders(
        backend,
        &format!("SELECT id, random_num FROM {p}accounts WHERE id = ?"),
    );
    let rank_sql = |column: &str| {
        format!("SELECT id, {column} FROM {p}accounts ORDER BY {column} DESC LIMIT {TOP}")
    };
    let (unindexed_sql, indexed_sql) = (rank_sql("random_num"), rank_sql("random_indexed_num"));
    let new_values: Vec<(i64, i64)> = (0..SINGLE_OPS)
        .map(|_| {
            (
                rng.random_range(0..2_000_000),
                rng.random_range(0..20_000_000),
            )
        })
        .collect();

    // One connection, one statement at a time, as the seed's telnet commands did.
    let (update_ms, seek_ms) = with_pool!(store.pool(), pool => {
        let mut conn = pool.acquire().await?;
        let start = Instant::now();
        for (id, (a, b)) in random_ids.iter().zip(&new_values) {
            sqlx::query(AssertSqlSafe(update_sql.as_str()))
                .bind(*a)
                .bind(*b)
                .bind(*id)
                .execute(&mut *conn)
                .await?;
        }
        let update_ms = ms(start, SINGLE_OPS);
        let start = Instant::now();
        for id in &random_ids {
            let row = sqlx::query(AssertSqlSafe(seek_sql.as_str()))
                .bind(*id)
                .fetch_one(&mut *conn)
                .await?;
            let _: i64 = row.try_get(1)?;
        }
        (update_ms, ms(start, SINGLE_OPS))
    });
    // The rank queries read the way the store reads a leaderboard page.
    let mut conn = store.acquire().await?;
    let mut rank_ms = [0.0; 2];
    for (slot, sql) in rank_ms.iter_mut().zip([&unindexed_sql, &indexed_sql]) {
        let mut total = 0.0;
        for run in 0..=RANK_RUNS {
            let start = Instant::now();
            let rows =
                rows::fetch_all(&mut conn, sql, &[], |row| Ok((row.int(0)?, row.int(1)?))).await?;
            if run > 0 {
                total += ms(start, 1);
            }
            debug_assert_eq!(rows.len() as i64, TOP.min(records as i64));
        }
        *slot = total / RANK_RUNS as f64;
    }
    let [unindexed_ms, indexed_ms] = rank_ms;
    drop(conn);

    // The writer's way: every account is a player; each event is one player's session end.
    let mut seen = Vec::with_capacity(records as usize);
    for id in 1..=records {
        seen.push(StatEvent::PlayerSeen {
            player: id,
            name: format!("player{id}"),
            at_ms: 0,
        });
    }
    for chunk in seen.chunks(10_000) {
        store.apply(chunk).await?;
    }
    let writer_config = WriterConfig {
        queue_capacity: config.writer.queue_capacity.max(1),
        ..config.writer.clone()
    };
    let writer = store.writer(&writer_config);
    let batched = BATCHED_UPDATES.min(records as usize * 2);
    let events: Vec<StatEvent> = (0..batched)
        .map(|i| {
            let ended_ms = 1_000_000 + i as i64;
            StatEvent::MatchEnded(MatchResult {
                room: format!("bench-{}", i % 64),
                started_ms: ended_ms - 60_000,
                ended_ms,
                outcomes: vec![Outcome {
                    player: rng.random_range(1..=records),
                    kills: rng.random_range(0..10),
                    deaths: rng.random_range(0..10),
                    score: rng.random_range(0..100),
                    play_time_ms: 60_000,
                }],
            })
        })
        .collect();
    let start = Instant::now();
    for event in events {
        // Off the tick path, so waiting for room is right here.
        if writer.record(event).await.is_err() {
            break;
        }
    }
    writer.close().await;
    let batched_updates_per_s = batched as f64 / start.elapsed().as_secs_f64();

    store.drop_tables(&["accounts"]).await?;
    store.close().await;
    Ok(BenchReport {
        backend: backend.name().to_owned(),
        records,
        fill_s,
        update_ms,
        seek_ms,
        rank_top1000_unindexed_ms: unindexed_ms,
        rank_top1000_indexed_ms: indexed_ms,
        batched_updates_per_s,
        batch_events: writer_config.batch_max_events,
        sqlite_synchronous: (backend == Backend::Sqlite)
            .then(|| format!("{:?}", config.sqlite_synchronous).to_lowercase()),
    })
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sync = match &self.sqlite_synchronous {
            Some(sync) => format!(", synchronous={sync}"),
            None => String::new(),
        };
        writeln!(
            f,
            "tickwire bench-db: {}{sync}, {} records (filled in {:.2} s)",
            self.backend, self.records, self.fill_s
        )?;
        writeln!(
            f,
            "{:<42} {:>14} {:>18}",
            "", "tickwire", "seed 004 (MySQL)"
        )?;
        let rows = [
            (
                "update one random record (ms)",
                self.update_ms,
                seed004::UPDATE_MS,
            ),
            (
                "seek one random record (ms)",
                self.seek_ms,
                seed004::SEEK_MS,
            ),
            (
                "top 1,000, unindexed (ms)",
                self.rank_top1000_unindexed_ms,
                seed004::RANK_UNINDEXED_MS,
            ),
            (
                "top 1,000, indexed (ms)",
                self.rank_top1000_indexed_ms,
                seed004::RANK_INDEXED_MS,
            ),
        ];
        for (what, ours, seed) in rows {
            writeln!(f, "{what:<42} {ours:>14.3} {seed:>18}")?;
        }
        writeln!(
            f,
            "{:<42} {:>14.0} {:>18}",
            format!("batched stat updates/s ({} per batch)", self.batch_events),
            self.batched_updates_per_s,
            "-"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bench_runs_on_sqlite_and_reports_every_field() {
        let path = std::env::temp_dir().join(format!("tickwire-bench-{}.db", std::process::id()));
        let url = format!("sqlite://{}", path.display());
        let report = run(&url, 2_000).await.expect("bench runs");
        assert_eq!(report.backend, "sqlite");
        assert_eq!(report.records, 2_000);
        let json = serde_json::to_value(&report).unwrap();
        for key in [
            "backend",
            "records",
            "update_ms",
            "seek_ms",
            "rank_top1000_unindexed_ms",
            "rank_top1000_indexed_ms",
            "batched_updates_per_s",
        ] {
            assert!(json.get(key).is_some(), "--json lacks {key}: {json}");
        }
        assert!(report.to_string().contains("seed 004"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
