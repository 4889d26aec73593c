//! A client that stops reading never slows the others: its sequenced state is replaced
//! rather than queued, its reliable overflow closes it with the slow-client code, and
//! another client's messages keep arriving on time throughout.

mod ws_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_net::ws::{CloseCode, ListenConfig, OutboxLimits, WsClosed, WsConfig, WsSendError};
use tickwire_proto::ConnectionParams;
use ws_support::{EVENT_TIMEOUT, Options, TestServer, expect_close, next_binary};

const TICK: Duration = Duration::from_millis(5);
const RELIABLE_BOUND: usize = 128 << 10;

#[tokio::test]
async fn a_client_that_stops_reading_is_replaced_then_dropped_without_delaying_others() {
    let mut server = TestServer::start(Options {
        ws: WsConfig {
            params: ConnectionParams {
                max_message_size: 16 << 10,
                ..ConnectionParams::default()
            },
            outbox: OutboxLimits {
                max_reliable_bytes: RELIABLE_BOUND,
                ..OutboxLimits::default()
            },
            ..WsConfig::default()
        },
        // Small socket buffers on both ends, so a client that stops reading backs up into
        // the outbox after a few hundred kilobytes rather than megabytes.
        listen: ListenConfig {
            tcp_send_buffer: Some(16 << 10),
            ..ListenConfig::default()
        },
        ..Options::default()
    })
    .await;
    let (mut slow, mut slow_side) = server.connect_with(1, Some(16 << 10)).await;
    let (mut normal, normal_side) = server.connect(2).await;
    let slow_sender = slow_side.sender();
    let normal_sender = normal_side.sender();

    // The normal client reads everything and notes when each message arrived.
    let normal_reader = tokio::spawn(async move {
        let mut arrivals = Vec::new();
        loop {
            let message = next_binary(&mut normal).await;
            let index = u32::from_le_bytes(message[1..5].try_into().unwrap());
            arrivals.push((index, Instant::now()));
            if index == u32::MAX {
                return arrivals;
            }
        }
    });
    let mut sent_at = Vec::new();
    let send_normal = |sent_at: &mut Vec<Instant>| {
        let index = sent_at.len() as u32;
        let mut payload = index.to_le_bytes().to_vec();
        payload.resize(100, 0);
        sent_at.push(Instant::now());
        normal_sender.send(0, payload.into()).unwrap();
    };

    let snapshot = Bytes::from(vec![0x5a; 8 << 10]);
    let chunk = Bytes::from(vec![0xc3; 8 << 10]);
    let mut tick = tokio::time::interval(TICK);
    let stall_started = Instant::now();

    // Phase 1: a snapshot every tick on the sequenced channel. Once the slow client's socket
    // is full, each new snapshot replaces the unsent one: the outbox holds at most one.
    for _ in 0..1000 {
        tick.tick().await;
        send_normal(&mut sent_at);
        slow_sender.send(2, snapshot.clone()).unwrap();
        let depth = slow_sender.depth();
        assert!(
            depth.sequenced_pending <= 1,
            "sequenced state queued: {depth:?}"
        );
        // Unwritten: what was framed before the socket stopped taking bytes (the tail of one
        // snapshot, or two framed within one flush), never a growing queue of them.
        assert!(
            depth.unwritten_bytes <= 2 * (snapshot.len() + 5),
            "snapshots queued: {depth:?}"
        );
        if server.endpoint.stats().sequenced_replaced >= 100 {
            break;
        }
    }
    let replaced = server.endpoint.stats().sequenced_replaced;
    assert!(
        replaced >= 100,
        "only {replaced} snapshots replaced: the client never backed up"
    );

    // Phase 2: reliable data piles up to the bound, and the send past it closes the client.
    let mut overflowed = None;
    for _ in 0..1000 {
        tick.tick().await;
        send_normal(&mut sent_at);
        match slow_sender.send(0, chunk.clone()) {
            Ok(()) => assert!(slow_sender.depth().unwritten_bytes <= RELIABLE_BOUND),
            Err(error) => {
                overflowed = Some(error);
                break;
            }
        }
    }
    assert!(
        matches!(
            overflowed,
            Some(WsSendError::SlowClient {
                max: RELIABLE_BOUND,
                ..
            })
        ),
        "reliable overflow did not close the client: {overflowed:?}"
    );
    assert!(slow_sender.is_closing());
    assert_eq!(slow_sender.send(0, chunk.clone()), Err(WsSendError::Closed));

    // The others carry on for a few more ticks.
    for _ in 0..20 {
        tick.tick().await;
        send_normal(&mut sent_at);
    }
    let stall = stall_started.elapsed();
    let mut last = u32::MAX.to_le_bytes().to_vec();
    last.resize(5, 0);
    normal_sender.send(0, last.into()).unwrap();

    // The slow client reads again: what was in flight, then the close with its code.
    let (code, reason, data) = expect_close(&mut slow).await;
    assert_eq!(code, CloseCode::SlowClient.code(), "{reason}");
    let closed = tokio::time::timeout(EVENT_TIMEOUT, slow_side.recv())
        .await
        .unwrap();
    assert!(
        matches!(
            closed,
            Err(WsClosed::ByServer {
                code: CloseCode::SlowClient,
                ..
            })
        ),
        "{closed:?}"
    );

    let arrivals = tokio::time::timeout(EVENT_TIMEOUT, normal_reader)
        .await
        .expect("the normal client did not get every message")
        .unwrap();
    assert_eq!(
        arrivals.len(),
        sent_at.len() + 1,
        "every message arrived once"
    );
    let worst = arrivals
        .iter()
        .filter(|(index, _)| *index != u32::MAX)
        .map(|(index, at)| at.duration_since(sent_at[*index as usize]))
        .max()
        .unwrap();
    println!(
        "stall {stall:?}: {replaced} snapshots replaced, {data} messages in flight to the slow \
         client; normal client's worst latency {worst:?} over {} messages",
        sent_at.len()
    );
    // Had the slow client held up the others, their latency would be the whole stall.
    assert!(
        stall >= Duration::from_millis(500),
        "stall of {stall:?} too short to show anything"
    );
    assert!(
        worst < Duration::from_millis(250),
        "the normal client waited up to {worst:?} while another client stalled for {stall:?}"
    );
    let stats = server.endpoint.stats();
    assert_eq!(stats.closed_slow_client, 1);
    assert_eq!(stats.connections_accepted, 2);
}
