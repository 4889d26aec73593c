//! An authenticated WebSocket connection: the reader the application awaits, and the writer
//! task that drains the [`Outbox`] into the socket.
//!
//! Both work on a transport-neutral view of the socket ([`Inbound`], [`Outbound`]), so
//! nothing here depends on the HTTP framework that performed the upgrade.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::poll_fn;
use futures_util::{Sink, Stream, StreamExt};
use tickwire_proto::token::USER_DATA_BYTES;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::framing::{CloseCode, clamp_reason, data_message, parse_data_message};
use super::outbox::{Closing, Outbox, Take, WsSender};
use super::stats::WsCounters;

/// An error from the underlying WebSocket, kept opaque.
pub(crate) type TransportError = Box<dyn std::error::Error + Send + Sync>;

/// What the socket delivered.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A binary message.
    Binary(Bytes),
    /// A text message: never valid in tickwire's framing.
    Text,
    /// A ping or pong: proof of life, nothing more.
    Control,
    /// The client's close frame (code and reason, if any).
    Close(Option<(u16, String)>),
}

/// Why reading the socket failed.
#[derive(Debug)]
pub(crate) enum InboundError {
    /// A frame or message passed the size limit (the text says which).
    TooLarge(String),
    /// Anything else: the connection is unusable.
    Failed(TransportError),
}

/// What the writer puts on the socket.
#[derive(Debug)]
pub(crate) enum Outbound {
    Binary(Bytes),
    Ping,
    Close(u16, String),
}

pub(crate) type InboundStream =
    Pin<Box<dyn Stream<Item = Result<Inbound, InboundError>> + Send + 'static>>;
pub(crate) type OutboundSink =
    Pin<Box<dyn Sink<Outbound, Error = TransportError> + Send + 'static>>;

/// How a connection ended, as [`WsConnection::recv`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WsClosed {
    /// The server closed it (a send to a slow client, a kick, a timeout, a bad message).
    #[error("closed by the server: {code:?} ({reason})")]
    ByServer {
        /// The close code sent.
        code: CloseCode,
        /// The reason sent.
        reason: String,
    },
    /// The client sent a close frame.
    #[error("closed by the client with code {code:?} ({reason})")]
    ByClient {
        /// The client's close code, if it gave one.
        code: Option<u16>,
        /// The client's reason.
        reason: String,
    },
    /// The socket ended or failed without a close frame.
    #[error("connection lost")]
    Lost,
}

/// Timings of one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timings {
    /// Silence from the client after which the connection is closed as timed out (pongs
    /// count: a browser answers the writer's pings by itself).
    pub(crate) idle_timeout: Duration,
    /// Idle time after which the writer pings, so a quiet but healthy client (browsers
    /// answer pings themselves) is not timed out.
    pub(crate) ping_interval: Duration,
    /// How long a close may take to write what is queued and the close frame.
    pub(crate) close_timeout: Duration,
}

/// Messages read from the socket and not yet taken by [`WsConnection::recv`]. A reader
/// that finds the queue full stops reading, so TCP's flow control holds the client back
/// rather than the server buffering for it.
pub(crate) const INBOUND_QUEUE: usize = 8;

/// A WebSocket client that presented a valid connect token and was sent the accepted
/// message: the player with id [`client_id`](Self::client_id).
///
/// The application (the runtime, attaching it to a shard) loops on
/// [`recv`](Self::recv) to take the client's messages, and gives the shard a
/// [`WsSender`] from [`sender`](Self::sender) to send without waiting. The connection's
/// own tasks read and write the socket, answer pings, and enforce the idle timeout whether
/// or not `recv` is being awaited; at most 8 messages wait for `recv` before reading stops.
/// Dropping the connection closes it ([`CloseCode::Kicked`], "released by the server") if
/// it is still open.
pub struct WsConnection {
    pub(crate) client_id: u64,
    pub(crate) user_data: Box<[u8; USER_DATA_BYTES]>,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) inbound: mpsc::Receiver<(u8, Bytes)>,
    pub(crate) sender: WsSender,
}

impl std::fmt::Debug for WsConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsConnection")
            .field("client_id", &self.client_id)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl WsConnection {
    /// The client id from the connect token's sealed part.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// Application data from the connect token's sealed part.
    pub fn user_data(&self) -> &[u8; USER_DATA_BYTES] {
        &self.user_data
    }

    /// The client's address as the listener saw it, when the listener recorded it.
    pub fn peer_address(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// A handle that queues messages to this client without waiting.
    pub fn sender(&self) -> WsSender {
        self.sender.clone()
    }

    /// Closes the connection; see [`WsSender::close`].
    pub fn close(&self, code: CloseCode, reason: &str) {
        self.sender.close(code, reason);
    }

    /// The next message from the client: its channel id and payload. Messages that arrived
    /// before the connection started closing are still returned; after them, why it closed.
    /// A message that breaks the framing (text, empty, unknown channel, too large) closes
    /// the connection with its code.
    pub async fn recv(&mut self) -> Result<(u8, Bytes), WsClosed> {
        match self.inbound.recv().await {
            Some(message) => Ok(message),
            None => Err(closed_by(&self.sender.outbox)),
        }
    }
}

impl Drop for WsConnection {
    fn drop(&mut self) {
        self.sender
            .close(CloseCode::Kicked, "released by the server");
    }
}

fn closed_by(outbox: &Outbox) -> WsClosed {
    match outbox.closing_reason() {
        Some(Closing::Server(code, reason)) => WsClosed::ByServer {
            code,
            reason: reason.to_string(),
        },
        Some(Closing::Peer(code, reason)) => WsClosed::ByClient { code, reason },
        Some(Closing::Lost) | None => WsClosed::Lost,
    }
}

/// Reads the socket into `inbound` until the connection closes, then lingers (see
/// [`linger`]) so a close the server started ends in a FIN rather than a reset.
pub(crate) async fn run_reader(
    mut stream: InboundStream,
    outbox: Arc<Outbox>,
    inbound: mpsc::Sender<(u8, Bytes)>,
    counters: Arc<WsCounters>,
    channel_count: usize,
    timings: Timings,
) {
    let mut closing = outbox.subscribe_closing();
    let close = |code: CloseCode, reason: String| {
        outbox.close(Closing::Server(code, clamp_reason(&reason).into()));
    };
    // False once the transport failed mid-frame: it cannot be read any further.
    let mut readable = true;
    while !*closing.borrow_and_update() {
        let next = tokio::select! {
            biased;
            _ = closing.changed() => continue,
            next = tokio::time::timeout(timings.idle_timeout, stream.next()) => next,
        };
        match next {
            Err(_) => {
                WsCounters::bump(&counters.closed_idle);
                close(
                    CloseCode::TimedOut,
                    format!("nothing received for {:?}", timings.idle_timeout),
                );
            }
            Ok(None) => outbox.close(Closing::Lost),
            Ok(Some(Err(InboundError::Failed(error)))) => {
                tracing::debug!(%error, "websocket read failed");
                readable = false;
                outbox.close(Closing::Lost);
            }
            Ok(Some(Err(InboundError::TooLarge(what)))) => {
                WsCounters::bump(&counters.closed_too_large);
                readable = false;
                close(CloseCode::MessageTooLarge, what);
            }
            Ok(Some(Ok(Inbound::Control))) => {}
            Ok(Some(Ok(Inbound::Text))) => {
                WsCounters::bump(&counters.closed_protocol_violation);
                close(
                    CloseCode::ProtocolViolation,
                    "text message; tickwire messages are binary".to_owned(),
                );
            }
            Ok(Some(Ok(Inbound::Close(frame)))) => {
                let (code, reason) =
                    frame.map_or((None, String::new()), |(code, reason)| (Some(code), reason));
                outbox.close(Closing::Peer(code, reason));
            }
            Ok(Some(Ok(Inbound::Binary(message)))) => {
                let len = message.len();
                match parse_data_message(message, channel_count) {
                    Ok(received) => {
                        WsCounters::bump(&counters.messages_received);
                        WsCounters::add(&counters.bytes_received, len as u64 - 1);
                        // A full queue stops reading here until the application catches up,
                        // or until closing starts.
                        tokio::select! {
                            biased;
                            _ = closing.changed() => {}
                            sent = inbound.send(received) => {
                                if sent.is_err() {
                                    // The application dropped the connection.
                                    close(CloseCode::Kicked, "released by the server".into());
                                }
                            }
                        }
                    }
                    Err(error) => {
                        WsCounters::bump(&counters.closed_protocol_violation);
                        close(CloseCode::ProtocolViolation, error.to_string());
                    }
                }
            }
        }
    }
    // `recv` reports the end once the queued messages are taken.
    drop(inbound);
    if matches!(outbox.closing_reason(), Some(Closing::Server(..))) {
        let deadline = Instant::now() + timings.close_timeout;
        linger(&mut stream, deadline, readable).await;
    }
}

/// After the server sent (or is sending) its close frame: reads and discards what the client
/// still sends until its close answer, the end of the stream, or `deadline`. Closing a TCP
/// socket with unread data makes the kernel send a reset, which can destroy the close frame
/// before the client reads it. A stream that can no longer be read (`readable` false, after
/// an oversize frame) is held until the deadline instead.
pub(crate) async fn linger(stream: &mut InboundStream, deadline: Instant, readable: bool) {
    if !readable {
        tokio::time::sleep_until(deadline).await;
        return;
    }
    let _ = tokio::time::timeout_at(deadline, async {
        while let Some(Ok(inbound)) = stream.next().await {
            if matches!(inbound, Inbound::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// Drains `outbox` into `sink` until the connection closes. Returns when the close frame is
/// written, the close timeout passes, or the socket fails.
pub(crate) async fn run_writer(
    mut sink: OutboundSink,
    outbox: Arc<Outbox>,
    counters: Arc<WsCounters>,
    timings: Timings,
) {
    let mut batch = VecDeque::new();
    let mut closing = outbox.subscribe_closing();
    // Set when closing starts: everything after must finish by then.
    let mut deadline: Option<Instant> = None;
    loop {
        if deadline.is_none() && outbox.is_closing() {
            deadline = Some(Instant::now() + timings.close_timeout);
        }
        let mut ping = false;
        if batch.is_empty() {
            match outbox.take(&mut batch) {
                Take::Messages => {}
                Take::Close(how) => {
                    let finished = finish(&mut sink, how);
                    let deadline =
                        deadline.unwrap_or_else(|| Instant::now() + timings.close_timeout);
                    if tokio::time::timeout_at(deadline, finished).await.is_err() {
                        WsCounters::bump(&counters.close_timeouts);
                    }
                    return;
                }
                Take::Empty => {
                    tokio::select! {
                        () = outbox.notified() => continue,
                        () = tokio::time::sleep(timings.ping_interval) => ping = true,
                    }
                }
            }
        }
        let written = async {
            if ping {
                WsCounters::bump(&counters.pings_sent);
                send_one(&mut sink, Outbound::Ping).await
            } else {
                write_batch(&mut sink, &mut batch, &counters).await
            }
        };
        let result = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, written).await {
                Ok(result) => result,
                Err(_) => {
                    WsCounters::bump(&counters.close_timeouts);
                    return;
                }
            },
            None => tokio::select! {
                result = written => result,
                // Closing started while the client is slow to read: the rest of this batch
                // (what is not yet in the socket's buffer) now has the close timeout.
                _ = closing.changed() => continue,
            },
        };
        if result.is_err() {
            outbox.close(Closing::Lost);
            return;
        }
    }
}

/// Writes every message of `batch` and flushes. Each message leaves the batch only once the
/// sink has taken it, so a write cancelled midway loses nothing still in the batch.
async fn write_batch(
    sink: &mut OutboundSink,
    batch: &mut VecDeque<(u8, Bytes)>,
    counters: &WsCounters,
) -> Result<(), TransportError> {
    let (mut messages, mut bytes) = (0, 0);
    let result = async {
        while !batch.is_empty() {
            poll_fn(|cx| sink.as_mut().poll_ready(cx)).await?;
            let Some((channel, payload)) = batch.pop_front() else {
                break;
            };
            messages += 1;
            bytes += payload.len() as u64;
            sink.as_mut()
                .start_send(Outbound::Binary(data_message(channel, &payload)))?;
        }
        poll_fn(|cx| sink.as_mut().poll_flush(cx)).await
    }
    .await;
    WsCounters::add(&counters.messages_sent, messages);
    WsCounters::add(&counters.bytes_sent, bytes);
    result
}

async fn send_one(sink: &mut OutboundSink, message: Outbound) -> Result<(), TransportError> {
    poll_fn(|cx| sink.as_mut().poll_ready(cx)).await?;
    sink.as_mut().start_send(message)?;
    poll_fn(|cx| sink.as_mut().poll_flush(cx)).await
}

/// Ends the connection as `how` says.
async fn finish(sink: &mut OutboundSink, how: Closing) {
    match how {
        Closing::Server(code, reason) => {
            let _ = send_one(sink, Outbound::Close(code.code(), reason.to_string())).await;
            // The TCP connection closes when both halves are dropped; the client has the
            // close frame by then.
        }
        // The transport has queued its answer to the client's close frame: flush it.
        Closing::Peer(..) => {
            let _ = poll_fn(|cx| sink.as_mut().poll_close(cx)).await;
        }
        Closing::Lost => {}
    }
}
