//! What the shard worker tests share: tokens with seat tickets, a worker hosting one relay
//! room, and UDP players.

#![allow(dead_code, unreachable_pub)]

pub mod raw_ws;
pub mod serve;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_net::driver::ClientDriver;
use tickwire_net::udp::BatchSocket;
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::{ConnectToken, TokenIssuer};
pub use tickwire_proto::unix_now;
use tickwire_proto::{Client, ClientEvent, ServerConfig};
use tickwire_server::rooms::relay::RelayRoom;
use tickwire_server::shard::{RoomId, ShardConfig};
use tickwire_server::worker::{Control, SeatTicket, ShardWorker};
use tokio::time::timeout;

pub const PROTOCOL_ID: u64 = 0x7157_0004;
/// The relay room every test's worker hosts.
pub const RELAY: RoomId = RoomId(1);
/// The longest any single step may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(5);

/// A worker on a loopback port of its choosing, hosting the relay room [`RELAY`].
pub async fn relay_worker(key: &Key) -> ShardWorker {
    let server_key = key.clone();
    let worker = ShardWorker::spawn(
        "127.0.0.1:0".parse().unwrap(),
        ShardConfig::default(),
        |address| ServerConfig::new(PROTOCOL_ID, server_key, vec![address]),
    )
    .unwrap();
    // Waited for: a player whose handshake completes before the shard has the room is
    // refused ("no such room"), which a loaded machine once showed.
    let (created, confirmed) = tokio::sync::oneshot::channel();
    worker
        .send(Control::CreateRoom {
            id: RELAY,
            kind: "relay".into(),
            room: Box::new(RelayRoom::default()),
            capacity: 8,
            options: Default::default(),
            created: Some(created),
        })
        .await
        .unwrap();
    confirmed.await.unwrap().expect("the relay room is created");
    worker
}

/// A token for `player`, seated in `room`, valid at `address`.
pub fn token(key: &Key, address: SocketAddr, player: u64, room: RoomId) -> ConnectToken {
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
    issuer
        .issue(
            &mut rand::rng(),
            unix_now(),
            player,
            &ticket.encode().unwrap(),
        )
        .unwrap()
}

/// A UDP client holding `token`, not yet connected.
pub fn udp_client(token: ConnectToken) -> ClientDriver {
    let client = Client::new(
        token,
        Instant::now(),
        unix_now(),
        ReliabilityConfig::default(),
    );
    ClientDriver::new(
        BatchSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap(),
        client,
    )
}

/// A UDP player connected to the worker at `address`, seated in `room`.
pub async fn udp_player(key: &Key, address: SocketAddr, player: u64, room: RoomId) -> ClientDriver {
    let mut driver = udp_client(token(key, address, player, room));
    let event = timeout(WAIT, driver.next_event())
        .await
        .expect("connects in time")
        .unwrap();
    assert!(
        matches!(event, ClientEvent::Connected { .. }),
        "player {player}: {event:?}"
    );
    driver
}

/// The next message a UDP player receives, skipping roll calls (see `worker_mixed`).
pub async fn udp_next(driver: &mut ClientDriver) -> (u8, Bytes) {
    loop {
        match timeout(WAIT, driver.next_event())
            .await
            .expect("a message in time")
            .unwrap()
        {
            ClientEvent::Message { message, .. } if message.as_ref() == b"roll call" => continue,
            ClientEvent::Message { channel, message } => return (channel, message),
            ClientEvent::Connected { .. } => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Drives a UDP player until it is disconnected; the reason.
pub async fn udp_disconnect_reason(driver: &mut ClientDriver) -> tickwire_proto::DisconnectReason {
    loop {
        if let ClientEvent::Disconnected { reason } = timeout(WAIT, driver.next_event())
            .await
            .expect("a disconnect in time")
            .unwrap()
        {
            return reason;
        }
    }
}
