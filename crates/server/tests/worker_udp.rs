//! A shard worker on a real UDP port: players connect with tokens naming a relay room, each
//! receives every other member's messages on the channel they came on, a refusal comes with
//! its words, and a stop reaches them as "server shutting down" and drops the worker's
//! running flag.

mod common;

use bytes::Bytes;
use common::{RELAY, relay_worker, token, udp_client, udp_disconnect_reason, udp_next, udp_player};
use tickwire_proto::DisconnectReason;
use tickwire_proto::crypto::Key;
use tickwire_server::shard::RoomId;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_players_in_a_relay_room_hear_each_other_and_hear_the_shutdown() {
    let key = Key([0x24; 32]);
    let worker = relay_worker(&key).await;
    let address = worker.udp_address();
    let mut alice = udp_player(&key, address, 1, RELAY).await;
    let mut bob = udp_player(&key, address, 2, RELAY).await;
    let mut carol = udp_player(&key, address, 3, RELAY).await;

    alice
        .endpoint_mut()
        .send(0, Bytes::from_static(b"reliable hello"))
        .unwrap();
    alice
        .endpoint_mut()
        .send(1, Bytes::from_static(b"unreliable hello"))
        .unwrap();
    alice.flush().await.unwrap();
    for listener in [&mut bob, &mut carol] {
        let mut heard = vec![udp_next(listener).await, udp_next(listener).await];
        heard.sort();
        assert_eq!(
            heard,
            [
                (0, Bytes::from_static(b"reliable hello")),
                (1, Bytes::from_static(b"unreliable hello"))
            ],
            "each message on the channel it was sent on"
        );
    }
    bob.endpoint_mut()
        .send(0, Bytes::from_static(b"hi alice"))
        .unwrap();
    bob.flush().await.unwrap();
    assert_eq!(
        udp_next(&mut alice).await,
        (0, Bytes::from_static(b"hi alice"))
    );
    assert_eq!(
        udp_next(&mut carol).await,
        (0, Bytes::from_static(b"hi alice"))
    );

    // A token naming a room that does not exist is refused.
    let mut lost = udp_client(token(&key, address, 4, RoomId(99)));
    assert_eq!(
        udp_disconnect_reason(&mut lost).await,
        DisconnectReason::Kicked
    );
    assert_eq!(
        lost.endpoint().disconnect_text(),
        "no seat for this player",
        "the words come with the code"
    );

    // Readiness watches this flag: it drops when the worker's thread ends.
    let running = worker.running();
    assert!(running.get());
    let report = worker.stop().await.unwrap();
    assert!(!running.get(), "a stopped worker says so");
    assert_eq!(report.joins_refused, 1);
    for listener in [&mut alice, &mut bob, &mut carol] {
        assert_eq!(
            udp_disconnect_reason(listener).await,
            DisconnectReason::ServerShutdown
        );
    }
}
