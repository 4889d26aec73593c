//! Message frames: the byte layout of what follows the packet header, a writer that packs
//! frames into a packet and a reader that validates them.
//!
//! Every frame starts with a tag byte: bits 0–4 the channel id, bit 7 set on fragment frames,
//! bits 5–6 zero. The channel's configured kind decides the rest:
//!
//! | frame | after the tag |
//! |---|---|
//! | reliable, whole | `id: u16`, `len: varint`, `len` bytes |
//! | reliable, fragment | `id: u16`, `total_len: u32`, `fragment_size: u16`, `index: u16`, the fragment's bytes (length implied) |
//! | unreliable | `len: varint`, `len` bytes |
//! | unreliable sequenced | `sequence: u16`, `len: varint`, `len` bytes |
//!
//! Integers are little-endian; varints are LEB128 (7 bits a byte, low group first) and must be
//! in their shortest form.

use super::config::{ChannelKind, MAX_FRAGMENTS, MIN_FRAGMENT_SIZE};
use super::error::MalformedError;
use super::fragment::fragment_range;

/// Tag bits holding the channel id.
const TAG_CHANNEL: u8 = 0x1f;
/// Tag bit marking a fragment frame.
const TAG_FRAGMENT: u8 = 0x80;
/// Tag bits that must be zero.
const TAG_RESERVED: u8 = 0x60;

/// Bytes of a fragment frame before the fragment's data.
pub(crate) const FRAGMENT_HEADER_LEN: usize = 1 + 2 + 4 + 2 + 2;

/// Smallest possible frame (an empty unreliable message): below this much space, stop
/// looking for frames that fit.
pub(crate) const MIN_FRAME_LEN: usize = 2;

/// Bytes of the LEB128 encoding of `value`.
#[inline]
pub(crate) fn varint_len(value: usize) -> usize {
    let bits = usize::BITS - (value | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

/// Bytes of a whole-message frame: tag, optional u16 id or sequence, varint length, data.
#[inline]
pub(crate) fn message_frame_len(has_number: bool, len: usize) -> usize {
    1 + if has_number { 2 } else { 0 } + varint_len(len) + len
}

/// One frame read from a packet, borrowing its data from the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    Reliable {
        channel: u8,
        id: u16,
        data: &'a [u8],
    },
    Fragment {
        channel: u8,
        id: u16,
        total_len: u32,
        fragment_size: u16,
        index: u16,
        data: &'a [u8],
    },
    Unreliable {
        channel: u8,
        data: &'a [u8],
    },
    Sequenced {
        channel: u8,
        sequence: u16,
        data: &'a [u8],
    },
}

/// Packs frames into the space after a packet header.
pub(crate) struct PacketWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
    frames: usize,
}

impl<'a> PacketWriter<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self {
            buf,
            len: 0,
            frames: 0,
        }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.len
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn frames(&self) -> usize {
        self.frames
    }

    /// Writes a whole-message frame if it fits; `number` is the reliable id or the sequenced
    /// channel's sequence, `None` on unreliable channels.
    pub(crate) fn try_message(&mut self, channel: u8, number: Option<u16>, data: &[u8]) -> bool {
        let need = message_frame_len(number.is_some(), data.len());
        if need > self.remaining() {
            return false;
        }
        let out = &mut self.buf[self.len..self.len + need];
        out[0] = channel & TAG_CHANNEL;
        let mut at = 1;
        if let Some(number) = number {
            out[1..3].copy_from_slice(&number.to_le_bytes());
            at = 3;
        }
        at += write_varint(&mut out[at..], data.len());
        out[at..].copy_from_slice(data);
        self.len += need;
        self.frames += 1;
        true
    }

    /// Writes a fragment frame if it fits; `data` is the fragment's bytes.
    pub(crate) fn try_fragment(
        &mut self,
        channel: u8,
        id: u16,
        total_len: u32,
        fragment_size: u16,
        index: u16,
        data: &[u8],
    ) -> bool {
        let need = FRAGMENT_HEADER_LEN + data.len();
        if need > self.remaining() {
            return false;
        }
        let out = &mut self.buf[self.len..self.len + need];
        out[0] = (channel & TAG_CHANNEL) | TAG_FRAGMENT;
        out[1..3].copy_from_slice(&id.to_le_bytes());
        out[3..7].copy_from_slice(&total_len.to_le_bytes());
        out[7..9].copy_from_slice(&fragment_size.to_le_bytes());
        out[9..11].copy_from_slice(&index.to_le_bytes());
        out[FRAGMENT_HEADER_LEN..].copy_from_slice(data);
        self.len += need;
        self.frames += 1;
        true
    }
}

/// Writes `value` (at most `u32::MAX`, which every length here is) as LEB128; returns bytes
/// written. `out` must hold [`varint_len`] bytes.
fn write_varint(out: &mut [u8], mut value: usize) -> usize {
    let mut at = 0;
    while value >= 0x80 {
        out[at] = (value as u8) | 0x80;
        value >>= 7;
        at += 1;
    }
    out[at] = value as u8;
    at + 1
}

/// Reads and validates the frames of one packet. Yields each frame, or one error and then
/// nothing. Checks only what the bytes and the channel kinds decide; window and bound checks
/// need connection state and live in the caller.
pub(crate) struct FrameReader<'a> {
    payload: &'a [u8],
    at: usize,
    kinds: &'a [ChannelKind],
    failed: bool,
}

impl<'a> FrameReader<'a> {
    /// Reads frames from `payload[start..]`; offsets in errors count from `payload`'s start.
    pub(crate) fn new(payload: &'a [u8], start: usize, kinds: &'a [ChannelKind]) -> Self {
        Self {
            payload,
            at: start,
            kinds,
            failed: false,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], MalformedError> {
        let rest = self.payload.get(self.at..).unwrap_or_default();
        match rest.get(..n) {
            Some(bytes) => {
                self.at += n;
                Ok(bytes)
            }
            None => Err(MalformedError::Truncated {
                offset: self.at,
                needed: n,
                remaining: rest.len(),
            }),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], MalformedError> {
        let bytes = self.take(N)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, MalformedError> {
        self.array().map(u16::from_le_bytes)
    }

    fn u32(&mut self) -> Result<u32, MalformedError> {
        self.array().map(u32::from_le_bytes)
    }

    /// A shortest-form LEB128 value of at most 32 bits.
    fn varint(&mut self) -> Result<u32, MalformedError> {
        let offset = self.at;
        let mut value = 0u32;
        for group in 0..5 {
            let [byte] = self.array()?;
            let payload = u32::from(byte & 0x7f);
            // The fifth group holds bits 28..32 only.
            if group == 4 && byte > 0x0f {
                return Err(MalformedError::InvalidVarint { offset });
            }
            value |= payload << (7 * group);
            if byte & 0x80 == 0 {
                if group > 0 && payload == 0 {
                    // Overlong: a trailing zero group adds nothing.
                    return Err(MalformedError::InvalidVarint { offset });
                }
                return Ok(value);
            }
        }
        Err(MalformedError::InvalidVarint { offset })
    }

    /// A varint length followed by that many bytes. The length is checked against what is
    /// left before anything is taken.
    fn sized(&mut self) -> Result<&'a [u8], MalformedError> {
        let len = self.varint()?;
        self.take(len as usize)
    }

    fn frame(&mut self) -> Result<Frame<'a>, MalformedError> {
        let offset = self.at;
        let [tag] = self.array()?;
        if tag & TAG_RESERVED != 0 {
            return Err(MalformedError::ReservedTagBits { tag, offset });
        }
        let channel = tag & TAG_CHANNEL;
        let Some(&kind) = self.kinds.get(usize::from(channel)) else {
            return Err(MalformedError::UnknownChannel {
                channel,
                channels: self.kinds.len(),
            });
        };
        if tag & TAG_FRAGMENT != 0 {
            if kind != ChannelKind::Reliable {
                return Err(MalformedError::FragmentOnUnreliable { channel });
            }
            return self.fragment(channel);
        }
        Ok(match kind {
            ChannelKind::Reliable => {
                let id = self.u16()?;
                Frame::Reliable {
                    channel,
                    id,
                    data: self.sized()?,
                }
            }
            ChannelKind::Unreliable => Frame::Unreliable {
                channel,
                data: self.sized()?,
            },
            ChannelKind::UnreliableSequenced => {
                let sequence = self.u16()?;
                Frame::Sequenced {
                    channel,
                    sequence,
                    data: self.sized()?,
                }
            }
        })
    }

    fn fragment(&mut self, channel: u8) -> Result<Frame<'a>, MalformedError> {
        let id = self.u16()?;
        let total_len = self.u32()?;
        let fragment_size = self.u16()?;
        let index = self.u16()?;
        if usize::from(fragment_size) < MIN_FRAGMENT_SIZE {
            return Err(MalformedError::FragmentSizeTooSmall {
                size: fragment_size,
                min: MIN_FRAGMENT_SIZE,
            });
        }
        let count = u64::from(total_len).div_ceil(u64::from(fragment_size));
        if count > MAX_FRAGMENTS as u64 {
            return Err(MalformedError::TooManyFragments {
                total_len,
                fragment_size,
                count,
                max: MAX_FRAGMENTS,
            });
        }
        if u64::from(index) >= count {
            return Err(MalformedError::FragmentIndex { index, count });
        }
        let range = fragment_range(total_len as usize, usize::from(fragment_size), index);
        let data = self.take(range.len())?;
        Ok(Frame::Fragment {
            channel,
            id,
            total_len,
            fragment_size,
            index,
            data,
        })
    }
}

impl<'a> Iterator for FrameReader<'a> {
    type Item = Result<Frame<'a>, MalformedError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.payload.len() {
            return None;
        }
        let frame = self.frame();
        self.failed = frame.is_err();
        Some(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KINDS: [ChannelKind; 3] = [
        ChannelKind::Reliable,
        ChannelKind::Unreliable,
        ChannelKind::UnreliableSequenced,
    ];

    fn read_all(payload: &[u8]) -> Result<Vec<Frame<'_>>, MalformedError> {
        FrameReader::new(payload, 0, &KINDS).collect()
    }

    #[test]
    fn varint_lengths_match_leb128() {
        for (value, len) in [
            (0, 1),
            (127, 1),
            (128, 2),
            (16383, 2),
            (16384, 3),
            (u32::MAX as usize, 5),
        ] {
            assert_eq!(varint_len(value), len, "varint_len({value})");
            let mut out = [0; 5];
            assert_eq!(
                write_varint(&mut out, value),
                len,
                "bytes written for {value}"
            );
        }
        let mut out = [0; 5];
        write_varint(&mut out, 300);
        assert_eq!(out[..2], [0xac, 0x02], "300 is ac 02 as in PROTOCOL.md");
    }

    #[test]
    fn frames_have_the_documented_bytes() {
        let mut buf = [0u8; 64];
        let mut writer = PacketWriter::new(&mut buf);
        assert!(writer.try_message(0, Some(0x1234), b"hi"));
        assert!(writer.try_message(1, None, b"u"));
        assert!(writer.try_message(2, Some(7), b""));
        assert!(writer.try_fragment(0, 9, 200, 64, 3, &[0xee; 8]));
        let len = writer.len();
        assert_eq!(writer.frames(), 4);
        #[rustfmt::skip]
        let expected: &[u8] = &[
            0x00, 0x34, 0x12, 0x02, b'h', b'i',
            0x01, 0x01, b'u',
            0x02, 0x07, 0x00, 0x00,
            0x80, 0x09, 0x00, 200, 0, 0, 0, 64, 0, 3, 0,
            0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
        ];
        assert_eq!(&buf[..len], expected);
        let frames = read_all(expected).expect("the frames just written must read back");
        assert_eq!(
            frames,
            vec![
                Frame::Reliable {
                    channel: 0,
                    id: 0x1234,
                    data: b"hi"
                },
                Frame::Unreliable {
                    channel: 1,
                    data: b"u"
                },
                Frame::Sequenced {
                    channel: 2,
                    sequence: 7,
                    data: b""
                },
                Frame::Fragment {
                    channel: 0,
                    id: 9,
                    total_len: 200,
                    fragment_size: 64,
                    index: 3,
                    data: &[0xee; 8]
                },
            ]
        );
    }

    #[test]
    fn writer_refuses_frames_that_do_not_fit() {
        let mut buf = [0u8; 6];
        let mut writer = PacketWriter::new(&mut buf);
        assert!(
            !writer.try_message(0, Some(1), b"abc"),
            "7 bytes must not fit in 6"
        );
        assert!(writer.try_message(0, Some(1), b"ab"), "6 bytes fit exactly");
        assert_eq!(writer.remaining(), 0);
    }

    #[test]
    fn malformed_frames_name_the_problem() {
        let cases: [(&[u8], MalformedError); 10] = [
            (
                &[0x20],
                MalformedError::ReservedTagBits {
                    tag: 0x20,
                    offset: 0,
                },
            ),
            (
                &[0x03],
                MalformedError::UnknownChannel {
                    channel: 3,
                    channels: 3,
                },
            ),
            (&[0x81], MalformedError::FragmentOnUnreliable { channel: 1 }),
            (
                &[0x00, 0x01],
                MalformedError::Truncated {
                    offset: 1,
                    needed: 2,
                    remaining: 1,
                },
            ),
            (
                &[0x01, 0x05, 1, 2],
                MalformedError::Truncated {
                    offset: 2,
                    needed: 5,
                    remaining: 2,
                },
            ),
            (
                &[0x01, 0x80, 0x00],
                MalformedError::InvalidVarint { offset: 1 },
            ),
            (
                &[0x01, 0xff, 0xff, 0xff, 0xff, 0x1f],
                MalformedError::InvalidVarint { offset: 1 },
            ),
            (
                &[0x80, 0, 0, 100, 0, 0, 0, 63, 0, 0, 0],
                MalformedError::FragmentSizeTooSmall { size: 63, min: 64 },
            ),
            (
                &[0x80, 0, 0, 100, 0, 0, 0, 64, 0, 2, 0],
                MalformedError::FragmentIndex { index: 2, count: 2 },
            ),
            (
                &[0x80, 0, 0, 0xff, 0xff, 0xff, 0xff, 64, 0, 0, 0],
                MalformedError::TooManyFragments {
                    total_len: u32::MAX,
                    fragment_size: 64,
                    count: u64::from(u32::MAX).div_ceil(64),
                    max: MAX_FRAGMENTS,
                },
            ),
        ];
        for (bytes, expected) in cases {
            assert_eq!(
                read_all(bytes),
                Err(expected.clone()),
                "{bytes:02x?} should fail: {expected}"
            );
        }
        // The last fragment's length is what remains: 100 - 64 = 36 bytes, only 35 given.
        let mut short = vec![0x80, 0, 0, 100, 0, 0, 0, 64, 0, 1, 0];
        short.extend_from_slice(&[0; 35]);
        assert_eq!(
            read_all(&short),
            Err(MalformedError::Truncated {
                offset: 11,
                needed: 36,
                remaining: 35
            })
        );
    }

    proptest! {
        #[test]
        fn varint_round_trips_and_rejects_overlong(value: u32) {
            let mut out = [0u8; 5];
            let len = write_varint(&mut out, value as usize);
            prop_assert_eq!(len, varint_len(value as usize));
            let mut reader = FrameReader::new(&out[..len], 0, &KINDS);
            prop_assert_eq!(reader.varint(), Ok(value));
            if len < 5 {
                // Append a zero group: same value, one byte longer, must be refused.
                let mut long = out;
                long[len - 1] |= 0x80;
                long[len] = 0;
                let mut reader = FrameReader::new(&long[..len + 1], 0, &KINDS);
                prop_assert_eq!(reader.varint(), Err(MalformedError::InvalidVarint { offset: 0 }));
            }
        }

        #[test]
        fn reader_never_panics_and_stays_in_bounds(bytes: Vec<u8>) {
            for frame in FrameReader::new(&bytes, 0, &KINDS) {
                match frame {
                    Ok(Frame::Fragment { total_len, fragment_size, index, data, .. }) => {
                        let range = fragment_range(total_len as usize, fragment_size.into(), index);
                        prop_assert_eq!(data.len(), range.len());
                    }
                    Ok(_) => {}
                    Err(_) => {}
                }
            }
        }
    }
}
