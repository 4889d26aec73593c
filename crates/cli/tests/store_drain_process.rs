//! Drain with a full stat queue: `tickwire serve` whose database is locked by another
//! process fills its writer's queue (and refuses, counting, what does not fit); SIGTERM,
//! then the lock goes away: the server exits 0 and every event it accepted is in the
//! database, and every event the rooms emitted was either committed or counted as refused.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{SERVE_ON_FREE_PORTS, listening, metric, scratch_dir, tickwire};

use sqlx::Connection as _;
use tickwire_client::{ConnectOptions, Link, MatchmakeRequest, Transport, matchmake};
use tickwire_store::Store;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(20);
/// Players who join, more than the queue and one batch hold.
const PLAYERS: usize = 24;
const QUEUE_CAPACITY: u64 = 8;

/// The server's log lines received so far, for a failure's message.
fn logged(log: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    std::iter::from_fn(|| log.try_recv().ok())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of field `key` in a log line's `key=value` pairs.
fn field(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|part| part.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_with_a_full_queue_commits_everything_accepted_and_exits_zero() {
    let dir = scratch_dir("drain-full");
    let url = format!("sqlite://{}", dir.join("game.db").display());
    // A small queue, small batches, and a grace long enough for the lock to go away.
    std::fs::write(
        dir.join("tickwire.toml"),
        format!(
            "[drain]\ngrace_secs = 60\n[store]\nurl = \"{url}\"\n[store.writer]\n\
             queue_capacity = {QUEUE_CAPACITY}\nbatch_max_events = 4\nflush_interval_ms = 10\n"
        ),
    )
    .unwrap();
    let mut child = tickwire(&dir)
        .args(SERVE_ON_FREE_PORTS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its stdout stays open (and unread) for as long as the server runs.
    let (at, _stdout) = listening(&mut child).await;
    // The log, read as it comes so the pipe never fills and blocks the server.
    let mut log = {
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    };

    // Another process holds the database's write lock: the writer's first batch waits for
    // it, and the queue behind it fills.
    let mut locker = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut locker)
        .await
        .unwrap();

    let server = format!("http://{}", at.http);
    let mut players = Vec::new();
    for i in 0..PLAYERS {
        let answer = matchmake(
            &server,
            &MatchmakeRequest::kind("arena").named(format!("p{i}")),
            WAIT,
        )
        .await
        .unwrap();
        let mut link =
            match Link::connect(&answer, Transport::Udp, &ConnectOptions::default()).await {
                Ok(link) => link,
                Err(error) => panic!(
                    "player {i} could not connect: {error}; the server's log so far:\n{}",
                    logged(&mut log)
                ),
            };
        // Keep each player's connection alive until the server ends it.
        players.push(tokio::spawn(async move {
            while !matches!(
                link.next_event().await,
                tickwire_client::LinkEvent::Ended(_)
            ) {}
        }));
    }

    // Every player has taken a seat (a join is one event) once the writer has heard of all
    // of them: accepted or refused.
    let deadline = Instant::now() + WAIT;
    let before = loop {
        let (_, text) = common::http(at.admin, "GET", "/metrics", "", "").await;
        let accepted = metric(&text, "tickwire_store_events_accepted_total").unwrap_or(0);
        let refused = metric(&text, "tickwire_store_rejected_full_total").unwrap_or(0);
        if accepted + refused >= PLAYERS as u64 {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the joins never reached the writer:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        metric(&before, "tickwire_store_events_committed_total"),
        Some(0),
        "nothing commits while the database is locked:\n{before}"
    );
    assert_eq!(
        metric(&before, "tickwire_store_queue_depth"),
        Some(QUEUE_CAPACITY),
        "the queue is full:\n{before}"
    );

    // SIGTERM: the rooms end every session (one more event per player) and stop, then the
    // server waits for the writer. Only then does the lock go away.
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: kill(2) with a pid this test spawned and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    timeout(WAIT, async {
        while let Some(line) = log.recv().await {
            if line.contains(" stopped workers=") {
                return;
            }
        }
        panic!("the server's log ended before its rooms stopped");
    })
    .await
    .expect("the rooms stop in time");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut locker)
        .await
        .unwrap();
    locker.close().await.unwrap();

    let flushed = timeout(WAIT, async {
        while let Some(line) = log.recv().await {
            if line.contains("persistence flushed") {
                return line;
            }
        }
        panic!("the server exited without flushing");
    })
    .await
    .expect("the writer flushes once the lock is gone");
    let status = timeout(WAIT, child.wait()).await.expect("exits").unwrap();
    assert!(status.success(), "exit status {status}");
    for player in players {
        player.await.unwrap();
    }

    let accepted = field(&flushed, "accepted").expect("accepted in the log");
    let committed = field(&flushed, "committed").expect("committed in the log");
    let refused = field(&flushed, "rejected_full").expect("rejected_full in the log");
    assert_eq!(
        committed, accepted,
        "everything accepted committed: {flushed}"
    );
    assert!(
        refused > 0,
        "the queue was full and refused some: {flushed}"
    );
    assert_eq!(
        accepted + refused,
        2 * PLAYERS as u64,
        "a join and a session end per player, each committed or counted as refused: {flushed}"
    );

    // The database holds exactly the accepted events: a join names its player, a session end
    // is one match.
    let store = Store::connect(&url).await.unwrap();
    let board = store.leaderboard(1000).await.unwrap();
    let named = board.iter().filter(|entry| !entry.name.is_empty()).count() as u64;
    let matches: i64 = board.iter().map(|entry| entry.stats.matches).sum();
    assert_eq!(
        named + matches as u64,
        accepted,
        "events in the database = events accepted ({named} joins, {matches} session ends)"
    );
    store.close().await;
    let _ = std::fs::remove_dir_all(dir);
}
