//! `tickwire bench cluster`: `--nodes` local `tickwire serve` processes on loopback sharing
//! one Redis (a cluster name of this run's own, so runs and tests sharing the Redis never
//! meet), and bots matchmaking through the first node's HTTP API, each then connected over
//! UDP (the SDK's own [`Session`]) to the node its token names.
//!
//! Figures: matchmake latency (the first `POST /api/matchmake` of each bot, a seat placed
//! anywhere in the cluster) p50/p99/max; how many players each node got; then `kill -9` of
//! the node holding the most players (never the one the bots ask): how long until its rooms
//! are gone from `GET /api/rooms` on every other node, and how many of its players came back
//! through the first node onto a surviving one (their sessions reconnect by themselves).
//!
//! A correctness run more than a throughput one: the nodes and the bots share the machine,
//! so the latency includes the bots' own scheduling.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Serialize;
use tickwire_client::{
    Backoff, ConnectOptions, MatchmakeRequest, Session, SessionEvent, Transport, matchmake,
};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior, interval, timeout};

use super::load::{ServerProcess, get};

/// The Done-when of issue 19: matchmake p99 on loopback at most this.
const TARGET_MATCHMAKE_P99_MS: f64 = 10.0;
/// A killed node gone from the directory within its lease, which is at most this (ms).
const TARGET_LEASE_MS: u64 = 10_000;
/// Relay rooms of this many seats: small, so a run fills rooms on every node.
const ROOM_CAPACITY: u32 = 8;
/// How long the nodes keep a silent connection: a killed node's players notice within it.
const CONNECTION_TIMEOUT_MS: u64 = 2000;
/// How often the directory is read after the kill.
const POLL: Duration = Duration::from_millis(50);

/// `tickwire bench cluster`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Nodes in the cluster (the bots matchmake through the first; one other is killed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..=16))]
    pub nodes: u16,
    /// Players (bots), each a UDP session.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..=5000))]
    pub players: u32,
    /// Players arriving per second (matchmakes paced, not all at once).
    #[arg(long, default_value_t = 50.0)]
    pub joins_per_second: f64,
    /// The Redis the nodes share. Default: `TICKWIRE_TEST_REDIS_URL`, else
    /// `redis://127.0.0.1:6379`.
    #[arg(long)]
    pub redis_url: Option<String>,
    /// The nodes' lease (`cluster.lease_ms`); the server's default unless given.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1000..=60_000))]
    pub lease_ms: u64,
    /// CPUs the nodes run on, in `taskset`'s list form.
    #[arg(long, default_value = "0-1")]
    pub cpus: String,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The figures, one JSON object with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    /// Nodes started.
    pub nodes: u16,
    /// Players asked for.
    pub players: u32,
    /// Players seated and connected.
    pub placed: u32,
    /// Players who could not get in, by what went wrong.
    pub failures: BTreeMap<String, u32>,
    /// The first matchmake of each bot, through node 0, median (ms).
    pub matchmake_p50_ms: f64,
    /// 99th percentile (nearest rank).
    pub matchmake_p99_ms: f64,
    /// Slowest.
    pub matchmake_max_ms: f64,
    /// Players connected to each node, by node id, once everyone was in.
    pub players_per_node: BTreeMap<String, u32>,
    /// The fullest node's players over an even share (1.0 = perfectly even).
    pub spread_max_over_even: f64,
    /// The node killed with `kill -9`.
    pub killed: String,
    /// Its players at the kill.
    pub killed_players: u32,
    /// The lease the nodes ran with (ms).
    pub lease_ms: u64,
    /// From the kill until no other node listed any of its rooms (s), read every 50 ms:
    /// the lease less the time since the node's last renewal (every third of the lease).
    pub gone_after_s: f64,
    /// Its players back through node 0 on a surviving node.
    pub replaced: u32,
    /// From the kill until the last of them was back (s).
    pub replaced_after_s: f64,
    /// Whether the Done-when holds: p99, gone within a lease of at most 10 s, everyone
    /// re-placed, no failures.
    pub done: bool,
    /// Why not, when not.
    pub not_done_because: Vec<String>,
}

/// Runs the bench.
pub fn run(args: &ClusterArgs) -> anyhow::Result<ClusterReport> {
    crate::bots::raise_fd_limit();
    anyhow::ensure!(
        args.joins_per_second > 0.0 && args.joins_per_second <= 1_000.0,
        "--joins-per-second must be above 0 and at most 1000"
    );
    let redis = args.redis_url.clone().unwrap_or_else(|| {
        std::env::var("TICKWIRE_TEST_REDIS_URL")
            .ok()
            .filter(|url| !url.is_empty())
            .unwrap_or_else(|| "redis://127.0.0.1:6379".into())
    });
    let nodes = start_nodes(args, &redis)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(bench(args, nodes))
}

/// A node of the bench's cluster.
struct Node {
    id: String,
    process: ServerProcess,
    udp: Vec<SocketAddr>,
}

fn start_nodes(args: &ClusterArgs, redis: &str) -> anyhow::Result<Vec<Node>> {
    let unique = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis()
    );
    let shared = [
        ("TICKWIRE_CLUSTER__REDIS_URL", redis.to_string()),
        ("TICKWIRE_CLUSTER__NAME", format!("bench-{unique}")),
        (
            "TICKWIRE_CLUSTER__SECRET",
            format!("bench cluster secret {unique}"),
        ),
        ("TICKWIRE_CLUSTER__LEASE_MS", args.lease_ms.to_string()),
        (
            "TICKWIRE_CONNECTION__TIMEOUT_MS",
            CONNECTION_TIMEOUT_MS.to_string(),
        ),
        (
            "TICKWIRE_ROOMS__KINDS__RELAY__CAPACITY",
            ROOM_CAPACITY.to_string(),
        ),
    ];
    (0..args.nodes)
        .map(|index| {
            let id = format!("n{index}");
            let mut env: Vec<(String, String)> = shared
                .iter()
                .map(|(key, value)| ((*key).to_string(), value.clone()))
                .collect();
            env.push(("TICKWIRE_CLUSTER__NODE_ID".into(), id.clone()));
            let process = ServerProcess::start_on(&args.cpus, &env)
                .with_context(|| format!("starting node {id}"))?;
            let udp = process
                .listening
                .split_whitespace()
                .find_map(|part| part.strip_prefix("udp="))
                .with_context(|| format!("no udp address in {:?}", process.listening))?
                .split(',')
                .map(str::parse)
                .collect::<Result<_, _>>()?;
            Ok(Node { id, process, udp })
        })
        .collect()
}

/// What a bot tells the bench.
enum Report {
    Matchmade { took: Duration },
    Placed { bot: u32, udp: SocketAddr },
    Failed { why: String },
}

async fn bench(args: &ClusterArgs, mut nodes: Vec<Node>) -> anyhow::Result<ClusterReport> {
    let want: Vec<String> = nodes.iter().map(|node| node.id.clone()).collect();
    let entry = nodes[0].process.http.clone();
    let entry_admin = nodes[0].process.admin.clone();
    wait_for(
        Duration::from_secs(20),
        "every node in the directory",
        || {
            let entry_admin = entry_admin.clone();
            let want = want.clone();
            async move { Ok((node_ids(&entry_admin).await? == want).then_some(())) }
        },
    )
    .await?;
    let node_of_udp: HashMap<SocketAddr, usize> = nodes
        .iter()
        .enumerate()
        .flat_map(|(index, node)| node.udp.iter().map(move |udp| (*udp, index)))
        .collect();

    // Everyone in, paced.
    let server: Arc<str> = format!("http://{entry}").into();
    let (reports_in, mut reports) = mpsc::unbounded_channel();
    let (leave, leaving) = watch::channel(false);
    let mut arrivals = interval(Duration::from_secs_f64(1.0 / args.joins_per_second));
    arrivals.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut bots = tokio::task::JoinSet::new();
    for bot in 0..args.players {
        arrivals.tick().await;
        bots.spawn(play(
            bot,
            server.clone(),
            reports_in.clone(),
            leaving.clone(),
        ));
    }
    let mut latencies = Vec::new();
    let mut failures: BTreeMap<String, u32> = BTreeMap::new();
    let mut node_of_bot: HashMap<u32, usize> = HashMap::new();
    let arrived = Instant::now() + Duration::from_secs(30);
    while (node_of_bot.len() as u32) + failures.values().sum::<u32>() < args.players {
        let Ok(Some(report)) = timeout(arrived - Instant::now(), reports.recv()).await else {
            bail!(
                "only {} of {} players in after 30 s",
                node_of_bot.len(),
                args.players
            );
        };
        match report {
            Report::Matchmade { took } => latencies.push(took),
            Report::Placed { bot, udp } => {
                let node = *node_of_udp
                    .get(&udp)
                    .context("a token for no node of ours")?;
                node_of_bot.insert(bot, node);
            }
            Report::Failed { why } => *failures.entry(why).or_default() += 1,
        }
    }
    let mut per_node = vec![0u32; nodes.len()];
    for node in node_of_bot.values() {
        per_node[*node] += 1;
    }
    let even = node_of_bot.len() as f64 / nodes.len() as f64;
    let spread_max_over_even = per_node.iter().copied().max().unwrap_or(0) as f64 / even.max(1.0);
    let players_per_node: BTreeMap<String, u32> = nodes
        .iter()
        .zip(&per_node)
        .map(|(node, count)| (node.id.clone(), *count))
        .collect();
    if !args.json {
        eprintln!(
            "{} players in: {players_per_node:?}; killing the fullest node",
            node_of_bot.len()
        );
    }

    // kill -9 of the fullest node other than the entry.
    let victim = (1..nodes.len())
        .max_by_key(|index| per_node[*index])
        .expect("at least two nodes");
    let victims: HashSet<u32> = node_of_bot
        .iter()
        .filter(|(_, node)| **node == victim)
        .map(|(bot, _)| *bot)
        .collect();
    nodes[victim].process.kill_now()?;
    let killed = Instant::now();
    let victim_id = nodes[victim].id.clone();
    let survivors: Vec<String> = nodes
        .iter()
        .enumerate()
        .filter(|(index, _)| *index != victim)
        .map(|(_, node)| node.process.http.clone())
        .collect();
    let directory = {
        let (victim_id, survivors) = (victim_id.clone(), survivors.clone());
        let within = Duration::from_millis(args.lease_ms) + Duration::from_secs(20);
        tokio::spawn(wait_for(
            within,
            "the killed node's rooms gone",
            move || {
                let (victim_id, survivors) = (victim_id.clone(), survivors.clone());
                async move {
                    for http in &survivors {
                        if lists_rooms_of(http, &victim_id).await? {
                            return Ok(None);
                        }
                    }
                    Ok(Some(()))
                }
            },
        ))
    };
    let mut replaced = HashSet::new();
    let mut replaced_after = Duration::ZERO;
    let deadline = killed + Duration::from_millis(args.lease_ms) + Duration::from_secs(30);
    while replaced.len() < victims.len() {
        let Ok(Some(report)) = timeout(deadline - Instant::now(), reports.recv()).await else {
            break;
        };
        match report {
            Report::Placed { bot, udp } if victims.contains(&bot) => {
                if node_of_udp.get(&udp).is_some_and(|node| *node != victim) {
                    replaced.insert(bot);
                    replaced_after = killed.elapsed();
                }
            }
            Report::Failed { why } => {
                *failures
                    .entry(format!("after the kill: {why}"))
                    .or_default() += 1;
            }
            Report::Placed { .. } | Report::Matchmade { .. } => {}
        }
    }
    let gone_after = directory.await??.1;

    let _ = leave.send(true);
    while bots.join_next().await.is_some() {}
    drop(nodes);

    latencies.sort_unstable();
    let ms = |quantile: f64| nearest_rank(&latencies, quantile).as_secs_f64() * 1e3;
    let mut report = ClusterReport {
        nodes: args.nodes,
        players: args.players,
        placed: node_of_bot.len() as u32,
        failures,
        matchmake_p50_ms: ms(0.5),
        matchmake_p99_ms: ms(0.99),
        matchmake_max_ms: ms(1.0),
        players_per_node,
        spread_max_over_even,
        killed: victim_id,
        killed_players: victims.len() as u32,
        lease_ms: args.lease_ms,
        gone_after_s: gone_after.as_secs_f64(),
        replaced: replaced.len() as u32,
        replaced_after_s: replaced_after.as_secs_f64(),
        done: false,
        not_done_because: Vec::new(),
    };
    report.not_done_because = verdict(&report);
    report.done = report.not_done_because.is_empty();
    Ok(report)
}

/// What keeps a run from meeting the Done-when.
fn verdict(report: &ClusterReport) -> Vec<String> {
    let mut why = Vec::new();
    if report.matchmake_p99_ms > TARGET_MATCHMAKE_P99_MS {
        why.push(format!(
            "matchmake p99 {:.2} ms (at most {TARGET_MATCHMAKE_P99_MS})",
            report.matchmake_p99_ms
        ));
    }
    // Within the lease, as read: the directory is polled every POLL.
    let lease_s = report.lease_ms as f64 / 1e3;
    if report.gone_after_s > lease_s + POLL.as_secs_f64() {
        why.push(format!(
            "the killed node left the directory after {:.2} s (its lease: {lease_s} s)",
            report.gone_after_s
        ));
    }
    if report.lease_ms > TARGET_LEASE_MS {
        why.push(format!(
            "a lease of {} ms: issue 19 asks a killed node gone within {TARGET_LEASE_MS} ms",
            report.lease_ms
        ));
    }
    if report.replaced < report.killed_players {
        why.push(format!(
            "{} of the killed node's {} players re-placed",
            report.replaced, report.killed_players
        ));
    }
    let failed: u32 = report.failures.values().sum();
    if failed > 0 {
        why.push(format!("{failed} players failed"));
    }
    why
}

/// The value at `quantile` of sorted `values` by nearest rank (zero when empty).
fn nearest_rank(values: &[Duration], quantile: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    let rank = (quantile * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// A bot: matchmakes through `server` (timed), connects over UDP to the node its token
/// names, and stays (its session reconnecting through `server` when the connection is
/// lost) until told to leave.
async fn play(
    bot: u32,
    server: Arc<str>,
    reports: mpsc::UnboundedSender<Report>,
    mut leave: watch::Receiver<bool>,
) {
    let options = ConnectOptions {
        timeout: Duration::from_secs(10),
        ..ConnectOptions::default()
    };
    let fail = |why: String| {
        let _ = reports.send(Report::Failed { why });
    };
    let mut request = MatchmakeRequest::kind("relay").named(format!("bench-{bot}"));
    let begun = Instant::now();
    let first = match matchmake(&server, &request, options.timeout).await {
        Ok(answer) => answer,
        Err(error) => return fail(format!("matchmake: {error}")),
    };
    let _ = reports.send(Report::Matchmade {
        took: begun.elapsed(),
    });
    // The session holds the seat just placed: starting it asks for that seat again.
    request.session = Some(first.session);
    let mut session = match Session::start(&server, request, Transport::Udp, options).await {
        Ok(session) => session.with_backoff(Backoff {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(1),
            attempts: 60,
        }),
        Err(error) => return fail(format!("connect: {error}")),
    };
    let placed = |session: &Session| Report::Placed {
        bot,
        udp: session.answer().endpoints.udp,
    };
    let _ = reports.send(placed(&session));
    loop {
        tokio::select! {
            event = session.next_event() => match event {
                SessionEvent::Message { .. } => {}
                SessionEvent::Reconnected { .. } => {
                    let _ = reports.send(placed(&session));
                }
                SessionEvent::Ended(why) => return fail(format!("ended: {why}")),
            },
            left = async { leave.wait_for(|leave| *leave).await.is_ok() } => {
                if !left {
                    return;
                }
                session.close().await;
                return;
            }
        }
    }
}

/// Polls `check` every [`POLL`] until it gives a value: the value and how long it took.
async fn wait_for<T, F, Fut>(
    within: Duration,
    what: &str,
    mut check: F,
) -> anyhow::Result<(T, Duration)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await? {
            return Ok((value, start.elapsed()));
        }
        if start.elapsed() > within {
            bail!("{what}: not within {within:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `GET path` off the runtime's threads (the harness's HTTP client is blocking).
async fn get_json(http: &str, path: &str, headers: &str) -> anyhow::Result<serde_json::Value> {
    let request = (http.to_string(), path.to_string(), headers.to_string());
    let (status, body) = tokio::task::spawn_blocking(move || {
        let (http, path, headers) = request;
        get(&http, &path, &headers)
    })
    .await??;
    if status != 200 {
        bail!("{path}: status {status}: {body}");
    }
    Ok(serde_json::from_str(&body)?)
}

/// The live nodes' ids as the node whose operator listener is `admin` sees them
/// (`GET /api/admin/nodes`).
async fn node_ids(admin: &str) -> anyhow::Result<Vec<String>> {
    let headers = format!("Authorization: Bearer {}\r\n", ServerProcess::admin_token());
    let nodes = get_json(admin, "/api/admin/nodes", &headers).await?;
    Ok(nodes
        .as_array()
        .context("/api/admin/nodes is not a list")?
        .iter()
        .filter_map(|node| Some(node["id"].as_str()?.to_string()))
        .collect())
}

/// Whether node `http`'s `GET /api/rooms` lists a room of node `id`.
async fn lists_rooms_of(http: &str, id: &str) -> anyhow::Result<bool> {
    let rooms = get_json(http, "/api/rooms", "").await?;
    Ok(rooms
        .as_array()
        .context("/api/rooms is not a list")?
        .iter()
        .any(|room| room["node"].as_str() == Some(id)))
}

/// The human table.
pub fn render(report: &ClusterReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "nodes {}  players {} ({} placed)\n",
        report.nodes, report.players, report.placed
    ));
    out.push_str(&format!(
        "matchmake through n0   p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms\n",
        report.matchmake_p50_ms, report.matchmake_p99_ms, report.matchmake_max_ms
    ));
    let spread: Vec<String> = report
        .players_per_node
        .iter()
        .map(|(node, players)| format!("{node} {players}"))
        .collect();
    out.push_str(&format!(
        "players per node       {}  (fullest {:.2}× an even share)\n",
        spread.join("  "),
        report.spread_max_over_even
    ));
    out.push_str(&format!(
        "kill -9 of {} ({} players, lease {} ms)\n",
        report.killed, report.killed_players, report.lease_ms
    ));
    out.push_str(&format!(
        "  gone from GET /api/rooms on the others after {:.2} s\n",
        report.gone_after_s
    ));
    out.push_str(&format!(
        "  re-placed through n0 on a survivor: {} of {} (the last after {:.2} s)\n",
        report.replaced, report.killed_players, report.replaced_after_s
    ));
    for (why, count) in &report.failures {
        out.push_str(&format!("  {count} × {why}\n"));
    }
    if report.done {
        out.push_str("done: p99, directory and re-placement within issue 19's bounds\n");
    } else {
        for why in &report.not_done_because {
            out.push_str(&format!("NOT DONE: {why}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_picks_the_value_at_or_above_the_quantile() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(nearest_rank(&values, 0.5), Duration::from_millis(50));
        assert_eq!(nearest_rank(&values, 0.99), Duration::from_millis(99));
        assert_eq!(nearest_rank(&values, 1.0), Duration::from_millis(100));
        assert_eq!(nearest_rank(&values, 0.0), Duration::from_millis(1));
        assert_eq!(nearest_rank(&[], 0.99), Duration::ZERO);
    }
}
