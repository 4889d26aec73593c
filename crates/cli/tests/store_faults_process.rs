//! `tickwire serve` whose database fails mid-run and comes back: PostgreSQL (a TCP proxy
//! this test owns, between the server and the shared database, is cut and restored) and
//! SQLite on a full disk (a tmpfs the test mounts and fills, then frees). Either way the
//! arena's rooms keep ticking within their step, players keep joining, the writer's queue
//! stays bounded, `/metrics` and `/readyz` say persistence is failing (the node stays
//! ready), the log has one error and one recovery line, and every event accepted is in the
//! database once it is back. Skipped (and passing) without `TICKWIRE_TEST_POSTGRES_URL`, or
//! where mounting is not permitted.

mod common;

// The store's tests own the proxy; this test borrows it.
#[path = "../../store/tests/common/disk.rs"]
#[allow(dead_code, unreachable_pub)]
mod disk;
#[path = "../../store/tests/common/proxy.rs"]
#[allow(dead_code, unreachable_pub)]
mod proxy;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{SERVE_ON_FREE_PORTS, listening, metric, scratch_dir, tickwire};
use disk::SmallDisk;
use proxy::{FaultProxy, upstream_of};
use tickwire_client::{ConnectOptions, Link, LinkEvent, MatchmakeRequest, Transport, matchmake};
use tickwire_store::{Store, StoreConfig};
use tokio::io::{AsyncBufReadExt, BufReader};

const WAIT: Duration = Duration::from_secs(20);
const QUEUE_CAPACITY: u64 = 64;

/// `/metrics` on the operator listener `admin`.
async fn metrics(admin: SocketAddr) -> String {
    common::http(admin, "GET", "/metrics", "", "").await.1
}

/// The arena's tick count and how many of those ticks took at most 16.7 ms (its step).
fn arena_ticks(text: &str) -> (f64, f64) {
    let within = metric(
        text,
        "tickwire_tick_duration_seconds_bucket{kind=\"arena\",le=\"0.0167\"}",
    )
    .unwrap_or(0.0);
    let all = metric(text, "tickwire_tick_duration_seconds_count{kind=\"arena\"}").unwrap_or(0.0);
    (all, within)
}

/// Polls `/metrics` until `check` holds.
async fn metrics_until(admin: SocketAddr, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = metrics(admin).await;
        if check(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A player who joins the arena and stays until the server ends the connection.
async fn join(http: SocketAddr, name: String) -> tokio::task::JoinHandle<()> {
    let answer = matchmake(
        &format!("http://{http}"),
        &MatchmakeRequest::kind("arena").named(name),
        WAIT,
    )
    .await
    .unwrap();
    let mut link = Link::connect(&answer, Transport::Udp, &ConnectOptions::default())
        .await
        .unwrap();
    tokio::spawn(async move { while !matches!(link.next_event().await, LinkEvent::Ended(_)) {} })
}

/// What goes wrong, and how it is put right.
enum Fault {
    /// PostgreSQL behind a proxy: cut, then restored.
    Proxy(FaultProxy),
    /// SQLite on a small disk: filled, then the filler removed.
    Disk(SmallDisk, Option<PathBuf>),
}

impl Fault {
    fn begin(&mut self) {
        match self {
            Self::Proxy(proxy) => proxy.cut(),
            Self::Disk(disk, filler) => *filler = Some(disk.fill()),
        }
    }

    fn end(&mut self) {
        match self {
            Self::Proxy(proxy) => proxy.restore(),
            Self::Disk(_, filler) => std::fs::remove_file(filler.take().unwrap()).unwrap(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_mid_run_rooms_tick_and_every_accepted_event_lands() {
    let test = "postgres_down_mid_run_rooms_tick_and_every_accepted_event_lands";
    let Some(url) = std::env::var("TICKWIRE_TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        eprintln!("{test}: skipped: set TICKWIRE_TEST_POSTGRES_URL to run it");
        return;
    };
    let proxy = FaultProxy::start(&upstream_of(&url)).await;
    let config = StoreConfig {
        url,
        table_prefix: format!("tfp{}_", std::process::id()),
        ..StoreConfig::default()
    };
    let served_url = proxy.url_for(&config.url);
    outage_mid_run(config, served_url, Fault::Proxy(proxy)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_disk_full_mid_run_rooms_tick_and_every_accepted_event_lands() {
    let test = "sqlite_disk_full_mid_run_rooms_tick_and_every_accepted_event_lands";
    let Some(disk) = SmallDisk::mount(test, "2m") else {
        return;
    };
    let config = StoreConfig {
        url: format!("sqlite://{}/game.db", disk.path().display()),
        ..StoreConfig::default()
    };
    let served_url = config.url.clone();
    outage_mid_run(config, served_url, Fault::Disk(disk, None)).await;
}

/// Serves with its store at `served_url` (the database `config` names, as the server
/// reaches it), breaks it with `fault` while players join, then mends it.
async fn outage_mid_run(config: StoreConfig, served_url: String, mut fault: Fault) {
    let dir = scratch_dir("store-faults");
    std::fs::write(
        dir.join("tickwire.toml"),
        format!(
            "[store]\nurl = \"{served_url}\"\ntable_prefix = \"{}\"\nconnect_timeout_ms = 1000\n\
             [store.writer]\nqueue_capacity = {QUEUE_CAPACITY}\nbatch_max_events = 8\n\
             flush_interval_ms = 10\n",
            config.table_prefix
        ),
    )
    .unwrap();
    let mut child = tickwire(&dir)
        .args(SERVE_ON_FREE_PORTS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (at, _stdout) = listening(&mut child).await;
    let (http, admin) = (at.http, at.admin);
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    {
        let log = log.clone();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                log.lock().unwrap().push(line);
            }
        });
    }
    let logged = |text: &str| {
        log.lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(text))
            .count()
    };

    let mut players = vec![join(http, "before".into()).await];
    metrics_until(admin, "the first join committed", |text| {
        metric(text, "tickwire_store_events_committed_total") == Some(1.0)
    })
    .await;

    let startup_lines = log.lock().unwrap().len();
    fault.begin();
    // Players keep joining while the database is down: each join is one more event.
    for i in 0..3 {
        players.push(join(http, format!("during{i}")).await);
    }
    let during = metrics_until(admin, "the writer to fail a few times", |text| {
        metric(text, "tickwire_store_failed_commits_total").unwrap_or(0.0) >= 3.0
    })
    .await;
    let (ticks_then, within_then) = arena_ticks(&during);
    assert_eq!(metric(&during, "tickwire_store_failing"), Some(1.0));
    assert!(
        metric::<f64>(&during, "tickwire_store_queue_depth").unwrap() <= QUEUE_CAPACITY as f64,
        "the queue stays within its capacity:\n{during}"
    );
    let (status, ready) = common::http(http, "GET", "/readyz", "", "").await;
    assert_eq!(
        status, 200,
        "a node that cannot persist still serves players"
    );
    assert!(
        ready.starts_with("ready\npersistence failing for "),
        "readiness names the failure: {ready:?}"
    );
    // The rooms keep ticking, within their step, for a while longer into the outage: 240
    // ticks (4 s at 60 Hz), so the p99 allows two slow ones on a busy machine.
    let later = metrics_until(admin, "more arena ticks during the outage", |text| {
        arena_ticks(text).0 >= ticks_then + 240.0
    })
    .await;
    assert_eq!(metric(&later, "tickwire_store_failing"), Some(1.0));
    let (ticks_now, within_now) = arena_ticks(&later);
    let (ticks, within) = (ticks_now - ticks_then, within_now - within_then);
    assert!(
        within >= 0.99 * ticks,
        "tick p99 within the step during the outage: {within} of {ticks} ticks within 16.7 ms"
    );
    assert_eq!(
        logged("persistence failing"),
        1,
        "one error line for the outage: {:#?}",
        log.lock().unwrap()
    );

    fault.end();
    let after = metrics_until(admin, "everything accepted committed", |text| {
        let accepted = metric::<f64>(text, "tickwire_store_events_accepted_total");
        metric(text, "tickwire_store_failing") == Some(0.0)
            && accepted.is_some()
            && metric(text, "tickwire_store_events_committed_total") == accepted
    })
    .await;
    assert_eq!(metric(&after, "tickwire_store_outages_total"), Some(1.0));
    assert_eq!(
        metric(&after, "tickwire_store_rejected_full_total"),
        Some(0.0)
    );
    let (status, ready) = common::http(http, "GET", "/readyz", "", "").await;
    assert_eq!((status, ready.as_str()), (200, "ready\n"));
    let recovered = Instant::now() + WAIT;
    while logged("persistence recovered") == 0 {
        assert!(Instant::now() < recovered, "no recovery line");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(logged("persistence failing"), 1);
    assert_eq!(logged("persistence recovered"), 1);
    let since_cut: Vec<String> = log.lock().unwrap()[startup_lines..].to_vec();
    let loud = since_cut
        .iter()
        .filter(|line| line.contains(" WARN ") || line.contains(" ERROR "))
        .count();
    assert_eq!(
        loud, 2,
        "nothing else at WARN or above since the cut: {since_cut:#?}"
    );

    let store = Store::connect_with(&config).await.unwrap();
    let named: Vec<String> = store
        .leaderboard(100)
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.name)
        .collect();
    for name in ["before", "during0", "during1", "during2"] {
        assert!(
            named.iter().any(|n| n == name),
            "{name} joined (accepted) and is stored: {named:?}"
        );
    }

    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: kill(2) with a pid this test spawned and a valid signal number.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "exit status {status}");
    for player in players {
        player.await.unwrap();
    }
    if let Fault::Proxy(_) = fault {
        store.drop_tables(&[]).await.unwrap();
    }
    store.close().await;
    let _ = std::fs::remove_dir_all(dir);
}
