//! Writing bits: the [`BitWrite`] trait, the [`BitWriter`] that fills a byte buffer and the
//! [`BitCounter`] that measures a value without writing it.
//!
//! Bit order (see `docs/PROTOCOL.md`): a value of `n` bits written at stream position `p`
//! puts its bit `k` (least significant first) at stream position `p + k`, and stream
//! position `i` is bit `i % 8` of byte `i / 8`.

use crate::error::{EncodeError, EncodeErrorKind};
use crate::quantize::Quantize;

/// Number of bits that hold every value in `0..=span`: `ceil(log2(span + 1))`, and 0 for a
/// span of 0 (a field with one possible value costs nothing).
pub const fn bits_for_span(span: u64) -> u32 {
    u64::BITS - span.leading_zeros()
}

/// Mask of the low `bits` bits, for `bits <= 32`.
#[inline(always)]
pub(crate) const fn low_mask(bits: u32) -> u64 {
    (1u64 << bits) - 1
}

/// A sink for bits: [`BitWriter`] writes them, [`BitCounter`] counts them.
///
/// Only [`write_bits`](BitWrite::write_bits), [`align`](BitWrite::align) and
/// [`bits_written`](BitWrite::bits_written) are required; every encoding in the wire format
/// is a provided method built on them, so measuring and writing can never disagree.
pub trait BitWrite {
    /// Writes the low `bits` bits of `value`, `bits <= 32`; higher bits of `value` are ignored.
    fn write_bits(&mut self, value: u32, bits: u32) -> Result<(), EncodeError>;

    /// Bits written so far.
    fn bits_written(&self) -> usize;

    /// Writes zero bits up to the next byte boundary.
    fn align(&mut self) -> Result<(), EncodeError> {
        let pad = (8 - self.bits_written() % 8) % 8;
        self.write_bits(0, pad as u32)
    }

    /// Writes one bit: 1 for true.
    #[inline(always)]
    fn write_bool(&mut self, value: bool) -> Result<(), EncodeError> {
        self.write_bits(u32::from(value), 1)
    }

    /// Writes an unsigned integer in exactly `bits` bits (`bits <= 64`).
    #[inline(always)]
    fn write_uint(&mut self, value: u64, bits: u32) -> Result<(), EncodeError> {
        debug_assert!(bits <= 64, "write_uint of {bits} bits");
        if bits < 64 && value >> bits != 0 {
            return Err(EncodeErrorKind::OutOfRange {
                value: i128::from(value),
                min: 0,
                max: (1i128 << bits) - 1,
            }
            .into());
        }
        if bits <= 32 {
            self.write_bits(value as u32, bits)
        } else {
            self.write_bits(value as u32, 32)?;
            self.write_bits((value >> 32) as u32, bits - 32)
        }
    }

    /// Writes an integer declared to lie in `min..=max` as its offset from `min`, in
    /// [`bits_for_span`]`(max - min)` bits. The span must fit in 64 bits.
    #[inline(always)]
    fn write_range(&mut self, value: i128, min: i128, max: i128) -> Result<(), EncodeError> {
        if value < min || value > max {
            return Err(EncodeErrorKind::OutOfRange { value, min, max }.into());
        }
        let span = (max - min) as u64;
        self.write_uint((value - min) as u64, bits_for_span(span))
    }

    /// Writes an unsigned integer as a varint: groups of 7 bits, least significant first,
    /// each group followed by a continuation bit (8 bits per group, 1 to 10 groups).
    #[inline]
    fn write_varint(&mut self, mut value: u64) -> Result<(), EncodeError> {
        while value >= 0x80 {
            self.write_bits((value as u32 & 0x7f) | 0x80, 8)?;
            value >>= 7;
        }
        self.write_bits(value as u32, 8)
    }

    /// Writes a signed integer as a zigzag-mapped varint (0, -1, 1, -2, … → 0, 1, 2, 3, …).
    #[inline]
    fn write_varint_signed(&mut self, value: i64) -> Result<(), EncodeError> {
        self.write_varint(((value << 1) ^ (value >> 63)) as u64)
    }

    /// Writes the 32 bits of an `f32` exactly as IEEE 754 lays them out.
    #[inline(always)]
    fn write_f32(&mut self, value: f32) -> Result<(), EncodeError> {
        self.write_bits(value.to_bits(), 32)
    }

    /// Writes the 64 bits of an `f64` exactly as IEEE 754 lays them out.
    #[inline(always)]
    fn write_f64(&mut self, value: f64) -> Result<(), EncodeError> {
        self.write_uint(value.to_bits(), 64)
    }

    /// Writes a float quantized to `quantize`'s grid, in `quantize.bits()` bits.
    #[inline(always)]
    fn write_quantized(&mut self, value: f32, quantize: &Quantize) -> Result<(), EncodeError> {
        let step = quantize.step_of(value)?;
        self.write_uint(step, quantize.bits())
    }

    /// Writes a length in `0..=max` (for strings, byte arrays and sequences).
    #[inline(always)]
    fn write_len(&mut self, len: usize, max: usize) -> Result<(), EncodeError> {
        if len > max {
            return Err(EncodeErrorKind::TooLong { len, max }.into());
        }
        self.write_uint(len as u64, bits_for_span(max as u64))
    }

    /// Writes bytes, 8 bits each, with no length prefix.
    #[inline(always)]
    fn write_raw_bytes(&mut self, bytes: &[u8]) -> Result<(), EncodeError> {
        let mut words = bytes.chunks_exact(4);
        for word in &mut words {
            // Least-significant-first bit order makes four bytes written one by one
            // identical to their little-endian word written at once.
            let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            self.write_bits(word, 32)?;
        }
        for &byte in words.remainder() {
            self.write_bits(u32::from(byte), 8)?;
        }
        Ok(())
    }

    /// Writes a byte array of at most `max_len` bytes: its length, then its bytes.
    #[inline(always)]
    fn write_bytes(&mut self, bytes: &[u8], max_len: usize) -> Result<(), EncodeError> {
        self.write_len(bytes.len(), max_len)?;
        self.write_raw_bytes(bytes)
    }

    /// Writes a UTF-8 string of at most `max_len` bytes: its length in bytes, then its bytes.
    #[inline(always)]
    fn write_str(&mut self, value: &str, max_len: usize) -> Result<(), EncodeError> {
        self.write_bytes(value.as_bytes(), max_len)
    }
}

/// Writes bits into a caller-provided byte buffer through a 64-bit scratch register,
/// storing eight bytes at a time. [`write_wide`](Self::write_wide) takes up to 64 bits in
/// one call: a caller that packs several fields into one word (the arena's snapshots pack
/// an entity's id and fields) writes them with one call and at most one store.
///
/// A buffer too short shows as [`EncodeErrorKind::BufferFull`] at the store that does not
/// fit, or at the latest from [`finish`](Self::finish) (up to 63 bits wait in the register
/// until then). After an error the writer's contents are unspecified; start a new one.
///
/// ```
/// use tickwire_wire::{BitWrite, BitWriter};
///
/// let mut buf = [0u8; 16];
/// let mut writer = BitWriter::new(&mut buf);
/// writer.write_range(750, 0, 1000).unwrap(); // 10 bits
/// writer.write_bool(true).unwrap(); // 1 bit
/// let len = writer.finish().unwrap();
/// assert_eq!(&buf[..len], &[0xee, 0x06]);
/// ```
#[derive(Debug)]
pub struct BitWriter<'a> {
    buf: &'a mut [u8],
    /// Bits not yet stored; bit 0 is the oldest.
    scratch: u64,
    /// How many bits of `scratch` are pending (always < 64 between calls). Full width on
    /// purpose: a `u32` here is stored in 4 bytes and reloaded in 8 when the writer moves,
    /// which stalls store forwarding (measured: a third of the encode time).
    scratch_bits: u64,
    /// Bytes stored into `buf` so far.
    stored: usize,
}

impl<'a> BitWriter<'a> {
    /// A writer that fills `buf` from its start.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self {
            buf,
            scratch: 0,
            scratch_bits: 0,
            stored: 0,
        }
    }

    /// Writes the low `bits` (at most 64) bits of `value`, whose higher bits must be zero.
    #[inline(always)]
    pub fn write_wide(&mut self, value: u64, bits: u32) -> Result<(), EncodeError> {
        debug_assert!(
            bits == 64 || (bits < 64 && value >> bits == 0),
            "write_wide of {bits} bits with higher bits set"
        );
        let used = self.scratch_bits;
        self.scratch |= value << used;
        let total = used + u64::from(bits);
        if total < 64 {
            self.scratch_bits = total;
            return Ok(());
        }
        let Some(dst) = self.buf.get_mut(self.stored..self.stored + 8) else {
            return Err(self.full());
        };
        dst.copy_from_slice(&self.scratch.to_le_bytes());
        self.stored += 8;
        // The bits of `value` that did not fit: `value >> (64 - used)`, and none when
        // `used` is 0 (a shift by 64 is not defined).
        self.scratch = (value >> 1) >> (63 - used);
        self.scratch_bits = total - 64;
        Ok(())
    }

    /// Stores the pending bits, padding the last byte with zeros, and returns the number of
    /// bytes used.
    #[inline]
    pub fn finish(mut self) -> Result<usize, EncodeError> {
        let pending = self.scratch_bits.div_ceil(8) as usize;
        let end = self.stored + pending;
        let capacity = self.buf.len();
        let dst = self
            .buf
            .get_mut(self.stored..end)
            .ok_or(EncodeErrorKind::BufferFull { capacity })?;
        // At most 8 bytes; a byte loop avoids a variable-length memcpy call.
        for (i, byte) in dst.iter_mut().enumerate() {
            *byte = (self.scratch >> (8 * i)) as u8;
        }
        self.stored = end;
        Ok(end)
    }

    #[cold]
    fn full(&self) -> EncodeError {
        EncodeErrorKind::BufferFull {
            capacity: self.buf.len(),
        }
        .into()
    }
}

impl BitWrite for BitWriter<'_> {
    #[inline(always)]
    fn write_bits(&mut self, value: u32, bits: u32) -> Result<(), EncodeError> {
        debug_assert!(bits <= 32, "write_bits of {bits} bits");
        self.write_wide(u64::from(value) & low_mask(bits), bits)
    }

    #[inline]
    fn bits_written(&self) -> usize {
        self.stored * 8 + self.scratch_bits as usize
    }
}

/// Counts the bits a value would take without writing them.
///
/// ```
/// use tickwire_wire::{BitCounter, BitWrite};
///
/// let mut counter = BitCounter::default();
/// counter.write_str("Casey", 32).unwrap();
/// assert_eq!(counter.bits_written(), 6 + 5 * 8);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct BitCounter {
    bits: usize,
}

impl BitCounter {
    /// Bytes the counted bits occupy once the last byte is padded.
    pub fn bytes(&self) -> usize {
        self.bits.div_ceil(8)
    }
}

impl BitWrite for BitCounter {
    #[inline(always)]
    fn write_bits(&mut self, _value: u32, bits: u32) -> Result<(), EncodeError> {
        self.bits += bits as usize;
        Ok(())
    }

    #[inline]
    fn bits_written(&self) -> usize {
        self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_for_span_is_ceil_log2_of_the_value_count() {
        assert_eq!(bits_for_span(0), 0);
        assert_eq!(bits_for_span(1), 1);
        assert_eq!(bits_for_span(2), 2);
        assert_eq!(bits_for_span(3), 2);
        assert_eq!(bits_for_span(4), 3);
        assert_eq!(bits_for_span(1000), 10);
        assert_eq!(bits_for_span(1023), 10);
        assert_eq!(bits_for_span(1024), 11);
        assert_eq!(bits_for_span(u64::MAX), 64);
    }

    #[test]
    fn bits_fill_bytes_least_significant_first() {
        let mut buf = [0u8; 8];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bits(0b101, 3).unwrap();
        writer.write_bits(0b11111, 5).unwrap();
        writer.write_bits(0x1, 1).unwrap();
        let len = writer.finish().unwrap();
        assert_eq!(&buf[..len], &[0b1111_1101, 0b0000_0001]);
    }

    proptest::proptest! {
        /// Any mix of wide (up to 64 bits) and narrow writes gives the bytes of a
        /// bit-by-bit reference, and counts the same bits as it goes.
        #[test]
        fn wide_and_narrow_writes_match_a_bit_by_bit_reference(
            writes in proptest::collection::vec(
                (proptest::prelude::any::<u64>(), 0u32..=64, proptest::prelude::any::<bool>()),
                0..60,
            )
        ) {
            let mut buf = vec![0u8; 512];
            let mut writer = BitWriter::new(&mut buf);
            let mut reference = Vec::new();
            for &(raw, bits, wide) in &writes {
                let value = raw.checked_shr(64 - bits).unwrap_or(0);
                if wide {
                    writer.write_wide(value, bits).unwrap();
                } else {
                    writer.write_uint(value, bits).unwrap();
                }
                reference.extend((0..bits).map(|i| value >> i & 1 == 1));
                proptest::prop_assert_eq!(writer.bits_written(), reference.len());
            }
            let len = writer.finish().unwrap();
            let mut expected = vec![0u8; reference.len().div_ceil(8)];
            for (i, bit) in reference.iter().enumerate() {
                expected[i / 8] |= u8::from(*bit) << (i % 8);
            }
            proptest::prop_assert_eq!(&buf[..len], &expected[..]);
        }
    }

    #[test]
    fn high_bits_beyond_the_count_are_ignored() {
        let mut buf = [0u8; 4];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bits(0xffff_ffff, 4).unwrap();
        let len = writer.finish().unwrap();
        assert_eq!(&buf[..len], &[0x0f]);
    }

    #[test]
    fn a_full_buffer_is_an_error_not_a_panic() {
        let mut buf = [0u8; 5];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bits(u32::MAX, 32).unwrap();
        writer.write_bits(0xff, 8).unwrap();
        writer.write_bits(1, 1).unwrap();
        let error = writer.finish().unwrap_err();
        assert_eq!(error.kind, EncodeErrorKind::BufferFull { capacity: 5 });

        // A store that does not fit fails at once; bits still in the register fail at
        // `finish`.
        let mut buf = [0u8; 7];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bits(u32::MAX, 32).unwrap();
        let error = writer.write_bits(u32::MAX, 32).unwrap_err();
        assert_eq!(error.kind, EncodeErrorKind::BufferFull { capacity: 7 });

        let mut buf = [0u8; 3];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bits(u32::MAX, 32).unwrap();
        let error = writer.finish().unwrap_err();
        assert_eq!(error.kind, EncodeErrorKind::BufferFull { capacity: 3 });
        let mut writer = BitWriter::new(&mut buf);
        assert!(
            writer.write_wide(u64::MAX, 64).is_err(),
            "64 bits in 3 bytes"
        );
    }

    #[test]
    fn out_of_range_values_are_refused_with_their_bounds() {
        let mut counter = BitCounter::default();
        let error = counter.write_range(1001, 0, 1000).unwrap_err();
        assert_eq!(error.to_string(), "value 1001 outside range 0..=1000");
        let error = counter.write_uint(16, 4).unwrap_err();
        assert_eq!(error.to_string(), "value 16 outside range 0..=15");
        let error = counter.write_uint(1, 0).unwrap_err();
        assert_eq!(error.to_string(), "value 1 outside range 0..=0");
        let error = counter.write_str("too long", 4).unwrap_err();
        assert_eq!(error.to_string(), "length 8 exceeds max 4");
    }
}
