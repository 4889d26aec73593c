//! Reading bits: [`BitReader`] over a byte slice, with the same encodings as
//! [`BitWrite`](crate::BitWrite) and a typed error for every way input can be wrong.

use crate::error::{DecodeError, DecodeErrorKind};
use crate::quantize::Quantize;
use crate::writer::{bits_for_span, low_mask};

/// Reads bits from a byte slice through a 64-bit scratch register, loading four bytes at a
/// time.
///
/// Every read checks the input: running out is [`DecodeErrorKind::Truncated`], never a
/// panic, and nothing is allocated before its length has been checked against both the
/// declared maximum and the bits actually left.
///
/// ```
/// use tickwire_wire::BitReader;
///
/// let mut reader = BitReader::new(&[0xee, 0x06]);
/// assert_eq!(reader.read_range(0, 1000).unwrap(), 750);
/// assert!(reader.read_bool().unwrap());
/// reader.finish().unwrap(); // the rest is zero padding
/// ```
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    buf: &'a [u8],
    /// Bytes of `buf` moved into `scratch` so far.
    loaded: usize,
    /// Loaded bits not yet read; bit 0 is the next one.
    scratch: u64,
    /// Full width for the same store-forwarding reason as `BitWriter::scratch_bits`.
    scratch_bits: u64,
}

impl<'a> BitReader<'a> {
    /// A reader positioned at the first bit of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            loaded: 0,
            scratch: 0,
            scratch_bits: 0,
        }
    }

    /// Bits read so far.
    pub fn bits_read(&self) -> usize {
        self.loaded * 8 - self.scratch_bits as usize
    }

    /// Bits left in the input, including the last byte's padding.
    pub fn remaining_bits(&self) -> usize {
        (self.buf.len() - self.loaded) * 8 + self.scratch_bits as usize
    }

    /// Checks that the input is used up: at most the last byte's padding remains, and it
    /// is zero. Encodings are canonical, so a value that decodes and finishes re-encodes to
    /// the same bytes.
    ///
    /// Takes `&self`: moving the reader into a by-value `finish` cost a store-forwarding
    /// stall on every decode.
    #[inline]
    pub fn finish(&self) -> Result<(), DecodeError> {
        let remaining = self.remaining_bits();
        if remaining >= 8 {
            return Err(DecodeErrorKind::TrailingBytes {
                bytes: remaining / 8,
            }
            .into());
        }
        // Fewer than 8 bits left means every byte is loaded and `scratch` holds exactly
        // the padding (bits already read were shifted out).
        if self.scratch != 0 {
            return Err(DecodeErrorKind::NonZeroPadding.into());
        }
        Ok(())
    }

    /// Reads `bits` bits (`bits <= 32`) as the low bits of the result.
    #[inline(always)]
    pub fn read_bits(&mut self, bits: u32) -> Result<u32, DecodeError> {
        debug_assert!(bits <= 32, "read_bits of {bits} bits");
        if self.scratch_bits < u64::from(bits) {
            self.refill();
            if self.scratch_bits < u64::from(bits) {
                return Err(self.truncated(bits as usize));
            }
        }
        let value = (self.scratch & low_mask(bits)) as u32;
        self.scratch >>= bits;
        self.scratch_bits -= u64::from(bits);
        Ok(value)
    }

    /// Tops up `scratch` to at least 32 bits, or to the end of the input.
    #[inline(always)]
    fn refill(&mut self) {
        // Callers only refill below 32 pending bits, so a whole word always fits.
        if let Some(word) = self.buf.get(self.loaded..self.loaded + 4) {
            let word = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            self.scratch |= u64::from(word) << self.scratch_bits;
            self.scratch_bits += 32;
            self.loaded += 4;
        } else {
            self.refill_tail();
        }
    }

    /// The last 0–3 bytes of every message come through here, so it stays inline.
    #[inline(always)]
    fn refill_tail(&mut self) {
        while self.scratch_bits <= 56 {
            let Some(&byte) = self.buf.get(self.loaded) else {
                break;
            };
            self.scratch |= u64::from(byte) << self.scratch_bits;
            self.scratch_bits += 8;
            self.loaded += 1;
        }
    }

    #[cold]
    fn truncated(&self, needed: usize) -> DecodeError {
        DecodeErrorKind::Truncated {
            needed,
            remaining: self.remaining_bits(),
        }
        .into()
    }

    #[inline]
    fn expect_zero(&mut self, bits: u32) -> Result<(), DecodeError> {
        if self.read_bits(bits)? != 0 {
            return Err(DecodeErrorKind::NonZeroPadding.into());
        }
        Ok(())
    }

    /// Skips to the next byte boundary; the skipped bits must be zero.
    #[inline]
    pub fn align(&mut self) -> Result<(), DecodeError> {
        let pad = (8 - self.bits_read() % 8) % 8;
        self.expect_zero(pad as u32)
    }

    /// Reads one bit.
    #[inline(always)]
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.read_bits(1)? == 1)
    }

    /// Reads an unsigned integer of exactly `bits` bits (`bits <= 64`).
    #[inline(always)]
    pub fn read_uint(&mut self, bits: u32) -> Result<u64, DecodeError> {
        debug_assert!(bits <= 64, "read_uint of {bits} bits");
        if bits <= 32 {
            return Ok(u64::from(self.read_bits(bits)?));
        }
        if self.remaining_bits() < bits as usize {
            return Err(self.truncated(bits as usize));
        }
        let low = u64::from(self.read_bits(32)?);
        let high = u64::from(self.read_bits(bits - 32)?);
        Ok(low | high << 32)
    }

    /// Reads an integer declared to lie in `min..=max` (the span must fit in 64 bits).
    #[inline(always)]
    pub fn read_range(&mut self, min: i128, max: i128) -> Result<i128, DecodeError> {
        self.read_range_in_bits(min, max, bits_for_span((max - min) as u64))
    }

    /// [`read_range`](Self::read_range) with the width already computed.
    #[inline(always)]
    pub(crate) fn read_range_in_bits(
        &mut self,
        min: i128,
        max: i128,
        bits: u32,
    ) -> Result<i128, DecodeError> {
        let span = (max - min) as u64;
        let offset = self.read_uint(bits)?;
        let value = min + i128::from(offset);
        if offset > span {
            return Err(DecodeErrorKind::OutOfRange { value, min, max }.into());
        }
        Ok(value)
    }

    /// Reads a varint (see [`BitWrite::write_varint`](crate::BitWrite::write_varint)),
    /// refusing overlong forms and values past `u64::MAX`.
    #[inline]
    pub fn read_varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for group in 0..10 {
            let byte = self.read_bits(8)?;
            let payload = u64::from(byte & 0x7f);
            let more = byte & 0x80 != 0;
            // The tenth group holds bit 63 only; anything else overflows.
            if group == 9 && (payload > 1 || more) {
                return Err(DecodeErrorKind::InvalidVarint.into());
            }
            value |= payload << (7 * group);
            if !more {
                // A zero last group (other than a lone zero) is an overlong encoding.
                if payload == 0 && group > 0 {
                    return Err(DecodeErrorKind::InvalidVarint.into());
                }
                return Ok(value);
            }
        }
        Err(DecodeErrorKind::InvalidVarint.into())
    }

    /// Reads a zigzag-mapped signed varint.
    #[inline]
    pub fn read_varint_signed(&mut self) -> Result<i64, DecodeError> {
        let zigzag = self.read_varint()?;
        Ok((zigzag >> 1) as i64 ^ -((zigzag & 1) as i64))
    }

    /// Reads a raw IEEE 754 `f32`.
    #[inline(always)]
    pub fn read_f32(&mut self) -> Result<f32, DecodeError> {
        Ok(f32::from_bits(self.read_bits(32)?))
    }

    /// Reads a raw IEEE 754 `f64`.
    #[inline(always)]
    pub fn read_f64(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_bits(self.read_uint(64)?))
    }

    /// Reads a float quantized to `quantize`'s grid.
    #[inline(always)]
    pub fn read_quantized(&mut self, quantize: &Quantize) -> Result<f32, DecodeError> {
        let step = self.read_uint(quantize.bits())?;
        quantize.value_of(step)
    }

    /// Reads a length in `0..=max`.
    #[inline(always)]
    pub fn read_len(&mut self, max: usize) -> Result<usize, DecodeError> {
        let len = self.read_uint(bits_for_span(max as u64))? as usize;
        if len > max {
            return Err(DecodeErrorKind::TooLong { len, max }.into());
        }
        Ok(len)
    }

    /// Reads a length in `0..=max` for a sequence whose elements take at least
    /// `min_element_bits` each, refusing a length the remaining input cannot hold.
    #[inline(always)]
    pub fn read_len_for(
        &mut self,
        max: usize,
        min_element_bits: usize,
    ) -> Result<usize, DecodeError> {
        let len = self.read_len(max)?;
        let needed = len.saturating_mul(min_element_bits);
        if needed > self.remaining_bits() {
            return Err(self.truncated(needed));
        }
        Ok(len)
    }

    /// Fills `out` with raw bytes, 8 bits each.
    #[inline]
    pub fn read_raw_bytes(&mut self, out: &mut [u8]) -> Result<(), DecodeError> {
        let needed = out.len().saturating_mul(8);
        if needed > self.remaining_bits() {
            return Err(self.truncated(needed));
        }
        let mut words = out.chunks_exact_mut(4);
        for word in &mut words {
            word.copy_from_slice(&self.read_bits(32)?.to_le_bytes());
        }
        for byte in words.into_remainder() {
            *byte = self.read_bits(8)? as u8;
        }
        Ok(())
    }

    /// Appends `len` raw bytes to `out`.
    #[inline(always)]
    fn append_raw_bytes(&mut self, out: &mut Vec<u8>, len: usize) -> Result<(), DecodeError> {
        let needed = len.saturating_mul(8);
        if needed > self.remaining_bits() {
            return Err(self.truncated(needed));
        }
        // Exact: a decoded value never holds more than its declared bound.
        out.reserve_exact(len);
        for _ in 0..len / 4 {
            out.extend_from_slice(&self.read_bits(32)?.to_le_bytes());
        }
        for _ in 0..len % 4 {
            out.push(self.read_bits(8)? as u8);
        }
        Ok(())
    }

    /// Reads a byte array of at most `max_len` bytes into `out`, replacing its contents and
    /// reusing its capacity.
    #[inline]
    pub fn read_bytes_into(
        &mut self,
        out: &mut Vec<u8>,
        max_len: usize,
    ) -> Result<(), DecodeError> {
        let len = self.read_len_for(max_len, 8)?;
        out.clear();
        self.append_raw_bytes(out, len)
    }

    /// Reads a UTF-8 string of at most `max_len` bytes into `out`, replacing its contents
    /// and reusing its capacity.
    #[inline]
    pub fn read_string_into(
        &mut self,
        out: &mut String,
        max_len: usize,
    ) -> Result<(), DecodeError> {
        let len = self.read_len_for(max_len, 8)?;
        // Decode into the string's own allocation so steady-state decoding allocates nothing.
        let mut bytes = std::mem::take(out).into_bytes();
        bytes.clear();
        if let Err(error) = self.append_raw_bytes(&mut bytes, len) {
            *out = empty_string_keeping(bytes);
            return Err(error);
        }
        if bytes.is_ascii() {
            // SAFETY: ASCII is valid UTF-8. Names and chat are mostly ASCII, and the full
            // validation below cost more than the rest of a short string's decode.
            *out = unsafe { String::from_utf8_unchecked(bytes) };
            return Ok(());
        }
        match String::from_utf8(bytes) {
            Ok(string) => {
                *out = string;
                Ok(())
            }
            Err(error) => {
                *out = empty_string_keeping(error.into_bytes());
                Err(DecodeErrorKind::InvalidUtf8.into())
            }
        }
    }
}

/// An empty string that keeps `bytes`' allocation.
fn empty_string_keeping(mut bytes: Vec<u8>) -> String {
    bytes.clear();
    // An empty vector is valid UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BitWrite, BitWriter};

    #[test]
    fn reads_what_the_writer_wrote() {
        let mut buf = [0u8; 64];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bits(5, 3).unwrap();
        writer.write_uint(u64::MAX - 1, 64).unwrap();
        writer.write_range(-7, -10, 10).unwrap();
        writer.write_varint_signed(-300).unwrap();
        writer.write_str("Casey", 32).unwrap();
        writer.align().unwrap();
        writer.write_f32(-0.5).unwrap();
        let len = writer.finish().unwrap();

        let mut reader = BitReader::new(&buf[..len]);
        assert_eq!(reader.read_bits(3).unwrap(), 5);
        assert_eq!(reader.read_uint(64).unwrap(), u64::MAX - 1);
        assert_eq!(reader.read_range(-10, 10).unwrap(), -7);
        assert_eq!(reader.read_varint_signed().unwrap(), -300);
        let mut name = String::new();
        reader.read_string_into(&mut name, 32).unwrap();
        assert_eq!(name, "Casey");
        reader.align().unwrap();
        assert_eq!(reader.read_f32().unwrap(), -0.5);
        reader.finish().unwrap();
    }

    #[test]
    fn running_out_is_a_truncation_error() {
        let mut reader = BitReader::new(&[0xff]);
        assert_eq!(reader.read_bits(5).unwrap(), 0x1f);
        let error = reader.read_bits(4).unwrap_err();
        assert_eq!(
            error.kind,
            DecodeErrorKind::Truncated {
                needed: 4,
                remaining: 3
            }
        );
    }

    #[test]
    fn a_long_length_prefix_allocates_nothing_before_failing() {
        // Length 255 of at most 1000, but only a few bytes follow.
        let mut reader = BitReader::new(&[0xff, 0x00, 0x41]);
        let mut out = Vec::new();
        let error = reader.read_bytes_into(&mut out, 1000).unwrap_err();
        assert!(matches!(
            error.kind,
            DecodeErrorKind::Truncated { needed: 2040, .. }
        ));
        assert_eq!(out.capacity(), 0);
    }

    #[test]
    fn lengths_past_the_maximum_are_refused() {
        // 6-bit length 40 with max 32.
        let mut reader = BitReader::new(&[40]);
        let error = reader.read_len(32).unwrap_err();
        assert_eq!(error.to_string(), "length 40 exceeds max 32");
    }

    #[test]
    fn overlong_and_overflowing_varints_are_refused() {
        for bytes in [
            &[0x80, 0x00][..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x81, 0x00,
            ],
        ] {
            let error = BitReader::new(bytes).read_varint().unwrap_err();
            assert_eq!(error.kind, DecodeErrorKind::InvalidVarint, "{bytes:02x?}");
        }
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(BitReader::new(&max).read_varint().unwrap(), u64::MAX);
        assert_eq!(BitReader::new(&[0x00]).read_varint().unwrap(), 0);
    }

    #[test]
    fn invalid_utf8_is_refused_and_the_buffer_kept() {
        let mut buf = [0u8; 8];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bytes(&[0xc3, 0x28], 8).unwrap();
        let len = writer.finish().unwrap();
        let mut out = String::with_capacity(16);
        let error = BitReader::new(&buf[..len])
            .read_string_into(&mut out, 8)
            .unwrap_err();
        assert_eq!(error.kind, DecodeErrorKind::InvalidUtf8);
        assert!(out.is_empty());
        assert!(out.capacity() >= 16, "capacity is kept for reuse");
    }

    #[test]
    fn finish_refuses_trailing_bytes_and_dirty_padding() {
        let reader = BitReader::new(&[0x00, 0x00]);
        assert_eq!(
            reader.finish().unwrap_err().kind,
            DecodeErrorKind::TrailingBytes { bytes: 2 }
        );
        let mut reader = BitReader::new(&[0b1000_0001]);
        assert!(reader.read_bool().unwrap());
        assert_eq!(
            reader.finish().unwrap_err().kind,
            DecodeErrorKind::NonZeroPadding
        );
    }
}
