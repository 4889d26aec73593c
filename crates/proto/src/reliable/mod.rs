//! Reliability and channels over the unreliable packets of an established connection, in the
//! manner of reliable.io and renet: packet acks, RTT and loss estimates, and per-channel
//! delivery (reliable and ordered, unreliable, or unreliable but sequenced), with large
//! reliable messages split into fragments.
//!
//! This layer sees only plaintext payloads. The connection code around it encrypts what
//! [`Reliability::write_packet`] produces and hands decrypted payloads to
//! [`Reliability::read_packet`]. It does no I/O and reads no clock; time comes in as `now`.
//! The byte layout is specified in `docs/PROTOCOL.md` ("Reliability and channels").
//!
//! A driver, each tick and whenever [`Reliability::next_timeout`] passes:
//!
//! 1. [`Reliability::read_packet`] for each payload received (count and drop a
//!    [`ReadError::Malformed`]; close the connection on a fatal one, [`ReadError::is_fatal`]);
//! 2. [`Reliability::receive`] until `None`, handing messages to the game;
//! 3. [`Reliability::send`] for the game's outgoing messages;
//! 4. [`Reliability::write_packet`] until `None`, sending each packet; pass `force` once
//!    when a keepalive is due.
//!
//! ```
//! use std::time::Instant;
//! use bytes::Bytes;
//! use tickwire_proto::reliable::{Reliability, ReliabilityConfig};
//!
//! let mut server = Reliability::new(ReliabilityConfig::default())?;
//! let mut client = Reliability::new(ReliabilityConfig::default())?;
//! let now = Instant::now(); // a driver's clock; this crate never reads one itself
//!
//! server.send(0, Bytes::from_static(b"welcome"))?; // channel 0: reliable
//! server.send(2, Bytes::from_static(b"snapshot 1"))?; // channel 2: sequenced
//! let mut packet = [0u8; 1150];
//! while let Some(len) = server.write_packet(now, &mut packet, false) {
//!     client.read_packet(now, &packet[..len])?; // in real life: encrypt, send, decrypt
//! }
//! assert_eq!(client.receive(), Some((0, Bytes::from_static(b"welcome"))));
//! assert_eq!(client.receive(), Some((2, Bytes::from_static(b"snapshot 1"))));
//! assert_eq!(client.receive(), None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`Reliability`] | one connection's acks, estimates, channels and queues |
//! | [`ReliabilityConfig`] | channel kinds and the memory bounds |
//! | [`ChannelKind`] | what a channel promises: `Reliable`, `Unreliable`, `UnreliableSequenced` |
//! | [`ReliabilityStats`] | RTT, loss, counters and memory in use |
//! | [`SendError`], [`ReadError`], [`MalformedError`], [`ConfigError`] | what went wrong, with the values and limits |

#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod acks;
mod channel;
mod config;
mod error;
mod fragment;
mod frame;
mod header;
mod reliable_recv;
mod reliable_send;
mod rtt;
mod sequence;
mod stats;

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

pub use acks::{MAX_ACK_DELAY, RECEIVED_WINDOW};
pub use config::{
    ChannelKind, ConfigError, MAX_CHANNELS, MAX_FRAGMENTS, MAX_PACKET_PAYLOAD, MIN_FRAGMENT_SIZE,
    MIN_PACKET_PAYLOAD, ReliabilityConfig,
};
pub use error::{MalformedError, ReadError, SendError};
pub use header::HEADER_LEN;
pub use reliable_recv::{Deliver, Owned};
pub use rtt::{INITIAL_RTT, LOSS_WINDOW, MAX_RESEND_TIMEOUT, MIN_RESEND_TIMEOUT};
pub use sequence::sequence_newer;
pub use stats::ReliabilityStats;

use acks::{AckWanted, Arrival, ReceivedPackets, SentPackets};
use channel::{Channel, accept_sequenced};
use config::Layout;
use frame::{Frame, FrameReader, PacketWriter};
use header::{Ack, PacketHeader};
use reliable_recv::{Delivered, Held};
use reliable_send::WriteContext;
use rtt::{LossEstimator, RttEstimator};

/// How often, at least, a packet asks for its ack at once (the ping flag) when nothing
/// reliable is being sent: the RTT estimate lives on such packets, since acks for packets of
/// unreliable messages may wait up to [`MAX_ACK_DELAY`] for a ride.
///
/// Each probe usually costs the peer an ack-only datagram (it rarely has a packet leaving
/// at that instant): the interval sets what a stream without reliable data pays for RTT.
/// The estimate only sets resend timeouts and what `stats` reports, and reliable traffic
/// feeds it with samples of its own, so one probe a second is enough. At 200 ms, the
/// answers to probes were up to 5 of a hobo bot's 31 datagrams a second out, and up to 5
/// of the server's 65 to it.
pub const RTT_PROBE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Most reliable messages a channel has in flight (admitted, not yet all acked). The
/// receiver holds ids up to this far ahead of the next one it expects.
pub const MESSAGE_WINDOW: usize = 1024;

/// Capacity a connection's queue (a send window, a send queue, a receive buffer, the record
/// of reliable units in flight) keeps once it has emptied: a steady trickle of messages
/// never reallocates, while a burst's peak (the notices of a room's joins, a fragmented
/// map) is handed back once it is through instead of being held for the connection's life.
/// In a room of 30 that peak was ≈ 2.6 KB a player, a quarter of its server memory.
const KEPT_WHEN_EMPTY: usize = 8;

/// Hands back `queue`'s allocation when it is empty and grew past [`KEPT_WHEN_EMPTY`].
/// Inlined: it runs on every packet's path, and is nearly always two comparisons.
#[inline(always)]
fn give_back_if_empty<T>(queue: &mut VecDeque<T>) {
    if queue.is_empty() && queue.capacity() > KEPT_WHEN_EMPTY {
        give_back(queue);
    }
}

#[cold]
fn give_back<T>(queue: &mut VecDeque<T>) {
    *queue = VecDeque::new();
}

/// What a queued reliable message costs beyond its payload, counted against
/// `max_reliable_queue_bytes`: its place in the send queue and then in the window (a
/// `Bytes`, 32 bytes, and a window entry, 80), and its allocation's header (16). Counting payload
/// alone, a peer that stops acking while a room sends it small messages would hold several
/// times the bound in bookkeeping (4 MiB of 30-byte messages: 140,000 of them, ≈ 21 MB).
pub const RELIABLE_MESSAGE_OVERHEAD: usize = 128;

/// Counters reported in [`ReliabilityStats`].
#[derive(Debug, Default)]
struct Counters {
    packets_sent: u64,
    packets_acked: u64,
    packets_received: u64,
    packets_duplicate: u64,
    packets_stale: u64,
    messages_dropped: u64,
    messages_out_of_sequence: u64,
    units_resent: u64,
}

/// One connection's reliability layer: acks, RTT and loss, and its channels. See the
/// [module docs](self) for the order a driver calls it in.
///
/// Laid out hot first (`repr(C)`): what writing a packet reads or writes comes first, in
/// [`HOT_BYTES`](Self::HOT_BYTES), what only received reliable data and the stats read
/// after it (see the connection's layout in `connection.rs`).
#[derive(Debug)]
#[repr(C)]
pub struct Reliability {
    layout: Layout,
    channels: Vec<Channel>,
    /// Reliable bytes queued or unacked, across channels.
    reliable_queue_bytes: usize,
    /// When the next packet of unreliable messages asks for its ack at once, to feed the
    /// RTT estimate: [`RTT_PROBE_INTERVAL`] after the last packet that asked (`None`
    /// before the first). Kept as a deadline, so a packet compares it, never subtracts.
    next_probe: Option<Instant>,
    sent: SentPackets,
    received: ReceivedPackets,
    loss: LossEstimator,
    rtt: RttEstimator,
    counters: Counters,
    config: ReliabilityConfig,
    // Read by received reliable data and the stats only.
    /// Newest of our packets acked so far; only an ack past it yields an RTT sample, so
    /// late or repeated acks (which include extra delay) do not skew the estimate.
    largest_acked: Option<u16>,
    delivered: Delivered,
    /// Reliable bytes admitted to send windows, across channels (at most
    /// `max_reassembly_bytes`: the most the peer may have to hold).
    span_bytes: usize,
    bytes_in_flight: usize,
    held: Held,
}

impl Reliability {
    /// Bytes at the start of this struct that writing a packet reads or writes.
    pub(crate) const HOT_BYTES: usize = std::mem::offset_of!(Reliability, largest_acked);

    /// Creates a connection's layer; fails when the config is out of bounds.
    pub fn new(config: ReliabilityConfig) -> Result<Self, ConfigError> {
        let layout = config.validate()?;
        Ok(Self {
            channels: config
                .channels
                .iter()
                .map(|&kind| Channel::new(kind))
                .collect(),
            held: Held {
                bytes: 0,
                max: config.max_reassembly_bytes,
            },
            config,
            layout,
            sent: SentPackets::default(),
            received: ReceivedPackets::default(),
            rtt: RttEstimator::default(),
            loss: LossEstimator::default(),
            largest_acked: None,
            next_probe: None,
            delivered: VecDeque::new(),
            reliable_queue_bytes: 0,
            span_bytes: 0,
            bytes_in_flight: 0,
            counters: Counters::default(),
        })
    }

    /// The configuration this layer was built with.
    pub fn config(&self) -> &ReliabilityConfig {
        &self.config
    }

    /// Largest message `channel` accepts, or `None` if there is no such channel: an
    /// unreliable message must fit one packet alone; a reliable one is fragmented up to
    /// `max_message_size`.
    pub fn max_message_len(&self, channel: u8) -> Option<usize> {
        Some(match self.config.channels.get(usize::from(channel))? {
            ChannelKind::Reliable => self.config.max_message_size,
            ChannelKind::Unreliable => self.layout.max_unreliable,
            ChannelKind::UnreliableSequenced => self.layout.max_sequenced,
        })
    }

    /// Queues `message` on `channel`. A reliable message is kept until acked; an unreliable
    /// one waits for the next packet, the oldest being dropped (and counted) when
    /// `max_unreliable_queue` are waiting.
    pub fn send(&mut self, channel: u8, message: Bytes) -> Result<(), SendError> {
        let channels = self.channels.len();
        let Some(state) = self.channels.get_mut(usize::from(channel)) else {
            return Err(SendError::UnknownChannel { channel, channels });
        };
        // The same bounds as `max_message_len`, read from the channel itself: a send touches
        // no more of the connection than it must.
        let max = match state {
            Channel::Reliable { .. } => self.config.max_message_size,
            Channel::Unreliable { .. } => self.layout.max_unreliable,
            Channel::Sequenced { .. } => self.layout.max_sequenced,
        };
        let len = message.len();
        if len > max {
            return Err(SendError::TooLarge { len, max });
        }
        if let Channel::Reliable { send, .. } = state {
            let max = self.config.max_reliable_queue_bytes;
            let cost = len + RELIABLE_MESSAGE_OVERHEAD;
            // An empty queue takes any message within `max_message_size`, which the config
            // keeps within the bound: only the overhead may pass it, and only then.
            if self.reliable_queue_bytes > 0 && self.reliable_queue_bytes + cost > max {
                return Err(SendError::QueueFull {
                    queued: self.reliable_queue_bytes,
                    len,
                    max,
                });
            }
            self.reliable_queue_bytes += cost;
            send.push(message);
        } else if state.queue_unreliable(message, self.config.max_unreliable_queue) {
            self.counters.messages_dropped += 1;
        }
        Ok(())
    }

    /// Writes the next packet's plaintext into `out` (using at most `max_packet_payload`
    /// bytes) and returns its length: the header, then reliable units that are due (never
    /// sent, or unacked for a resend timeout) oldest first, then queued unreliable messages,
    /// as many as fit. Returns `None`, writing nothing, when there is nothing to send, no
    /// ack is owed and `force` is false, or when `out` is shorter than [`HEADER_LEN`].
    ///
    /// Call it until `None` to drain a tick's packets. `force` makes this one call return a
    /// packet even when empty (a keepalive: it carries the current ack and asks for none);
    /// passing it on every call of a drain loop would never end the loop.
    pub fn write_packet(&mut self, now: Instant, out: &mut [u8], force: bool) -> Option<usize> {
        let limit = out.len().min(self.config.max_packet_payload);
        let (head, body) = out
            .get_mut(..limit)?
            .split_first_chunk_mut::<HEADER_LEN>()?;
        let now_us = self.sent.clock(now);
        self.sent
            .retire_at(now_us, self.rtt.loss_delay(), &mut self.loss);
        let mut writer = PacketWriter::new(body);
        let entries_before = self.sent.entries_pushed();
        if self.has_reliable() {
            self.write_reliable(now, &mut writer);
        }
        for (id, channel) in self.channels.iter_mut().enumerate() {
            channel.write_unreliable(id as u8, &mut writer);
        }
        let frames = writer.frames();
        if frames == 0 && !force && !self.received.ack_due(now) {
            return None;
        }
        let carries_reliable = self.sent.entries_pushed() > entries_before;
        let probe_due = self.next_probe.is_none_or(|at| now >= at);
        // A packet of unreliable messages that keeps the RTT estimate fed. A keepalive
        // (forced, no frames) does not ask for an ack: each side sends its own when quiet,
        // so an idle connection costs one datagram per keepalive interval each way, not
        // a keepalive and an ack.
        let ping = !carries_reliable && frames > 0 && probe_due;
        let wanted = AckWanted::of(carries_reliable, ping, frames > 0);
        if wanted == AckWanted::Now {
            self.next_probe = Some(now + RTT_PROBE_INTERVAL);
        }
        let header = PacketHeader {
            sequence: self.sent.next_sequence(),
            ack: self.received.take_ack(),
            ping,
        };
        header.encode(head);
        self.sent.push_packet_at(now_us, wanted, &mut self.loss);
        self.counters.packets_sent += 1;
        Some(HEADER_LEN + writer.len())
    }

    /// Whether any reliable channel holds a message, queued or in its window: every
    /// message counts in `reliable_queue_bytes` until it is acked and freed. A game's
    /// stream of unreliable messages skips the reliable channels (each behind a pointer,
    /// a cache miss per packet in a crowd) while none does.
    fn has_reliable(&self) -> bool {
        self.reliable_queue_bytes > 0
    }

    /// The reliable half of [`write_packet`](Self::write_packet): admits queued messages
    /// to the windows, then writes the units due, channel by channel.
    fn write_reliable(&mut self, now: Instant, writer: &mut PacketWriter<'_>) {
        for channel in &mut self.channels {
            if let Channel::Reliable { send, .. } = channel {
                send.admit(
                    &mut self.span_bytes,
                    self.config.max_reassembly_bytes,
                    &self.layout,
                );
            }
        }
        let mut ctx = WriteContext {
            now,
            resend_timeout: self.rtt.resend_timeout(),
            writer,
            sent: &mut self.sent,
            bytes_in_flight: &mut self.bytes_in_flight,
            units_resent: &mut self.counters.units_resent,
        };
        for (id, channel) in self.channels.iter_mut().enumerate() {
            if let Channel::Reliable { send, .. } = channel {
                send.write_due(id as u8, &mut ctx);
            }
        }
    }

    /// Processes one received payload: its acks (RTT samples, freeing acked reliable data)
    /// and its messages. A malformed packet is refused whole, before it has any effect; a
    /// duplicate or stale one is dropped (counted in the stats) and returns `Ok`. Never
    /// panics, and allocates only within `max_reassembly_bytes` (plus delivered messages,
    /// which the caller drains with [`Reliability::receive`]).
    pub fn read_packet(&mut self, now: Instant, payload: &[u8]) -> Result<(), ReadError> {
        let mut delivered = std::mem::take(&mut self.delivered);
        let mut queue = Owned(|channel, message| delivered.push_back((channel, message)));
        let read = self.read_packet_into(now, payload, &mut queue);
        self.delivered = delivered;
        read
    }

    /// [`read_packet`](Self::read_packet), handing each message to `deliver` as it is read
    /// instead of queueing it for [`receive`](Self::receive): a message read whole and in
    /// order is lent as a slice of `payload`, never copied. The connections use this; the
    /// queue is for drivers of this layer alone.
    pub fn read_packet_into(
        &mut self,
        now: Instant,
        payload: &[u8],
        deliver: &mut impl Deliver,
    ) -> Result<(), ReadError> {
        let header = PacketHeader::decode(payload)?;
        let (frames, reliable) = self.check_frames(payload)?;
        let wanted = AckWanted::of(reliable > 0, header.ping, frames > 0);
        let arrival = self.received.insert(header.sequence, wanted, now);
        if arrival == Arrival::Stale {
            // Its acks are as old as it is; ignore them too.
            self.counters.packets_stale += 1;
            return Ok(());
        }
        if let Some(ack) = header.ack {
            self.handle_ack(now, ack);
        }
        self.sent.retire(now, self.rtt.loss_delay(), &mut self.loss);
        if arrival == Arrival::Duplicate {
            self.counters.packets_duplicate += 1;
            return Ok(());
        }
        self.counters.packets_received += 1;
        self.apply_frames(payload, deliver)
    }

    /// The next delivered message and its channel, in delivery order.
    #[inline]
    pub fn receive(&mut self) -> Option<(u8, Bytes)> {
        let message = self.delivered.pop_front();
        if message.is_none() {
            give_back_if_empty(&mut self.delivered);
        }
        message
    }

    /// When [`Reliability::write_packet`] next has something to write without being asked:
    /// the earliest resend of an unacked reliable unit, or the last moment for an ack owed
    /// for unreliable messages (held up to [`MAX_ACK_DELAY`] for a packet to ride on).
    /// `None` when neither is pending. New messages and acks owed at once go out on the
    /// driver's next `write_packet` regardless ([`Reliability::wants_to_send`]).
    pub fn next_timeout(&self) -> Option<Instant> {
        if !self.has_reliable() {
            return self.received.ack_deadline();
        }
        // The resend timeout is worked out only when a window holds something: a game's
        // stream (unreliable messages only) asks this after every packet.
        self.channels
            .iter()
            .filter_map(|channel| match channel {
                Channel::Reliable { send, .. } if !send.window_is_empty() => {
                    send.next_timeout(self.rtt.resend_timeout())
                }
                _ => None,
            })
            .chain(self.received.ack_deadline())
            .min()
    }

    /// Estimates, counters and memory in use.
    pub fn stats(&self) -> ReliabilityStats {
        let c = &self.counters;
        ReliabilityStats {
            rtt: self.rtt.smoothed(),
            rtt_variance: self.rtt.variance(),
            resend_timeout: self.rtt.resend_timeout(),
            packet_loss: self.loss.loss(),
            packets_sent: c.packets_sent,
            packets_acked: c.packets_acked,
            packets_received: c.packets_received,
            packets_duplicate: c.packets_duplicate,
            packets_stale: c.packets_stale,
            messages_dropped: c.messages_dropped,
            messages_out_of_sequence: c.messages_out_of_sequence,
            units_resent: c.units_resent,
            bytes_in_flight: self.bytes_in_flight,
            reliable_queue_bytes: self.reliable_queue_bytes,
            reassembly_bytes: self.held.bytes,
        }
    }

    /// Asks for what [`write_packet`](Self::write_packet) reads beyond this struct: the
    /// channels, their first queued messages, and the ends of the sent-packet ring. A
    /// driver writing for many connections in turn asks for the next one's while it writes
    /// for this one (see [`crate::prefetch`]); a hint, it changes nothing.
    pub fn prefetch_for_write(&self) {
        crate::prefetch::prefetch(self.channels.as_slice());
        for channel in &self.channels {
            channel.prefetch_front();
        }
        self.sent.prefetch_ends();
    }

    /// True when [`write_packet`](Self::write_packet) has something to write now without
    /// `force`: an ack owed at once, queued unreliable messages, or reliable units not yet
    /// sent (new messages the window admits, or units a full packet left behind). It may say true when
    /// `write_packet` then finds nothing, never false when it would write; resends that come
    /// due later are [`next_timeout`](Self::next_timeout)'s.
    pub fn wants_to_send(&self) -> bool {
        let reliable = self.has_reliable();
        self.received.ack_owed()
            || self.channels.iter().any(|channel| match channel {
                Channel::Reliable { send, .. } => {
                    reliable && send.has_sendable(self.span_bytes, self.config.max_reassembly_bytes)
                }
                other => other.has_unreliable(),
            })
    }

    /// True while unreliable messages wait or reliable ones are queued or unacked.
    pub fn has_pending(&self) -> bool {
        self.reliable_queue_bytes > 0 || self.channels.iter().any(Channel::has_unreliable)
    }

    /// Every check that needs no change of state, so that a packet refused here has had no
    /// effect. Returns the number of frames and how many of them are reliable.
    fn check_frames(&self, payload: &[u8]) -> Result<(usize, usize), ReadError> {
        let (mut frames, mut reliable) = (0, 0);
        for frame in FrameReader::new(payload, HEADER_LEN, &self.config.channels) {
            frames += 1;
            let frame = frame?;
            if matches!(frame, Frame::Reliable { .. } | Frame::Fragment { .. }) {
                reliable += 1;
            }
            match frame {
                Frame::Reliable { channel, id, data } => {
                    self.check_size(data.len())?;
                    if let Some(Channel::Reliable { receive, .. }) = self.channel(channel) {
                        receive.check_message(channel, id)?;
                    }
                }
                Frame::Fragment {
                    channel,
                    id,
                    total_len,
                    fragment_size,
                    ..
                } => {
                    self.check_size(total_len as usize)?;
                    if let Some(Channel::Reliable { receive, .. }) = self.channel(channel) {
                        receive.check_fragment(channel, id, total_len, fragment_size)?;
                    }
                }
                Frame::Unreliable { .. } | Frame::Sequenced { .. } => {}
            }
        }
        Ok((frames, reliable))
    }

    fn check_size(&self, len: usize) -> Result<(), ReadError> {
        let max = self.config.max_message_size;
        if len > max {
            return Err(ReadError::MessageTooLarge { len, max });
        }
        Ok(())
    }

    fn channel(&self, channel: u8) -> Option<&Channel> {
        self.channels.get(usize::from(channel))
    }

    /// Delivers a checked packet's messages.
    fn apply_frames(
        &mut self,
        payload: &[u8],
        deliver: &mut impl Deliver,
    ) -> Result<(), ReadError> {
        let Self {
            config,
            channels,
            held,
            counters,
            ..
        } = self;
        for frame in FrameReader::new(payload, HEADER_LEN, &config.channels) {
            match frame? {
                Frame::Reliable { channel, id, data } => {
                    if let Some(Channel::Reliable { receive, .. }) =
                        channels.get_mut(usize::from(channel))
                    {
                        receive.on_message(channel, id, data, held, deliver)?;
                    }
                }
                Frame::Fragment {
                    channel,
                    id,
                    total_len,
                    fragment_size,
                    index,
                    data,
                } => {
                    if let Some(Channel::Reliable { receive, .. }) =
                        channels.get_mut(usize::from(channel))
                    {
                        receive.on_fragment(
                            channel,
                            id,
                            total_len,
                            fragment_size,
                            index,
                            data,
                            held,
                            deliver,
                        )?;
                    }
                }
                Frame::Unreliable { channel, data } => deliver.message(channel, data),
                Frame::Sequenced {
                    channel,
                    sequence,
                    data,
                } => {
                    if let Some(Channel::Sequenced { last_delivered, .. }) =
                        channels.get_mut(usize::from(channel))
                    {
                        if accept_sequenced(last_delivered, sequence) {
                            deliver.message(channel, data);
                        } else {
                            counters.messages_out_of_sequence += 1;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Applies the peer's ack: marks our packets acked, their reliable units delivered, takes
    /// an RTT sample and frees fully acked messages.
    fn handle_ack(&mut self, now: Instant, ack: Ack) {
        let mut news = false;
        for sequence in self.sent.named_in_flight(ack) {
            let Some(acked) = self.sent.ack(sequence, now) else {
                continue;
            };
            news = true;
            self.counters.packets_acked += 1;
            if sequence == ack.ack
                && self
                    .largest_acked
                    .is_none_or(|largest| sequence_newer(sequence, largest))
            {
                self.largest_acked = Some(sequence);
                if acked.probe {
                    self.rtt.sample(acked.age);
                }
            }
            for index in acked.entries {
                let Some(entry) = self.sent.entry(index) else {
                    continue;
                };
                if let Some(Channel::Reliable { send, .. }) =
                    self.channels.get_mut(usize::from(entry.channel))
                    && let Some(len) = send.ack(entry.message, entry.unit)
                {
                    self.bytes_in_flight -= len;
                }
            }
        }
        if !news {
            // Nothing freed and no RTT sample: the channels are as they were.
            return;
        }
        for channel in &mut self.channels {
            if let Channel::Reliable { send, .. } = channel {
                let (freed, messages) = send.pop_acked();
                self.reliable_queue_bytes -= freed + messages * RELIABLE_MESSAGE_OVERHEAD;
                self.span_bytes -= freed;
                // The resend timeout may have changed with the sample.
                send.invalidate_cursor();
            }
        }
    }
}

#[cfg(test)]
mod tests;
