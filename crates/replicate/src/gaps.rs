//! Entity ids on the wire: each list's ids ascend and are written as gaps from the one
//! before (from 0 for the first): `0` + 4 bits below 16, `1 0` + 8 bits (gap − 16) below 272,
//! `1 1` + 16 bits otherwise. Bits are written least significant first, as everywhere.

use tickwire_wire::{BitReader, BitWrite, DecodeError, DecodeErrorKind, EncodeError};

use crate::EntityId;

/// The most bits an id takes: what the selection counts before ids are sorted.
pub(crate) const ID_BITS_MAX: usize = 18;

/// Writes ascending ids as gaps.
#[derive(Debug, Default)]
pub(crate) struct GapWriter {
    next: u32,
}

impl GapWriter {
    pub(crate) fn write<W: BitWrite + ?Sized>(
        &mut self,
        writer: &mut W,
        id: EntityId,
    ) -> Result<(), EncodeError> {
        let gap = u32::from(id) - self.next;
        if gap < 16 {
            writer.write_bits(gap << 1, 5)?;
        } else if gap < 272 {
            writer.write_bits(0b01 | (gap - 16) << 2, 10)?;
        } else {
            writer.write_bits(0b11 | gap << 2, 18)?;
        }
        self.next = u32::from(id) + 1;
        Ok(())
    }
}

/// Reads ids written by [`GapWriter`], refusing one past the id space.
#[derive(Debug, Default)]
pub(crate) struct GapReader {
    next: u32,
}

impl GapReader {
    pub(crate) fn read(&mut self, reader: &mut BitReader<'_>) -> Result<EntityId, DecodeError> {
        let gap = if !reader.read_bool()? {
            reader.read_bits(4)?
        } else if !reader.read_bool()? {
            reader.read_bits(8)? + 16
        } else {
            reader.read_bits(16)?
        };
        let id = self.next + gap;
        if id > u32::from(crate::MAX_ENTITY_ID) {
            return Err(DecodeErrorKind::OutOfRange {
                value: i128::from(id),
                min: 0,
                max: i128::from(crate::MAX_ENTITY_ID),
            }
            .into());
        }
        self.next = id + 1;
        Ok(id as EntityId)
    }
}

#[cfg(test)]
mod tests {
    use tickwire_wire::BitWriter;

    use super::*;

    #[test]
    fn gaps_take_5_10_or_18_bits_and_read_back() {
        let ids = [0u16, 15, 16, 300, 301, 65_000];
        let mut buf = [0u8; 32];
        let mut writer = BitWriter::new(&mut buf);
        let mut gaps = GapWriter::default();
        for id in ids {
            gaps.write(&mut writer, id).unwrap();
        }
        // 0 (gap 0), 15 (14), 16 (0), 300 (283: 18 bits), 301 (0), 65,000 (18 bits).
        assert_eq!(writer.bits_written(), 5 + 5 + 5 + 18 + 5 + 18);
        let len = writer.finish().unwrap();
        let mut reader = BitReader::new(&buf[..len]);
        let mut gaps = GapReader::default();
        for id in ids {
            assert_eq!(gaps.read(&mut reader).unwrap(), id);
        }
    }

    #[test]
    fn an_id_past_the_id_space_is_refused() {
        // Gap 65,535 after id 65,000.
        let mut buf = [0u8; 8];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_bits(0b11 | 65_000 << 2, 18).unwrap();
        writer.write_bits(0b11 | 65_535 << 2, 18).unwrap();
        let len = writer.finish().unwrap();
        let mut reader = BitReader::new(&buf[..len]);
        let mut gaps = GapReader::default();
        assert_eq!(gaps.read(&mut reader).unwrap(), 65_000);
        assert!(gaps.read(&mut reader).is_err());
    }
}
