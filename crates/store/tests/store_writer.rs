//! The write-behind queue: batching by size and by interval, backpressure that refuses and
//! counts, and a close that commits a full queue.

mod common;

use std::time::Duration;

use common::{TestDb, one_point};
use sqlx::Connection as _;
use tickwire_store::{RecordError, StatEvent, WriterConfig};

/// Holds SQLite's write lock from a connection of its own, so the writer's commit blocks
/// until [`release`]: the queue behind it fills deterministically.
async fn hold_write_lock(db: &TestDb) -> sqlx::SqliteConnection {
    let mut conn = sqlx::SqliteConnection::connect(&db.config.url)
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

async fn release(mut conn: sqlx::SqliteConnection) {
    sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
}

/// Polls `check` every millisecond until it holds, for at most ten seconds.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn batches_by_size_then_flush_commits_the_rest() {
    let db = TestDb::sqlite().await;
    let writer = db.store.writer(&WriterConfig {
        queue_capacity: 1000,
        batch_max_events: 10,
        // Far longer than the test: only size and the flush cut batches.
        flush_interval_ms: 600_000,
        ..WriterConfig::default()
    });
    for seq in 1..=35 {
        writer.try_record(one_point(seq)).unwrap();
    }
    writer.flush().await.unwrap();
    let stats = writer.stats();
    assert_eq!(stats.events_accepted, 35);
    assert_eq!(stats.events_committed, 35);
    assert_eq!(
        stats.batches_committed, 4,
        "10 + 10 + 10 by size, 5 by the flush: {stats:?}"
    );
    assert_eq!(stats.last_batch_events, 5);
    assert_eq!(stats.queue_depth, 0);
    let p1 = db.store.player(1).await.unwrap().unwrap();
    assert_eq!(p1.stats.matches, 35);
    writer.close().await;
    db.cleanup().await;
}

#[tokio::test]
async fn the_interval_commits_without_a_flush() {
    let db = TestDb::sqlite().await;
    let writer = db.store.writer(&WriterConfig {
        queue_capacity: 1000,
        batch_max_events: 512,
        flush_interval_ms: 20,
        ..WriterConfig::default()
    });
    let mut committed = writer.committed();
    for seq in 1..=3 {
        writer.try_record(one_point(seq)).unwrap();
    }
    tokio::time::timeout(Duration::from_secs(10), committed.wait_for(|&n| n == 3))
        .await
        .expect("the interval commits the three events within 10 s")
        .unwrap();
    assert_eq!(db.store.player(1).await.unwrap().unwrap().stats.matches, 3);
    writer.close().await;
    db.cleanup().await;
}

#[tokio::test]
async fn a_full_queue_refuses_try_record_and_record_waits() {
    let db = TestDb::sqlite().await;
    let writer = db.store.writer(&WriterConfig {
        queue_capacity: 8,
        // One event fills a batch, so the writer commits (and blocks) as soon as it takes one.
        batch_max_events: 1,
        flush_interval_ms: 600_000,
        ..WriterConfig::default()
    });
    let lock = hold_write_lock(&db).await;
    // The writer takes the first event and blocks committing it; then eight fill the queue.
    writer.try_record(one_point(1)).unwrap();
    eventually("the writer to take the first event", || {
        writer.stats().queue_depth == 0
    })
    .await;
    for seq in 2..=9 {
        writer.try_record(one_point(seq)).unwrap();
    }
    let seq = 10;
    let refused = writer.try_record(one_point(seq)).unwrap_err();
    assert!(
        matches!(refused, RecordError::Full { capacity: 8, ref event } if **event == one_point(seq)),
        "{refused:?}"
    );
    assert_eq!(refused.to_string(), "stat queue full (8 events)");
    let stats = writer.stats();
    assert_eq!(stats.rejected_full, 1);
    assert_eq!(stats.queue_depth, 8);
    assert_eq!(
        stats.events_committed, 0,
        "nothing commits while the lock is held"
    );

    // `record` waits for room instead, and says so in the counters.
    let waiting = {
        let writer = writer.clone();
        tokio::spawn(async move { writer.record(one_point(1_000)).await })
    };
    eventually("record to find the queue full", || {
        writer.stats().waited_full == 1
    })
    .await;
    assert!(!waiting.is_finished());

    release(lock).await;
    waiting.await.unwrap().unwrap();
    writer.flush().await.unwrap();
    let stats = writer.stats();
    assert_eq!(
        stats.events_accepted, 10,
        "nine before the refusal, one that waited"
    );
    assert_eq!(stats.events_committed, stats.events_accepted);
    let p1 = db.store.player(1).await.unwrap().unwrap();
    assert_eq!(p1.stats.matches as u64, stats.events_accepted);
    writer.close().await;
    db.cleanup().await;
}

#[tokio::test]
async fn close_with_a_full_queue_commits_everything_then_refuses() {
    let db = TestDb::sqlite().await;
    let writer = db.store.writer(&WriterConfig {
        queue_capacity: 64,
        batch_max_events: 1,
        flush_interval_ms: 600_000,
        ..WriterConfig::default()
    });
    let lock = hold_write_lock(&db).await;
    writer.try_record(one_point(0)).unwrap();
    eventually("the writer to take the first event", || {
        writer.stats().queue_depth == 0
    })
    .await;
    let mut accepted = 1u64;
    for seq in 1..1_000 {
        match writer.try_record(one_point(seq)) {
            Ok(()) => accepted += 1,
            Err(RecordError::Full { .. }) => break,
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(accepted, 65, "one being committed, 64 queued");
    assert_eq!(writer.stats().queue_depth, 64);
    let closing = {
        let writer = writer.clone();
        tokio::spawn(async move { writer.close().await })
    };
    release(lock).await;
    closing.await.unwrap();

    let stats = writer.stats();
    assert_eq!(stats.events_committed, accepted, "{stats:?}");
    assert!(matches!(
        writer.try_record(one_point(0)),
        Err(RecordError::Closed(_))
    ));
    assert!(writer.flush().await.is_err());
    writer.close().await; // a second close returns at once
    // Read back through a fresh connection: it is in the file, not only in a cache.
    db.store.close().await;
    let store = tickwire_store::Store::connect_with(&db.config)
        .await
        .unwrap();
    let p1 = store.player(1).await.unwrap().unwrap();
    assert_eq!(p1.stats.matches as u64, accepted);
    assert_eq!(
        store.matches(1, u32::MAX).await.unwrap().len() as u64,
        accepted
    );
    store.close().await;
    db.cleanup().await;
}

#[tokio::test]
async fn invalid_events_are_refused_and_counted() {
    let db = TestDb::sqlite().await;
    let writer = db.store.writer(&WriterConfig::default());
    let err = writer
        .try_record(StatEvent::PlayerSeen {
            player: 1,
            name: "bell\u{7}".into(),
            at_ms: 0,
        })
        .unwrap_err();
    assert!(matches!(err, RecordError::Invalid(_)), "{err}");
    assert_eq!(writer.stats().rejected_invalid, 1);
    writer.close().await;
    db.cleanup().await;
}

#[test]
fn stats_render_as_prometheus_text() {
    let stats = tickwire_store::WriterStats {
        queue_depth: 3,
        last_flush_us: 1_500,
        ..Default::default()
    };
    let mut text = String::new();
    stats.write_prometheus(&mut text);
    assert!(
        text.contains("# TYPE tickwire_store_queue_depth gauge\ntickwire_store_queue_depth 3\n")
    );
    assert!(
        text.contains("tickwire_store_last_flush_seconds 0.0015\n"),
        "{text}"
    );
    assert!(text.contains("tickwire_store_rejected_full_total 0\n"));
}

#[test]
fn commit_durations_render_as_a_cumulative_histogram() {
    // One commit within 1 ms, two within 2.5 ms, one past the last bound (5 s).
    let mut flush_buckets = [0; tickwire_store::FLUSH_BUCKETS_US.len() + 1];
    flush_buckets[0] = 1;
    flush_buckets[1] = 2;
    flush_buckets[tickwire_store::FLUSH_BUCKETS_US.len()] = 1;
    let stats = tickwire_store::WriterStats {
        flush_buckets,
        flush_sum_us: 7_004_000,
        ..Default::default()
    };
    let mut text = String::new();
    stats.write_prometheus(&mut text);
    for line in [
        "# TYPE tickwire_store_flush_duration_seconds histogram\n",
        "tickwire_store_flush_duration_seconds_bucket{le=\"0.001\"} 1\n",
        "tickwire_store_flush_duration_seconds_bucket{le=\"0.0025\"} 3\n",
        "tickwire_store_flush_duration_seconds_bucket{le=\"5\"} 3\n",
        "tickwire_store_flush_duration_seconds_bucket{le=\"+Inf\"} 4\n",
        "tickwire_store_flush_duration_seconds_sum 7.004\n",
        "tickwire_store_flush_duration_seconds_count 4\n",
    ] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
}
