//! What an idle connection costs: with nothing to say, each side sends one keepalive per
//! interval and acks none of the other's, so a lobby of idle players is cheap to hold.

mod common;

use std::time::Duration;

use common::{Harness, client_address};
use tickwire_proto::ClientState;
use tickwire_proto::sim::LinkConfig;

#[test]
fn an_idle_connection_sends_at_most_one_datagram_per_keepalive_interval_each_way() {
    let mut harness = Harness::new(LinkConfig::perfect(Duration::from_millis(30)), 5);
    harness.add_client(1);
    harness.connect_all();
    harness.run_for(Duration::from_secs(2));
    let connection = harness
        .server
        .connection_at(client_address(0))
        .expect("connected");
    let sent = |harness: &Harness| {
        let server = harness.server.connection_stats(connection).expect("open");
        let client = harness.clients[0].client.stats().expect("open");
        (server.packets_sent, client.packets_sent)
    };

    let (server_before, client_before) = sent(&harness);
    let idle = Duration::from_secs(60);
    harness.run_for(idle);
    let (server_after, client_after) = sent(&harness);

    assert_eq!(harness.clients[0].client.state(), ClientState::Connected);
    let per_second = |n: u64| n as f64 / idle.as_secs_f64();
    let (to_client, to_server) = (
        per_second(server_after - server_before),
        per_second(client_after - client_before),
    );
    // The default keepalive interval is 1 s; the bound is 2 datagrams/s.
    assert!(
        (0.9..=1.05).contains(&to_client) && (0.9..=1.05).contains(&to_server),
        "idle: {to_client:.2} datagrams/s to the client, {to_server:.2} to the server; \
         want one keepalive per second each way and no acks of keepalives"
    );
}
