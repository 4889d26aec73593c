//! One repository suite, run against SQLite always and against PostgreSQL and MariaDB when
//! their URLs are set.

mod common;

use common::{Server, TestDb};
use tickwire_store::{
    ConnectError, MatchResult, Outcome, PlayerStats, StatEvent, Store, StoreConfig, StoreError,
};

fn outcome(player: u64, kills: u32, deaths: u32, score: i64, play_time_ms: u64) -> Outcome {
    Outcome {
        player,
        kills,
        deaths,
        score,
        play_time_ms,
    }
}

fn seen(player: u64, name: &str, at_ms: i64) -> StatEvent {
    StatEvent::PlayerSeen {
        player,
        name: name.into(),
        at_ms,
    }
}

fn ended(room: &str, started_ms: i64, ended_ms: i64, outcomes: Vec<Outcome>) -> StatEvent {
    StatEvent::MatchEnded(MatchResult {
        room: room.into(),
        started_ms,
        ended_ms,
        outcomes,
    })
}

/// What every backend must do the same way.
async fn suite(db: &TestDb) {
    let store = &db.store;
    assert!(
        store.player(1).await.unwrap().is_none(),
        "empty store has no player 1"
    );
    assert!(store.leaderboard(10).await.unwrap().is_empty());

    store
        .apply(&[seen(1, "Casey", 1_000), seen(2, "Ünïcødé 🎮", 1_500)])
        .await
        .unwrap();
    // Two matches in one transaction, one player in both, and a player never seen by name.
    store
        .apply(&[
            ended(
                "arena-1",
                2_000,
                62_000,
                vec![outcome(1, 3, 1, 31, 60_000), outcome(2, 1, 3, 12, 60_000)],
            ),
            ended(
                "arena-2",
                70_000,
                80_000,
                vec![outcome(1, 2, 0, 20, 10_000), outcome(3, 0, 2, 20, 9_000)],
            ),
        ])
        .await
        .unwrap();
    // A rename moves last_seen forward; an older sighting does not move it back.
    store
        .apply(&[seen(2, "Robin", 90_000), seen(2, "Robin", 85_000)])
        .await
        .unwrap();

    let p1 = store.player(1).await.unwrap().expect("player 1 exists");
    assert_eq!(p1.name, "Casey");
    assert_eq!(p1.created_ms, 1_000);
    assert_eq!(p1.last_seen_ms, 80_000, "last seen is the last match's end");
    assert_eq!(
        p1.stats,
        PlayerStats {
            kills: 5,
            deaths: 1,
            score: 51,
            play_time_ms: 70_000,
            matches: 2
        }
    );
    assert_eq!(p1.rank, 1);
    let p2 = store.player(2).await.unwrap().unwrap();
    assert_eq!(p2.name, "Robin");
    assert_eq!(p2.last_seen_ms, 90_000);
    let p3 = store.player(3).await.unwrap().unwrap();
    assert_eq!(p3.name, "", "a player only seen in a match has no name yet");
    assert_eq!(p3.created_ms, 70_000);
    assert_eq!((p2.rank, p3.rank), (3, 2), "score 20 ranks above 12");

    // Names survive a round trip exactly, whatever the backend's charset.
    store.apply(&[seen(4, "Ünïcødé 🎮", 1)]).await.unwrap();
    assert_eq!(store.player(4).await.unwrap().unwrap().name, "Ünïcødé 🎮");

    let top = store.leaderboard(10).await.unwrap();
    let order: Vec<(u64, u64)> = top.iter().map(|e| (e.player, e.rank)).collect();
    assert_eq!(order, vec![(1, 1), (3, 2), (2, 3), (4, 4)]);
    assert_eq!(store.leaderboard(2).await.unwrap().len(), 2);

    let around = store.around(3, 1).await.unwrap().unwrap();
    let order: Vec<(u64, u64)> = around.iter().map(|e| (e.player, e.rank)).collect();
    assert_eq!(order, vec![(1, 1), (3, 2), (2, 3)]);
    assert!(store.around(99, 1).await.unwrap().is_none());

    let history = store.matches(1, 10).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].room, "arena-2", "newest first");
    assert_eq!(
        (history[0].kills, history[0].score, history[0].players),
        (2, 20, 2)
    );
    assert_eq!(history[1].room, "arena-1");
    assert_eq!(
        (history[1].started_ms, history[1].ended_ms),
        (2_000, 62_000)
    );
    assert!(history[0].match_id > history[1].match_id);
    assert_eq!(store.matches(1, 1).await.unwrap().len(), 1);
    assert!(store.matches(99, 10).await.unwrap().is_empty());

    // Invalid events are refused before anything is written.
    let err = store
        .apply(&[seen(5, "ok", 0), seen(6, "", 0)])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    assert!(
        store.player(5).await.unwrap().is_none(),
        "the batch was all or nothing"
    );
    assert!(matches!(
        store.player(u64::MAX).await,
        Err(StoreError::PlayerId(_))
    ));

    // Connecting again re-runs migrations cleanly and sees the same data.
    let again = Store::connect_with(&db.config)
        .await
        .expect("reconnect migrates cleanly");
    assert_eq!(again.player(1).await.unwrap().unwrap().stats.score, 51);
    again.close().await;
}

#[tokio::test]
async fn repository_on_sqlite() {
    let db = TestDb::sqlite().await;
    suite(&db).await;
    db.cleanup().await;
}

#[tokio::test]
async fn repository_on_postgres() {
    let Some(db) = TestDb::server(Server::Postgres, "repository_on_postgres").await else {
        return;
    };
    suite(&db).await;
    db.cleanup().await;
}

#[tokio::test]
async fn repository_on_mysql() {
    let Some(db) = TestDb::server(Server::MySql, "repository_on_mysql").await else {
        return;
    };
    suite(&db).await;
    db.cleanup().await;
}

#[tokio::test]
async fn sqlite_in_memory_works_and_is_private() {
    let store = Store::connect("sqlite::memory:").await.unwrap();
    store.apply(&[seen(1, "a", 0)]).await.unwrap();
    assert!(store.player(1).await.unwrap().is_some());
}

#[tokio::test]
async fn bad_urls_and_prefixes_are_clear_errors() {
    let err = Store::connect("redis://localhost").await.unwrap_err();
    assert!(
        matches!(err, ConnectError::UnknownScheme(ref s) if s == "redis"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("expected sqlite://, postgres://, mysql:// or mariadb://")
    );
    let err = Store::connect("postgres://[bad").await.unwrap_err();
    assert!(matches!(err, ConnectError::BadUrl { .. }), "{err}");
    let err = Store::connect_with(&StoreConfig {
        url: "sqlite::memory:".into(),
        table_prefix: "Robert'); DROP TABLE".into(),
        ..StoreConfig::default()
    })
    .await
    .unwrap_err();
    assert!(matches!(err, ConnectError::BadPrefix(_)), "{err}");
    // Nothing listens on port 1.
    let err = Store::connect_with(&StoreConfig {
        url: "postgres://postgres@127.0.0.1:1/x".into(),
        connect_timeout_ms: 300,
        ..StoreConfig::default()
    })
    .await
    .unwrap_err();
    assert!(matches!(err, ConnectError::Connect { .. }), "{err}");
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let db = TestDb::sqlite().await;
    // Pretend a newer tickwire migrated this file.
    let raw = Store::connect_with(&db.config).await.unwrap();
    raw.close().await;
    let url = db.config.url.clone();
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("INSERT INTO tickwire_schema_migrations VALUES (999, 'future', 0)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let err = Store::connect_with(&db.config).await.unwrap_err();
    assert!(
        matches!(
            err,
            ConnectError::SchemaTooNew {
                found: 999,
                known: 1
            }
        ),
        "{err}"
    );
    db.cleanup().await;
}
