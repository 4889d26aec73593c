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
//! 8439's: the tests hold every backend to its vectors and to `ring`'s output on random
//! batches.
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

#![warn(missing_docs)]

mod chacha20;
mod poly1305;

use std::ops::Range;

pub use chacha20::Backend;
use chacha20::{Blocks, LANES, Rows};
use poly1305::Poly1305;

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

/// One packet of a batch.
#[derive(Debug, Clone)]
struct Packet {
    key: [u8; KEY_BYTES],
    nonce: [u8; NONCE_BYTES],
    aad: Range<usize>,
    /// Where the plaintext starts in the buffer; its tag follows it.
    start: usize,
    len: usize,
    /// The first half of the packet's block 0, filled in when that block is computed.
    poly_key: [u32; 8],
}

fn words<const N: usize>(bytes: &[u8]) -> [u32; N] {
    std::array::from_fn(|i| {
        let mut word = [0u8; 4];
        word.copy_from_slice(&bytes[4 * i..4 * i + 4]);
        u32::from_le_bytes(word)
    })
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
        self.packets.push(Packet {
            key: *key,
            nonce: *nonce,
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
    /// If a packet's plaintext and tag do not lie within `buf`, or a plaintext is longer
    /// than [`MAX_PLAINTEXT_BYTES`]: both are the caller's mistake, never the network's.
    pub fn seal(&mut self, buf: &mut [u8]) {
        let backend = self.backend.unwrap_or_else(Backend::detect);
        seal_packets(backend, &mut self.packets, &self.aad, buf);
        self.packets.clear();
        self.aad.clear();
    }
}

/// One packet through `ring`, its key object made for it (544 bytes: a batch holds keys as
/// their 32 bytes).
fn ring_seal(
    key: &[u8; KEY_BYTES],
    nonce: &[u8; NONCE_BYTES],
    aad: &[u8],
    in_out: &mut [u8],
) -> [u8; TAG_BYTES] {
    use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
    let key = UnboundKey::new(&CHACHA20_POLY1305, key)
        .unwrap_or_else(|_| unreachable!("ChaCha20-Poly1305 accepts every 32-byte key"));
    let tag = LessSafeKey::new(key)
        .seal_in_place_separate_tag(Nonce::assume_unique_for_key(*nonce), Aad::from(aad), in_out)
        .unwrap_or_else(|_| unreachable!("sealing fails only past 2^38 bytes"));
    let mut out = [0u8; TAG_BYTES];
    out.copy_from_slice(tag.as_ref());
    out
}

/// Every block a set of packets needs, computed sixteen at a time and applied as each
/// sixteen are done: block 0 of a packet keeps its first 32 bytes as the packet's Poly1305
/// key, block `n` is XORed into the packet's bytes `64(n − 1)..64n`.
struct Keystream {
    backend: Backend,
    rows: Rows,
    out: Blocks,
    /// For each lane filled so far: its packet and block counter.
    lanes: [(usize, u32); LANES],
    filled: usize,
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
            assert!(
                packet.len as u64 <= MAX_PLAINTEXT_BYTES,
                "plaintext too long"
            );
            let blocks = 1 + packet.len.div_ceil(64) as u32;
            let (key, nonce) = (words(&packet.key), words(&packet.nonce));
            for counter in 0..blocks {
                chacha20::set_lane(&mut self.rows, self.filled, &key, counter, &nonce);
                self.lanes[self.filled] = (index, counter);
                self.filled += 1;
                if self.filled == LANES {
                    self.apply(packets, buf);
                }
            }
        }
        if self.filled > 0 {
            self.apply(packets, buf);
        }
    }

    fn apply(&mut self, packets: &mut [Packet], buf: &mut [u8]) {
        self.backend.blocks(&self.rows, &mut self.out);
        for (&(index, counter), block) in self.lanes[..self.filled].iter().zip(&self.out) {
            let packet = &mut packets[index];
            if counter == 0 {
                packet.poly_key.copy_from_slice(&block[..8]);
                continue;
            }
            let offset = 64 * (counter as usize - 1);
            let end = packet.len.min(offset + 64);
            let text = &mut buf[packet.start + offset..packet.start + end];
            let mut keystream = [0u8; 64];
            for (bytes, word) in keystream.chunks_exact_mut(4).zip(block) {
                bytes.copy_from_slice(&word.to_le_bytes());
            }
            // A whole block is XORed as a fixed 64 bytes, which the compiler vectorizes.
            match <&mut [u8; 64]>::try_from(&mut *text) {
                Ok(block) => xor(block, &keystream),
                Err(_) => xor(text, &keystream),
            }
        }
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
    let mut key = [0u8; 32];
    for (bytes, word) in key.chunks_exact_mut(4).zip(packet.poly_key) {
        bytes.copy_from_slice(&word.to_le_bytes());
    }
    let mut poly = Poly1305::new(&key);
    poly.update_padded(aad);
    poly.update_padded(text);
    poly.update_lengths(aad.len(), text.len());
    poly.finish()
}

fn seal_packets(backend: Backend, packets: &mut [Packet], aad: &[u8], buf: &mut [u8]) {
    for packet in packets.iter() {
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
        let tag = ring_seal(&packet.key, &packet.nonce, &aad[packet.aad.clone()], text);
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
