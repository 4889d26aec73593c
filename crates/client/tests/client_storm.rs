//! Crowds arriving at once, as a server meets them after a match starts or a network blip:
//! a thousand browser players over each of WebSocket and WebTransport connecting at 500 per
//! second, and two thousand UDP players cut off for five seconds who all come back to their
//! seats together. Every one of them must make it: a crowd that loses a few to handshake
//! timeouts on a busy core is the failure these tests exist for.
//!
//! The server runs in this process on one shard, and the clients are the SDK's own, so the
//! server's core is shared with two thousand clients' handshakes: busier than a real one.

use std::sync::Arc;
use std::time::Duration;

use tickwire_client::{
    ConnectOptions, Link, MatchmakeRequest, Session, SessionEvent, Transport, matchmake,
};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until, timeout};

mod common;

use common::relay_server;

/// One storm at a time: each is sized for this process's two cores on its own.
static ONE_STORM: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The SDK's defaults: a 10 s handshake bound, what a game gives a player by default.
fn options() -> ConnectOptions {
    ConnectOptions::default()
}

/// Players seated in the server's rooms, as its public room list reports them.
async fn seated_players(url: &str) -> usize {
    let body = http_get(&format!("{url}/api/rooms")).await;
    let rooms: serde_json::Value = serde_json::from_str(&body).expect("room list is JSON");
    rooms
        .as_array()
        .expect("a rooms array")
        .iter()
        .map(|room| room["players"].as_u64().expect("players") as usize)
        .sum()
}

/// A plain HTTP/1.1 GET over a TCP socket: the test needs one JSON document, not a client.
async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest.split_at(rest.find('/').expect("a path"));
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// What became of a crowd's connection attempts.
struct Crowd {
    links: Vec<Link>,
    /// Players who got in only on their second attempt, as a game client retries once.
    second_tries: Vec<String>,
    /// Players who did not get in at all, with why.
    failures: Vec<String>,
}

/// Each distinct reason in `whys` with how many gave it, the most common first: a storm that
/// fails shows whether it was one cause or several.
fn tally(whys: &[String]) -> String {
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for why in whys {
        *counts.entry(why).or_default() += 1;
    }
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by_key(|&(_, count)| std::cmp::Reverse(count));
    let counts: Vec<String> = counts
        .iter()
        .map(|(why, count)| format!("{count} × {why}"))
        .collect();
    counts.join("; ")
}

/// One player's matchmaking and connection.
async fn attempt(url: &str, transport: Transport, name: &str) -> Result<Link, String> {
    let request = MatchmakeRequest::kind("relay").named(name);
    let answer = matchmake(url, &request, options().timeout)
        .await
        .map_err(|error| format!("matchmake: {error}"))?;
    Link::connect(&answer, transport, &options())
        .await
        .map_err(|error| format!("connect: {error}"))
}

/// `players` connections over `transport`, started at `per_second`. Each player matchmakes
/// and connects; a player whose first attempt fails tries once more, as a game would.
async fn connect_crowd(
    url: Arc<str>,
    transport: Transport,
    players: usize,
    per_second: f64,
) -> Crowd {
    let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / per_second));
    let mut joins = JoinSet::new();
    for index in 0..players {
        pace.tick().await;
        let url = url.clone();
        joins.spawn(async move {
            let name = format!("{}{index}", transport.name());
            match attempt(&url, transport, &name).await {
                Ok(link) => Ok((link, None)),
                Err(first) => attempt(&url, transport, &name)
                    .await
                    .map(|link| (link, Some(first.clone())))
                    .map_err(|second| format!("{first}; then {second}")),
            }
        });
    }
    let mut crowd = Crowd {
        links: Vec::with_capacity(players),
        second_tries: Vec::new(),
        failures: Vec::new(),
    };
    while let Some(joined) = joins.join_next().await {
        match joined.expect("connect task") {
            Ok((link, first_failure)) => {
                crowd.links.push(link);
                crowd.second_tries.extend(first_failure);
            }
            Err(why) => crowd.failures.push(why),
        }
    }
    crowd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_websocket_and_a_thousand_webtransport_players_at_500_per_second_all_connect() {
    const PER_TRANSPORT: usize = 1_000;
    let _alone = ONE_STORM.lock().await;
    let (runtime, url) = relay_server(|_, _| {}).await;
    let url: Arc<str> = url.into();
    let started = Instant::now();
    let (ws, wt) = tokio::join!(
        connect_crowd(url.clone(), Transport::Ws, PER_TRANSPORT, 500.0),
        connect_crowd(url.clone(), Transport::Wt, PER_TRANSPORT, 500.0),
    );
    let took = started.elapsed();
    println!(
        "connected {} over WebSocket ({} on a second try) and {} over WebTransport ({} on a \
         second try) in {took:.1?}",
        ws.links.len(),
        ws.second_tries.len(),
        wt.links.len(),
        wt.second_tries.len(),
    );
    // A second try is a player kept waiting: rare, or the server is dropping handshakes. The
    // one WebTransport connect in 3,000 that waited out its timeout in silence was a QUIC
    // Retry handing out a connection ID already in use (fixed: the endpoint's
    // `RandomConnectionIds`, and its own test); none needed a second try in 19 runs after it
    // on a quiet machine. One in a hundred stays allowed on each transport, as on a machine
    // whose other work takes the server's core (CI's), a handshake can miss its deadline.
    for (transport, crowd, second_tries_allowed) in [
        ("WebSocket", &ws, PER_TRANSPORT / 100),
        ("WebTransport", &wt, PER_TRANSPORT / 100),
    ] {
        assert!(
            crowd.failures.is_empty(),
            "{transport}: {} never connected ({})",
            crowd.failures.len(),
            tally(&crowd.failures)
        );
        assert!(
            crowd.second_tries.len() <= second_tries_allowed,
            "{transport}: {} needed a second try, at most {second_tries_allowed} may ({})",
            crowd.second_tries.len(),
            tally(&crowd.second_tries)
        );
    }
    for why in ws.second_tries.iter().chain(&wt.second_tries) {
        println!("a first attempt failed: {why}");
    }
    // Connected means seated: the rooms hold every one of them, and the seat each failed
    // first attempt reserved until that reservation expires (the server cannot know the
    // client gave up on it).
    let expected = 2 * PER_TRANSPORT + ws.second_tries.len() + wt.second_tries.len();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seated = seated_players(&url).await;
        if seated == expected {
            break;
        }
        assert!(Instant::now() < deadline, "{seated} seated of {expected}");
        sleep(Duration::from_millis(200)).await;
    }
    drop((ws, wt));
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_udp_players_cut_off_for_five_seconds_all_come_back_to_their_seats() {
    const PLAYERS: usize = 2_000;
    const CUT: Duration = Duration::from_secs(5);
    let _alone = ONE_STORM.lock().await;
    let (runtime, url) = relay_server(|_, _| {}).await;
    let url: Arc<str> = url.into();

    // In at 1,000 per second: the crowd the cut will hit, not the storm under test.
    let mut pace = tokio::time::interval(Duration::from_millis(1));
    let mut joins = JoinSet::new();
    for index in 0..PLAYERS {
        pace.tick().await;
        let url = url.clone();
        joins.spawn(async move {
            let request = MatchmakeRequest::kind("relay").named(format!("udp{index}"));
            Session::start(&url, request, Transport::Udp, options())
                .await
                .map_err(|error| error.to_string())
        });
    }
    let mut sessions = Vec::with_capacity(PLAYERS);
    while let Some(joined) = joins.join_next().await {
        sessions.push(joined.expect("start task").expect("every player connects"));
    }
    assert_eq!(seated_players(&url).await, PLAYERS);

    // The cut: no client sends or reads for five seconds, and what the server sends meanwhile
    // is lost. Then every client notices at the same instant and comes back on a new socket,
    // as after a network change, while the server still holds the old connections.
    let back_at = Instant::now() + CUT;
    let mut comebacks = JoinSet::new();
    for mut session in sessions {
        comebacks.spawn(async move {
            let room = session.answer().room;
            sleep_until(back_at).await;
            let event = session
                .reconnect()
                .await
                .map_err(|error| error.to_string())?;
            match event {
                SessionEvent::Reconnected {
                    same_room: true, ..
                } if session.answer().room == room => Ok(session),
                other => Err(format!("came back as {other:?}")),
            }
        });
    }
    let mut failures = Vec::new();
    let mut sessions = Vec::with_capacity(PLAYERS);
    let all_back = timeout(Duration::from_secs(60), async {
        while let Some(joined) = comebacks.join_next().await {
            match joined.expect("comeback task") {
                Ok(session) => sessions.push(session),
                Err(why) => failures.push(why),
            }
        }
    })
    .await;
    let took = back_at.elapsed();
    println!(
        "{} of {PLAYERS} back in their seats {took:.1?} after the cut ended",
        sessions.len()
    );
    assert!(all_back.is_ok(), "still reconnecting after 60 s");
    assert!(
        failures.is_empty(),
        "{} did not come back (first: {:?})",
        failures.len(),
        failures.first()
    );
    // Back in place, not beside it: the old connections were replaced, no seat doubled.
    assert_eq!(seated_players(&url).await, PLAYERS);
    drop(sessions);
    runtime.shut_down().await.unwrap();
}
