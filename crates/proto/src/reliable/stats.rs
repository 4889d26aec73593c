//! What a connection's reliability layer reports: estimates, counters and memory in use.

use std::time::Duration;

/// A snapshot of one connection's estimates and counters, from
/// [`Reliability::stats`](super::Reliability::stats). Counters only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReliabilityStats {
    /// Smoothed round-trip time (RFC 6298 `SRTT`); 100 ms until the first sample. Includes
    /// the peer's delay in acking (up to one of its ticks).
    pub rtt: Duration,
    /// Round-trip time variation (RFC 6298 `RTTVAR`).
    pub rtt_variance: Duration,
    /// Current resend timeout: `rtt + max(4 × rtt_variance, 10 ms)`, clamped to 10 ms..=1 s.
    pub resend_timeout: Duration,
    /// Fraction (0..=1) of the last 256 decided ack-eliciting packets that were never acked.
    pub packet_loss: f32,
    /// Packets written by `write_packet`.
    pub packets_sent: u64,
    /// Our packets the peer acknowledged.
    pub packets_acked: u64,
    /// Peer packets accepted (not malformed, duplicate or stale).
    pub packets_received: u64,
    /// Peer packets dropped because they were seen before.
    pub packets_duplicate: u64,
    /// Peer packets dropped because they were older than the 256-packet receive window.
    pub packets_stale: u64,
    /// Unreliable messages dropped from full send queues (`max_unreliable_queue`).
    pub messages_dropped: u64,
    /// Sequenced messages received but dropped as older than one already delivered.
    pub messages_out_of_sequence: u64,
    /// Reliable units (whole messages or fragments) sent again after a resend timeout.
    pub units_resent: u64,
    /// Reliable bytes sent at least once and not yet acked.
    pub bytes_in_flight: usize,
    /// Reliable bytes queued, unsent plus unacked, each message counted with
    /// [`RELIABLE_MESSAGE_OVERHEAD`](super::RELIABLE_MESSAGE_OVERHEAD) for its bookkeeping
    /// (bounded by `max_reliable_queue_bytes`, which only a lone message may pass, by its
    /// overhead at most).
    pub reliable_queue_bytes: usize,
    /// Bytes held for the peer's reliable messages: partly reassembled, or complete and
    /// waiting for an earlier one (bounded by `max_reassembly_bytes`).
    pub reassembly_bytes: usize,
}
