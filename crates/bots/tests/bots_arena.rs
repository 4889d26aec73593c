//! The arena scenarios end to end at small scale, against a real server with arena rooms
//! on loopback: every bot connects and is welcomed, inputs go up and snapshots come down,
//! every input is confirmed by a snapshot, every snapshot decodes, every warp of the
//! teleport burst is confirmed and seen in the plaza, and WebTransport bots get the room's
//! every snapshot and leave with a close that frees their seats.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tickwire_arena::BuiltinMap;
use tickwire_arena::room::{ArenaConfig, ArenaRoomFactory};
use tickwire_bots::engine::{self, Quiet, RunConfig, RunReport};
use tickwire_bots::scenario::ArenaScenario;
use tickwire_client::Transport;
use tickwire_proto::ConnectionParams;
use tickwire_server::embed::free_ports_config;
use tickwire_server::runtime::{RoomKinds, Runtime};

/// Starts a server whose `arena` rooms play `map` with `capacity` seats, runs `scenario`.
fn run_against_server(
    scenario: ArenaScenario,
    map: BuiltinMap,
    capacity: u16,
    transport: Transport,
) -> RunReport {
    run_and_count_seats(scenario, map, capacity, transport).0
}

/// As [`run_against_server`], with the players the server still holds once the bots are
/// gone (a connection lost rather than closed holds its seat; within 3 s).
fn run_and_count_seats(
    scenario: ArenaScenario,
    map: BuiltinMap,
    capacity: u16,
    transport: Transport,
) -> (RunReport, u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(async {
        let mut config = free_ports_config();
        config.shards = 1;
        config.console.enabled = false;
        let factory =
            ArenaRoomFactory::new(Arc::new(map.load().unwrap()), ArenaConfig::default(), 5)
                .unwrap();
        let mut kinds = RoomKinds::new();
        kinds.register("arena", capacity, factory.into_factory());
        Runtime::start(config, kinds).await.unwrap()
    });
    let config = RunConfig {
        server: format!("http://{}", server.addresses().http),
        transport,
        warmup: Duration::from_millis(500),
        duration: Duration::from_millis(2000),
        drain: Duration::from_secs(1),
        connect_rate: 200.0,
        threads: 2,
        ..RunConfig::default()
    };
    let report = engine::run(&config, Arc::new(scenario), &mut Quiet);
    let handle = server.handle();
    let deadline = Instant::now() + Duration::from_secs(3);
    while handle.pulse().players > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let players_left = handle.pulse().players;
    handle.shutdown();
    let _ = runtime.block_on(server.run());
    let report = report.unwrap_or_else(|error| panic!("the run failed: {error}"));
    (report, players_left)
}

fn assert_played(report: &RunReport, players: usize, rooms: usize) {
    let arena = report.arena.as_ref().expect("arena figures");
    assert_eq!(report.players, players, "every bot connected: {report:#?}");
    assert_eq!(
        report.rooms, rooms,
        "the bots spread over the rooms: {report:#?}"
    );
    assert_eq!(
        arena.welcomes, players as u64,
        "every bot was welcomed: {report:#?}"
    );
    assert!(
        report.delivery.sent > 0 && arena.snapshots_per_s > 0.0,
        "inputs went up and snapshots came down: {report:#?}"
    );
    assert_eq!(
        arena.decode_errors, 0,
        "every snapshot decoded: {report:#?}"
    );
    assert!(
        arena.full_decodes > 0,
        "some bots decoded in full: {report:#?}"
    );
    assert_eq!(report.foreign_messages, 0, "{report:#?}");
    assert_eq!(report.disconnects, 0, "no bot was dropped: {report:#?}");
}

fn small_hobo() -> ArenaScenario {
    ArenaScenario {
        players: 9,
        rooms: 3,
        full_decode_every: 4,
        ..ArenaScenario::hobo()
    }
}

#[test]
fn hobo_over_udp_confirms_every_input() {
    let report = run_against_server(small_hobo(), BuiltinMap::Courtyard, 3, Transport::Udp);
    assert_played(&report, 9, 3);
    // Unreliable, but each input rides in two packets; on loopback nothing should be lost
    // beyond a trace.
    let d = &report.delivery;
    assert!(d.delivered * 100 >= d.sent * 99, "{report:#?}");
    assert!(report.rtt_samples > 0, "{report:#?}");
}

#[test]
fn hobo_over_websocket_confirms_every_input() {
    let report = run_against_server(small_hobo(), BuiltinMap::Courtyard, 3, Transport::Ws);
    assert_played(&report, 9, 3);
    assert_eq!(
        report.recv_lag_p99_ms, None,
        "a WebSocket bot times a message when it reads it, and says so"
    );
    assert_eq!(
        report.delivery.delivered, report.delivery.sent,
        "{report:#?}"
    );
}

#[test]
fn hobo_over_webtransport_confirms_every_input() {
    let report = run_against_server(small_hobo(), BuiltinMap::Courtyard, 3, Transport::Wt);
    assert_played(&report, 9, 3);
    // Inputs and snapshots ride datagrams; on loopback nothing should be lost beyond a
    // trace.
    let d = &report.delivery;
    assert!(d.delivered * 100 >= d.sent * 99, "{report:#?}");
}

/// The WebTransport engine (sans-IO QUIC clients, one task per group) at 20 bots: every
/// bot opens its HTTP/3 session and is accepted, gets the room's snapshots at the room's
/// rate as datagrams, and leaves with a close the server reads as the player's.
#[test]
fn twenty_webtransport_bots_get_every_snapshot_and_leave_cleanly() {
    let players = 20;
    let scenario = ArenaScenario {
        players,
        rooms: 4,
        ..ArenaScenario::hobo()
    };
    let (report, players_left) =
        run_and_count_seats(scenario, BuiltinMap::Courtyard, 5, Transport::Wt);
    assert_played(&report, players, 4);
    assert_eq!(report.transport, "wt");
    let arena = report.arena.as_ref().unwrap();
    let per_player = arena.snapshots_per_s / players as f64;
    let rate = f64::from(ConnectionParams::default().tick_rate_hz);
    assert!(
        per_player >= rate * 0.9,
        "each bot got {per_player:.1} snapshots/s of the room's {rate}: {report:#?}"
    );
    let d = &report.delivery;
    assert!(d.delivered * 100 >= d.sent * 99, "{report:#?}");
    assert!(report.rtt_samples > 0, "{report:#?}");
    assert_eq!(
        players_left, 0,
        "every bot's close freed its seat (a lost connection holds it)"
    );
}

#[test]
fn the_teleport_burst_is_confirmed_and_seen_in_the_plaza() {
    let scenario = ArenaScenario {
        players: 12,
        ..ArenaScenario::teleport()
    };
    let report = run_against_server(scenario, BuiltinMap::Metropolis, 12, Transport::Udp);
    assert_played(&report, 12, 1);
    let arena = report.arena.as_ref().unwrap();
    assert_eq!(
        arena.teleport.sent, 12,
        "every bot warped once: {report:#?}"
    );
    assert_eq!(arena.teleport.delivered, 12, "{report:#?}");
    assert_eq!(arena.teleport_seen.delivered, 12, "{report:#?}");
    // Timed from when each request left, never more than from the schedule.
    assert_eq!(arena.teleport_scheduled.delivered, 12, "{report:#?}");
    assert!(
        arena.teleport.latency_max_ms <= arena.teleport_scheduled.latency_max_ms,
        "{report:#?}"
    );
    // UDP bots on loopback read the kernel's arrival stamps: their receive lag is known.
    assert!(report.recv_lag_p99_ms.is_some(), "{report:#?}");
}

#[test]
fn arena_bots_play_over_websocket() {
    let scenario = ArenaScenario {
        players: 6,
        rooms: 2,
        ..ArenaScenario::arena()
    };
    let report = run_against_server(scenario, BuiltinMap::Courtyard, 3, Transport::Ws);
    assert_played(&report, 6, 2);
    assert_eq!(
        report.delivery.delivered, report.delivery.sent,
        "{report:#?}"
    );
    let arena = report.arena.as_ref().unwrap();
    assert_eq!(
        arena.full_decodes as f64,
        arena.snapshots_per_s * report.duration_s,
        "every snapshot decoded in full: {report:#?}"
    );
}
