//! ChaCha20-Poly1305 (RFC 8439, the IETF variant: 32-byte key, 12-byte nonce, 16-byte tag)
//! that seals many packets in one call, each under its own key and nonce.
//!
//! A server sending a tick's packets seals hundreds of short messages, one per connection.
//! One at a time, `ring`'s code computes four ChaCha20 blocks for a 48-byte packet that needs
//! two (its shortest path is four blocks wide), and its fixed costs are paid per packet.
//! [`SealBatch`] instead lays every block the batch needs (each packet's one-time Poly1305
//! key and its keystream) side by side, sixteen at a time, so the cipher runs at the full
//! width of the processor's vectors whatever the packets' lengths, then authenticates each
//! packet with a 64-bit Poly1305. That pays most where a row of sixteen lanes is one
//! AVX-512 register; with AVX2 alone a row is two registers, and the lanes pay for short
//! packets only (up to [`AVX2_LANES_MAX_BYTES`]: a longer one goes through `ring`);
//! elsewhere a batch is sealed through `ring` one packet at a time. The bytes are RFC
//! 8439's: the tests hold every backend to its vectors and to `ring`'s output for every
//! length up to a full datagram and on random batches. They skip a backend the processor
//! lacks; with `TICKWIRE_REQUIRE_ALL_BACKENDS=1` (as CI runs them) they fail when the
//! processor has one they could not run.
//!
//! ```
//! use tickwire_aead::SealBatch;
//!
//! // Two packets in one buffer, each its plaintext followed by room for its tag.
//! let mut buf = *b"hello\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0world!\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
//! let mut batch = SealBatch::new();
//! batch.push(&[1; 32], &[0; 12], b"header", 0, 5);
//! batch.push(&[2; 32], &[0; 12], b"header", 21, 6);
//! batch.seal(&mut buf);
//! assert!(batch.is_empty());
//! assert_ne!(&buf[..5], b"hello");
//! ```
//!
//! | item | what it is |
//! |---|---|
//! | [`SealBatch`] | packets waiting to be sealed together, as ranges of one buffer |
//! | [`Backend`] | which code seals: the AVX-512 lanes, the AVX2 lanes (short packets; `ring` the rest), `ring` one packet at a time where there is neither, or the portable lanes (the tests' reference) |
//!
//! Opening is `ring`'s: a server opens what arrives one datagram at a time.
//!
//! Keys, one-time Poly1305 keys and keystream are wiped (`zeroize`) once a batch is sealed:
//! the packets' keys in the batch's buffer (also when it grows), the sixteen states and
//! blocks of the cipher, and the Poly1305 state. That is best effort: what the compiler
//! keeps in registers or spills, and `ring`'s own key objects, are beyond its reach.

#![warn(missing_docs)]

mod chacha20;
mod poly1305;

// The integration tests' support, shared with the unit tests, names the crate as they do.
#[cfg(test)]
extern crate self as tickwire_aead;
#[cfg(test)]
#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt;
use std::ops::{Range, RangeInclusive};

pub use chacha20::Backend;
use chacha20::{Blocks, LANES, Rows};
use poly1305::Poly1305;
use zeroize::Zeroize;

/// Bytes in a key.
pub const KEY_BYTES: usize = 32;
/// Bytes in a nonce.
pub const NONCE_BYTES: usize = 12;
/// Bytes a tag adds after the ciphertext.
pub const TAG_BYTES: usize = 16;
/// Longest plaintext the [`Backend::Avx2`] lanes seal; a longer packet of the batch is
/// sealed through `ring`, whose own AVX2 code is quicker once a packet spans several blocks
/// (BENCHMARKS.md, "Sealing in AVX2 lanes").
pub const AVX2_LANES_MAX_BYTES: usize = 256;
/// Longest plaintext one packet may have: the cipher's 32-bit block counter, less the block
/// that makes the Poly1305 key.
pub const MAX_PLAINTEXT_BYTES: u64 = u32::MAX as u64 * 64;

/// One packet of a batch. Its key and one-time Poly1305 key are wiped when it is dropped.
struct Packet {
    /// The key as the cipher reads it: little-endian words.
    key: [u32; 8],
    nonce: [u32; 3],
    aad: Range<usize>,
    /// Where the plaintext starts in the buffer; its tag follows it.
    start: usize,
    len: usize,
    /// The first half of the packet's block 0, filled in when that block is computed.
    poly_key: [u32; 8],
}

impl Drop for Packet {
    fn drop(&mut self) {
        self.key.zeroize();
        self.poly_key.zeroize();
    }
}

/// Without the keys.
impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("aad", &self.aad)
            .field("start", &self.start)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

fn words<const N: usize>(bytes: &[u8]) -> [u32; N] {
    std::array::from_fn(|i| {
        let mut word = [0u8; 4];
        word.copy_from_slice(&bytes[4 * i..4 * i + 4]);
        u32::from_le_bytes(word)
    })
}

fn bytes<const N: usize>(words: &[u32]) -> [u8; N] {
    let mut bytes = [0u8; N];
    for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    bytes
}

/// The block counters a plaintext of `len` bytes takes: 0 for its Poly1305 key, then one
/// per 64 bytes. At [`MAX_PLAINTEXT_BYTES`] the last is `u32::MAX`, so the count (2^32) is
/// not a `u32`: the range is inclusive.
///
/// # Panics
/// Past [`MAX_PLAINTEXT_BYTES`], where the counter would wrap.
fn counters(len: usize) -> RangeInclusive<u32> {
    match u32::try_from(len.div_ceil(64)) {
        Ok(last) => 0..=last,
        Err(_) => panic!("plaintext of {len} bytes exceeds max {MAX_PLAINTEXT_BYTES}"),
    }
}

/// Moves `packets` into a buffer twice as large and returns the old one, empty and wiped:
/// a `Vec` that grows by itself would give its old buffer back to the allocator with the
/// keys still in it.
fn grow_wiped(packets: &mut Vec<Packet>) -> Vec<Packet> {
    let mut grown = Vec::with_capacity((2 * packets.capacity()).max(8));
    grown.append(packets);
    // Empty now, so its spare capacity is all of it, the bytes just moved included.
    packets.spare_capacity_mut().zeroize();
    std::mem::replace(packets, grown)
}

/// Packets waiting to be sealed together. Each is a range of the buffer later given to
/// [`seal`](Self::seal): `len` bytes of plaintext at `start`, then [`TAG_BYTES`] of room for
/// its tag. The batch keeps its capacity, so a steady stream of batches does not allocate.
#[derive(Debug, Default)]
pub struct SealBatch {
    packets: Vec<Packet>,
    /// Every packet's associated data, one after the other.
    aad: Vec<u8>,
    backend: Option<Backend>,
}

impl SealBatch {
    /// An empty batch, sealing with the fastest [`Backend`] this processor runs.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch that seals with `backend` (the portable lanes if it is
    /// [`Backend::Avx512`] or [`Backend::Avx2`] and this processor lacks that); for tests
    /// and benchmarks.
    pub fn with_backend(backend: Backend) -> Self {
        Self {
            backend: Some(backend),
            ..Self::default()
        }
    }

    /// Queues a packet: `len` bytes of plaintext at `start` of the buffer given to
    /// [`seal`](Self::seal), sealed under `key` and `nonce` with `aad` as associated data.
    /// The nonce must never repeat under the key.
    pub fn push(
        &mut self,
        key: &[u8; KEY_BYTES],
        nonce: &[u8; NONCE_BYTES],
        aad: &[u8],
        start: usize,
        len: usize,
    ) {
        let aad_start = self.aad.len();
        self.aad.extend_from_slice(aad);
        if self.packets.len() == self.packets.capacity() {
            drop(grow_wiped(&mut self.packets));
        }
        self.packets.push(Packet {
            key: words(key),
            nonce: words(nonce),
            aad: aad_start..self.aad.len(),
            start,
            len,
            poly_key: [0; 8],
        });
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.packets.len()
    }

    /// Whether no packet is queued.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// Encrypts every queued packet's plaintext in `buf` in place, writes each tag after
    /// its ciphertext, and empties the batch.
    ///
    /// # Panics
    /// If a plaintext is longer than [`MAX_PLAINTEXT_BYTES`], or a packet's plaintext and
    /// tag do not lie within `buf`: both are the caller's mistake, never the network's.
    pub fn seal(&mut self, buf: &mut [u8]) {
        let backend = self.backend.unwrap_or_else(Backend::detect);
        seal_packets(backend, &mut self.packets, &self.aad, buf);
        // Each packet wipes its keys as it is dropped.
        self.packets.clear();
        self.aad.clear();
    }
}

/// One packet through `ring`, its key object made for it (544 bytes: a batch holds keys as
/// their 32 bytes).
fn ring_seal(packet: &Packet, aad: &[u8], in_out: &mut [u8]) -> [u8; TAG_BYTES] {
    use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
    let mut key_bytes: [u8; KEY_BYTES] = bytes(&packet.key);
    let key = UnboundKey::new(&CHACHA20_POLY1305, &key_bytes)
        .unwrap_or_else(|_| unreachable!("ChaCha20-Poly1305 accepts every 32-byte key"));
    key_bytes.zeroize();
    let nonce = Nonce::assume_unique_for_key(bytes(&packet.nonce));
    let tag = LessSafeKey::new(key)
        .seal_in_place_separate_tag(nonce, Aad::from(aad), in_out)
        .unwrap_or_else(|_| unreachable!("sealing fails only past MAX_PLAINTEXT_BYTES"));
    let mut out = [0u8; TAG_BYTES];
    out.copy_from_slice(tag.as_ref());
    out
}

/// Every block a set of packets needs, computed sixteen at a time and applied as each
/// sixteen are done: block 0 of a packet keeps its first 32 bytes as the packet's Poly1305
/// key, block `n` is XORed into the packet's bytes `64(n − 1)..64n`. The states (which
/// hold the keys) and the blocks are wiped when it is dropped.
struct Keystream {
    backend: Backend,
    rows: Rows,
    out: Blocks,
    /// For each lane filled so far: its packet and block counter.
    lanes: [(usize, u32); LANES],
    filled: usize,
}

impl Drop for Keystream {
    fn drop(&mut self) {
        self.rows.zeroize();
        self.out.zeroize();
    }
}

impl Keystream {
    fn new(backend: Backend) -> Self {
        Self {
            backend,
            rows: chacha20::empty_rows(),
            out: [[0; 16]; LANES],
            lanes: [(0, 0); LANES],
            filled: 0,
        }
    }

    /// Encrypts the packets that the backend seals in its lanes.
    fn encrypt(&mut self, packets: &mut [Packet], buf: &mut [u8]) {
        for index in 0..packets.len() {
            let packet = &packets[index];
            if !self.backend.seals_in_lanes(packet.len) {
                continue;
            }
            // Copied out of the packet, which `apply` writes its Poly1305 key into.
            let (mut key, nonce) = (packet.key, packet.nonce);
            for counter in counters(packet.len) {
                chacha20::set_lane(&mut self.rows, self.filled, &key, counter, &nonce);
                self.lanes[self.filled] = (index, counter);
                self.filled += 1;
                if self.filled == LANES {
                    self.apply(packets, buf);
                }
            }
            key.zeroize();
        }
        if self.filled > 0 {
            self.apply(packets, buf);
        }
    }

    fn apply(&mut self, packets: &mut [Packet], buf: &mut [u8]) {
        self.backend.blocks(&self.rows, &mut self.out);
        let mut keystream = [0u8; 64];
        for (&(index, counter), block) in self.lanes[..self.filled].iter().zip(&self.out) {
            let packet = &mut packets[index];
            if counter == 0 {
                packet.poly_key.copy_from_slice(&block[..8]);
                continue;
            }
            let offset = 64 * (counter as usize - 1);
            let end = packet.len.min(offset + 64);
            let text = &mut buf[packet.start + offset..packet.start + end];
            for (bytes, word) in keystream.chunks_exact_mut(4).zip(block) {
                bytes.copy_from_slice(&word.to_le_bytes());
            }
            // A whole block is XORed as a fixed 64 bytes, which the compiler vectorizes.
            match <&mut [u8; 64]>::try_from(&mut *text) {
                Ok(block) => xor(block, &keystream),
                Err(_) => xor(text, &keystream),
            }
        }
        keystream.zeroize();
        self.filled = 0;
    }
}

#[inline(always)]
fn xor(text: &mut [u8], keystream: &[u8; 64]) {
    for (byte, key) in text.iter_mut().zip(keystream) {
        *byte ^= key;
    }
}

/// The tag of one packet whose ciphertext is `text` (RFC 8439, 2.8: Poly1305 over the
/// associated data and the ciphertext, each zero-padded to 16 bytes, then both lengths).
fn authenticate(packet: &Packet, aad: &[u8], text: &[u8]) -> [u8; TAG_BYTES] {
    let mut poly = Poly1305::new(&packet.poly_key);
    poly.update_padded(aad);
    poly.update_padded(text);
    poly.update_lengths(aad.len(), text.len());
    poly.finish()
}

fn seal_packets(backend: Backend, packets: &mut [Packet], aad: &[u8], buf: &mut [u8]) {
    for packet in packets.iter() {
        assert!(
            packet.len as u64 <= MAX_PLAINTEXT_BYTES,
            "plaintext of {} bytes exceeds max {MAX_PLAINTEXT_BYTES}",
            packet.len
        );
        let end = packet.start.checked_add(packet.len + TAG_BYTES);
        assert!(
            end.is_some_and(|end| end <= buf.len()),
            "packet at {} of {} bytes (and its tag) past the buffer's {}",
            packet.start,
            packet.len,
            buf.len()
        );
    }
    let in_lanes = |packet: &Packet| backend.seals_in_lanes(packet.len);
    for packet in packets.iter().filter(|packet| !in_lanes(packet)) {
        let (text, rest) = buf[packet.start..].split_at_mut(packet.len);
        let tag = ring_seal(packet, &aad[packet.aad.clone()], text);
        rest[..TAG_BYTES].copy_from_slice(&tag);
    }
    if !packets.iter().any(in_lanes) {
        return;
    }
    Keystream::new(backend).encrypt(packets, buf);
    for packet in packets.iter().filter(|packet| in_lanes(packet)) {
        let (text, rest) = buf[packet.start..].split_at_mut(packet.len);
        let tag = authenticate(packet, &aad[packet.aad.clone()], text);
        rest[..TAG_BYTES].copy_from_slice(&tag);
    }
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;
    use std::ptr::addr_of;

    use super::*;

    /// At the longest plaintext the last counter is `u32::MAX`: counting the blocks as a
    /// `u32` (one more than that) would wrap to none.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn the_counters_reach_u32_max_at_the_longest_plaintext() {
        let max = MAX_PLAINTEXT_BYTES as usize;
        assert_eq!(counters(max), 0..=u32::MAX, "{max} bytes");
        assert_eq!(counters(max - 63), 0..=u32::MAX, "{} bytes", max - 63);
        assert_eq!(counters(max - 64), 0..=u32::MAX - 1, "{} bytes", max - 64);
        assert_eq!(
            counters(0),
            0..=0,
            "no plaintext: the Poly1305 key's block alone"
        );
        assert_eq!(counters(1), 0..=1);
        assert_eq!(counters(64), 0..=1);
        assert_eq!(counters(65), 0..=2);
    }

    #[cfg(target_pointer_width = "64")]
    #[test]
    #[should_panic(expected = "exceeds max")]
    fn the_counters_refuse_a_plaintext_past_the_longest() {
        counters(MAX_PLAINTEXT_BYTES as usize + 1);
    }

    /// The keys left in the first `slots` slots of an emptied packet buffer.
    fn keys_left(packets: &mut Vec<Packet>, slots: usize) -> Vec<([u32; 8], [u32; 8])> {
        assert!(packets.is_empty());
        packets.spare_capacity_mut()[..slots]
            .iter()
            .map(|slot| {
                let packet = slot.as_ptr();
                // SAFETY: the slot held a packet (dropped since), whose key words are still
                // initialized memory of the buffer.
                unsafe {
                    (
                        addr_of!((*packet).key).read(),
                        addr_of!((*packet).poly_key).read(),
                    )
                }
            })
            .collect()
    }

    fn packet(key: u8) -> Packet {
        Packet {
            key: words(&[key; KEY_BYTES]),
            nonce: [7; 3],
            aad: 0..0,
            start: 0,
            len: 0,
            poly_key: [u32::from(key) << 8; 8],
        }
    }

    #[test]
    fn a_sealed_batch_leaves_no_key_in_its_buffer() {
        let mut batch = SealBatch::with_backend(Backend::Portable);
        let mut buf = [0u8; 3 * (40 + TAG_BYTES)];
        for i in 0..3 {
            batch.push(
                &[i as u8 + 1; 32],
                &[0; 12],
                b"aad",
                i * (40 + TAG_BYTES),
                40,
            );
        }
        batch.seal(&mut buf);
        for (slot, keys) in keys_left(&mut batch.packets, 3).iter().enumerate() {
            assert_eq!(
                *keys,
                ([0; 8], [0; 8]),
                "packet {slot}'s key and Poly1305 key"
            );
        }
    }

    #[test]
    fn growing_the_batch_wipes_the_buffer_it_leaves() {
        let mut packets = Vec::with_capacity(2);
        packets.extend([packet(1), packet(2)]);
        let mut old = grow_wiped(&mut packets);
        assert_eq!(old.capacity(), 2, "the old buffer came back");
        for (slot, keys) in keys_left(&mut old, 2).iter().enumerate() {
            assert_eq!(*keys, ([0; 8], [0; 8]), "slot {slot} of the old buffer");
        }
        assert!(packets.capacity() >= 4, "room for more");
        let kept: Vec<_> = packets.iter().map(|p| (p.key, p.poly_key)).collect();
        let expected: Vec<_> = [packet(1), packet(2)]
            .iter()
            .map(|p| (p.key, p.poly_key))
            .collect();
        assert_eq!(kept, expected, "the packets moved whole");
    }

    /// `value`'s drop run in place; then `read` sees the memory it left.
    fn after_drop<T, R>(value: T, read: impl FnOnce(*const T) -> R) -> R {
        let mut slot = MaybeUninit::new(value);
        // SAFETY: the slot holds a value, dropped once here and never again (MaybeUninit
        // does not drop); `read` reads only plain words of the memory it left.
        unsafe {
            slot.as_mut_ptr().drop_in_place();
            read(slot.as_ptr())
        }
    }

    #[test]
    fn the_cipher_states_and_blocks_are_wiped_when_dropped() {
        let mut keystream = Keystream::new(Backend::Portable);
        let key = words(&[9; KEY_BYTES]);
        for lane in 0..LANES {
            chacha20::set_lane(&mut keystream.rows, lane, &key, 1, &[3; 3]);
        }
        keystream
            .backend
            .blocks(&keystream.rows, &mut keystream.out);
        assert_ne!(keystream.out, [[0; 16]; LANES]);
        // SAFETY (in the closure): rows and blocks are arrays of u32.
        let (rows, out) = after_drop(keystream, |k| unsafe {
            (addr_of!((*k).rows).read(), addr_of!((*k).out).read())
        });
        assert_eq!(rows, [[0; LANES]; 16], "the states, keys included");
        assert_eq!(out, [[0; 16]; LANES], "the keystream");
    }

    #[test]
    fn the_poly1305_state_is_wiped_when_dropped() {
        let mut poly = Poly1305::new(&[0x0102_0304; 8]);
        poly.update_padded(b"some ciphertext");
        let size = size_of::<Poly1305>();
        const { assert!(size_of::<Poly1305>() == size_of::<[u64; 8]>()) };
        // SAFETY (in the closure): the state is eight u64s, no padding (asserted above).
        let state = after_drop(poly, |p| unsafe { p.cast::<[u64; 8]>().read() });
        assert_eq!(state, [0; 8], "the key and accumulator ({size} bytes)");
    }
}
