//! A connection's outbound queues, shared by the shard (which fills them through a
//! [`WtSender`] and must never wait) and the connection's writer task (which drains them into
//! the socket at whatever pace the client reads).
//!
//! Per channel kind:
//!
//! - **Reliable**: a FIFO bounded in bytes. A message that would pass the bound closes the
//!   connection with [`CloseCode::SlowClient`]: the client is not keeping up, and a reliable
//!   stream cannot skip.
//! - **UnreliableSequenced**: one slot per channel. A newer message replaces an unsent older
//!   one (latest wins: a stale snapshot is worth nothing once a newer one exists).
//! - **Unreliable**: a FIFO bounded in count and bytes; when full the oldest is dropped.
//!
//! So a client that stops reading costs at most the reliable bound, the unreliable bound and
//! one message per sequenced channel, plus what the writer holds in hand (one drained batch)
//! and the socket's buffers.
//!
//! The state sits behind a `std::sync::Mutex` per connection. It is acceptable on the shard's
//! path because only two parties ever take it (the shard that sends and this connection's
//! writer), each holds it for a push or a swap of `VecDeque`s with no I/O, allocation aside,
//! and never across an `.await`; contention is thus rare and short, and no other connection
//! is involved. `Notify::notify_one` and `watch::Sender::send_replace` do not block either.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tickwire_proto::reliable::ChannelKind;
use tokio::sync::{Notify, watch};

use super::framing::{CloseCode, clamp_reason};
use super::stats::WsCounters;

/// Bounds of one connection's outbound queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxLimits {
    /// Reliable bytes queued and not yet taken by the writer, past which the connection is
    /// closed as a slow client.
    pub max_reliable_bytes: usize,
    /// Unreliable messages queued; a new one at the bound drops the oldest.
    pub max_unreliable_messages: usize,
    /// Unreliable bytes queued; a new one past the bound drops the oldest until it fits.
    pub max_unreliable_bytes: usize,
}

impl Default for OutboxLimits {
    /// 1 MiB of reliable data (four of the largest reliable messages, or seconds of chat and
    /// events), 64 unreliable messages or 256 KiB.
    fn default() -> Self {
        Self {
            max_reliable_bytes: 1 << 20,
            max_unreliable_messages: 64,
            max_unreliable_bytes: 256 << 10,
        }
    }
}

/// Why [`WtSender::send`] did not queue a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WsSendError {
    /// The connection is closing or closed.
    #[error("connection closed")]
    Closed,
    /// No such channel on this connection.
    #[error("channel {channel} does not exist; the connection has {count} channels")]
    UnknownChannel {
        /// The channel asked for.
        channel: u8,
        /// Channels the connection has.
        count: usize,
    },
    /// The message is larger than the dictated `max_message_size`.
    #[error("message of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Message bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Queuing the reliable message would pass the bound; the connection is now closing
    /// with [`CloseCode::SlowClient`].
    #[error("reliable queue of {queued} bytes plus {len} exceeds the maximum of {max}")]
    SlowClient {
        /// Reliable bytes already queued.
        queued: usize,
        /// This message's bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
}

/// How a connection is ending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Closing {
    /// The server closes: send a close frame with this code and reason.
    Server(CloseCode, Arc<str>),
    /// The client sent a close frame (with this code and reason); the transport answers it,
    /// nothing more to write.
    Peer(Option<u16>, String),
    /// The socket failed or ended.
    Lost,
}

/// What the writer should do next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Messages were moved into the batch.
    Messages,
    /// Nothing queued: wait for [`Outbox::notified`].
    Empty,
    /// Everything is written (or discarded); close.
    Close(Closing),
}

/// Sizes of what is queued, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxDepth {
    /// Reliable messages queued.
    pub reliable_messages: usize,
    /// Reliable bytes queued.
    pub reliable_bytes: usize,
    /// Unreliable messages queued.
    pub unreliable_messages: usize,
    /// Sequenced channels holding an unsent message.
    pub sequenced_pending: usize,
}

#[derive(Default)]
struct Queues {
    reliable: VecDeque<(u8, Bytes)>,
    reliable_bytes: usize,
    unreliable: VecDeque<(u8, Bytes)>,
    unreliable_bytes: usize,
    /// By channel id; `None` for channels of other kinds or with nothing pending.
    sequenced: Vec<Option<Bytes>>,
    sequenced_pending: usize,
    closing: Option<Closing>,
}

/// One connection's queues and the signals between shard, reader and writer.
pub(crate) struct Outbox {
    queues: Mutex<Queues>,
    /// Set once closing starts, so `send` refuses without taking the lock.
    closing_flag: AtomicBool,
    /// Wakes the writer when something is queued (a stored permit covers a send that
    /// happens before the writer waits).
    wake: Notify,
    /// Tells the reader and writer that closing started.
    closing: watch::Sender<bool>,
    channels: Arc<[ChannelKind]>,
    limits: OutboxLimits,
    max_message_bytes: usize,
    counters: Arc<WsCounters>,
}

impl Outbox {
    pub(crate) fn new(
        channels: Arc<[ChannelKind]>,
        limits: OutboxLimits,
        max_message_bytes: usize,
        counters: Arc<WsCounters>,
    ) -> Self {
        Self {
            queues: Mutex::new(Queues {
                sequenced: vec![None; channels.len()],
                ..Queues::default()
            }),
            closing_flag: AtomicBool::new(false),
            wake: Notify::new(),
            closing: watch::Sender::new(false),
            channels,
            limits,
            max_message_bytes,
            counters,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        // Nothing panics while holding the lock except allocation failure; the queues stay
        // consistent at every await-free step, so a poisoned lock is still usable.
        self.queues
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn send(&self, channel: u8, message: Bytes) -> Result<(), WsSendError> {
        if self.closing_flag.load(Ordering::Acquire) {
            return Err(WsSendError::Closed);
        }
        let Some(&kind) = self.channels.get(usize::from(channel)) else {
            return Err(WsSendError::UnknownChannel {
                channel,
                count: self.channels.len(),
            });
        };
        let len = message.len();
        if len > self.max_message_bytes {
            WsCounters::bump(&self.counters.sends_too_large);
            return Err(WsSendError::TooLarge {
                len,
                max: self.max_message_bytes,
            });
        }
        let mut queues = self.lock();
        if queues.closing.is_some() {
            return Err(WsSendError::Closed);
        }
        match kind {
            ChannelKind::Reliable => {
                let max = self.limits.max_reliable_bytes;
                if queues.reliable_bytes + len > max {
                    let queued = queues.reliable_bytes;
                    drop(queues);
                    WsCounters::bump(&self.counters.closed_slow_client);
                    self.close(Closing::Server(
                        CloseCode::SlowClient,
                        format!(
                            "{} ({queued} bytes queued, bound {max})",
                            CloseCode::SlowClient.default_reason()
                        )
                        .into(),
                    ));
                    return Err(WsSendError::SlowClient { queued, len, max });
                }
                queues.reliable_bytes += len;
                queues.reliable.push_back((channel, message));
            }
            ChannelKind::UnreliableSequenced => {
                let slot = &mut queues.sequenced[usize::from(channel)];
                if slot.replace(message).is_some() {
                    WsCounters::bump(&self.counters.sequenced_replaced);
                } else {
                    queues.sequenced_pending += 1;
                }
            }
            ChannelKind::Unreliable => {
                let mut dropped = 0;
                while !queues.unreliable.is_empty()
                    && (queues.unreliable.len() >= self.limits.max_unreliable_messages
                        || queues.unreliable_bytes + len > self.limits.max_unreliable_bytes)
                {
                    if let Some((_, oldest)) = queues.unreliable.pop_front() {
                        queues.unreliable_bytes -= oldest.len();
                        dropped += 1;
                    }
                }
                if len > self.limits.max_unreliable_bytes
                    || self.limits.max_unreliable_messages == 0
                {
                    // Could never fit: it is the one dropped.
                    dropped += 1;
                } else {
                    queues.unreliable_bytes += len;
                    queues.unreliable.push_back((channel, message));
                }
                if dropped > 0 {
                    WsCounters::add(&self.counters.unreliable_dropped, dropped);
                }
            }
        }
        drop(queues);
        self.wake.notify_one();
        Ok(())
    }

    /// Starts closing, unless closing already started (the first reason wins). A slow
    /// client's queued data is discarded: it would only delay the close frame.
    pub(crate) fn close(&self, how: Closing) {
        let mut queues = self.lock();
        if queues.closing.is_some() {
            return;
        }
        if matches!(how, Closing::Server(CloseCode::SlowClient, _)) || how == Closing::Lost {
            queues.reliable.clear();
            queues.reliable_bytes = 0;
            queues.unreliable.clear();
            queues.unreliable_bytes = 0;
            queues.sequenced.iter_mut().for_each(|slot| *slot = None);
            queues.sequenced_pending = 0;
        }
        queues.closing = Some(how);
        self.closing_flag.store(true, Ordering::Release);
        drop(queues);
        self.closing.send_replace(true);
        self.wake.notify_one();
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing_flag.load(Ordering::Acquire)
    }

    /// How closing started, once it has.
    pub(crate) fn closing_reason(&self) -> Option<Closing> {
        self.lock().closing.clone()
    }

    /// Waits until closing starts.
    pub(crate) fn subscribe_closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Waits until something is queued or closing starts.
    pub(crate) async fn notified(&self) {
        self.wake.notified().await;
    }

    /// Moves everything queued into `batch` (reliable first, in order, then sequenced
    /// slots, then unreliable), or says to close once the queues are empty. Swapping the
    /// reliable queue out keeps the lock short whatever its length.
    pub(crate) fn take(&self, batch: &mut VecDeque<(u8, Bytes)>) -> Take {
        let mut queues = self.lock();
        let queues = &mut *queues;
        if queues.reliable.is_empty()
            && queues.sequenced_pending == 0
            && queues.unreliable.is_empty()
        {
            return match &queues.closing {
                Some(how) => Take::Close(how.clone()),
                None => Take::Empty,
            };
        }
        if batch.is_empty() {
            std::mem::swap(batch, &mut queues.reliable);
        } else {
            batch.append(&mut queues.reliable);
        }
        queues.reliable_bytes = 0;
        if queues.sequenced_pending > 0 {
            for (channel, slot) in queues.sequenced.iter_mut().enumerate() {
                if let Some(message) = slot.take() {
                    // Channel ids are below MAX_CHANNELS (32), so the cast is exact.
                    batch.push_back((channel as u8, message));
                }
            }
            queues.sequenced_pending = 0;
        }
        batch.extend(queues.unreliable.drain(..));
        queues.unreliable_bytes = 0;
        Take::Messages
    }

    pub(crate) fn depth(&self) -> OutboxDepth {
        let queues = self.lock();
        OutboxDepth {
            reliable_messages: queues.reliable.len(),
            reliable_bytes: queues.reliable_bytes,
            unreliable_messages: queues.unreliable.len(),
            sequenced_pending: queues.sequenced_pending,
        }
    }
}

/// The shard's handle on one WebSocket connection: queues messages without waiting.
///
/// Every method returns at once: it only touches this connection's queues (see the module
/// docs for the bounds and the lock). Cloning is cheap; all clones feed the same queues.
#[derive(Clone)]
pub struct WtSender {
    pub(crate) outbox: Arc<Outbox>,
    pub(crate) client_id: u64,
    pub(crate) transport: &'static str,
}

impl std::fmt::Debug for WtSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WtSender")
            .field("client_id", &self.client_id)
            .field("closing", &self.is_closing())
            .finish()
    }
}

impl WtSender {
    /// Queues `message` on `channel`, by the channel's kind: reliable messages in order
    /// (passing the bound closes the connection as a slow client and returns
    /// [`WsSendError::SlowClient`]), a sequenced channel's unsent message replaced, the
    /// oldest unreliable message dropped from a full queue.
    pub fn send(&self, channel: u8, message: Bytes) -> Result<(), WsSendError> {
        self.outbox.send(channel, message)
    }

    /// Closes the connection with `code` and `reason` (cut to 123 bytes), after what is
    /// already queued has been written, within the endpoint's close timeout. Later sends
    /// fail; a second close is ignored.
    pub fn close(&self, code: CloseCode, reason: &str) {
        self.outbox
            .close(Closing::Server(code, clamp_reason(reason).into()));
    }

    /// Whether the connection is closing or closed.
    pub fn is_closing(&self) -> bool {
        self.outbox.is_closing()
    }

    /// The client id from the connect token.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// The transport carrying the connection: `"ws"` (ws and wss) or `"wt"` (WebTransport).
    pub fn transport(&self) -> &'static str {
        self.transport
    }

    /// What is queued now.
    pub fn depth(&self) -> OutboxDepth {
        self.outbox.depth()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANNELS: [ChannelKind; 3] = [
        ChannelKind::Reliable,
        ChannelKind::Unreliable,
        ChannelKind::UnreliableSequenced,
    ];

    fn outbox(limits: OutboxLimits) -> (Outbox, Arc<WsCounters>) {
        let counters = Arc::new(WsCounters::default());
        let outbox = Outbox::new(CHANNELS.into(), limits, 1000, counters.clone());
        (outbox, counters)
    }

    fn message(tag: u8, len: usize) -> Bytes {
        vec![tag; len].into()
    }

    fn taken(outbox: &Outbox) -> Vec<(u8, u8)> {
        let mut batch = VecDeque::new();
        assert_eq!(outbox.take(&mut batch), Take::Messages);
        batch
            .into_iter()
            .map(|(channel, bytes)| (channel, bytes.first().copied().unwrap_or(0)))
            .collect()
    }

    #[test]
    fn reliable_messages_keep_their_order_and_come_first() {
        let (outbox, _) = outbox(OutboxLimits::default());
        outbox.send(1, message(10, 5)).unwrap();
        outbox.send(0, message(1, 5)).unwrap();
        outbox.send(2, message(20, 5)).unwrap();
        outbox.send(0, message(2, 5)).unwrap();
        assert_eq!(taken(&outbox), [(0, 1), (0, 2), (2, 20), (1, 10)]);
        assert_eq!(outbox.take(&mut VecDeque::new()), Take::Empty);
        assert_eq!(outbox.depth(), OutboxDepth::default());
    }

    #[test]
    fn a_sequenced_channel_keeps_only_the_latest_unsent_message() {
        let (outbox, counters) = outbox(OutboxLimits::default());
        for tick in 1..=100 {
            outbox.send(2, message(tick, 100)).unwrap();
        }
        assert_eq!(outbox.depth().sequenced_pending, 1);
        assert_eq!(counters.snapshot().sequenced_replaced, 99);
        assert_eq!(
            taken(&outbox),
            [(2, 100)],
            "only the newest snapshot is written"
        );
    }

    #[test]
    fn a_full_unreliable_queue_drops_the_oldest() {
        let limits = OutboxLimits {
            max_unreliable_messages: 3,
            max_unreliable_bytes: 250,
            ..OutboxLimits::default()
        };
        let (outbox, counters) = outbox(limits);
        for tag in 1..=5 {
            outbox.send(1, message(tag, 10)).unwrap();
        }
        assert_eq!(counters.snapshot().unreliable_dropped, 2, "count bound");
        assert_eq!(taken(&outbox), [(1, 3), (1, 4), (1, 5)]);
        outbox.send(1, message(6, 200)).unwrap();
        outbox.send(1, message(7, 100)).unwrap();
        assert_eq!(
            counters.snapshot().unreliable_dropped,
            3,
            "byte bound: 200 + 100 > 250"
        );
        assert_eq!(taken(&outbox), [(1, 7)]);
        outbox.send(1, message(8, 251)).unwrap();
        assert_eq!(
            counters.snapshot().unreliable_dropped,
            4,
            "a message larger than the bound is itself dropped"
        );
        assert_eq!(outbox.take(&mut VecDeque::new()), Take::Empty);
    }

    #[test]
    fn reliable_overflow_closes_as_a_slow_client_and_discards_the_queue() {
        let limits = OutboxLimits {
            max_reliable_bytes: 1000,
            ..OutboxLimits::default()
        };
        let (outbox, counters) = outbox(limits);
        let mut closing = outbox.subscribe_closing();
        for _ in 0..10 {
            outbox.send(0, message(1, 100)).unwrap();
        }
        assert_eq!(
            outbox.send(0, message(1, 1)),
            Err(WsSendError::SlowClient {
                queued: 1000,
                len: 1,
                max: 1000
            })
        );
        assert!(
            closing.has_changed().unwrap(),
            "the reader and writer are told"
        );
        assert!(*closing.borrow_and_update());
        assert_eq!(counters.snapshot().closed_slow_client, 1);
        assert_eq!(outbox.send(2, message(1, 1)), Err(WsSendError::Closed));
        let mut batch = VecDeque::new();
        match outbox.take(&mut batch) {
            Take::Close(Closing::Server(CloseCode::SlowClient, reason)) => {
                assert!(reason.contains("1000 bytes queued"), "{reason}");
            }
            other => panic!("expected a slow-client close, got {other:?}"),
        }
        assert!(batch.is_empty(), "queued data is discarded");
    }

    #[test]
    fn other_closes_write_what_is_queued_first() {
        let (outbox, _) = outbox(OutboxLimits::default());
        outbox.send(0, message(1, 5)).unwrap();
        outbox.close(Closing::Server(CloseCode::Kicked, "bye".into()));
        outbox.close(Closing::Server(CloseCode::ServerShutdown, "later".into()));
        assert_eq!(outbox.send(0, message(2, 5)), Err(WsSendError::Closed));
        assert_eq!(taken(&outbox), [(0, 1)]);
        assert_eq!(
            outbox.take(&mut VecDeque::new()),
            Take::Close(Closing::Server(CloseCode::Kicked, "bye".into())),
            "the first close wins"
        );
    }

    #[test]
    fn bad_sends_are_refused_without_closing() {
        let (outbox, counters) = outbox(OutboxLimits::default());
        assert_eq!(
            outbox.send(3, message(1, 1)),
            Err(WsSendError::UnknownChannel {
                channel: 3,
                count: 3
            })
        );
        assert_eq!(
            outbox.send(0, message(1, 1001)),
            Err(WsSendError::TooLarge {
                len: 1001,
                max: 1000
            })
        );
        assert!(!outbox.is_closing());
        assert_eq!(
            counters.snapshot().sends_too_large,
            1,
            "the refusal is counted"
        );
    }
}
