//! Faults in the database under the write-behind queue: a database server that stops and
//! comes back, one that answers slowly, and SQLite on a full disk. In each, recording never
//! waits, the queue stays within its capacity and refuses (counted) past it, every accepted
//! event is in the database once the fault is gone, writes resume by themselves, and an
//! outage is logged once as it begins and once as it ends.
//!
//! The database servers are the shared ones (`TICKWIRE_TEST_POSTGRES_URL`,
//! `TICKWIRE_TEST_MYSQL_URL`), reached through a [`FaultProxy`] this test owns: stopping the
//! proxy, not the server, is the outage. SQLite's full disk is a 2 MiB tmpfs the test
//! mounts (CI runs as root); where mounting is not permitted that test says "skipped: cannot
//! mount" and passes.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::disk::SmallDisk;
use common::proxy::{FaultProxy, upstream_of};
use common::{Server, TestDb, one_point};
use tickwire_store::{RecordError, StatWriter, Store, StoreConfig, WriterConfig};

/// What the tests' writers use: a small queue, so a fault fills it quickly.
const CAPACITY: usize = 64;

fn writer_config() -> WriterConfig {
    WriterConfig {
        queue_capacity: CAPACITY,
        batch_max_events: 16,
        flush_interval_ms: 10,
        ..WriterConfig::default()
    }
}

/// Log lines at WARN and above, captured from this thread (the tests run on a
/// current-thread runtime, so the writer task logs here).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn count(&self, text: &str) -> usize {
        self.lines().iter().filter(|l| l.contains(text)).count()
    }
}

/// One "tick" per event, as a room records: `try_record` never waits, whatever the
/// database does. Returns (accepted, refused as full).
fn tick_and_record(writer: &StatWriter, seqs: std::ops::RangeInclusive<u64>) -> (u64, u64) {
    let (mut accepted, mut refused) = (0, 0);
    for seq in seqs {
        match writer.try_record(one_point(seq)) {
            Ok(()) => accepted += 1,
            Err(RecordError::Full { capacity, .. }) => {
                assert_eq!(capacity, CAPACITY);
                refused += 1;
            }
            Err(other) => panic!("event {seq} refused for another reason: {other}"),
        }
        let depth = writer.stats().queue_depth;
        assert!(
            depth <= CAPACITY as u64,
            "queue depth {depth} over its capacity {CAPACITY}"
        );
    }
    (accepted, refused)
}

/// Whether `/metrics` text has `name value`.
fn metric(writer: &StatWriter, name: &str) -> String {
    let mut text = String::new();
    writer.stats().write_prometheus(&mut text);
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")).map(str::to_owned))
        .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
}

/// `GET /api/leaderboard`'s status.
async fn leaderboard_status(store: &Store) -> u16 {
    use tower::ServiceExt as _;
    let request = axum::http::Request::get("/api/leaderboard?limit=10")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = tickwire_store::http::router(store.clone())
        .oneshot(request)
        .await
        .unwrap();
    response.status().as_u16()
}

/// The store `db` names, reached through `proxy`.
async fn through(proxy: &FaultProxy, db: &TestDb) -> Store {
    let config = StoreConfig {
        url: proxy.url_for(&db.config.url),
        connect_timeout_ms: 1000,
        ..db.config.clone()
    };
    Store::connect_with(&config)
        .await
        .expect("the store connects through the proxy")
}

async fn down_then_back(server: Server, test: &str) {
    let Some(db) = TestDb::server(server, test).await else {
        return;
    };
    let proxy = FaultProxy::start(&upstream_of(&db.config.url)).await;
    let store = through(&proxy, &db).await;
    let (logs, _guard) = Logs::capture();
    let writer = store.writer(&writer_config());

    let (before, _) = tick_and_record(&writer, 1..=10);
    writer.flush().await.unwrap();
    assert_eq!(metric(&writer, "tickwire_store_failing"), "0");

    proxy.cut();
    let (first, _) = tick_and_record(&writer, 11..=11);
    let mut failing = writer.failing();
    failing.wait_for(|failing| *failing).await.unwrap();
    // Several more failed attempts (backoff 50, 100, 200 ms…): still one log line.
    let mut committed = writer.committed();
    while writer.stats().failed_commits < 3 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (during, refused) = tick_and_record(&writer, 12..=(12 + 2 * CAPACITY as u64));
    assert!(refused > 0, "a queue of {CAPACITY} refuses past it");
    // Players keep asking for the leaderboard: each read answers 503.
    for _ in 0..5 {
        assert_eq!(leaderboard_status(&store).await, 503);
    }
    assert_eq!(
        logs.count("store query failed"),
        1,
        "failed reads are logged once a minute at most: {:#?}",
        logs.lines()
    );
    let stats = writer.stats();
    assert!(stats.failing(), "{stats:?}");
    assert_eq!(stats.outages, 1);
    assert_eq!(stats.rejected_full, refused);
    assert_eq!(metric(&writer, "tickwire_store_failing"), "1");
    assert_eq!(metric(&writer, "tickwire_store_outages_total"), "1");
    let note = stats.degraded().expect("failing is reported to readiness");
    assert!(note.starts_with("persistence failing for"), "{note}");
    assert_eq!(
        logs.count("persistence failing"),
        1,
        "one error line per outage, after {} failed commits: {:#?}",
        stats.failed_commits,
        logs.lines()
    );

    proxy.restore();
    let accepted = before + first + during;
    committed
        .wait_for(|committed| *committed == accepted)
        .await
        .unwrap();
    failing.wait_for(|failing| !*failing).await.unwrap();
    let stats = writer.stats();
    assert_eq!(stats.events_committed, accepted, "{stats:?}");
    assert_eq!(metric(&writer, "tickwire_store_failing"), "0");
    assert_eq!(metric(&writer, "tickwire_store_failing_seconds"), "0");
    assert_eq!(writer.stats().degraded(), None);
    let p1 = db.store.player(1).await.unwrap().expect("player 1 stored");
    assert_eq!(
        p1.stats.matches as u64, accepted,
        "every accepted event committed once, refused ones never"
    );
    assert_eq!(logs.count("persistence recovered"), 1);
    assert_eq!(
        logs.lines().len(),
        3,
        "the outage logged once as it began and once as it ended, the failed reads once, nothing else: {:#?}",
        logs.lines()
    );
    writer.close().await;
    store.close().await;
    db.cleanup().await;
}

async fn slow(server: Server, test: &str) {
    let Some(db) = TestDb::server(server, test).await else {
        return;
    };
    let proxy = FaultProxy::start(&upstream_of(&db.config.url)).await;
    let store = through(&proxy, &db).await;
    let (logs, _guard) = Logs::capture();
    let writer = store.writer(&writer_config());

    proxy.set_latency(Duration::from_millis(150));
    let (accepted, refused) = tick_and_record(&writer, 1..=(4 * CAPACITY as u64));
    assert!(refused > 0, "a slow database fills a queue of {CAPACITY}");
    let stats = writer.stats();
    assert_eq!(stats.rejected_full, refused);
    assert!(!stats.failing(), "slow is not failing: {stats:?}");
    let note = stats
        .degraded()
        .expect("a full queue is reported to readiness");
    assert!(note.contains("queue is full"), "{note}");

    proxy.set_latency(Duration::ZERO);
    writer.flush().await.unwrap();
    let p1 = db.store.player(1).await.unwrap().expect("player 1 stored");
    assert_eq!(p1.stats.matches as u64, accepted);
    assert_eq!(writer.stats().outages, 0);
    assert!(
        logs.lines().is_empty(),
        "a slow database is no error: {:#?}",
        logs.lines()
    );
    writer.close().await;
    store.close().await;
    db.cleanup().await;
}

/// A database that stops answering without closing the connection (a partition; here 3 s
/// per chunk against a 1 s commit timeout, which a healthy commit stays far under): the
/// commit timeout gives up on the connection, the outage is reported like any other, and
/// the batch commits once the database answers again.
async fn hung(server: Server, test: &str) {
    let Some(db) = TestDb::server(server, test).await else {
        return;
    };
    let proxy = FaultProxy::start(&upstream_of(&db.config.url)).await;
    let store = through(&proxy, &db).await;
    let (logs, _guard) = Logs::capture();
    let writer = store.writer(&WriterConfig {
        commit_timeout_ms: 1000,
        ..writer_config()
    });
    let (before, _) = tick_and_record(&writer, 1..=10);
    writer.flush().await.unwrap();

    proxy.set_latency(Duration::from_secs(3));
    let (during, _) = tick_and_record(&writer, 11..=20);
    let mut failing = writer.failing();
    failing.wait_for(|failing| *failing).await.unwrap();
    assert_eq!(logs.count("commit timeout"), 1, "{:#?}", logs.lines());

    proxy.set_latency(Duration::ZERO);
    let accepted = before + during;
    writer
        .committed()
        .wait_for(|committed| *committed == accepted)
        .await
        .unwrap();
    failing.wait_for(|failing| !*failing).await.unwrap();
    let p1 = db.store.player(1).await.unwrap().expect("player 1 stored");
    assert_eq!(
        p1.stats.matches as u64, accepted,
        "the timed-out transaction rolled back and committed once on retry"
    );
    assert_eq!(logs.count("persistence recovered"), 1);
    assert_eq!(
        logs.lines().len(),
        2,
        "the outage logged once as it began and once as it ended, nothing else: {:#?}",
        logs.lines()
    );
    writer.close().await;
    store.close().await;
    db.cleanup().await;
}

/// A database that goes down and comes back three times within a minute: three outages
/// counted, one logged (the throttle's unit test covers the next minute's line).
#[tokio::test]
async fn postgres_flapping() {
    let Some(db) = TestDb::server(Server::Postgres, "postgres_flapping").await else {
        return;
    };
    let proxy = FaultProxy::start(&upstream_of(&db.config.url)).await;
    let store = through(&proxy, &db).await;
    let (logs, _guard) = Logs::capture();
    let writer = store.writer(&writer_config());
    // Settle first: the connections the store used to connect go back to the pool with a
    // ping, and a ping the cut interrupts is sqlx's own warning (one per such connection).
    let mut accepted = tick_and_record(&writer, 100..=100).0;
    writer.flush().await.unwrap();
    let mut failing = writer.failing();
    for round in 0..3u64 {
        proxy.cut();
        accepted += tick_and_record(&writer, round * 10 + 1..=round * 10 + 10).0;
        failing.wait_for(|failing| *failing).await.unwrap();
        proxy.restore();
        failing.wait_for(|failing| !*failing).await.unwrap();
    }
    writer.flush().await.unwrap();
    let p1 = db.store.player(1).await.unwrap().expect("player 1 stored");
    assert_eq!(p1.stats.matches as u64, accepted);
    assert_eq!(metric(&writer, "tickwire_store_outages_total"), "3");
    assert_eq!(
        (
            logs.count("persistence failing"),
            logs.count("persistence recovered"),
            logs.lines().len()
        ),
        (1, 1, 2),
        "the first outage of the minute logged, the others counted: {:#?}",
        logs.lines()
    );
    writer.close().await;
    store.close().await;
    db.cleanup().await;
}

/// The database commits a batch but its answer is lost: the writer, after its commit
/// timeout, cannot tell and retries; the batch must count once.
async fn commit_answer_lost(server: Server, test: &str) {
    let tls_off = match server {
        Server::Postgres => "sslmode=disable",
        Server::MySql => "ssl-mode=disabled",
    };
    let Some(db) = TestDb::server(server, test).await else {
        return;
    };
    let proxy = FaultProxy::start(&upstream_of(&db.config.url)).await;
    // The proxy has to read the COMMIT: no TLS (PostgreSQL would negotiate it).
    let url = proxy.url_for(&db.config.url);
    let separator = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{separator}{tls_off}");
    let config = StoreConfig {
        url,
        connect_timeout_ms: 1000,
        ..db.config.clone()
    };
    let store = Store::connect_with(&config).await.unwrap();
    let writer = store.writer(&WriterConfig {
        commit_timeout_ms: 1000,
        ..writer_config()
    });
    let (before, _) = tick_and_record(&writer, 1..=10);
    writer.flush().await.unwrap();

    proxy.lose_next_commit_answer();
    let (during, _) = tick_and_record(&writer, 11..=20);
    writer.flush().await.unwrap();
    let stats = writer.stats();
    assert!(
        stats.failed_commits >= 1,
        "the lost answer failed an attempt: {stats:?}"
    );
    let p1 = db.store.player(1).await.unwrap().expect("player 1 stored");
    assert_eq!(
        p1.stats.matches as u64,
        before + during,
        "the batch whose answer was lost counts once"
    );
    writer.close().await;
    store.close().await;
    db.cleanup().await;
}

#[tokio::test]
async fn postgres_commit_answer_lost() {
    commit_answer_lost(Server::Postgres, "postgres_commit_answer_lost").await;
}

#[tokio::test]
async fn mysql_commit_answer_lost() {
    commit_answer_lost(Server::MySql, "mysql_commit_answer_lost").await;
}

#[tokio::test]
async fn postgres_hung() {
    hung(Server::Postgres, "postgres_hung").await;
}

#[tokio::test]
async fn mysql_hung() {
    hung(Server::MySql, "mysql_hung").await;
}

#[tokio::test]
async fn postgres_down_then_back() {
    down_then_back(Server::Postgres, "postgres_down_then_back").await;
}

#[tokio::test]
async fn mysql_down_then_back() {
    down_then_back(Server::MySql, "mysql_down_then_back").await;
}

#[tokio::test]
async fn postgres_slow() {
    slow(Server::Postgres, "postgres_slow").await;
}

#[tokio::test]
async fn mysql_slow() {
    slow(Server::MySql, "mysql_slow").await;
}

#[tokio::test]
async fn sqlite_on_a_full_disk() {
    let Some(disk) = SmallDisk::mount("sqlite_on_a_full_disk", "2m") else {
        return;
    };
    let config = StoreConfig {
        url: format!("sqlite://{}/full.db", disk.path().display()),
        ..StoreConfig::default()
    };
    let store = Store::connect_with(&config).await.expect("sqlite opens");
    let (logs, _guard) = Logs::capture();
    let writer = store.writer(&writer_config());
    let (before, _) = tick_and_record(&writer, 1..=10);
    writer.flush().await.unwrap();

    let filler = disk.fill();
    let (first, _) = tick_and_record(&writer, 11..=11);
    let mut failing = writer.failing();
    failing.wait_for(|failing| *failing).await.unwrap();
    let mut committed = writer.committed();
    let (during, refused) = tick_and_record(&writer, 12..=(12 + 2 * CAPACITY as u64));
    assert!(refused > 0, "a queue of {CAPACITY} refuses past it");
    assert_eq!(metric(&writer, "tickwire_store_failing"), "1");
    assert_eq!(logs.count("persistence failing"), 1, "{:#?}", logs.lines());
    assert!(
        logs.lines()[0].contains("full"),
        "the error names the cause: {:#?}",
        logs.lines()
    );

    std::fs::remove_file(filler).unwrap();
    let accepted = before + first + during;
    committed
        .wait_for(|committed| *committed == accepted)
        .await
        .unwrap();
    failing.wait_for(|failing| !*failing).await.unwrap();
    let p1 = store.player(1).await.unwrap().expect("player 1 stored");
    assert_eq!(p1.stats.matches as u64, accepted);
    assert_eq!(
        logs.lines().len(),
        2,
        "the outage logged once as it began and once as it ended, nothing else: {:#?}",
        logs.lines()
    );
    writer.close().await;
    store.close().await;
}
