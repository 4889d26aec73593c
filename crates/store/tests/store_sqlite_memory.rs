//! SQLite's memory is bounded by `sqlite_cache_mib`, whatever the database's size. A binary
//! of its own: SQLite's allocation counter is the whole process's, and another test's
//! connections would move it.

mod common;

use tickwire_store::{MatchResult, Outcome, StatEvent, Store, StoreConfig, sqlite_memory_used};

const MIB: u64 = 1 << 20;

/// A match of 100 players, each a new one: rows in three tables and their indexes.
fn crowd_match(number: u64) -> Vec<StatEvent> {
    let players = (number * 100 + 1)..=(number * 100 + 100);
    let mut events: Vec<StatEvent> = players
        .clone()
        .map(|player| StatEvent::PlayerSeen {
            player,
            name: format!("a player with a long name {player}"),
            at_ms: number as i64,
        })
        .collect();
    events.push(StatEvent::MatchEnded(MatchResult {
        room: format!("arena-{number}"),
        started_ms: 0,
        ended_ms: 60_000,
        outcomes: players
            .map(|player| Outcome {
                player,
                kills: (player % 7) as u32,
                deaths: 1,
                score: (player * 7919 % 10_007) as i64,
                play_time_ms: 60_000,
            })
            .collect(),
    }));
    events
}

#[tokio::test]
async fn sqlites_memory_stays_within_its_cache_budget_as_the_database_grows() {
    let path = common::sqlite_path();
    let store = Store::connect_with(&StoreConfig {
        url: format!("sqlite://{}", path.display()),
        max_connections: 2,
        sqlite_cache_mib: 2,
        ..StoreConfig::default()
    })
    .await
    .unwrap();
    let mut peak = 0;
    for number in 0..600 {
        store.apply(&crowd_match(number)).await.unwrap();
        if number % 50 == 0 {
            // Reads on the other connection fill its cache too.
            store.leaderboard(1000).await.unwrap();
        }
        peak = peak.max(sqlite_memory_used());
    }
    let file = std::fs::metadata(&path).unwrap().len()
        + std::fs::metadata(path.with_extension("db-wal")).map_or(0, |wal| wal.len());
    assert!(
        file > 8 * MIB,
        "the database ({file} bytes) is to outgrow the cache several times over"
    );
    // The budget, plus what is not page cache: schemas, prepared statements, the
    // connections' own state.
    assert!(
        peak < 2 * MIB + 3 * MIB / 2,
        "SQLite held up to {peak} bytes for a 2 MiB cache budget and a {file}-byte database"
    );
    assert!(peak > MIB, "the cache filled: {peak} bytes");
    store.close().await;
    for suffix in ["db", "db-wal", "db-shm"] {
        let _ = std::fs::remove_file(path.with_extension(suffix));
    }
}
