//! [`SnapshotWriter`]: the wire's bit writer, shaped for the snapshot's hot loop.

use tickwire_wire::{BitWrite, EncodeError, EncodeErrorKind};

/// Writes bits in the wire's order (the same bytes as [`tickwire_wire::BitWriter`] for the
/// same writes) through a 64-bit accumulator stored 8 bytes at a time, and takes up to 64
/// bits in one call ([`write_wide`](Self::write_wide)): a snapshot's entity, id and fields
/// packed together, is one call and at most one store rather than one call per field.
///
/// After an error the buffer's contents are unspecified.
#[derive(Debug)]
pub(crate) struct SnapshotWriter<'a> {
    buf: &'a mut [u8],
    /// Bits not yet stored; bit 0 is the oldest.
    pending: u64,
    /// How many bits of `pending` are in use: always below 64 between calls.
    pending_bits: u32,
    /// Bytes stored into `buf` so far.
    stored: usize,
}

impl<'a> SnapshotWriter<'a> {
    /// A writer that fills `buf` from its start.
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self {
            buf,
            pending: 0,
            pending_bits: 0,
            stored: 0,
        }
    }

    /// Writes the low `bits` (at most 64) bits of `value`, whose higher bits must be zero.
    #[inline(always)]
    pub(crate) fn write_wide(&mut self, value: u64, bits: u32) -> Result<(), EncodeError> {
        debug_assert!(bits == 64 || (bits < 64 && value >> bits == 0));
        let used = self.pending_bits;
        self.pending |= value << used;
        let total = used + bits;
        if total < 64 {
            self.pending_bits = total;
            return Ok(());
        }
        let Some(dst) = self.buf.get_mut(self.stored..self.stored + 8) else {
            return Err(self.full());
        };
        dst.copy_from_slice(&self.pending.to_le_bytes());
        self.stored += 8;
        // The bits of `value` that did not fit: `value >> (64 - used)`, and none when
        // `used` is 0 (a shift by 64 is not defined).
        self.pending = (value >> 1) >> (63 - used);
        self.pending_bits = total - 64;
        Ok(())
    }

    /// Stores the pending bits, padding the last byte with zeros, and returns the number of
    /// bytes used.
    pub(crate) fn finish(self) -> Result<usize, EncodeError> {
        let end = self.stored + self.pending_bits.div_ceil(8) as usize;
        let Some(dst) = self.buf.get_mut(self.stored..end) else {
            return Err(self.full());
        };
        let pending = self.pending.to_le_bytes();
        dst.copy_from_slice(&pending[..dst.len()]);
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

impl BitWrite for SnapshotWriter<'_> {
    #[inline(always)]
    fn write_bits(&mut self, value: u32, bits: u32) -> Result<(), EncodeError> {
        debug_assert!(bits <= 32, "write_bits of {bits} bits");
        let mask = (1u64 << bits) - 1;
        self.write_wide(u64::from(value) & mask, bits)
    }

    #[inline]
    fn bits_written(&self) -> usize {
        self.stored * 8 + self.pending_bits as usize
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use tickwire_wire::BitWriter;

    use super::*;

    /// Random runs of writes of 0 to 64 bits: the same bytes as the wire's writer given
    /// the same bits 32 at a time.
    #[test]
    fn writes_the_same_bytes_as_the_wire_writer() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..500 {
            let writes: Vec<(u64, u32)> = (0..rng.random_range(0..60))
                .map(|_| {
                    let bits = rng.random_range(0..=64u32);
                    let value = rng.random::<u64>().checked_shr(64 - bits).unwrap_or(0);
                    (value, bits)
                })
                .collect();
            let (mut expected, mut actual) = (vec![0u8; 512], vec![0u8; 512]);
            let mut wire = BitWriter::new(&mut expected);
            let mut ours = SnapshotWriter::new(&mut actual);
            for &(value, bits) in &writes {
                wire.write_uint(value, bits).unwrap();
                if bits <= 32 && rng.random() {
                    ours.write_bits(value as u32, bits).unwrap();
                } else {
                    ours.write_wide(value, bits).unwrap();
                }
                assert_eq!(ours.bits_written(), wire.bits_written());
            }
            let len = wire.finish().unwrap();
            assert_eq!(ours.finish().unwrap(), len);
            assert_eq!(actual[..len], expected[..len], "writes {writes:?}");
        }
    }

    #[test]
    fn a_write_past_the_buffer_is_an_error_and_one_that_fits_is_not() {
        let mut buf = [0u8; 9];
        let mut writer = SnapshotWriter::new(&mut buf);
        writer.write_wide(u64::MAX, 64).unwrap();
        writer.write_wide(0xff, 8).unwrap();
        assert_eq!(writer.finish().unwrap(), 9);
        let mut writer = SnapshotWriter::new(&mut buf);
        writer.write_wide(u64::MAX, 64).unwrap();
        writer.write_wide(0x1ff, 9).unwrap();
        assert!(writer.finish().is_err(), "73 bits in 9 bytes");
        let mut short = [0u8; 7];
        let mut writer = SnapshotWriter::new(&mut short);
        assert!(
            writer.write_wide(u64::MAX, 64).is_err(),
            "64 bits in 7 bytes"
        );
    }
}
