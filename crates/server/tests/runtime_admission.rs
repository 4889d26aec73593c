//! One connect token opens one connection on one transport: a whole server on loopback
//! refuses a matchmade token over WebSocket once it opened a UDP connection, and over UDP
//! once it opened a WebSocket connection (every shard and the WebSocket endpoint share one
//! used-token set).

mod common;

use common::serve::{
    WsPlayer, answer_token, http, matchmake, metrics_until, test_config, ws_close_code, ws_connect,
    ws_present,
};
use common::{WAIT, udp_client};
use serde_json::json;
use tickwire_proto::{ClientEvent, DisconnectReason};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::time::timeout;

fn relay_kinds() -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_used_over_udp_is_refused_over_websocket() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;
    let answer = matchmake(http_address, json!({"kind": "relay", "name": "ann"})).await;
    let token = answer_token(&answer);

    let mut udp = udp_client(token.clone());
    let event = timeout(WAIT, udp.next_event())
        .await
        .expect("connects in time")
        .unwrap();
    assert!(matches!(event, ClientEvent::Connected { .. }), "{event:?}");

    let mut ws = ws_present(http_address, &token).await;
    assert_eq!(
        ws_close_code(&mut ws).await,
        4012,
        "the token already opened a UDP connection: TokenReplayed"
    );
    metrics_until(
        runtime.addresses().admin,
        "tickwire_ws_connections_refused_total{reason=\"replayed\"} 1",
    )
    .await;
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_used_over_websocket_is_refused_over_udp() {
    let mut config = test_config();
    // The refused UDP client gives up after this, instead of the default 5 s.
    config.udp.handshake_timeout_secs = 1;
    let runtime = Runtime::start(config, relay_kinds()).await.unwrap();
    let http_address = runtime.addresses().http;
    let answer = matchmake(http_address, json!({"kind": "relay", "name": "bob"})).await;
    let token = answer_token(&answer);

    let _ws = WsPlayer::new(ws_connect(http_address, &token).await);

    // A refused request gets no answer (none to an unauthenticated packet): the server
    // counts it, and the client's handshake runs out.
    let mut udp = udp_client(token);
    let event = timeout(WAIT, udp.next_event())
        .await
        .expect("the handshake ends in time")
        .unwrap();
    assert_eq!(
        event,
        ClientEvent::Disconnected {
            reason: DisconnectReason::HandshakeTimedOut
        },
        "the token already opened a WebSocket connection"
    );
    // Every request the client sent (it resends until it gives up) was dropped as a
    // replay; the shards publish their counters on their own beat, so poll for it.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let body = http(runtime.addresses().admin, "GET", "/metrics", None, None)
            .await
            .body;
        let replayed = body
            .lines()
            .find_map(|line| {
                line.strip_prefix(
                    "tickwire_udp_datagrams_dropped_total{reason=\"token_replayed\"} ",
                )
            })
            .and_then(|count| count.parse::<u64>().ok())
            .expect("the UDP drop counter is exported");
        if replayed >= 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "UDP requests with the used token were never counted as replayed:\n{body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    runtime.shut_down().await.unwrap();
}
