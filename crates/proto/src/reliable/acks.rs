//! Packet-level acknowledgement: which of the peer's packets arrived (and which of those we
//! still owe an ack for), and which of ours are in flight with what they carried.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::{Duration, Instant};

use super::header::Ack;
use super::rtt::LossEstimator;
use super::sequence::sequence_newer;

/// How many of the peer's most recent sequences we remember: older packets are stale (we can
/// no longer tell whether they are duplicates) and are dropped unacked.
pub const RECEIVED_WINDOW: u32 = 256;

/// Most of our packets tracked in flight; past it the oldest is given up as lost.
const MAX_SENT_RECORDS: usize = 1024;

/// Longest an ack for a packet of unreliable messages waits for a packet of ours to ride
/// on before it goes alone: the default keepalive interval. A game's streams (snapshots one
/// way, inputs every few ticks the other) carry every ack well within it, so a lone ack is
/// rarely needed; without the wait, every snapshot and every input would cost a second
/// datagram back. Reliable data and pings are acked at once: resends and RTT samples
/// depend on it. The wait only delays the loss estimate.
pub const MAX_ACK_DELAY: Duration = Duration::from_millis(100);

/// How soon the peer must acknowledge a packet it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AckWanted {
    /// Only acks: acknowledged whenever the peer next sends anything.
    Never,
    /// Unreliable messages only: within [`MAX_ACK_DELAY`].
    Soon,
    /// Reliable data or a ping: in the peer's next packet, sent at once.
    Now,
}

impl AckWanted {
    /// What a packet asks for, from what it carries: the same rule for the sender (what it
    /// waits for) and the receiver (what it owes).
    pub(crate) fn of(reliable: bool, ping: bool, frames: bool) -> Self {
        if reliable || ping {
            Self::Now
        } else if frames {
            Self::Soon
        } else {
            Self::Never
        }
    }
}

/// 256 bits indexed from 0, stored as four little-endian words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bits256([u64; 4]);

impl Bits256 {
    pub(crate) fn get(&self, i: u32) -> bool {
        i < 256 && self.0[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    pub(crate) fn set(&mut self, i: u32, value: bool) {
        if i < 256 {
            let word = &mut self.0[(i / 64) as usize];
            let mask = 1u64 << (i % 64);
            if value {
                *word |= mask;
            } else {
                *word &= !mask;
            }
        }
    }

    /// Moves bit `i` to `i + n`; bits pushed past 255 are lost and the low `n` become 0.
    pub(crate) fn shift_up(&mut self, n: u32) {
        if n >= 256 {
            self.0 = [0; 4];
            return;
        }
        if (1..64).contains(&n) {
            // Every packet that arrives in order shifts by one: each word takes the bits
            // its lower neighbour pushes out.
            let [a, b, c, d] = self.0;
            self.0 = [
                a << n,
                b << n | a >> (64 - n),
                c << n | b >> (64 - n),
                d << n | c >> (64 - n),
            ];
            return;
        }
        let words = (n / 64) as usize;
        let bits = n % 64;
        let old = self.0;
        for k in 0..4usize {
            let low = k.checked_sub(words).map_or(0, |j| old[j] << bits);
            let carry = match k.checked_sub(words + 1) {
                Some(j) if bits != 0 => old[j] >> (64 - bits),
                _ => 0,
            };
            self.0[k] = low | carry;
        }
    }

    /// Bits `start..start + 32` as a `u32` (bit `start` lowest); bits past 255 read as 0.
    pub(crate) fn u32_at(&self, start: u32) -> u32 {
        let (word, shift) = ((start / 64) as usize, start % 64);
        let Some(&low) = self.0.get(word) else {
            return 0;
        };
        let mut bits = low >> shift;
        if shift > 32
            && let Some(&high) = self.0.get(word + 1)
        {
            bits |= high << (64 - shift);
        }
        bits as u32
    }

    /// Clears bits `start..end` (those below 256).
    pub(crate) fn clear_range(&mut self, start: u32, end: u32) {
        let end = end.min(256);
        let mut at = start;
        while at < end {
            let word = (at / 64) as usize;
            let low = at % 64;
            let high = (end - word as u32 * 64).min(64);
            let mask = (u64::MAX >> (64 - (high - low))) << low;
            self.0[word] &= !mask;
            at = word as u32 * 64 + high;
        }
    }

    pub(crate) fn lowest_set(&self) -> Option<u32> {
        self.0
            .iter()
            .enumerate()
            .find(|(_, word)| **word != 0)
            .map(|(k, word)| k as u32 * 64 + word.trailing_zeros())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}

/// What a received packet sequence turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Not seen before: process it.
    New,
    /// Seen before: its messages were already handled.
    Duplicate,
    /// Older than the window: cannot tell, so drop it (unacked; the peer resends).
    Stale,
}

/// The peer's packets we received. Bit `i` of each set stands for sequence `latest - i`.
#[derive(Debug, Default)]
pub(crate) struct ReceivedPackets {
    latest: Option<u16>,
    received: Bits256,
    /// Received ack-eliciting packets not yet covered by an ack we sent.
    unreported: Bits256,
    /// Some unreported packet wants its ack at once ([`AckWanted::Now`]).
    urgent: bool,
    /// When the oldest unreported [`AckWanted::Soon`] packet arrived.
    soon_since: Option<Instant>,
}

impl ReceivedPackets {
    pub(crate) fn insert(&mut self, sequence: u16, wanted: AckWanted, now: Instant) -> Arrival {
        let back = match self.latest {
            Some(latest) if !sequence_newer(sequence, latest) => {
                u32::from(latest.wrapping_sub(sequence))
            }
            Some(latest) => {
                let ahead = u32::from(sequence.wrapping_sub(latest));
                self.received.shift_up(ahead);
                self.unreported.shift_up(ahead);
                self.latest = Some(sequence);
                0
            }
            None => {
                self.latest = Some(sequence);
                0
            }
        };
        if back >= RECEIVED_WINDOW {
            return Arrival::Stale;
        }
        // A newer sequence has just shifted its bit in clear, so only a repeat finds it set.
        if self.received.get(back) {
            return Arrival::Duplicate;
        }
        self.received.set(back, true);
        match wanted {
            AckWanted::Never => {}
            AckWanted::Soon => {
                self.unreported.set(back, true);
                self.soon_since.get_or_insert(now);
            }
            AckWanted::Now => {
                self.unreported.set(back, true);
                self.urgent = true;
            }
        }
        Arrival::New
    }

    /// True while a packet that wants its ack at once has not been acknowledged in a packet
    /// we sent.
    pub(crate) fn ack_owed(&self) -> bool {
        self.urgent
    }

    /// When an ack owed for unreliable messages must leave, alone if nothing else does.
    pub(crate) fn ack_deadline(&self) -> Option<Instant> {
        self.soon_since.map(|since| since + MAX_ACK_DELAY)
    }

    /// Whether a packet must be sent now for its ack alone.
    pub(crate) fn ack_due(&self, now: Instant) -> bool {
        self.urgent || self.ack_deadline().is_some_and(|at| at <= now)
    }

    /// The ack for the next packet we send, or `None` before any packet arrived. It names the
    /// newest unreported packet (normally the latest received) and the 32 before it, and
    /// marks them reported; older unreported packets go in the next packet's ack, so a burst
    /// of more than 33 packets is still fully acknowledged by a few packets back.
    pub(crate) fn take_ack(&mut self) -> Option<Ack> {
        let latest = self.latest?;
        let from = self.unreported.lowest_set().unwrap_or(0);
        let bits = self.received.u32_at(from + 1);
        self.unreported.clear_range(from, from + 33);
        // Older unreported packets (a burst past 33) keep what they asked for until the
        // next packet's ack covers them.
        if self.unreported.is_empty() {
            self.urgent = false;
            self.soon_since = None;
        }
        Some(Ack {
            ack: latest.wrapping_sub(from as u16),
            bits,
        })
    }
}

/// A reliable unit a packet carried: which message (by absolute number, so an entry can
/// never be mistaken for a later message that reuses the u16 id) and which fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SentEntry {
    pub(crate) channel: u8,
    pub(crate) unit: u16,
    pub(crate) message: u64,
}

/// One of our packets in flight, in 12 bytes (with an `Instant` and a `u64` it took 32): a
/// connection sending 60 packets a second holds a round trip's worth of these, more while
/// a lost packet holds the front for the loss delay, and its ring keeps the largest size it
/// reached.
#[derive(Debug)]
struct SentRecord {
    /// When it was sent, in microseconds since [`SentPackets::epoch`], wrapping every 71
    /// minutes: a record is retired within the loss delay (or pushed out by newer ones), so
    /// its age taken with wrapping arithmetic is exact.
    sent_us: u32,
    /// The low 32 bits of the absolute index one past this packet's last entry (see
    /// [`SentPackets::absolute_end`]); its first is the previous record's end (or
    /// `entries_base` for the front record).
    entries_end: u32,
    acked: bool,
    eliciting: bool,
    /// Asked for its ack at once, so the ack's delay is the path's: an RTT sample.
    probe: bool,
}

/// A packet of ours that the peer just acknowledged.
pub(crate) struct AckedPacket {
    /// Time from its sending to the ack.
    pub(crate) age: Duration,
    /// Whether it asked for its ack at once (reliable data or a ping). Only those give RTT
    /// samples: the peer holds other acks until it has something to send (up to
    /// [`MAX_ACK_DELAY`]), which says nothing about the path.
    pub(crate) probe: bool,
    pub(crate) entries: Range<u64>,
}

/// Sequences an ack names, as `newest - back` for each set bit `back` (see
/// [`SentPackets::named_in_flight`]), newest first.
pub(crate) struct NamedSequences {
    newest: u16,
    backs: u64,
}

impl Iterator for NamedSequences {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        if self.backs == 0 {
            return None;
        }
        let back = self.backs.trailing_zeros();
        self.backs &= self.backs - 1;
        Some(self.newest.wrapping_sub(back as u16))
    }
}

/// Our packets in flight, in sequence order, and the reliable units each carried. Records
/// and entries live in two ring buffers that keep their capacity, so sending a packet does
/// not allocate once they have grown to the connection's working size.
#[derive(Debug, Default)]
pub(crate) struct SentPackets {
    records: VecDeque<SentRecord>,
    /// Sequence of `records[0]`, or of the next packet when there are none.
    front_sequence: u16,
    entries: VecDeque<SentEntry>,
    /// Absolute index of `entries[0]`.
    entries_base: u64,
    /// The first packet's sending time: records keep their times as offsets from it.
    epoch: Option<Instant>,
}

impl SentPackets {
    /// Asks for the records a packet written now reads and writes: the oldest (is it
    /// retired?) and the newest (the next goes after it). See [`crate::prefetch`].
    pub(crate) fn prefetch_ends(&self) {
        if let Some(front) = self.records.front() {
            crate::prefetch::prefetch(front);
        }
        if let Some(back) = self.records.back() {
            crate::prefetch::prefetch(back);
        }
    }

    /// Sequence the next packet will carry.
    pub(crate) fn next_sequence(&self) -> u16 {
        self.front_sequence.wrapping_add(self.records.len() as u16)
    }

    /// Reliable units noted so far: grows while a packet carries some.
    pub(crate) fn entries_pushed(&self) -> u64 {
        self.entries_base + self.entries.len() as u64
    }

    /// Notes a reliable unit carried by the packet being written.
    pub(crate) fn push_entry(&mut self, entry: SentEntry) {
        self.entries.push_back(entry);
    }

    /// [`push_packet_at`](Self::push_packet_at) at `now`, for tests.
    #[cfg(test)]
    pub(crate) fn push_packet(
        &mut self,
        now: Instant,
        wanted: AckWanted,
        loss: &mut LossEstimator,
    ) {
        let now_us = self.clock(now);
        self.push_packet_at(now_us, wanted, loss);
    }

    /// Finishes the packet being written (its entries were pushed already), sent at
    /// `now_us` as [`clock`](Self::clock) read it. `wanted` is the ack the packet asked
    /// for; all but acks-only count in the loss estimate.
    pub(crate) fn push_packet_at(
        &mut self,
        now_us: u32,
        wanted: AckWanted,
        loss: &mut LossEstimator,
    ) {
        // At the bound the oldest leaves first, and the newest takes its place in the
        // ring: the line that retiring has just read. Pushing first would touch a second
        // line, half the ring away (in a ring grown to twice the bound).
        if self.records.len() >= MAX_SENT_RECORDS {
            self.pop_front(loss);
        }
        self.records.push_back(SentRecord {
            sent_us: now_us,
            // Truncated: see `absolute_end`.
            entries_end: self.entries_pushed() as u32,
            acked: false,
            eliciting: wanted != AckWanted::Never,
            probe: wanted == AckWanted::Now,
        });
    }

    /// The sequences `ack` names that are still held here (sent and not yet retired),
    /// newest first. Of the 33 sequences an ack names, most were retired long ago: looking
    /// each one up was a third of a received packet's reliability work.
    pub(crate) fn named_in_flight(&self, ack: Ack) -> NamedSequences {
        let none = NamedSequences {
            newest: ack.ack,
            backs: 0,
        };
        let held = self.records.len() as u32;
        if held == 0 {
            return none;
        }
        // Back `b` names the record at offset `newest - b`, held while in `0..held`.
        let newest = u32::from(ack.ack.wrapping_sub(self.front_sequence));
        let highest = newest.min(32);
        let lowest = (newest + 1).saturating_sub(held);
        if lowest > highest {
            return none;
        }
        let in_window = (u64::MAX >> (63 - highest)) & (u64::MAX << lowest);
        NamedSequences {
            newest: ack.ack,
            backs: (u64::from(ack.bits) << 1 | 1) & in_window,
        }
    }

    /// Marks our packet `sequence` acknowledged at `now`; returns it if this is news.
    pub(crate) fn ack(&mut self, sequence: u16, now: Instant) -> Option<AckedPacket> {
        let index = usize::from(sequence.wrapping_sub(self.front_sequence));
        let start = match index.checked_sub(1) {
            Some(prev) => self.absolute_end(self.records.get(prev)?),
            None => self.entries_base,
        };
        let record = self.records.get(index)?;
        if record.acked {
            return None;
        }
        let acked = AckedPacket {
            age: self.age(record, now),
            probe: record.probe,
            entries: start..self.absolute_end(record),
        };
        self.records[index].acked = true;
        Some(acked)
    }

    /// A record's entries end as an absolute index: entries held are far fewer than 2^32
    /// (at most [`MAX_SENT_RECORDS`] packets' worth), so the low 32 bits and
    /// `entries_base` place it.
    fn absolute_end(&self, record: &SentRecord) -> u64 {
        self.entries_base + u64::from(record.entries_end.wrapping_sub(self.entries_base as u32))
    }

    /// Time since `record` was sent.
    fn age(&self, record: &SentRecord, now: Instant) -> Duration {
        let now_us = self.epoch.map_or(0, |epoch| micros_since(epoch, now));
        Duration::from_micros(u64::from(now_us.wrapping_sub(record.sent_us)))
    }

    /// `now` as records keep their times: microseconds since the first packet's sending
    /// (which `now` becomes, before there was one). A packet written reads it once for
    /// both its retiring and its record.
    pub(crate) fn clock(&mut self, now: Instant) -> u32 {
        micros_since(*self.epoch.get_or_insert(now), now)
    }

    pub(crate) fn entry(&self, index: u64) -> Option<SentEntry> {
        let offset = usize::try_from(index.checked_sub(self.entries_base)?).ok()?;
        self.entries.get(offset).copied()
    }

    /// Retires packets from the front once their fate is known: acked, or unacked for
    /// `loss_delay` (lost). Each retired ack-eliciting packet feeds the loss estimate.
    pub(crate) fn retire(&mut self, now: Instant, loss_delay: Duration, loss: &mut LossEstimator) {
        if self.records.is_empty() {
            return;
        }
        let now_us = self.clock(now);
        self.retire_at(now_us, loss_delay, loss);
    }

    /// [`retire`](Self::retire) at `now_us`, as [`clock`](Self::clock) read it.
    pub(crate) fn retire_at(
        &mut self,
        now_us: u32,
        loss_delay: Duration,
        loss: &mut LossEstimator,
    ) {
        // A delay past the 71 minutes the offsets span never passes.
        let delay_us = u32::try_from(loss_delay.as_micros()).unwrap_or(u32::MAX);
        while let Some(front) = self.records.front() {
            if !front.acked && now_us.wrapping_sub(front.sent_us) < delay_us {
                break;
            }
            self.pop_front(loss);
        }
    }

    fn pop_front(&mut self, loss: &mut LossEstimator) {
        let Some(record) = self.records.pop_front() else {
            return;
        };
        if record.eliciting {
            loss.record(!record.acked);
        }
        self.front_sequence = self.front_sequence.wrapping_add(1);
        let count = self.absolute_end(&record) - self.entries_base;
        let count = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .min(self.entries.len());
        // Most packets carry no reliable unit: nothing to drain, and no drain to set up.
        if count > 0 {
            self.entries.drain(..count);
            self.entries_base += count as u64;
            super::give_back_if_empty(&mut self.entries);
        }
    }

    /// Packets in flight (sent, not yet acked or given up).
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.records.iter().filter(|record| !record.acked).count()
    }
}

/// Microseconds from `epoch` to `now`, truncated to 32 bits (wrapping every 71 minutes).
fn micros_since(epoch: Instant, now: Instant) -> u32 {
    let since = now.saturating_duration_since(epoch);
    // `as_micros() as u32`, without its 128-bit product: both are the count modulo 2^32.
    (since.as_secs() as u32)
        .wrapping_mul(1_000_000)
        .wrapping_add(since.subsec_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Instant {
        Instant::now()
    }

    #[test]
    fn bits_shift_across_words() {
        let mut bits = Bits256::default();
        bits.set(0, true);
        bits.set(63, true);
        bits.set(200, true);
        bits.shift_up(1);
        assert!(bits.get(1) && bits.get(64) && bits.get(201) && !bits.get(0) && !bits.get(63));
        bits.shift_up(64);
        assert!(
            bits.get(65) && bits.get(128) && !bits.get(201),
            "bit 265 must fall out"
        );
        bits.shift_up(130);
        assert!(bits.get(195) && !bits.get(128), "{bits:?}");
        assert_eq!(bits.lowest_set(), Some(195));
        bits.shift_up(256);
        assert!(bits.is_empty());
    }

    #[test]
    fn shifts_of_every_distance_match_a_bit_by_bit_one() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        for _ in 0..20 {
            let before = Bits256([rng.random(), rng.random(), rng.random(), rng.random()]);
            for n in 0..=260 {
                let mut shifted = before;
                shifted.shift_up(n);
                for i in 0..256 {
                    let expected = i >= n && before.get(i - n);
                    assert_eq!(shifted.get(i), expected, "bit {i} after a shift by {n}");
                }
            }
        }
    }

    #[test]
    fn word_reads_and_clears_match_bit_by_bit_ones() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        for _ in 0..2000 {
            let bits = Bits256([rng.random(), rng.random(), rng.random(), rng.random()]);
            let start = rng.random_range(0..300);
            let expected = (0..32).fold(0u32, |acc, j| acc | u32::from(bits.get(start + j)) << j);
            assert_eq!(
                bits.u32_at(start),
                expected,
                "32 bits from {start} of {bits:?}"
            );
            let end = start + rng.random_range(0..70);
            let mut cleared = bits;
            cleared.clear_range(start, end);
            let mut slow = bits;
            for i in start..end {
                slow.set(i, false);
            }
            assert_eq!(cleared, slow, "clearing {start}..{end} of {bits:?}");
        }
    }

    #[test]
    fn acks_name_the_latest_and_the_32_before() {
        let mut received = ReceivedPackets::default();
        assert_eq!(received.take_ack(), None, "no ack before any packet");
        for sequence in [65530u16, 65531, 65533, 0, 2] {
            assert_eq!(
                received.insert(sequence, AckWanted::Now, now()),
                Arrival::New,
                "{sequence} is new"
            );
        }
        assert!(received.ack_owed());
        let ack = received.take_ack().expect("packets arrived");
        assert_eq!(ack.ack, 2);
        // Bits: 1 (-1) no, 0 (-2) yes, 65535 no, 65534 no, 65533 (-5) yes, 65532 no, 65531 (-7), 65530 (-8).
        assert_eq!(ack.bits, 0b1101_0010, "bits {:#b}", ack.bits);
        assert!(!received.ack_owed(), "everything was covered by that ack");
    }

    #[test]
    fn duplicates_and_stale_packets_are_told_apart() {
        let mut received = ReceivedPackets::default();
        assert_eq!(received.insert(1000, AckWanted::Now, now()), Arrival::New);
        assert_eq!(
            received.insert(1000, AckWanted::Now, now()),
            Arrival::Duplicate
        );
        assert_eq!(
            received.insert(999, AckWanted::Never, now()),
            Arrival::New,
            "an older packet not seen yet"
        );
        assert_eq!(
            received.insert(999, AckWanted::Now, now()),
            Arrival::Duplicate
        );
        assert_eq!(
            received.insert(1000 - 255, AckWanted::Now, now()),
            Arrival::New,
            "inside the 256 window"
        );
        assert_eq!(
            received.insert(1000 - 256, AckWanted::Now, now()),
            Arrival::Stale,
            "just outside the window"
        );
        assert_eq!(
            received.insert(1000u16.wrapping_add(32768), AckWanted::Now, now()),
            Arrival::Stale,
            "half the circle away is not newer, so it is old and stale"
        );
        assert_eq!(received.insert(1300, AckWanted::Now, now()), Arrival::New);
        assert_eq!(
            received.insert(1000, AckWanted::Now, now()),
            Arrival::Stale,
            "1000 fell out of the window"
        );
    }

    #[test]
    fn bursts_longer_than_the_bitfield_are_acked_over_several_packets() {
        let mut received = ReceivedPackets::default();
        for sequence in 0..100u16 {
            received.insert(sequence, AckWanted::Now, now());
        }
        let mut acked = std::collections::BTreeSet::new();
        let mut packets = 0;
        while received.ack_owed() {
            let Ack { ack, bits } = received.take_ack().expect("packets arrived");
            acked.insert(ack);
            for i in 0..32u16 {
                if bits >> i & 1 == 1 {
                    acked.insert(ack.wrapping_sub(1 + i));
                }
            }
            packets += 1;
        }
        assert_eq!(packets, 4, "100 packets need ceil(100 / 33) acks");
        assert_eq!(
            acked,
            (0..100).collect(),
            "every packet of the burst must be acked"
        );
        // With nothing unreported, the ack falls back to the latest.
        assert_eq!(received.take_ack().map(|ack| ack.ack), Some(99));
    }

    #[test]
    fn acks_for_unreliable_packets_wait_their_delay_and_go_at_once_for_reliable_ones() {
        let start = Instant::now();
        let mut received = ReceivedPackets::default();
        received.insert(0, AckWanted::Never, start);
        assert!(
            !received.ack_due(start + Duration::from_secs(1)),
            "an ack-only packet wants no ack"
        );
        assert_eq!(received.ack_deadline(), None);
        received.insert(1, AckWanted::Soon, start);
        received.insert(2, AckWanted::Soon, start + Duration::from_millis(5));
        assert!(!received.ack_owed(), "unreliable packets wait for a ride");
        assert_eq!(
            received.ack_deadline(),
            Some(start + MAX_ACK_DELAY),
            "the oldest waiting packet sets the deadline"
        );
        assert!(!received.ack_due(start + MAX_ACK_DELAY - Duration::from_millis(1)));
        assert!(received.ack_due(start + MAX_ACK_DELAY));
        received.insert(3, AckWanted::Now, start + Duration::from_millis(6));
        assert!(received.ack_owed(), "reliable data is acked at once");
        let ack = received.take_ack().expect("packets arrived");
        assert_eq!(
            (ack.ack, ack.bits & 0b111),
            (3, 0b111),
            "one ack covers all four"
        );
        assert!(!received.ack_owed());
        assert_eq!(received.ack_deadline(), None, "nothing is waiting any more");
    }

    /// A connection whose peer stops acking holds the bound and no more: at it, each new
    /// record takes the place of the oldest, so the ring never grows past the bound (a
    /// crowd's memory) and each packet touches one line of it, not two.
    #[test]
    fn at_the_bound_the_newest_takes_the_oldests_place() {
        let start = Instant::now();
        let mut loss = LossEstimator::default();
        let mut sent = SentPackets::default();
        for _ in 0..MAX_SENT_RECORDS + 10 {
            let sequence = sent.next_sequence();
            sent.push_packet(start, AckWanted::Soon, &mut loss);
            assert_eq!(
                sent.next_sequence(),
                sequence.wrapping_add(1),
                "the packet just pushed carries the sequence written in its header"
            );
        }
        assert_eq!(sent.records.len(), MAX_SENT_RECORDS);
        assert!(
            sent.records.capacity() <= MAX_SENT_RECORDS,
            "the ring grew to {} records for a bound of {MAX_SENT_RECORDS}",
            sent.records.capacity()
        );
        assert_eq!(sent.front_sequence, 10, "the ten oldest were given up");
        assert_eq!(loss.loss(), 1.0, "each given up counts as lost");
        let newest = sent.next_sequence().wrapping_sub(1);
        assert!(sent.ack(newest, start).is_some(), "the newest is held");
        assert!(sent.ack(9, start).is_none(), "sequence 9 was given up");
    }

    #[test]
    fn a_sent_record_is_12_bytes() {
        assert_eq!(std::mem::size_of::<SentRecord>(), 12);
    }

    #[test]
    fn ages_are_exact_across_the_32_bit_microsecond_wrap() {
        let start = Instant::now();
        let wrap = Duration::from_micros(1 << 32);
        let mut loss = LossEstimator::default();
        let mut sent = SentPackets::default();
        sent.push_packet(start, AckWanted::Now, &mut loss);
        assert!(sent.ack(0, start).is_some());
        sent.retire(start, Duration::from_millis(100), &mut loss);
        // Sent 5 ms before the offsets wrap, looked at 15 ms after.
        sent.push_packet(
            start + wrap - Duration::from_millis(5),
            AckWanted::Now,
            &mut loss,
        );
        let later = start + wrap + Duration::from_millis(15);
        sent.retire(later, Duration::from_millis(100), &mut loss);
        assert_eq!(sent.in_flight(), 1, "20 ms old: not yet lost");
        let acked = sent.ack(1, later).expect("packet 1 is in flight");
        assert_eq!(acked.age, Duration::from_millis(20));
    }

    #[test]
    fn an_ack_names_exactly_the_held_sequences_it_covers() {
        // Against the plain reading of an ack (each of the 33 sequences, kept if a record
        // holds it), for fronts on both sides of the u16 wrap, windows from empty to past
        // 33, and acks before, inside and past what was sent.
        let start = Instant::now();
        for front in [0u16, 7, 65_520] {
            for held in [0u16, 1, 2, 5, 33, 40] {
                let mut loss = LossEstimator::default();
                let mut sent = SentPackets {
                    front_sequence: front,
                    ..SentPackets::default()
                };
                for _ in 0..held {
                    sent.push_packet(start, AckWanted::Now, &mut loss);
                }
                for delta in [-40i32, -33, -1, 0, 1, 4, 32, 33, 39, 40, 45, 80] {
                    for bits in [0u32, u32::MAX, 0b1011, 1 << 31] {
                        let ack = Ack {
                            ack: front.wrapping_add(delta as u16),
                            bits,
                        };
                        let expected: Vec<u16> = (0..=32u16)
                            .filter(|&back| back == 0 || bits >> (back - 1) & 1 == 1)
                            .map(|back| ack.ack.wrapping_sub(back))
                            .filter(|&sequence| sequence.wrapping_sub(front) < held)
                            .collect();
                        let named: Vec<u16> = sent.named_in_flight(ack).collect();
                        assert_eq!(named, expected, "front {front}, held {held}, {ack:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn sent_packets_map_acks_to_their_entries_and_retire_in_order() {
        let start = Instant::now();
        let mut loss = LossEstimator::default();
        let mut sent = SentPackets::default();
        for n in 0..3u16 {
            assert_eq!(sent.next_sequence(), n);
            for unit in 0..n {
                sent.push_entry(SentEntry {
                    channel: 0,
                    unit,
                    message: u64::from(n),
                });
            }
            sent.push_packet(
                start + Duration::from_millis(u64::from(n)),
                AckWanted::Now,
                &mut loss,
            );
        }
        let acked = sent
            .ack(2, start + Duration::from_millis(30))
            .expect("packet 2 is in flight");
        assert_eq!(acked.entries, 1..3, "packet 2 carried entries 1 and 2");
        assert_eq!(
            acked.age,
            Duration::from_millis(28),
            "sent at 2 ms, acked at 30"
        );
        assert_eq!(sent.entry(2).map(|entry| entry.unit), Some(1));
        assert!(sent.ack(2, start).is_none(), "a second ack is not news");
        assert!(sent.ack(7, start).is_none(), "never sent");
        // Packet 0 is lost after the delay; 1 is still waiting; so only 0 retires.
        sent.retire(
            start + Duration::from_millis(100),
            Duration::from_millis(100),
            &mut loss,
        );
        assert_eq!(sent.in_flight(), 1);
        assert_eq!(
            sent.entry(0).map(|entry| entry.message),
            Some(1),
            "entries stay until retired"
        );
        assert_eq!(loss.loss(), 1.0);
        assert!(sent.ack(1, start).is_some());
        sent.retire(
            start + Duration::from_millis(100),
            Duration::from_millis(100),
            &mut loss,
        );
        assert_eq!(sent.in_flight(), 0);
        assert_eq!(loss.loss(), 1.0 / 3.0, "one lost of three decided");
        assert_eq!(sent.entry(2), None, "entries of retired packets are freed");
        assert!(
            sent.ack(1, start).is_none(),
            "a retired packet cannot be acked again"
        );
    }
}
