//! The binary's arena kind wired to the store, end to end: a player matchmade into an arena
//! room over HTTP, connected over UDP, who leaves, is in the database with their session
//! counted, and the persistence API serves it; and a match played by bots lands in the
//! database with exactly the totals the room counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tickwire::arena::{ArenaSettings, StoreSink};
use tickwire::serve::{room_kinds, room_kinds_with_arena};
use tickwire_arena::room::{StatEvent, StatSink};
use tickwire_bots::engine::{self, Quiet, RunConfig};
use tickwire_bots::scenario::ArenaScenario;
use tickwire_client::{ConnectOptions, Link, LinkEvent, MatchmakeRequest, Transport, matchmake};
use tickwire_server::config::DEFAULT_RELAY_TICK_RATE_HZ;
use tickwire_server::embed::free_ports_config;
use tickwire_server::runtime::{Extras, Runtime};
use tickwire_store::{Store, WriterConfig};
use tokio::time::{Instant, timeout};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arena_session_lands_in_the_database_and_on_the_api() {
    let dir = std::env::temp_dir().join(format!("tickwire-arena-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::connect(&format!("sqlite://{}", dir.join("game.db").display()))
        .await
        .unwrap();
    let writer = store.writer(&WriterConfig::default());
    let settings = ArenaSettings {
        seed: Some(7),
        ..ArenaSettings::default()
    };
    let kinds = room_kinds(&settings, Some(writer.clone()), DEFAULT_RELAY_TICK_RATE_HZ).unwrap();

    let mut config = free_ports_config();
    config.shards = 1;
    config.console.enabled = false;
    config.admin.token = "arena-store-test".into();
    let extras = Extras::default().routes(tickwire_store::http::router(store.clone()));
    let runtime = Runtime::start_with(config, kinds, extras).await.unwrap();
    let url = format!("http://{}", runtime.addresses().http);

    let answer = matchmake(&url, &MatchmakeRequest::kind("arena").named("ada"), WAIT)
        .await
        .unwrap();
    assert_eq!(answer.kind, "arena");
    let mut link = Link::connect(&answer, Transport::Udp, &ConnectOptions::default())
        .await
        .unwrap();
    // The arena welcomes a seated player on its reliable channel, then snapshots follow.
    let welcomed = timeout(WAIT, async {
        loop {
            match link.next_event().await {
                LinkEvent::Message { channel: 0, .. } => return,
                LinkEvent::Message { .. } => continue,
                LinkEvent::Ended(ended) => panic!("ended before the welcome: {ended}"),
            }
        }
    })
    .await;
    assert!(welcomed.is_ok(), "no welcome in time");
    link.close().await;

    // The session's end goes through the write-behind queue; the API shows it once committed.
    let path = format!("/api/players/{}", answer.player_id);
    let deadline = Instant::now() + WAIT;
    let profile = loop {
        let (status, body) = get(runtime.addresses().http, &path).await;
        if status == 200 {
            let profile: serde_json::Value = serde_json::from_str(&body).unwrap();
            if profile["stats"]["matches"] == 1 {
                break profile;
            }
        }
        assert!(Instant::now() < deadline, "never stored: {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(profile["name"], "ada");
    assert_eq!(profile["rank"], 1);
    let (status, board) = get(runtime.addresses().http, "/api/leaderboard?limit=10").await;
    assert_eq!(status, 200);
    assert!(board.contains("\"ada\""), "{board}");

    runtime.shut_down().await.unwrap();
    writer.close().await;
    store.close().await;
    let _ = std::fs::remove_dir_all(dir);
}

async fn get(address: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// What one player's sessions added up to, as the room reported them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Totals {
    kills: i64,
    deaths: i64,
    score: i64,
    matches: i64,
}

/// The room's own account of a match: every kill it announced, and each session's totals.
#[derive(Debug, Default)]
struct RoomAccount {
    names: BTreeMap<u64, String>,
    sessions: BTreeMap<u64, Totals>,
    killed_by: BTreeMap<u64, i64>,
    died: BTreeMap<u64, i64>,
}

/// Counts what the arena rooms emit, then hands each event on to the store's sink.
struct Counting {
    account: Mutex<RoomAccount>,
    store: StoreSink,
}

impl StatSink for Counting {
    fn record(&self, event: StatEvent) {
        {
            let mut account = self.account.lock().unwrap();
            match &event {
                StatEvent::Joined { player, name, .. } => {
                    account.names.insert(player.0, name.clone());
                }
                StatEvent::Kill { killer, victim } => {
                    *account.killed_by.entry(killer.0).or_default() += 1;
                    *account.died.entry(victim.0).or_default() += 1;
                }
                StatEvent::SessionEnded {
                    player,
                    kills,
                    deaths,
                    score,
                    ..
                } => {
                    let totals = account.sessions.entry(player.0).or_default();
                    totals.kills += i64::from(*kills);
                    totals.deaths += i64::from(*deaths);
                    totals.score += i64::from(*score);
                    totals.matches += 1;
                }
            }
        }
        self.store.record(event);
    }
}

#[test]
fn a_match_played_by_bots_lands_in_the_database_with_the_rooms_totals() {
    let dir = std::env::temp_dir().join(format!("tickwire-arena-bots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (store, writer, counting, server) = runtime.block_on(async {
        let store = Store::connect(&format!("sqlite://{}", dir.join("game.db").display()))
            .await
            .unwrap();
        let writer = store.writer(&WriterConfig::default());
        let counting = Arc::new(Counting {
            account: Mutex::default(),
            store: StoreSink::new(writer.clone()),
        });
        let settings = ArenaSettings {
            seed: Some(11),
            ..ArenaSettings::default()
        };
        let arena = settings.factory_with_sink(Some(counting.clone())).unwrap();
        let mut config = free_ports_config();
        config.shards = 1;
        config.console.enabled = false;
        let server = Runtime::start_with(
            config,
            room_kinds_with_arena(arena, DEFAULT_RELAY_TICK_RATE_HZ),
            Extras::default(),
        )
        .await
        .unwrap();
        (store, writer, counting, server)
    });

    // Six bots that hunt each other in one small room for a few seconds, then leave.
    let bots = 6;
    let scenario = ArenaScenario {
        players: bots,
        rooms: 1,
        ..ArenaScenario::arena()
    };
    let run = RunConfig {
        server: format!("http://{}", server.addresses().http),
        warmup: Duration::from_millis(500),
        duration: Duration::from_secs(4),
        drain: Duration::from_millis(500),
        threads: 1,
        ..RunConfig::default()
    };
    let report = engine::run(&run, Arc::new(scenario), &mut Quiet)
        .unwrap_or_else(|error| panic!("the bots' run failed: {error}"));
    assert_eq!(report.players, bots, "every bot played: {report:#?}");
    // Whoever is still seated leaves at shutdown, which ends their session too; then the
    // writer commits everything queued.
    server.handle().shutdown();
    runtime.block_on(server.run()).unwrap();
    runtime.block_on(writer.close());

    let stats = writer.stats();
    assert_eq!(stats.rejected_full, 0, "nothing refused: {stats:?}");
    assert_eq!(
        stats.events_committed, stats.events_accepted,
        "everything accepted was committed: {stats:?}"
    );
    let account = std::mem::take(&mut *counting.account.lock().unwrap());
    assert_eq!(account.names.len(), bots, "every bot joined: {account:?}");
    assert_eq!(
        account.sessions.len(),
        bots,
        "every bot's session ended: {account:?}"
    );
    let announced_kills: i64 = account.died.values().sum();
    assert!(
        announced_kills > 0,
        "the bots fought (else this test proves little): {account:?}"
    );

    runtime.block_on(async {
        let board = store.leaderboard(1000).await.unwrap();
        assert_eq!(
            board.len(),
            bots,
            "the database has exactly the players who played: {board:?}"
        );
        let mut stored_kills = 0;
        for (player, totals) in &account.sessions {
            let profile = store
                .player(*player)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("player {player} is not in the database"));
            let stored = Totals {
                kills: profile.stats.kills,
                deaths: profile.stats.deaths,
                score: profile.stats.score,
                matches: profile.stats.matches,
            };
            assert_eq!(
                stored, *totals,
                "player {player}: the database's totals are the room's (lost or doubled events?)"
            );
            assert_eq!(
                profile.name, account.names[player],
                "player {player}'s name"
            );
            // A death is always the victim's own (a kill of a player who has left is not
            // credited, so only the deaths are compared one for one).
            assert_eq!(
                profile.stats.deaths,
                account.died.get(player).copied().unwrap_or(0),
                "player {player}: deaths stored = kills of them the room announced"
            );
            stored_kills += profile.stats.kills;
        }
        assert!(
            stored_kills > 0 && stored_kills <= announced_kills,
            "kills stored {stored_kills}, announced {announced_kills}"
        );
        writer.close().await;
        store.close().await;
    });
    let _ = std::fs::remove_dir_all(dir);
}
