//! Nothing is dropped without a count: a UDP datagram over the 2048-byte receive slot, and
//! an unreliable message too large for a UDP recipient's packets, each move a named metric.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::serve::{WsPlayer, answer_token, matchmake, metrics_until, test_config, ws_connect};
use common::{WAIT, udp_client};
use serde_json::json;
use tickwire_proto::ClientEvent;
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;

fn relay_kinds() -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_datagram_over_the_receive_slot_is_counted_as_too_large() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket
        .send_to(&[0u8; 2049], runtime.addresses().udp[0])
        .await
        .unwrap();
    metrics_until(
        runtime.addresses().admin,
        "tickwire_udp_datagrams_dropped_total{reason=\"too_large\"} 1",
    )
    .await;
    runtime.shut_down().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreliable_message_too_large_for_a_udp_player_is_counted() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http = runtime.addresses().http;
    let udp_answer = matchmake(http, json!({"kind": "relay", "name": "udp"})).await;
    let ws_answer = matchmake(http, json!({"kind": "relay", "name": "ws"})).await;
    let mut udp = udp_client(answer_token(&udp_answer));
    let event = timeout(WAIT, udp.next_event()).await.unwrap().unwrap();
    assert!(matches!(event, ClientEvent::Connected { .. }), "{event:?}");
    let mut ws = WsPlayer::new(ws_connect(http, &answer_token(&ws_answer)).await);

    // Both seated: the WebSocket player hears the UDP player.
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "the players never met");
        udp.endpoint_mut()
            .send(1, Bytes::from_static(b"here"))
            .unwrap();
        udp.flush().await.unwrap();
        if timeout(Duration::from_millis(50), ws.next()).await.is_ok() {
            break;
        }
    }
    // 2000 bytes on the unreliable channel: the relay passes it on, and no UDP packet
    // (MTU 1200) can carry it.
    let mut big = vec![1u8];
    big.extend_from_slice(&[7u8; 2000]);
    ws.send(Message::Binary(big.into())).await;
    metrics_until(
        runtime.addresses().admin,
        "tickwire_messages_too_large_total{transport=\"udp\"} 1",
    )
    .await;
    runtime.shut_down().await.unwrap();
}
