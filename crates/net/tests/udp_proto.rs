//! The protocol over real loopback sockets: a client and a server driver handshake, then
//! exchange reliable, unreliable and fragmented messages, then disconnect cleanly.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_net::driver::{ClientDriver, ServerDriver};
use tickwire_net::udp::BatchSocket;
use tickwire_proto::crypto::Key;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::token::TokenIssuer;
use tickwire_proto::{
    Client, ClientEvent, DisconnectReason, Server, ServerConfig, ServerEvent, unix_now,
};
use tokio::time::timeout;

const PROTOCOL_ID: u64 = 0x7157_0003;
const RELIABLE: u8 = 0;
const UNRELIABLE: u8 = 1;

/// A message whose bytes depend on `seed` and position, so corruption shows.
fn pattern(len: usize, seed: u8) -> Bytes {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed)
        .collect::<Vec<_>>()
        .into()
}

#[tokio::test]
async fn client_and_server_exchange_reliable_and_unreliable_messages_over_loopback() {
    let key = Key([0x42; 32]);
    let socket = BatchSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind server");
    let server_address = socket.local_addr().unwrap();
    let config = ServerConfig::new(PROTOCOL_ID, key.clone(), vec![server_address]);
    let server = Server::new(config, Instant::now(), unix_now(), &mut rand::rng()).expect("server");
    let mut server = ServerDriver::new(socket, server);

    // The server echoes every message on the channel it came on, and reports disconnects.
    let (disconnects, mut disconnected) = tokio::sync::mpsc::unbounded_channel();
    let server_task = tokio::spawn(async move {
        loop {
            match server.next_event().await.expect("server driver") {
                ServerEvent::Message {
                    connection,
                    channel,
                    message,
                } => {
                    let now = Instant::now();
                    server
                        .endpoint_mut()
                        .send(now, connection, channel, message)
                        .expect("echo queued");
                }
                ServerEvent::Disconnected { reason, .. } => {
                    let _ = disconnects.send(reason);
                }
                ServerEvent::Connected { .. } => {}
            }
        }
    });

    let issuer = TokenIssuer {
        protocol_id: PROTOCOL_ID,
        key,
        server_addresses: vec![server_address],
        validity_seconds: 30,
        timeout_seconds: 5,
    };
    let token = issuer
        .issue(&mut rand::rng(), unix_now(), 7, b"player:7")
        .expect("token");
    let client = Client::new(
        token,
        Instant::now(),
        unix_now(),
        ReliabilityConfig::default(),
    );
    let socket = BatchSocket::bind("127.0.0.1:0".parse().unwrap()).expect("bind client");
    let mut client = ClientDriver::new(socket, client);

    let connected = timeout(Duration::from_secs(5), client.next_event())
        .await
        .expect("handshake within 5 s")
        .expect("client driver");
    assert!(
        matches!(connected, ClientEvent::Connected { .. }),
        "got {connected:?}"
    );

    let big = pattern(100 * 1024, 3);
    for i in 0..200u32 {
        let endpoint = client.endpoint_mut();
        endpoint
            .send(RELIABLE, Bytes::from(i.to_le_bytes().to_vec()))
            .unwrap();
        endpoint
            .send(UNRELIABLE, Bytes::from((i + 1000).to_le_bytes().to_vec()))
            .unwrap();
        if i == 50 {
            endpoint.send(RELIABLE, big.clone()).unwrap();
        }
    }

    let mut reliable = Vec::new();
    let mut unreliable = Vec::new();
    let mut big_echo = None;
    let collected = timeout(Duration::from_secs(10), async {
        // Unreliable echoes queue behind the reliable backlog, so wait for all three.
        while reliable.len() < 200 || big_echo.is_none() || unreliable.len() < 200 {
            match client.next_event().await.expect("client driver") {
                ClientEvent::Message {
                    channel: RELIABLE,
                    message,
                } if message.len() == 4 => {
                    reliable.push(u32::from_le_bytes(message[..].try_into().unwrap()));
                }
                ClientEvent::Message {
                    channel: RELIABLE,
                    message,
                } => big_echo = Some(message),
                ClientEvent::Message {
                    channel: UNRELIABLE,
                    message,
                } => {
                    unreliable.push(u32::from_le_bytes(message[..].try_into().unwrap()));
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
    })
    .await;
    assert!(
        collected.is_ok(),
        "echoes within 10 s: {} reliable, {} unreliable, big {}",
        reliable.len(),
        unreliable.len(),
        big_echo.is_some()
    );
    assert_eq!(
        reliable,
        (0..200).collect::<Vec<_>>(),
        "reliable echoes arrive once, in order"
    );
    assert_eq!(
        big_echo,
        Some(big),
        "the 100 KiB message survives fragmentation both ways"
    );
    unreliable.sort_unstable();
    assert_eq!(
        unreliable,
        (1000..1200).collect::<Vec<_>>(),
        "every unreliable message came back once (loopback loses nothing here)"
    );

    client.endpoint_mut().disconnect(Instant::now());
    client.flush().await.expect("farewell sent");
    let reason = timeout(Duration::from_secs(5), disconnected.recv())
        .await
        .expect("server notices within 5 s");
    assert_eq!(reason, Some(DisconnectReason::Requested));
    server_task.abort();
}
