//! The WebTransport engine (sans-IO QUIC clients, one task per group) on real sockets
//! against a real server: every bot opens its HTTP/3 session and is accepted, gets the
//! room's snapshots at the room's rate as datagrams, and leaves with a close the server
//! reads as the player's (its seat freed at once, not held as a lost connection's).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tickwire_arena::BuiltinMap;
use tickwire_arena::room::{ArenaConfig, ArenaRoomFactory};
use tickwire_bots::engine::{self, Quiet, RunConfig};
use tickwire_bots::scenario::ArenaScenario;
use tickwire_client::Transport;
use tickwire_proto::ConnectionParams;
use tickwire_server::embed::free_ports_config;
use tickwire_server::runtime::{RoomKinds, Runtime};

#[test]
fn twenty_webtransport_bots_get_every_snapshot_and_leave_cleanly() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(async {
        let mut config = free_ports_config();
        config.shards = 1;
        config.console.enabled = false;
        let map = BuiltinMap::Courtyard;
        let factory =
            ArenaRoomFactory::new(Arc::new(map.load().unwrap()), ArenaConfig::default(), 5)
                .unwrap();
        let mut kinds = RoomKinds::new();
        kinds.register("arena", 5, factory.into_factory());
        Runtime::start(config, kinds).await.unwrap()
    });
    let players = 20;
    let scenario = ArenaScenario {
        players,
        rooms: 4,
        ..ArenaScenario::hobo()
    };
    let config = RunConfig {
        server: format!("http://{}", server.addresses().http),
        transport: Transport::Wt,
        warmup: Duration::from_millis(500),
        duration: Duration::from_secs(2),
        drain: Duration::from_millis(500),
        connect_rate: 200.0,
        threads: 1,
        ..RunConfig::default()
    };
    let report = engine::run(&config, Arc::new(scenario), &mut Quiet);
    let handle = server.handle();
    // A bot whose close the server read as a lost connection would hold its seat.
    let deadline = Instant::now() + Duration::from_secs(3);
    while handle.pulse().players > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let players_left = handle.pulse().players;
    handle.shutdown();
    let _ = runtime.block_on(server.run());
    let report = report.unwrap_or_else(|error| panic!("the run failed: {error}"));

    assert_eq!(report.transport, "wt");
    assert_eq!(report.players, players, "every bot connected: {report:#?}");
    assert_eq!(report.connect_failed, 0, "{report:#?}");
    assert_eq!(report.disconnects, 0, "no bot was dropped: {report:#?}");
    let arena = report.arena.as_ref().expect("arena figures");
    assert_eq!(arena.welcomes, players as u64, "{report:#?}");
    assert_eq!(arena.decode_errors, 0, "{report:#?}");
    let per_player = arena.snapshots_per_s / players as f64;
    let rate = f64::from(ConnectionParams::default().tick_rate_hz);
    assert!(
        per_player >= rate * 0.9,
        "each bot got {per_player:.1} snapshots/s of the room's {rate}: {report:#?}"
    );
    let d = &report.delivery;
    assert!(
        d.sent > 0 && d.delivered * 100 >= d.sent * 99,
        "inputs went up and were confirmed: {report:#?}"
    );
    assert!(report.rtt_samples > 0, "{report:#?}");
    assert_eq!(
        players_left, 0,
        "every bot's close freed its seat (a lost connection holds it)"
    );
}
