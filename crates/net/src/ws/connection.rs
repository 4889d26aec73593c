//! A WebTransport session as the application sees it: the messages its reader tasks
//! queued, and a [`WtSender`] into the [`Outbox`] its writer task drains. (WebSocket
//! connections are driven by their shard instead: [`WsLinks`](super::WsLinks).)

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::framing::CloseCode;
use super::outbox::{Closing, Outbox, WtSender};

/// How a connection ended, as [`WtSession::recv`] reports it.
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

/// Messages read from the session and not yet taken by [`WtSession::recv`]. A reader
/// that finds the queue full stops reading, so QUIC's flow control holds the client back
/// rather than the server buffering for it.
pub(crate) const INBOUND_QUEUE: usize = 8;

/// A WebTransport session that presented a valid connect token and was sent the accepted
/// message: the player [`client`](Self::client) names.
///
/// The application (the runtime, attaching it to a shard) loops on
/// [`recv`](Self::recv) to take the client's messages, and gives the shard a
/// [`WtSender`] from [`sender`](Self::sender) to send without waiting. The session's own
/// tasks read and write its stream and datagrams whether or not `recv` is being awaited
/// (QUIC keeps it alive and times it out); at most 8 messages wait for `recv` before reading
/// stops. Dropping the session closes it ([`CloseCode::Kicked`], "released by the server")
/// if it is still open.
pub struct WtSession {
    pub(crate) client: super::socket::AdmittedClient,
    pub(crate) inbound: mpsc::Receiver<(u8, Bytes)>,
    pub(crate) sender: WtSender,
    /// Its place among the endpoint's open connections.
    pub(crate) _slot: super::socket::ConnectionSlot,
}

impl std::fmt::Debug for WtSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WtSession")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl WtSession {
    /// Who the client is.
    pub fn client(&self) -> &super::socket::AdmittedClient {
        &self.client
    }

    /// A handle that queues messages to this client without waiting.
    pub fn sender(&self) -> WtSender {
        self.sender.clone()
    }

    /// Closes the connection; see [`WtSender::close`].
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

impl Drop for WtSession {
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
