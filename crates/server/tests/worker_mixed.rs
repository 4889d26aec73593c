//! UDP and WebSocket players share one room: two of each join a relay room on one shard
//! worker, and every player receives every other member's messages on the channel they were
//! sent on; the room never learns who uses which transport.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::serve::{WsClient, ws_next};
use common::{PROTOCOL_ID, RELAY, WAIT, relay_worker, token, udp_next, udp_player};
use futures_util::{SinkExt, StreamExt};
use tickwire_net::ws::{HttpListener, ListenConfig, WsConfig, WsEndpoint};
use tickwire_proto::admission::{Admission, UsedTokens};
use tickwire_proto::crypto::Key;
use tickwire_proto::login::{ServerNonce, login_for_token};
use tickwire_server::worker::Control;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message;

async fn ws_player(key: &Key, udp_address: SocketAddr, http: SocketAddr, player: u64) -> WsClient {
    let stream = TcpStream::connect(http).await.unwrap();
    let (mut client, _) = timeout(
        WAIT,
        tokio_tungstenite::client_async(format!("ws://{http}/ws"), stream),
    )
    .await
    .expect("upgrade in time")
    .expect("upgrade");
    let bytes = token(key, udp_address, player, RELAY).to_bytes().unwrap();
    let nonce = ServerNonce::read(&ws_next(&mut client).await).expect("the challenge");
    let login = login_for_token(&bytes[..], &nonce).unwrap();
    client.send(Message::Binary(login.into())).await.unwrap();
    // The accepted message, then the player is seated.
    assert!(!ws_next(&mut client).await.is_empty());
    client
}

/// The next WebSocket message that is not a roll call, split into channel and payload.
async fn ws_heard(client: &mut WsClient) -> (u8, Bytes) {
    loop {
        let bytes = ws_next(client).await;
        if &bytes[1..] != b"roll call" {
            return (bytes[0], bytes.slice(1..));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_udp_and_two_websocket_players_share_a_relay_room() {
    let key = Key([0x51; 32]);
    let worker = relay_worker(&key).await;
    let udp_address = worker.udp_address();

    // The HTTP side: /ws accepts tokens naming the worker's address and hands connections over.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http = listener.local_addr().unwrap();
    let admission = Admission::new(PROTOCOL_ID, &key, vec![udp_address], UsedTokens::new(1024));
    let (handoff, mut connections) = tokio::sync::mpsc::channel(16);
    let endpoint = WsEndpoint::new(WsConfig::default(), admission, handoff).unwrap();
    let router = endpoint.router();
    tokio::spawn(
        HttpListener::from_listener(listener, None, ListenConfig::default())
            .serve(router, std::future::pending()),
    );
    let control = worker.control();
    tokio::spawn(async move {
        while let Some(connection) = connections.recv().await {
            if control.send(Control::Attach(connection)).await.is_err() {
                return;
            }
        }
    });

    let mut udp_one = udp_player(&key, udp_address, 1, RELAY).await;
    let mut udp_two = udp_player(&key, udp_address, 2, RELAY).await;
    let mut ws_three = ws_player(&key, udp_address, http, 3).await;
    let mut ws_four = ws_player(&key, udp_address, http, 4).await;

    // A WebSocket player is accepted by the HTTP side before the worker seats them, and a
    // relay does not replay what was said before someone sat down. So first a roll call:
    // player 1 speaks until both WebSocket players have heard it, proving they are seated.
    for attempt in 0u32.. {
        assert!(attempt < 100, "websocket players were never seated");
        udp_one
            .endpoint_mut()
            .send(1, Bytes::from_static(b"roll call"))
            .unwrap();
        udp_one.flush().await.unwrap();
        let three = timeout(Duration::from_millis(50), ws_next(&mut ws_three))
            .await
            .is_ok();
        let four = timeout(Duration::from_millis(50), ws_next(&mut ws_four))
            .await
            .is_ok();
        if three && four {
            break;
        }
    }
    // Unreliable roll calls may still be in flight; the rest of the test uses other channels
    // and skips them.

    // Every player says something on a channel of their own; the others hear it there.
    udp_one
        .endpoint_mut()
        .send(0, Bytes::from_static(b"from 1"))
        .unwrap();
    udp_one.flush().await.unwrap();
    udp_two
        .endpoint_mut()
        .send(2, Bytes::from_static(b"from 2"))
        .unwrap();
    udp_two.flush().await.unwrap();
    ws_three
        .send(Message::Binary(b"\x00from 3".to_vec().into()))
        .await
        .unwrap();
    ws_four
        .send(Message::Binary(b"\x00from 4".to_vec().into()))
        .await
        .unwrap();

    let expected = |me: u8| -> Vec<(u8, Bytes)> {
        let mut all = vec![
            (0, Bytes::from_static(b"from 1")),
            (2, Bytes::from_static(b"from 2")),
            (0, Bytes::from_static(b"from 3")),
            (0, Bytes::from_static(b"from 4")),
        ];
        all.remove(usize::from(me - 1));
        all.sort();
        all
    };
    for (me, driver) in [(1u8, &mut udp_one), (2, &mut udp_two)] {
        let mut heard = vec![
            udp_next(driver).await,
            udp_next(driver).await,
            udp_next(driver).await,
        ];
        heard.sort();
        assert_eq!(heard, expected(me), "udp player {me}");
    }
    for (me, client) in [(3u8, &mut ws_three), (4, &mut ws_four)] {
        let mut heard = vec![
            ws_heard(client).await,
            ws_heard(client).await,
            ws_heard(client).await,
        ];
        heard.sort();
        assert_eq!(heard, expected(me), "websocket player {me}");
    }

    let report = worker.stop().await.unwrap();
    assert_eq!(report.ws_attached, 2);
    assert_eq!(report.joins_refused, 0);
    for client in [&mut ws_three, &mut ws_four] {
        let close = async {
            loop {
                match client.next().await {
                    Some(Ok(Message::Close(Some(frame)))) => return u16::from(frame.code),
                    Some(Ok(_)) => continue,
                    other => panic!("connection ended without a close frame: {other:?}"),
                }
            }
        };
        let code = timeout(WAIT, close).await.expect("a close frame in time");
        assert_eq!(
            code, 4003,
            "websocket players hear that the server is shutting down"
        );
    }
}
