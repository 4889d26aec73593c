//! Counters of the WebTransport transport beside the message-layer ones it shares with
//! WebSocket ([`WsStats`](crate::ws::WsStats), counted separately per transport).

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// A snapshot of the WebTransport transport's own counters ([`WtMeters::counts`](super::WtMeters::counts)).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct WtCounts {
            $($(#[$doc])* pub $name: u64,)*
        }

        #[derive(Debug, Default)]
        pub(crate) struct WtCounters {
            $(pub(crate) $name: AtomicU64,)*
        }

        impl WtCounters {
            pub(crate) fn snapshot(&self) -> WtCounts {
                WtCounts {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }
    };
}

counters! {
    /// QUIC connection attempts seen.
    incoming,
    /// Attempts answered with a QUIC Retry (address validation) before being taken.
    retries_sent,
    /// Attempts refused because the peer's address already had its most sessions open.
    refused_per_ip,
    /// Attempts refused because the endpoint had its most sessions open.
    refused_total,
    /// Attempts whose QUIC or HTTP/3 handshake failed.
    handshakes_failed,
    /// Sessions requested on another path than `/wt` (answered 404).
    refused_path,
    /// Sessions that did not open their control stream or send the token in time.
    handshake_timeouts,
    /// Sessions opened (WebTransport accepted; the token is checked after).
    sessions_opened,
    /// Sessions ended, for any reason.
    sessions_closed,
    /// Streams opened past the one control stream, stopped at once.
    extra_streams,
    /// Datagrams received and delivered.
    datagrams_received,
    /// Datagrams received and dropped: empty, unknown or Reliable channel, stale sequence,
    /// before the token, or with the inbound queue full.
    datagrams_dropped,
    /// Datagrams sent.
    datagrams_sent,
    /// Unreliable messages too large for a datagram, sent as stream frames instead.
    datagrams_too_large,
    /// Frames received on control streams (the token and close frames included).
    stream_frames_received,
    /// Frames sent on control streams (the accepted message and close frames included).
    stream_frames_sent,
}

impl WtCounters {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        Self::add(counter, 1);
    }
}
