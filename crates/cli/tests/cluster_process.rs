//! A cluster as an operator runs it: three `tickwire serve` processes on loopback sharing
//! one Redis (`TICKWIRE_TEST_REDIS_URL`; skipped with a reason when unset). 300 bots
//! matchmade through node A land on all three, each connected to the node its token
//! names; `kill -9` of B: its rooms leave the directory within the lease and its players
//! reconnect through A onto A or C; a drain of C: no new players go there, its rooms
//! finish, its listings are gone when it exits. And Redis stopped and started again under
//! two nodes (a Redis of the test's own): play goes on, matchmaking answers 503, the
//! directory is whole again after. And with one PostgreSQL shared by the nodes
//! (`TICKWIRE_TEST_POSTGRES_URL`): `kill -9` of a node whose arena players come and go loses
//! none of the stats its writer reported committed. An operator's `POST /api/admin/say` on
//! one node is heard in every node's rooms.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;
use tickwire_client::{
    Backoff, ConnectOptions, MatchmakeRequest, Session, SessionEvent, Transport, matchmake,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout};
use tokio::sync::mpsc;
use tokio::time::timeout;

mod common;

use common::{SERVE_ON_FREE_PORTS, WAIT, http, scratch_dir, tickwire};

const LEASE_MS: u64 = 3000;
const ADMIN: &str = "Authorization: Bearer operator\r\n";

fn redis_url() -> Option<String> {
    match std::env::var("TICKWIRE_TEST_REDIS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("skipped: set TICKWIRE_TEST_REDIS_URL to run the cluster process tests");
            None
        }
    }
}

fn cluster_name(test: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "proc-{test}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

struct Node {
    id: &'static str,
    child: Child,
    http: SocketAddr,
    /// The operator listener: `/metrics`, the admin API.
    admin: SocketAddr,
    udp: Vec<SocketAddr>,
    _stdout: BufReader<ChildStdout>,
}

async fn start_node(dir: &Path, redis: &str, cluster: &str, id: &'static str) -> Node {
    start_node_with(dir, redis, cluster, id, &[]).await
}

/// [`start_node`] with `env` (configuration keys as `TICKWIRE_…` variables) on top.
async fn start_node_with(
    dir: &Path,
    redis: &str,
    cluster: &str,
    id: &'static str,
    env: &[(&str, String)],
) -> Node {
    let dir = dir.join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = tickwire(&dir)
        .args(SERVE_ON_FREE_PORTS)
        .args(["--no-wt"])
        .env("TICKWIRE_ADMIN__TOKEN", "operator")
        .env("TICKWIRE_CLUSTER__REDIS_URL", redis)
        .env("TICKWIRE_CLUSTER__NAME", cluster)
        .env("TICKWIRE_CLUSTER__SECRET", "the cluster's shared secret")
        .env("TICKWIRE_CLUSTER__NODE_ID", id)
        .env("TICKWIRE_CLUSTER__LEASE_MS", LEASE_MS.to_string())
        .env("TICKWIRE_CLUSTER__REDIS_TIMEOUT_MS", "300")
        .env("TICKWIRE_CONNECTION__TIMEOUT_MS", "2000")
        .env("TICKWIRE_ROOMS__KINDS__RELAY__CAPACITY", "8")
        .env("TICKWIRE_ROOMS__EMPTY_ROOM_TTL_SECS", "30")
        .env("TICKWIRE_ROOMS__RECONNECT_GRACE_SECS", "5")
        .env("TICKWIRE_DRAIN__GRACE_SECS", "5")
        .envs(env.iter().map(|(key, value)| (key, value)))
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    timeout(WAIT, stdout.read_line(&mut line))
        .await
        .expect("the node starts in time")
        .unwrap();
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|part| part.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
            .to_string()
    };
    let http = field("http=").parse().unwrap();
    let admin = field("admin=").parse().unwrap();
    let udp = field("udp=")
        .split(',')
        .map(|address| address.parse().unwrap())
        .collect();
    Node {
        id,
        child,
        http,
        admin,
        udp,
        _stdout: stdout,
    }
}

async fn get_json(address: SocketAddr, path: &str, headers: &str) -> (u16, Value) {
    let (status, body) = http(address, "GET", path, headers, "").await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// The cluster's rooms as node `address` lists them: (node, players, capacity) by room.
async fn rooms(address: SocketAddr) -> Option<HashMap<u64, (String, u64, u64)>> {
    let (status, rooms) = get_json(address, "/api/rooms", "").await;
    if status != 200 {
        return None;
    }
    Some(
        rooms
            .as_array()
            .unwrap()
            .iter()
            .map(|room| {
                (
                    room["id"].as_u64().unwrap(),
                    (
                        room["node"].as_str().unwrap().to_string(),
                        room["players"].as_u64().unwrap(),
                        room["capacity"].as_u64().unwrap(),
                    ),
                )
            })
            .collect(),
    )
}

/// The live nodes' ids, as the node whose operator listener is `address` sees them.
async fn node_ids(address: SocketAddr) -> Option<Vec<String>> {
    let (status, nodes) = get_json(address, "/api/admin/nodes", ADMIN).await;
    (status == 200).then(|| {
        nodes
            .as_array()
            .unwrap()
            .iter()
            .map(|node| node["id"].as_str().unwrap().to_string())
            .collect()
    })
}

async fn eventually<T>(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> (T, Duration) {
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return (value, start.elapsed());
        }
        assert!(start.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a bot reports: where each matchmaking answer sent it, and whether it was lost.
#[derive(Debug)]
enum Report {
    Started {
        took: Duration,
        attempts: u32,
    },
    Placed {
        bot: usize,
        player: u64,
        room: u64,
        udp: SocketAddr,
    },
    Ended {
        bot: usize,
        why: String,
    },
}

/// A bot: matchmakes through `server`, connects over UDP to the node its token names, and
/// stays (reconnecting through `server` when its connection is lost) until told to leave.
fn bot(
    bot: usize,
    server: String,
    reports: mpsc::UnboundedSender<Report>,
    mut leave: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let options = ConnectOptions {
            timeout: Duration::from_secs(10),
            ..ConnectOptions::default()
        };
        let begun = Instant::now();
        let request = MatchmakeRequest::kind("relay").named(format!("bot-{bot}"));
        // Placed once; a connection that fails asks again with the session, for the same
        // seat and a fresh token (what a reloaded page does).
        let first = match matchmake(&server, &request, options.timeout).await {
            Ok(answer) => answer,
            Err(error) => {
                let _ = reports.send(Report::Ended {
                    bot,
                    why: format!("matchmake: {error}"),
                });
                return;
            }
        };
        let mut request = request;
        request.session = Some(first.session.clone());
        let mut attempts = 0;
        let mut session = loop {
            attempts += 1;
            match Session::start(&server, request.clone(), Transport::Udp, options.clone()).await {
                Ok(session) => break session,
                Err(error) if attempts >= 3 => {
                    let _ = reports.send(Report::Ended {
                        bot,
                        why: format!("start: {error}"),
                    });
                    return;
                }
                Err(_) => {}
            }
        };
        assert_eq!(session.answer().room, first.room, "the same seat, again");
        session = session.with_backoff(Backoff {
            initial: Duration::from_millis(200),
            max: Duration::from_millis(800),
            attempts: 30,
        });
        let placed = |session: &Session| Report::Placed {
            bot,
            player: session.answer().player_id,
            room: session.answer().room,
            udp: session.answer().endpoints.udp,
        };
        let _ = reports.send(Report::Started {
            took: begun.elapsed(),
            attempts,
        });
        let _ = reports.send(placed(&session));
        loop {
            tokio::select! {
                event = session.next_event() => match event {
                    SessionEvent::Message { .. } => {}
                    SessionEvent::Reconnected { .. } => {
                        let _ = reports.send(placed(&session));
                    }
                    SessionEvent::Ended(why) => {
                        let _ = reports.send(Report::Ended { bot, why: format!("{why:?}") });
                        return;
                    }
                },
                left = async { leave.wait_for(|leave| *leave).await.is_ok() } => {
                    if left {
                        session.close().await;
                    }
                    return;
                }
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_players_heal_a_killed_node_and_drain_one() {
    let Some(redis) = redis_url() else { return };
    let cluster = cluster_name("three");
    let dir = scratch_dir("cluster-three");
    let mut a = start_node(&dir, &redis, &cluster, "a").await;
    let mut b = start_node(&dir, &redis, &cluster, "b").await;
    let mut c = start_node(&dir, &redis, &cluster, "c").await;
    eventually("all three nodes in the directory", WAIT, async || {
        let ids = node_ids(a.admin).await?;
        (ids == ["a", "b", "c"]).then_some(())
    })
    .await;
    let node_of_udp: HashMap<SocketAddr, &'static str> = [&a, &b, &c]
        .iter()
        .flat_map(|node| node.udp.iter().map(move |udp| (*udp, node.id)))
        .collect();

    // 300 bots through node A, all at once.
    let (reports_in, mut reports) = mpsc::unbounded_channel();
    let server = format!("http://{}", a.http);
    let started = Instant::now();
    let mut leave = Vec::new();
    let bots: Vec<_> = (0..300)
        .map(|index| {
            let (sender, leaving) = tokio::sync::watch::channel(false);
            leave.push(sender);
            bot(index, server.clone(), reports_in.clone(), leaving)
        })
        .collect();
    let mut placed: HashMap<usize, (u64, u64, &'static str)> = HashMap::new();
    let mut slowest = Duration::ZERO;
    let mut retried = 0;
    while placed.len() < 300 {
        match timeout(WAIT * 3, reports.recv())
            .await
            .expect("bots report")
            .unwrap()
        {
            Report::Started { took, attempts } => {
                slowest = slowest.max(took);
                retried += u32::from(attempts > 1);
            }
            Report::Placed {
                bot,
                player,
                room,
                udp,
            } => {
                let node = node_of_udp[&udp];
                placed.insert(bot, (player, room, node));
            }
            Report::Ended { bot, why } => {
                for node in [&a, &b, &c] {
                    let (_, metrics) = http(node.admin, "GET", "/metrics", ADMIN, "").await;
                    for line in metrics.lines().filter(|line| {
                        line.contains("drop") || line.contains("refus") || line.contains("denied")
                    }) {
                        eprintln!("{}: {line}", node.id);
                    }
                }
                panic!("bot {bot} could not play: {why}")
            }
        }
    }
    eprintln!("slowest start: {slowest:?}; connections retried: {retried}");
    eprintln!(
        "300 bots matchmade through a and connected in {:?}",
        started.elapsed()
    );
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for (_, _, node) in placed.values() {
        *per_node.entry(node).or_default() += 1;
    }
    eprintln!("players per node: {per_node:?}");
    for node in ["a", "b", "c"] {
        assert!(
            per_node.get(node).copied().unwrap_or(0) >= 30,
            "node {node} got its share: {per_node:?}"
        );
    }
    // Every bot is seated where its token sent it; no room over capacity.
    let (listing, _) = eventually("every seat taken", WAIT, async || {
        let listing = rooms(c.http).await?;
        let total: u64 = listing.values().map(|room| room.1).sum();
        (total == 300).then_some(listing)
    })
    .await;
    let mut seated_per_node: HashMap<String, u64> = HashMap::new();
    for (room, (node, players, capacity)) in &listing {
        assert!(players <= capacity, "room {room}: {players} of {capacity}");
        *seated_per_node.entry(node.clone()).or_default() += players;
    }
    for (node, count) in &per_node {
        assert_eq!(
            seated_per_node.get(*node).copied().unwrap_or(0),
            *count as u64,
            "node {node} seats the bots whose tokens name it"
        );
    }
    for (bot, (_, room, node)) in &placed {
        assert_eq!(listing[room].0, *node, "bot {bot}'s room is on its node");
    }

    // kill -9 of B: within the lease its rooms leave the directory, and its players come
    // back through A onto A or C.
    let b_players: HashSet<usize> = placed
        .iter()
        .filter(|(_, (_, _, node))| *node == "b")
        .map(|(bot, _)| *bot)
        .collect();
    b.child.start_kill().unwrap();
    b.child.wait().await.unwrap();
    let killed = Instant::now();
    let (_, gone_after) = eventually(
        "b's rooms gone from a and c",
        Duration::from_millis(LEASE_MS + 2000),
        async || {
            for node in [a.http, c.http] {
                if rooms(node).await?.values().any(|room| room.0 == "b") {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    eprintln!("b left the directory {gone_after:?} after kill -9 (lease {LEASE_MS} ms)");
    let mut replaced = HashSet::new();
    let deadline = killed + Duration::from_secs(20);
    while replaced.len() < b_players.len() {
        let report = timeout(
            deadline.saturating_duration_since(Instant::now()),
            reports.recv(),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} of b's {} players re-placed",
                replaced.len(),
                b_players.len()
            )
        })
        .unwrap();
        match report {
            Report::Started { .. } => {}
            Report::Placed { bot, room, udp, .. } => {
                let node = node_of_udp[&udp];
                if node == "b" {
                    continue; // a seat held in the lease's last moments; it retries
                }
                if !b_players.contains(&bot) {
                    // A blip on a busy machine: back to the seat it holds.
                    assert_eq!(placed[&bot].1, room, "bot {bot} of {node} keeps its seat");
                    continue;
                }
                replaced.insert(bot);
                let player = placed[&bot].0;
                placed.insert(bot, (player, room, node));
            }
            Report::Ended { bot, why } => panic!("bot {bot} was lost: {why}"),
        }
    }
    eprintln!(
        "b's {} players re-placed on a and c {:?} after the kill",
        b_players.len(),
        killed.elapsed()
    );
    let (listing, _) = eventually("b's players seated again", WAIT, async || {
        let listing = rooms(a.http).await?;
        let total: u64 = listing.values().map(|room| room.1).sum();
        (total == 300 && listing.values().all(|room| room.1 <= room.2)).then_some(listing)
    })
    .await;
    assert!(listing.values().all(|room| room.0 != "b"));

    // Drain of C: no new player goes there; its rooms finish when their players leave;
    // its listings are gone when it exits.
    let (status, _) = http(c.admin, "POST", "/api/admin/drain", ADMIN, "").await;
    assert_eq!(status, 200);
    for index in 0..40 {
        let body = format!(r#"{{"kind": "relay", "name": "late-{index}"}}"#);
        let (status, answer) = http(a.http, "POST", "/api/matchmake", "", &body).await;
        assert_eq!(status, 200, "{answer}");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        let udp: SocketAddr = answer["endpoints"]["udp"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            node_of_udp[&udp], "a",
            "no new player goes to the draining c"
        );
    }
    let (status, answer) = http(c.http, "POST", "/api/matchmake", "", r#"{"kind": "relay"}"#).await;
    assert_eq!(status, 503, "c itself takes no one: {answer}");
    // C's players finish (leave): C exits by itself, and takes its listings with it.
    let c_bots: Vec<usize> = placed
        .iter()
        .filter(|(_, (_, _, node))| *node == "c")
        .map(|(bot, _)| *bot)
        .collect();
    assert!(!c_bots.is_empty());
    for bot in &c_bots {
        let _ = leave[*bot].send(true);
    }
    let exit = timeout(Duration::from_secs(40), c.child.wait())
        .await
        .expect("c exits once drained")
        .unwrap();
    assert!(exit.success(), "c exits cleanly: {exit:?}");
    let listing = rooms(a.http).await.unwrap();
    assert!(
        listing.values().all(|room| room.0 != "c"),
        "c's listings are gone at its exit, not a lease later"
    );
    assert_eq!(node_ids(a.admin).await.unwrap(), ["a"]);

    for sender in &leave {
        let _ = sender.send(true);
    }
    for bot in bots {
        let _ = timeout(WAIT, bot).await;
    }
    a.child.start_kill().unwrap();
}

/// A Redis of the test's own on a free port, keeping nothing on disk.
fn start_redis(port: u16) -> Child {
    tokio::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("redis-server (Debian's redis-server package)")
}

/// `from` says `text` in the room, and `to` hears it; both links are driven meanwhile
/// (an undriven link would go quiet and time out), and neither may be lost.
async fn exchange(from: &mut Session, to: &mut Session, text: &str) {
    from.send(0, Bytes::from(text.to_string())).unwrap();
    from.flush().await.unwrap();
    let deadline = tokio::time::sleep(WAIT);
    tokio::pin!(deadline);
    loop {
        let event = tokio::select! {
            event = to.next_event() => event,
            event = from.next_event() => event,
            () = &mut deadline => panic!("{text:?} not heard in time"),
        };
        match event {
            SessionEvent::Message { message, .. } if message == text.as_bytes() => return,
            SessionEvent::Message { .. } => {}
            SessionEvent::Reconnected { .. } => panic!("a connection was lost"),
            SessionEvent::Ended(why) => panic!("ended: {why:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_going_away_stops_matchmaking_not_play_and_the_directory_comes_back() {
    // The shared Redis must not be stopped: this test runs one of its own.
    if redis_url().is_none() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redis = format!("redis://127.0.0.1:{port}");
    let mut server = start_redis(port);
    let cluster = cluster_name("restart");
    let dir = scratch_dir("cluster-restart");
    let a = start_node(&dir, &redis, &cluster, "a").await;
    let b = start_node(&dir, &redis, &cluster, "b").await;
    eventually("both nodes in the directory", WAIT, async || {
        (node_ids(a.admin).await? == ["a", "b"]).then_some(())
    })
    .await;

    // Two players in one room, wherever the cluster put it.
    let options = ConnectOptions::default();
    let server_a = format!("http://{}", a.http);
    let mut first = Session::start(
        &server_a,
        MatchmakeRequest::create("relay").named("first"),
        Transport::Udp,
        options.clone(),
    )
    .await
    .unwrap();
    let room = first.answer().room;
    let mut second = Session::start(
        &server_a,
        MatchmakeRequest::room(room).named("second"),
        Transport::Udp,
        options.clone(),
    )
    .await
    .unwrap();
    assert_eq!(second.answer().room, room);
    exchange(&mut first, &mut second, "before").await;

    // Redis goes away (a crash: it keeps nothing).
    server.start_kill().unwrap();
    server.wait().await.unwrap();
    let (refusal, _) = eventually("matchmaking refused", WAIT, async || {
        let (status, body) =
            http(a.http, "POST", "/api/matchmake", "", r#"{"kind": "relay"}"#).await;
        (status == 503).then_some(body)
    })
    .await;
    assert!(
        refusal.contains("cluster directory unavailable"),
        "a clear reason: {refusal}"
    );
    // Each node notices at its next renewal (a third of the lease), and says so.
    eventually("b reports its directory missing", WAIT, async || {
        let (status, ready) = http(b.http, "GET", "/readyz", "", "").await;
        assert_eq!(
            status, 200,
            "a node without its directory still serves its rooms"
        );
        ready
            .contains("cluster: directory unavailable")
            .then_some(())
    })
    .await;
    // Play goes on, past a whole lease.
    let outage = Instant::now();
    let mut round = 0;
    while outage.elapsed() < Duration::from_millis(LEASE_MS + 500) {
        exchange(&mut first, &mut second, &format!("during {round}")).await;
        round += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Redis is back, empty: the nodes list themselves and their rooms again.
    let mut server = start_redis(port);
    let (_, rebuilt) = eventually("the directory rebuilt", WAIT, async || {
        let listing = rooms(b.http).await?;
        let (_, players, _) = listing.get(&room)?;
        (node_ids(a.admin).await? == ["a", "b"] && *players == 2).then_some(())
    })
    .await;
    eprintln!("directory rebuilt {rebuilt:?} after redis came back");
    let (status, body) = http(
        a.http,
        "POST",
        "/api/matchmake",
        "",
        &format!(r#"{{"room": {room}}}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    exchange(&mut second, &mut first, "after").await;
    server.start_kill().unwrap();
}

/// What a cluster's node reports as committed (`tickwire_store_events_committed_total`:
/// the first n events its writer accepted are in the database) survives its `kill -9`: two
/// nodes share one PostgreSQL (tables of this run's own prefix), arena players join B's
/// room through A and leave while B is killed, and the database holds at least those n.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_loses_no_stat_it_committed() {
    let Some(redis) = redis_url() else { return };
    let Some(postgres) = std::env::var("TICKWIRE_TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        eprintln!("skipped: set TICKWIRE_TEST_POSTGRES_URL to run the shared-database test");
        return;
    };
    let config = tickwire_store::StoreConfig {
        url: postgres.clone(),
        table_prefix: format!("tcl{}_", std::process::id()),
        ..tickwire_store::StoreConfig::default()
    };
    // Fresh tables: a run that failed before its cleanup may have left some under this pid.
    let store = tickwire_store::Store::connect_with(&config).await.unwrap();
    store.drop_tables(&[]).await.unwrap();
    store.close().await;
    let store_env = [
        ("TICKWIRE_STORE__URL", postgres),
        ("TICKWIRE_STORE__TABLE_PREFIX", config.table_prefix.clone()),
        ("TICKWIRE_STORE__WRITER__FLUSH_INTERVAL_MS", "20".into()),
    ];
    let cluster = cluster_name("stats");
    let dir = scratch_dir("cluster-stats");
    // B alone first: the arena room is created there.
    let mut b = start_node_with(&dir, &redis, &cluster, "b", &store_env).await;
    eventually("b in the directory", WAIT, async || {
        (node_ids(b.admin).await? == ["b"]).then_some(())
    })
    .await;
    let server_b = format!("http://{}", b.http);
    let options = ConnectOptions::default();
    let host = Session::start(
        &server_b,
        MatchmakeRequest::create("arena").named("host"),
        Transport::Udp,
        options.clone(),
    )
    .await
    .unwrap();
    let room = host.answer().room;
    let a = start_node_with(&dir, &redis, &cluster, "a", &store_env).await;
    eventually("both nodes in the directory", WAIT, async || {
        (node_ids(a.admin).await? == ["a", "b"]).then_some(())
    })
    .await;

    // Players keep coming to B's room through A and leaving again: each a join and a
    // session's end written by B.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let server_a = format!("http://{}", a.http);
    let churn = tokio::spawn(async move {
        let mut visits = tokio::task::JoinSet::new();
        for index in 0.. {
            if *stopped.borrow() {
                break;
            }
            let request = MatchmakeRequest::room(room).named(format!("visitor-{index}"));
            if let Ok(mut session) = Session::start(
                &server_a,
                request,
                Transport::Udp,
                ConnectOptions::default(),
            )
            .await
            {
                assert_eq!(session.answer().room, room);
                visits.spawn(async move {
                    let stay = tokio::time::sleep(Duration::from_millis(300));
                    tokio::pin!(stay);
                    loop {
                        tokio::select! {
                            event = session.next_event() => {
                                if matches!(event, SessionEvent::Ended(_)) {
                                    return;
                                }
                            }
                            () = &mut stay => break,
                        }
                    }
                    session.close().await;
                });
            }
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        visits.abort_all();
    });
    let committed = |text: &str| {
        common::metric::<f64>(text, "tickwire_store_events_committed_total").unwrap_or(0.0)
    };
    eventually("b to commit a few dozen events", WAIT * 2, async || {
        let (_, text) = http(b.admin, "GET", "/metrics", "", "").await;
        (committed(&text) >= 30.0).then_some(())
    })
    .await;
    // Still under way: what B reports committed at the last moment, then kill -9.
    let (_, text) = http(b.admin, "GET", "/metrics", "", "").await;
    b.child.start_kill().unwrap();
    b.child.wait().await.unwrap();
    let acknowledged = committed(&text);
    let accepted = common::metric::<f64>(&text, "tickwire_store_events_accepted_total").unwrap();
    let _ = stop.send(true);
    churn.await.unwrap();
    drop(host);

    // Every player row is one join and every match one session's end (nobody reconnected,
    // nobody fired): together at least what B had committed.
    let store = tickwire_store::Store::connect_with(&config).await.unwrap();
    let players = store.leaderboard(1000).await.unwrap();
    let sessions_ended: i64 = players.iter().map(|player| player.stats.matches).sum();
    let stored = players.len() as f64 + sessions_ended as f64;
    eprintln!(
        "b accepted {accepted}, committed {acknowledged} events before kill -9; stored: {} \
         players, {sessions_ended} sessions ended",
        players.len()
    );
    assert!(sessions_ended > 0, "players left before the kill");
    assert!(
        stored >= acknowledged,
        "every event b committed is in PostgreSQL: {stored} stored, {acknowledged} committed"
    );
    // A visitor or two may be accepted and committed between the scrape and the kill.
    assert!(
        stored <= accepted + 10.0,
        "nothing stored that b never accepted: {stored} stored, {accepted} accepted"
    );
    store.drop_tables(&[]).await.unwrap();
    store.close().await;
}

/// `POST /api/admin/say` on A reaches the players of B's rooms too (over B's channel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_on_one_node_reaches_every_nodes_players() {
    let Some(redis) = redis_url() else { return };
    let cluster = cluster_name("say");
    let dir = scratch_dir("cluster-say");
    let a = start_node(&dir, &redis, &cluster, "a").await;
    let b = start_node(&dir, &redis, &cluster, "b").await;
    eventually("both nodes in the directory", WAIT, async || {
        (node_ids(a.admin).await? == ["a", "b"]).then_some(())
    })
    .await;
    // New rooms go to the node with fewer players: one room each, after a few at most.
    let server_a = format!("http://{}", a.http);
    let mut on_a = None;
    let mut on_b = None;
    for index in 0..8 {
        if on_a.is_some() && on_b.is_some() {
            break;
        }
        let session = Session::start(
            &server_a,
            MatchmakeRequest::create("relay").named(format!("listener-{index}")),
            Transport::Udp,
            ConnectOptions::default(),
        )
        .await
        .unwrap();
        let slot = if a.udp.contains(&session.answer().endpoints.udp) {
            &mut on_a
        } else {
            assert!(b.udp.contains(&session.answer().endpoints.udp));
            &mut on_b
        };
        slot.get_or_insert(session);
    }
    let (Some(mut on_a), Some(mut on_b)) = (on_a, on_b) else {
        panic!("no room on each node");
    };

    let (status, answer) = http(
        a.admin,
        "POST",
        "/api/admin/say",
        ADMIN,
        r#"{"text": "restart in 5 minutes"}"#,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["nodes"], 2, "both nodes have it: {answer}");
    for (node, session) in [("a", &mut on_a), ("b", &mut on_b)] {
        timeout(WAIT, async {
            loop {
                match session.next_event().await {
                    SessionEvent::Message {
                        channel: 0,
                        message,
                    } if message == "restart in 5 minutes".as_bytes() => return,
                    SessionEvent::Message { .. } | SessionEvent::Reconnected { .. } => {}
                    SessionEvent::Ended(why) => panic!("{node}'s player lost: {why:?}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{node}'s player did not hear the announcement"));
    }
}
