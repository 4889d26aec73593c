//! A shard worker on a real UDP port: players connect with tokens naming a relay room, each
//! receives every other member's messages on the channel they came on, and a stop reaches
//! them as "server shutting down".

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tickwire_net::driver::ClientDriver;
use tickwire_net::udp::BatchSocket;
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::TokenIssuer;
use tickwire_proto::{Client, ClientEvent, DisconnectReason, ServerConfig};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::shard::{RoomId, ShardConfig};
use tickwire_server::worker::{Control, SeatTicket, ShardWorker};
use tokio::time::timeout;

const PROTOCOL_ID: u64 = 0x7157_0004;

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn connect(address: SocketAddr, key: &Key, player: u64, room: RoomId) -> ClientDriver {
    let issuer = TokenIssuer {
        protocol_id: PROTOCOL_ID,
        key: key.clone(),
        server_addresses: vec![address],
        validity_seconds: 30,
        timeout_seconds: 5,
    };
    let ticket = SeatTicket {
        room,
        name: format!("player{player}"),
    };
    let token = issuer
        .issue(
            &mut rand::rng(),
            unix_now(),
            player,
            &ticket.encode().unwrap(),
        )
        .unwrap();
    let client = Client::new(
        token,
        Instant::now(),
        unix_now(),
        ReliabilityConfig::default(),
    );
    let socket = BatchSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut driver = ClientDriver::new(socket, client);
    let event = timeout(Duration::from_secs(5), driver.next_event())
        .await
        .expect("connects within 5 s")
        .unwrap();
    assert!(
        matches!(event, ClientEvent::Connected { .. }),
        "player {player}: {event:?}"
    );
    driver
}

/// The next message, driving the client meanwhile.
async fn next_message(driver: &mut ClientDriver) -> (u8, Bytes) {
    loop {
        let event = timeout(Duration::from_secs(5), driver.next_event())
            .await
            .expect("a message within 5 s")
            .unwrap();
        if let ClientEvent::Message { channel, message } = event {
            return (channel, message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_players_in_a_relay_room_hear_each_other_and_hear_the_shutdown() {
    let key = Key([0x24; 32]);
    let server_key = key.clone();
    let worker = ShardWorker::spawn(
        "127.0.0.1:0".parse().unwrap(),
        ShardConfig::default(),
        |address| ServerConfig::new(PROTOCOL_ID, server_key, vec![address]),
    )
    .unwrap();
    worker
        .send(Control::CreateRoom {
            id: RoomId(1),
            kind: "relay".into(),
            room: Box::new(RelayRoom::default()),
            capacity: 8,
        })
        .await
        .unwrap();

    let address = worker.udp_address();
    let mut alice = connect(address, &key, 1, RoomId(1)).await;
    let mut bob = connect(address, &key, 2, RoomId(1)).await;
    let mut carol = connect(address, &key, 3, RoomId(1)).await;

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
        let mut heard = vec![next_message(listener).await, next_message(listener).await];
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
        next_message(&mut alice).await,
        (0, Bytes::from_static(b"hi alice"))
    );
    assert_eq!(
        next_message(&mut carol).await,
        (0, Bytes::from_static(b"hi alice"))
    );

    // A token naming a room that does not exist is refused.
    let issuer = TokenIssuer {
        protocol_id: PROTOCOL_ID,
        key: key.clone(),
        server_addresses: vec![address],
        validity_seconds: 30,
        timeout_seconds: 5,
    };
    let ticket = SeatTicket {
        room: RoomId(99),
        name: "lost".into(),
    };
    let token = issuer
        .issue(&mut rand::rng(), unix_now(), 4, &ticket.encode().unwrap())
        .unwrap();
    let client = Client::new(
        token,
        Instant::now(),
        unix_now(),
        ReliabilityConfig::default(),
    );
    let mut lost = ClientDriver::new(
        BatchSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap(),
        client,
    );
    let mut refused = false;
    for _ in 0..3 {
        if let ClientEvent::Disconnected { reason } =
            timeout(Duration::from_secs(5), lost.next_event())
                .await
                .unwrap()
                .unwrap()
        {
            assert_eq!(reason, DisconnectReason::Kicked);
            refused = true;
            break;
        }
    }
    assert!(refused, "a player for an unknown room is disconnected");

    let report = worker.stop().await.unwrap();
    assert_eq!(report.joins_refused, 1);
    for listener in [&mut alice, &mut bob, &mut carol] {
        let reason = loop {
            match timeout(Duration::from_secs(5), listener.next_event())
                .await
                .unwrap()
                .unwrap()
            {
                ClientEvent::Disconnected { reason } => break reason,
                _ => continue,
            }
        };
        assert_eq!(reason, DisconnectReason::ServerShutdown);
    }
}
