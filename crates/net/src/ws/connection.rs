//! How a connection ended, and the timings it is held to: the same for a WebSocket link
//! ([`WsLinks`](super::WsLinks)) and a WebTransport session
//! ([`WtLinks`](crate::wt::WtLinks)).

use std::time::Duration;

use super::framing::CloseCode;

/// How a connection ended, as a [`WsLinkEvent::Closed`](super::WsLinkEvent::Closed) or
/// [`WtLinkEvent::Closed`](crate::wt::WtLinkEvent::Closed) reports it.
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
