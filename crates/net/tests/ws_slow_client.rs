//! A client that stops reading never slows the others: its sequenced state is replaced
//! rather than queued, its reliable overflow closes it with the slow-client code, and
//! another client's messages keep arriving on time throughout. The overflow is caught on
//! the message that passes the bound, blocked socket or not, and its close discards the
//! backlog: the client gets at most the message in flight, then 4005.

mod ws_support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_net::ws::{CloseCode, ListenConfig, OutboxLimits, WsClosed, WsConfig, WsSendError};
use tickwire_proto::ConnectionParams;
use tickwire_proto::websocket::{opcode, write_frame};
use tokio::io::AsyncReadExt;
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

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_with_4005_at_once_and_its_backlog_discarded() {
    stopped_readers_are_closed_with_4005(false).await;
}

#[tokio::test]
async fn a_wss_client_that_stops_reading_is_closed_with_4005_at_once_and_its_backlog_discarded() {
    stopped_readers_are_closed_with_4005(true).await;
}

/// Ten of the largest reliable messages, sent within one turn, to a client that stopped
/// reading (4 KiB receive buffer), on a connection that has either written nothing yet or
/// has the first message half written and its socket full. Every time: the message past the
/// default 1 MiB bound is refused, everything queued behind the frame in flight is
/// discarded, the client reads that one frame (if any) and then 4005, and the connection
/// never holds more than the bound and one message.
async fn stopped_readers_are_closed_with_4005(tls: bool) {
    let mut server = TestServer::start(Options {
        // Small server send buffers, so the kernel (and the TLS session's 64 KiB) holds a
        // fraction of one message.
        listen: ListenConfig {
            tcp_send_buffer: Some(16 << 10),
            ..ListenConfig::default()
        },
        tls,
        ..Options::default()
    })
    .await;
    let bound = OutboxLimits::default().max_reliable_bytes;
    let largest = server.params.max_message_size as usize;
    let message = Bytes::from(vec![0xa5; largest]);
    let mut framed = Vec::new();
    write_frame(&mut framed, opcode::BINARY, &[0], &message);
    let framed = framed.len();
    // Nothing but the frame in flight and the close frame (at most 4 + 123 bytes).
    let after_close = framed + 2 + 4 + 123;

    for trial in 0..6u64 {
        // Odd trials write the first message before sending the rest: a frame is then in
        // flight and the connection blocked; even ones send all ten before any write.
        let in_flight = usize::from(trial % 2 == 1);
        let (mut client, mut side) = server.connect_with(100 + trial, Some(4 << 10)).await;
        let discarded_before = server.endpoint.stats().discarded_bytes;
        let (results, in_flight_left, closed_depth) = side.sender().with_links(|links, link| {
            let mut results = Vec::new();
            let mut in_flight_left = 0;
            for i in 0..10 {
                results.push(links.send(link, 0, message.clone()));
                if i == 0 && in_flight == 1 {
                    links.flush();
                    let depth = links.depth(link).unwrap();
                    assert!(
                        depth.unwritten_bytes > 0 && depth.unwritten_bytes < framed,
                        "trial {trial}: the first message is not half written: {depth:?}"
                    );
                    in_flight_left = depth.unwritten_bytes;
                }
                let Some(depth) = links.depth(link) else {
                    panic!("trial {trial}: the connection was dropped instead of closed");
                };
                assert!(
                    depth.unwritten_bytes <= bound.max(after_close),
                    "trial {trial}: {} bytes queued after message {i}, past the bound of {bound}",
                    depth.unwritten_bytes
                );
                assert!(
                    depth.buffer_capacity <= 2 * (bound + framed),
                    "trial {trial}: the write buffer holds {} bytes after message {i}",
                    depth.buffer_capacity
                );
            }
            (results, in_flight_left, links.depth(link).unwrap())
        });

        // The message past the bound is refused, and every send after it.
        let accepted = results.iter().take_while(|result| result.is_ok()).count();
        let Some(Err(WsSendError::SlowClient { queued, len, max })) = results.get(accepted) else {
            panic!("trial {trial}: ten messages past a bound of {bound} were all queued");
        };
        assert_eq!(
            *queued,
            in_flight_left + (accepted - in_flight) * framed,
            "trial {trial}: the refusal counted another queue than the one written"
        );
        assert!(
            *max == bound && queued + len > bound && queued - framed + len <= bound,
            "trial {trial}: refused with {queued} + {len} queued against a bound of {max}, \
             not on the first message past it"
        );
        assert!(
            results[accepted + 1..]
                .iter()
                .all(|result| *result == Err(WsSendError::Closed)),
            "trial {trial}: sends after the overflow: {results:?}"
        );

        // What was queued behind the frame in flight is gone, and its memory with it.
        let discarded = server.endpoint.stats().discarded_bytes - discarded_before;
        assert_eq!(
            discarded as usize,
            (accepted - in_flight) * framed,
            "trial {trial}: the backlog was not discarded"
        );
        assert!(
            closed_depth.unwritten_bytes <= after_close
                && closed_depth.buffer_capacity <= after_close.max(16 << 10),
            "trial {trial}: the closing connection still holds {closed_depth:?}"
        );

        // The client reads again: the frame in flight, if any, then the close.
        let (code, reason, data) = expect_close(&mut client).await;
        assert_eq!(
            code,
            CloseCode::SlowClient.code(),
            "trial {trial}: closed with {code} ({reason}) instead of 4005"
        );
        assert_eq!(
            data, in_flight,
            "trial {trial}: {data} messages arrived before the close, {in_flight} in flight"
        );
        let closed = tokio::time::timeout(EVENT_TIMEOUT, side.recv())
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
            "trial {trial}: the shard was told {closed:?}"
        );
    }
    assert_eq!(server.endpoint.stats().closed_slow_client, 6);
}

/// A client that reads exactly as fast as the room sends, but from behind a backlog it never
/// catches up on: the write buffer never empties, yet what it has already written is given
/// back, so the connection's memory stays near its backlog however much passes through.
#[tokio::test]
async fn a_client_reading_behind_a_backlog_it_never_clears_holds_bounded_memory() {
    let mut server = TestServer::start(Options {
        listen: ListenConfig {
            tcp_send_buffer: Some(16 << 10),
            ..ListenConfig::default()
        },
        ..Options::default()
    })
    .await;
    let (mut client, side) = server.connect_with(1, Some(4 << 10)).await;
    let sender = side.sender();
    let message = Bytes::from(vec![0x3c; 64 << 10]);
    let mut framed = Vec::new();
    write_frame(&mut framed, opcode::BINARY, &[0], &message);
    let framed = framed.len();
    let backlog = 8 * framed;
    sender.with_links(|links, link| {
        for _ in 0..8 {
            links.send(link, 0, message.clone()).unwrap();
        }
        links.flush();
    });

    // Raw bytes off the socket, one message's worth per message sent (the WebSocket parser
    // on the client is not needed to count them).
    let mut read = vec![0; framed];
    let mut peak = 0;
    for i in 0..64 {
        let depth = sender.with_links(|links, link| {
            links.send(link, 0, message.clone()).unwrap();
            links.flush();
            links.depth(link).unwrap()
        });
        assert!(
            depth.unwritten_bytes > 0,
            "message {i}: the backlog drained, so this shows nothing: {depth:?}"
        );
        peak = peak.max(depth.buffer_capacity);
        assert!(
            depth.buffer_capacity <= 4 * backlog,
            "message {i}: the write buffer holds {} bytes for a backlog of at most {}",
            depth.buffer_capacity,
            backlog + framed
        );
        tokio::time::timeout(EVENT_TIMEOUT, client.get_mut().read_exact(&mut read))
            .await
            .expect("the server stopped writing")
            .unwrap();
    }
    assert!(!sender.is_closing(), "a client keeping pace was closed");
    println!(
        "{} bytes through, write buffer peak {peak} bytes",
        64 * framed
    );
}
