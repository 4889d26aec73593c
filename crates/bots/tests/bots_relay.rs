//! The relay scenarios end to end at small scale, against a real server on loopback, over
//! UDP and WebSocket: every bot connects, messages flow both ways, and nothing is lost that
//! should not be (the reliable chat storm delivers every line).

use std::sync::Arc;
use std::time::Duration;

use tickwire_bots::engine::{self, Quiet, RunConfig, RunReport};
use tickwire_bots::scenario::RelayScenario;
use tickwire_client::Transport;
use tickwire_server::embed::free_ports_config;
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};

/// Starts a server with `relay` rooms of `capacity` seats, runs `scenario` against it.
fn run_against_server(scenario: RelayScenario, transport: Transport) -> RunReport {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let capacity = scenario.players_per_room as u16;
    let server = runtime.block_on(async {
        let mut config = free_ports_config();
        config.shards = 1;
        config.console.enabled = false;
        let mut kinds = RoomKinds::new();
        kinds.register("relay", capacity, || Box::new(RelayRoom::default()));
        Runtime::start(config, kinds).await.unwrap()
    });
    let config = RunConfig {
        server: format!("http://{}", server.addresses().http),
        transport,
        warmup: Duration::from_millis(500),
        duration: Duration::from_millis(1500),
        // Generous: a loaded CI machine may hold a reliable resend back a while.
        drain: Duration::from_secs(3),
        connect_rate: 200.0,
        threads: 2,
        ..RunConfig::default()
    };
    let report = engine::run(&config, Arc::new(scenario), &mut Quiet);
    let handle = server.handle();
    handle.shutdown();
    let _ = runtime.block_on(server.run());
    report.unwrap_or_else(|error| panic!("the run failed: {error}"))
}

fn small_sfs() -> RelayScenario {
    RelayScenario {
        rooms: 2,
        players_per_room: 4,
        ..RelayScenario::sfs()
    }
}

fn small_nettest() -> RelayScenario {
    RelayScenario {
        players_per_room: 6,
        // Several lines per bot within the short window.
        rate_hz: 5.0,
        ..RelayScenario::nettest()
    }
}

fn assert_flowed(report: &RunReport, players: usize, rooms: usize) {
    assert_eq!(report.players, players, "every bot connected: {report:#?}");
    assert_eq!(
        (report.rooms, report.room_size_min, report.room_size_max),
        (rooms, players / rooms, players / rooms),
        "the bots filled the rooms evenly: {report:#?}"
    );
    assert!(report.delivery.sent > 0, "the bots sent: {report:#?}");
    assert!(
        report.bot_out_pps > 0.0 && report.bot_in_pps > 0.0,
        "traffic flowed both ways: {report:#?}"
    );
    assert!(
        report.delivery.delivered > 0,
        "messages arrived: {report:#?}"
    );
    assert_eq!(
        report.delivery.expected,
        report.delivery.sent * (players / rooms - 1) as u64,
        "each message is expected at every other member: {report:#?}"
    );
    assert_eq!(report.delivery.duplicates, 0, "{report:#?}");
    assert_eq!(report.foreign_messages, 0, "{report:#?}");
    assert_eq!(report.disconnects, 0, "no bot was dropped: {report:#?}");
}

#[test]
fn sfs_over_udp_relays_every_message_to_the_other_members() {
    let report = run_against_server(small_sfs(), Transport::Udp);
    assert_flowed(&report, 8, 2);
    // Unreliable, but on loopback at this scale nothing should be lost beyond a trace.
    assert!(
        report.delivery.delivered * 10 >= report.delivery.expected * 9,
        "{report:#?}"
    );
    assert!(
        report.rtt_samples > 0,
        "round trips were sampled: {report:#?}"
    );
}

#[test]
fn sfs_over_webtransport_relays_every_message_to_the_other_members() {
    let report = run_against_server(small_sfs(), Transport::Wt);
    assert_flowed(&report, 8, 2);
    // Unreliable datagrams, but on loopback at this scale nothing should be lost beyond a
    // trace.
    assert!(
        report.delivery.delivered * 10 >= report.delivery.expected * 9,
        "{report:#?}"
    );
}

#[test]
fn sfs_over_websocket_relays_every_message_to_the_other_members() {
    let report = run_against_server(small_sfs(), Transport::Ws);
    assert_flowed(&report, 8, 2);
    assert_eq!(
        report.delivery.delivered, report.delivery.expected,
        "{report:#?}"
    );
}

#[test]
fn nettest_over_udp_delivers_every_line() {
    let report = run_against_server(small_nettest(), Transport::Udp);
    assert_flowed(&report, 6, 1);
    assert_eq!(
        report.delivery.delivered, report.delivery.expected,
        "{report:#?}"
    );
}

#[test]
fn nettest_over_websocket_delivers_every_line() {
    let report = run_against_server(small_nettest(), Transport::Ws);
    assert_flowed(&report, 6, 1);
    assert_eq!(
        report.delivery.delivered, report.delivery.expected,
        "{report:#?}"
    );
}

#[test]
fn a_run_whose_bots_cannot_connect_fails_instead_of_reporting() {
    // Nothing listens on this port (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = RunConfig {
        server: format!("http://127.0.0.1:{port}"),
        connect_timeout: Duration::from_secs(2),
        ..RunConfig::default()
    };
    let result = engine::run(&config, Arc::new(small_sfs()), &mut Quiet);
    match result {
        Err(engine::RunError::ConnectFailed {
            failed, players, ..
        }) => assert_eq!((failed, players), (8, 8)),
        other => panic!("expected a connect failure, got {other:?}"),
    }
}
