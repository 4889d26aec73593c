//! Shutdown by the book: every client gets the shutdown close (4003), whatever state its
//! connection is in when the server stops: a WebSocket upgraded with no token yet, one
//! partway through its token, one seated; a WebTransport session with no control stream
//! yet, one partway through its token, one seated; and a seated UDP player gets reason 3.
//! The shutdown does not wait for their handshake timeouts to do it. (A UDP client in its
//! handshake has no state on the server to be told from: the handshake is stateless.)

mod common;

use std::time::{Duration, Instant};

use common::raw_ws::{RawWs, client_frame};
use common::serve::{answer_token, matchmake, test_config};
use common::{WAIT, udp_client, udp_disconnect_reason};
use serde_json::{Value, json};
use tickwire_net::ws::CloseCode;
use tickwire_net::wt::{WtClientError, WtRawSession, parse_cert_sha256};
use tickwire_proto::{ClientEvent, DisconnectReason};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::runtime::{RoomKinds, Runtime};
use tokio::time::timeout;

const SHUTDOWN: u16 = 4003;

fn relay_kinds() -> RoomKinds {
    let mut kinds = RoomKinds::new();
    kinds.register("relay", 16, || Box::new(RelayRoom::default()));
    kinds
}

fn token(answer: &Value) -> Vec<u8> {
    answer_token(answer).to_bytes().unwrap().to_vec()
}

async fn wt_open(answer: &Value) -> WtRawSession {
    let wt = &answer["endpoints"]["wt"];
    let hash = parse_cert_sha256(wt["cert_sha256"].as_str().unwrap()).unwrap();
    timeout(
        WAIT,
        WtRawSession::open(wt["url"].as_str().unwrap(), Some(hash)),
    )
    .await
    .expect("a session in time")
    .expect("a session")
}

/// The code a WebTransport session was closed with: its CLOSE frame's, or the QUIC
/// connection's application close (a session with no control stream has no frame).
async fn wt_close_code(session: &mut WtRawSession) -> u16 {
    let mut ended = timeout(WAIT, session.recv_frame(4096))
        .await
        .expect("closed in time");
    if matches!(&ended, Ok(challenge) if challenge.len() == 32) {
        // The challenge comes first on a control stream the server has seen.
        ended = timeout(WAIT, session.recv_frame(4096))
            .await
            .expect("closed in time");
    }
    match ended {
        Err(WtClientError::Closed { code, .. }) => code,
        other => {
            let closed = timeout(WAIT, session.connection.closed())
                .await
                .expect("the connection closed in time");
            match closed {
                wtransport::error::ConnectionError::ApplicationClosed(close) => {
                    u16::try_from(close.code().into_inner()).unwrap_or(0)
                }
                error => panic!("not an application close: {error:?} (after {other:?})"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_websocket_and_webtransport_connection_state_gets_the_shutdown_close() {
    let runtime = Runtime::start(test_config(), relay_kinds()).await.unwrap();
    let http = runtime.addresses().http;
    let answers: Vec<Value> = {
        let mut answers = Vec::new();
        for name in ["a", "b", "c", "d", "e", "f", "g"] {
            answers.push(matchmake(http, json!({"kind": "relay", "name": name})).await);
        }
        answers
    };

    // WebSocket: upgraded with no token; partway through its token; seated.
    let mut ws_no_token = RawWs::upgrade(http).await;
    let mut ws_part_token = RawWs::upgrade(http).await;
    let frame = client_frame(0x82, &token(&answers[0]), true);
    ws_part_token.send(&frame[..100]).await;
    let mut ws_seated = RawWs::connect(http, &token(&answers[1])).await;

    // WebTransport: a session whose control stream the server has not seen; one partway
    // through its token; seated.
    let mut wt_no_stream = wt_open(&answers[2]).await;
    let mut wt_part_token = wt_open(&answers[3]).await;
    wt_part_token.send.write_all(&[0x08]).await.unwrap();
    let mut wt_seated = timeout(
        WAIT,
        wt_open(&answers[4]).await.handshake(&token(&answers[4])),
    )
    .await
    .expect("accepted in time")
    .expect("accepted");
    // UDP: seated.
    let mut udp = udp_client(answer_token(&answers[5]));
    let event = timeout(WAIT, udp.next_event()).await.unwrap().unwrap();
    assert!(matches!(event, ClientEvent::Connected { .. }), "{event:?}");
    // Let the server see the partial token and the no-stream session's handshake finish.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let shutdown = tokio::spawn(runtime.shut_down());

    let (no_token, part_token, seated) = tokio::join!(
        ws_no_token.close_code_then_dropped_answering(true),
        ws_part_token.close_code_then_dropped_answering(true),
        ws_seated.close_code_then_dropped_answering(true),
    );
    assert_eq!(no_token, SHUTDOWN, "ws upgraded, no token yet");
    assert_eq!(part_token, SHUTDOWN, "ws partway through its token");
    assert_eq!(seated, SHUTDOWN, "ws seated");

    let (no_stream, part_token) = tokio::join!(
        wt_close_code(&mut wt_no_stream),
        wt_close_code(&mut wt_part_token),
    );
    assert_eq!(no_stream, SHUTDOWN, "wt session, no control stream yet");
    assert_eq!(part_token, SHUTDOWN, "wt partway through its token");
    let seated = loop {
        match timeout(WAIT, wt_seated.recv())
            .await
            .expect("a close in time")
        {
            Ok(_) => continue,
            Err(error) => break error,
        }
    };
    assert!(
        matches!(seated, WtClientError::Closed { code, .. } if code == CloseCode::ServerShutdown.code()),
        "wt seated: {seated:?}"
    );

    assert_eq!(
        udp_disconnect_reason(&mut udp).await,
        DisconnectReason::ServerShutdown,
        "udp seated"
    );

    timeout(WAIT, shutdown)
        .await
        .expect("the shutdown finished in time")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "the shutdown took {took:?}: it waited for a handshake timeout"
    );
}
