//! An established connection, as either endpoint sees it: its ciphers and packet sequence,
//! replay protection, reliability and channels, keepalives and timeout.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_aead::SealBatch;

use crate::crypto::{Cipher, Key};
use crate::packet::{
    ENCRYPTED_OVERHEAD_MAX, EncryptedHeader, HANDSHAKE_SEQUENCE_BIT, PacketType, UnsealedPacket,
    is_handshake_sequence, write_encrypted, write_unsealed,
};
use crate::params::{ConnectionParams, DisconnectReason};
use crate::reliable::{Deliver, Reliability, ReliabilityConfig, ReliabilityStats, SendError};
use crate::replay::ReplayWindow;
use crate::websocket::{MAX_CLOSE_REASON_BYTES, clamp_close_reason};

/// Disconnect packets sent when a side closes, so one lost datagram does not leave the
/// other waiting for its timeout.
pub(crate) const DISCONNECT_REDUNDANCY: usize = 3;

/// Figures about one connection.
#[derive(Debug, Clone)]
pub struct ConnectionStats {
    /// Acks, round-trip time and loss, from the reliability layer.
    pub reliability: ReliabilityStats,
    /// Encrypted packets sent.
    pub packets_sent: u64,
    /// Encrypted packets that authenticated and were accepted.
    pub packets_received: u64,
    /// Packets refused as replays (a sequence seen before or too old).
    pub packets_replayed: u64,
    /// Packets that did not authenticate under this connection's key.
    pub packets_unauthenticated: u64,
    /// Payloads the reliability layer refused as malformed.
    pub payloads_malformed: u64,
}

/// Longest disconnect body: the reason code, then at most a close frame's worth of text
/// ([`MAX_CLOSE_REASON_BYTES`]), so a UDP client reads the same words a WebSocket one does.
pub(crate) const MAX_DISCONNECT_BODY: usize = 1 + MAX_CLOSE_REASON_BYTES;

/// A disconnect's body: the reason code, then `text` cut to [`MAX_CLOSE_REASON_BYTES`] on a
/// character boundary (nothing when empty). Returns the length written into `buf`.
pub(crate) fn write_disconnect(
    reason: DisconnectReason,
    text: &str,
    buf: &mut [u8; MAX_DISCONNECT_BODY],
) -> usize {
    let text = clamp_close_reason(text).as_bytes();
    buf[0] = reason.code();
    buf[1..=text.len()].copy_from_slice(text);
    1 + text.len()
}

/// Reads a disconnect's body: a reason code, then optional UTF-8 text of at most
/// [`MAX_CLOSE_REASON_BYTES`]. `None` for anything else.
pub(crate) fn read_disconnect(body: &[u8]) -> Option<(DisconnectReason, &str)> {
    let (code, text) = body.split_first()?;
    if text.len() > MAX_CLOSE_REASON_BYTES {
        return None;
    }
    let text = std::str::from_utf8(text).ok()?;
    Some((DisconnectReason::from_code(*code), text))
}

/// What an authenticated packet meant.
pub(crate) enum Received {
    /// Acks and messages were taken in; the messages went to the caller's [`Deliver`].
    Payload,
    /// The peer closed the connection, saying why, perhaps in words (see
    /// [`read_disconnect`]).
    Disconnect(DisconnectReason, String),
    /// A packet type this side ignores once connected (a repeated handshake reply).
    Other,
}

/// Why a packet was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    Replay,
    Unauthenticated,
    Malformed,
    /// A packet type or sequence that has no place on a connection (a handshake packet),
    /// dropped before it is opened.
    NotOnConnection,
    /// The peer broke the protocol badly enough to end the connection.
    Fatal(DisconnectReason),
}

/// Which endpoint sent the packets a connection takes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sender {
    Client,
    Server,
}

impl Sender {
    /// The packet types this side sends on an established connection: payloads and
    /// disconnects, and from the server the accepted packet (repeated when a client's
    /// response crossed it). Challenges, denials and responses belong to the handshake.
    fn sends_on_connection(self, packet_type: PacketType) -> bool {
        match packet_type {
            PacketType::Payload | PacketType::Disconnect => true,
            PacketType::Accepted => self == Self::Server,
            _ => false,
        }
    }
}

/// Laid out hot first (`repr(C)`, on a cache line of its own): what every packet sent
/// reads or writes comes first, then the reliability layer (its own hot part first), then
/// what only received packets and the stats read. A crowd's connections do not stay in
/// cache from one of their packets to the next (the kernel's sends in between evict them),
/// so each line a packet touches is a miss; in the compiler's own order a packet sent
/// touched 13 of the 14 lines. [`prefetch_for_send`](Self::prefetch_for_send) asks for the
/// hot lines alone.
#[repr(C, align(64))]
pub(crate) struct Connection {
    /// Each direction's key as its 32 bytes, made ready for each datagram: a `ring` key
    /// object is 544 bytes (sized for AES-GCM's key schedule whatever the cipher), so
    /// holding the two was 1.1 KB of a connection's 1.9. For ChaCha20-Poly1305 making one
    /// is a copy of the key; the object is then copied out of `ring`'s constructors, which
    /// the release build's LTO elides (without it, +2.7 % instructions in the relay's turn
    /// for the receiving key alone).
    send_key: Key,
    pub(crate) address: SocketAddr,
    send_sequence: u64,
    protocol_id: u64,
    /// When a keepalive is due: the keepalive interval after the last packet sent. Kept as
    /// deadlines, not as the times of the last packets, so that a packet sent compares
    /// and adds once instead of subtracting (`Instant` arithmetic is a call into `std`,
    /// a few of which per packet were 8 % of a crowd's sending).
    keepalive_at: Instant,
    keepalive_interval: Duration,
    /// When the connection times out: the timeout after the last packet received.
    timeout_at: Instant,
    reliability: Reliability,
    receive_key: Key,
    pub(crate) client_id: u64,
    timeout: Duration,
    replay: ReplayWindow,
    counters: PacketCounters,
}

/// Bytes at the start of a [`Connection`] that a packet sent reads or writes.
const SEND_HOT_BYTES: usize =
    std::mem::offset_of!(Connection, reliability) + Reliability::HOT_BYTES;

// What `prefetch_for_send` relies on, checked as the crate compiles: the send path's part
// comes first and stops short of what only received packets and the stats read.
const _: () = {
    assert!(
        SEND_HOT_BYTES <= 10 * 64,
        "the send path's part grew past ten lines"
    );
    assert!(std::mem::offset_of!(Connection, receive_key) >= SEND_HOT_BYTES);
    assert!(std::mem::offset_of!(Connection, replay) >= SEND_HOT_BYTES);
    assert!(std::mem::offset_of!(Connection, counters) >= SEND_HOT_BYTES);
};

/// This layer's counters; [`Connection::stats`] adds the reliability layer's to them (held
/// once each: a copy of those in every connection was 144 bytes a player). Payload packets
/// sent are the reliability layer's count, so only control packets are counted here.
#[derive(Debug, Default, Clone, Copy)]
struct PacketCounters {
    control_packets_sent: u64,
    packets_received: u64,
    packets_replayed: u64,
    packets_unauthenticated: u64,
    payloads_malformed: u64,
}

impl Connection {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        now: Instant,
        address: SocketAddr,
        client_id: u64,
        protocol_id: u64,
        send_key: &Key,
        receive_key: &Key,
        params: &ConnectionParams,
        reliability: &ReliabilityConfig,
    ) -> Result<Self, crate::reliable::ConfigError> {
        // The dictated message size wins over local bounds: a receiver must be able to
        // reassemble what its peer may send, or the two would disagree mid-message.
        let max_message_size = params.max_message_size as usize;
        let reliability = Reliability::new(ReliabilityConfig {
            channels: params.channels.clone(),
            max_packet_payload: usize::from(params.mtu) - ENCRYPTED_OVERHEAD_MAX,
            max_message_size,
            max_reassembly_bytes: reliability.max_reassembly_bytes.max(max_message_size),
            max_reliable_queue_bytes: reliability.max_reliable_queue_bytes.max(max_message_size),
            ..reliability.clone()
        })?;
        Ok(Self {
            send_key: send_key.clone(),
            address,
            send_sequence: 0,
            protocol_id,
            keepalive_at: now + params.keepalive_interval,
            keepalive_interval: params.keepalive_interval,
            timeout_at: now + params.timeout,
            reliability,
            receive_key: receive_key.clone(),
            client_id,
            timeout: params.timeout,
            replay: ReplayWindow::default(),
            counters: PacketCounters::default(),
        })
    }

    /// Authenticates, de-duplicates and takes in one datagram from the peer (`sender`),
    /// handing its messages to `deliver`. Only the types `sender` sends on a connection,
    /// in the connection's half of the sequence space, are opened: a handshake packet
    /// (a recorded challenge, say) is refused before it could touch the replay window.
    pub(crate) fn handle_datagram(
        &mut self,
        now: Instant,
        header: EncryptedHeader,
        datagram: &[u8],
        scratch: &mut [u8],
        deliver: &mut impl Deliver,
        sender: Sender,
    ) -> Result<Received, Refused> {
        if !sender.sends_on_connection(header.packet_type) || is_handshake_sequence(header.sequence)
        {
            return Err(Refused::NotOnConnection);
        }
        if self.replay.is_replay(header.sequence) {
            self.counters.packets_replayed += 1;
            return Err(Refused::Replay);
        }
        let cipher = Cipher::new(&self.receive_key);
        let Some(body) = header.open(datagram, &cipher, self.protocol_id, scratch) else {
            self.counters.packets_unauthenticated += 1;
            return Err(Refused::Unauthenticated);
        };
        self.replay.accept(header.sequence);
        self.timeout_at = now + self.timeout;
        self.counters.packets_received += 1;
        match header.packet_type {
            PacketType::Payload => match self.reliability.read_packet_into(now, body, deliver) {
                Ok(()) => Ok(Received::Payload),
                Err(error) if error.is_fatal() => {
                    Err(Refused::Fatal(DisconnectReason::ProtocolViolation))
                }
                Err(_) => {
                    self.counters.payloads_malformed += 1;
                    Err(Refused::Malformed)
                }
            },
            PacketType::Disconnect => match read_disconnect(body) {
                Some((reason, text)) => Ok(Received::Disconnect(reason, text.to_string())),
                None => Err(Refused::Malformed),
            },
            _ => Ok(Received::Other),
        }
    }

    /// Whether a packet authenticates under the key the peer seals with, without taking it
    /// in (the server's check of a response repeated by a client already connected).
    pub(crate) fn authenticates(
        &self,
        header: EncryptedHeader,
        datagram: &[u8],
        scratch: &mut [u8],
    ) -> bool {
        header
            .open(
                datagram,
                &Cipher::new(&self.receive_key),
                self.protocol_id,
                scratch,
            )
            .is_some()
    }

    /// Records a packet that authenticated outside `handle_datagram` (the client's accepted
    /// packet, opened during the handshake), so a copy of it is a replay.
    pub(crate) fn note_received(&mut self, sequence: u64, now: Instant) {
        if !self.replay.is_replay(sequence) {
            self.replay.accept(sequence);
        }
        self.timeout_at = now + self.timeout;
    }

    /// Queues a message on a channel.
    pub(crate) fn send(&mut self, channel: u8, message: Bytes) -> Result<(), SendError> {
        self.reliability.send(channel, message)
    }

    fn next_sequence(&mut self) -> u64 {
        let sequence = self.send_sequence;
        self.send_sequence += 1;
        sequence
    }

    /// The connection's half of the sequence space is spent: it sends nothing more (and
    /// times out), rather than reach the handshake half. Never, in practice: 2^63 packets.
    fn out_of_sequences(&self) -> bool {
        self.send_sequence >= HANDSHAKE_SEQUENCE_BIT
    }

    /// Writes the next payload packet into `buf`: data, owed acks, or a keepalive when the
    /// connection has been quiet for the keepalive interval. `None` when nothing is due.
    pub(crate) fn write_payload(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let packet = self.write_payload_unsealed(now, buf)?;
        packet.seal(buf, &Cipher::new(&self.send_key), self.protocol_id);
        Some(packet.len)
    }

    /// [`write_payload`](Self::write_payload) into `buf[offset..end]`, queued in `batch` to
    /// be sealed with other connections' packets (the server's send turn). Returns the
    /// packet's length.
    pub(crate) fn stage_payload(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        offset: usize,
        end: usize,
        batch: &mut SealBatch,
    ) -> Option<usize> {
        let packet = self.write_payload_unsealed(now, &mut buf[offset..end])?;
        packet.queue(batch, &self.send_key, self.protocol_id, buf, offset);
        Some(packet.len)
    }

    fn write_payload_unsealed(&mut self, now: Instant, buf: &mut [u8]) -> Option<UnsealedPacket> {
        if self.out_of_sequences() {
            return None;
        }
        let force = now >= self.keepalive_at;
        let reliability = &mut self.reliability;
        let packet = write_unsealed(buf, PacketType::Payload, self.send_sequence, |body| {
            reliability.write_packet(now, body, force)
        })?;
        self.next_sequence();
        self.keepalive_at = now + self.keepalive_interval;
        Some(packet)
    }

    /// Writes an encrypted control packet (accepted, disconnect, denied) with `body`.
    pub(crate) fn write_control(
        &mut self,
        now: Instant,
        packet_type: PacketType,
        body: &[u8],
        buf: &mut [u8],
    ) -> Option<usize> {
        if self.out_of_sequences() {
            return None;
        }
        let sequence = self.send_sequence;
        let len = write_encrypted(
            buf,
            packet_type,
            sequence,
            &Cipher::new(&self.send_key),
            self.protocol_id,
            |out| {
                out.get_mut(..body.len())?.copy_from_slice(body);
                Some(body.len())
            },
        )?;
        self.next_sequence();
        self.keepalive_at = now + self.keepalive_interval;
        self.counters.control_packets_sent += 1;
        Some(len)
    }

    /// Asks for the state a payload written now reads outside this struct (see
    /// [`Reliability::prefetch_for_write`]).
    pub(crate) fn prefetch_for_write(&self) {
        self.reliability.prefetch_for_write();
    }

    /// Asks for the lines of this struct a packet sent reads or writes (see
    /// [`crate::prefetch`]): the hot part the layout puts first, not the whole struct.
    pub(crate) fn prefetch_for_send(&self) {
        crate::prefetch::prefetch_bytes(self, SEND_HOT_BYTES);
    }

    /// Whether [`write_payload`](Self::write_payload) has data or an owed ack to write now;
    /// keepalives and resends come from [`next_timeout`](Self::next_timeout) instead.
    pub(crate) fn wants_to_send(&self) -> bool {
        self.reliability.wants_to_send()
    }

    /// Whether the peer has been silent past the timeout.
    pub(crate) fn is_timed_out(&self, now: Instant) -> bool {
        now >= self.timeout_at
    }

    /// When this connection next needs attention: a keepalive, a resend or its timeout.
    pub(crate) fn next_timeout(&self) -> Instant {
        let mut next = self.keepalive_at.min(self.timeout_at);
        if let Some(resend) = self.reliability.next_timeout() {
            next = next.min(resend);
        }
        next
    }

    pub(crate) fn stats(&self) -> ConnectionStats {
        let c = self.counters;
        let reliability = self.reliability.stats();
        ConnectionStats {
            packets_sent: c.control_packets_sent + reliability.packets_sent,
            reliability,
            packets_received: c.packets_received,
            packets_replayed: c.packets_replayed,
            packets_unauthenticated: c.packets_unauthenticated,
            payloads_malformed: c.payloads_malformed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disconnect_carries_a_code_and_bounded_words() {
        let mut buf = [0u8; MAX_DISCONNECT_BODY];
        let len = write_disconnect(DisconnectReason::Kicked, "room crashed", &mut buf);
        assert_eq!(&buf[..len], b"\x04room crashed");
        assert_eq!(
            read_disconnect(&buf[..len]),
            Some((DisconnectReason::Kicked, "room crashed"))
        );
        let len = write_disconnect(DisconnectReason::TimedOut, "", &mut buf);
        assert_eq!(&buf[..len], [2], "no words: the code alone, as before");
        // "é" is two bytes: 100 of them are cut to 61 (122 bytes), never half a character.
        let len = write_disconnect(DisconnectReason::Kicked, &"é".repeat(100), &mut buf);
        assert_eq!(len, 1 + 122);
        assert_eq!(read_disconnect(&[]), None);
        assert_eq!(read_disconnect(&[4, 0xff]), None, "not UTF-8");
        let mut long = vec![4];
        long.extend([b'a'; 124]);
        assert_eq!(read_disconnect(&long), None, "past 123 bytes");
    }
}
