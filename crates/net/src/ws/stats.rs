//! Counters of the WebSocket transport, shared by every connection of an endpoint.
//!
//! Relaxed atomics: each counter is read on its own for metrics, never used to order other
//! memory. Message and byte counts are bumped by the connections' own tasks, not by the
//! shard calling [`WtSender::send`](super::WtSender::send); the shard touches a counter only
//! when it replaces or drops a message for a slow client.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// A snapshot of a [`WsEndpoint`](super::WsEndpoint)'s counters since it started.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct WsStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        #[derive(Debug, Default)]
        pub(crate) struct WsCounters {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl WsCounters {
            pub(crate) fn snapshot(&self) -> WsStats {
                WsStats {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }
    };
}

counters! {
    /// Connections authenticated and handed to the application.
    connections_accepted,
    /// Connections that ended after being accepted, for any reason.
    connections_closed,
    /// Connections closed because the same client id connected again with a fresh token.
    connections_replaced,
    /// First messages refused as not a connect token (wrong size or layout, text).
    refused_malformed,
    /// Tokens refused: wrong protocol, tampered, another key, or not naming this server.
    refused_bad_token,
    /// Tokens refused as expired.
    refused_expired,
    /// Tokens refused as already used.
    refused_replayed,
    /// Connections refused because the server was full or too busy to take them.
    refused_full,
    /// Connections refused because the server was shutting down.
    refused_shutdown,
    /// Connections closed because no token arrived within the handshake timeout.
    handshake_timeouts,
    /// Upgrades that hyper accepted but that failed before the WebSocket started.
    upgrades_failed,
    /// Upgrades refused with 403: their `Origin` is not on the endpoint's allow-list.
    refused_origin,
    /// Connections closed because a frame or message passed the size limit.
    closed_too_large,
    /// Connections closed for a protocol violation after the handshake.
    closed_protocol_violation,
    /// Connections closed because nothing arrived for the dictated timeout.
    closed_idle,
    /// Connections closed because their reliable send queue passed its bound.
    closed_slow_client,
    /// Framed bytes not yet handed to a socket that a close discarded: the backlog of a
    /// slow client (4005), or of a client that broke the protocol.
    discarded_bytes,
    /// Closes whose close frame could not be written within the close timeout (the client
    /// had stopped reading); the connection was dropped.
    close_timeouts,
    /// Unsent UnreliableSequenced messages replaced by a newer one on the same channel.
    sequenced_replaced,
    /// Unsent Unreliable messages dropped, oldest first, from a full queue.
    unreliable_dropped,
    /// Messages the application sent past `max_message_size`: refused and dropped, the
    /// connection kept.
    sends_too_large,
    /// Data messages received after the handshake.
    messages_received,
    /// Payload bytes received (channel byte excluded).
    bytes_received,
    /// Data messages written to sockets.
    messages_sent,
    /// Payload bytes written (channel byte excluded).
    bytes_sent,
    /// Pings sent to idle connections.
    pings_sent,
}

impl WsCounters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        Self::add(counter, 1);
    }
}
