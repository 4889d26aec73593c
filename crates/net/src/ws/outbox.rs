//! The bounds of what waits for a slow client, and why a send was refused: the same for a
//! WebSocket link ([`WsLinks`](super::WsLinks)) and a WebTransport session
//! ([`WtLinks`](crate::wt::WtLinks)).
//!
//! Per channel kind:
//!
//! - **Reliable**: bounded in bytes. A message that would pass the bound closes the
//!   connection with [`CloseCode::SlowClient`]: the client is not keeping up, and a reliable
//!   stream cannot skip.
//! - **UnreliableSequenced**: one slot per channel. A newer message replaces an unsent older
//!   one (latest wins: a stale snapshot is worth nothing once a newer one exists).
//! - **Unreliable**: bounded in count and bytes; when full the oldest is dropped.

#[cfg(doc)]
use super::framing::CloseCode;

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

/// Why a send to a connection did not queue the message.
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
