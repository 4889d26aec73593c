//! What travels on a WebTransport session (`docs/PROTOCOL.md`, "WebTransport transport"):
//! length-prefixed frames on the control stream, and datagrams. Pure functions: no socket,
//! no clock. Shared by the server endpoint and the Rust client (`tickwire-net`'s `wt`), and
//! fuzzed by `fuzz/webtransport_frames`.

use crate::login::LOGIN_BYTES;
use crate::reliable::{ChannelKind, sequence_newer};
use bytes::{BufMut, Bytes, BytesMut};

use crate::websocket::clamp_close_reason;

/// The URL path of the WebTransport endpoint: `https://host:port/wt`.
pub const WT_PATH: &str = "/wt";

/// The first byte of a close frame (no channel has this id: channels are below 32).
pub const CLOSE_FRAME_TAG: u8 = 0xff;

/// Bytes of a frame's length prefix (u32 little-endian).
pub const FRAME_HEADER_BYTES: usize = 4;

/// The largest frame body for connections with `max_message_size`: a channel byte and the
/// largest message, and never less than a login (a connect token and its proof).
pub fn max_frame_bytes(max_message_size: u32) -> usize {
    (max_message_size as usize)
        .saturating_add(1)
        .max(LOGIN_BYTES)
}

/// What a frame's length prefix says, checked before anything is buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameLengthError {
    /// A frame holds at least one byte.
    #[error("empty frame")]
    Empty,
    /// The prefix announces more than the bound.
    #[error("frame of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Announced bytes.
        len: u64,
        /// The bound.
        max: usize,
    },
}

/// Checks a frame's length prefix against `max` bytes.
pub fn check_frame_length(
    prefix: [u8; FRAME_HEADER_BYTES],
    max: usize,
) -> Result<usize, FrameLengthError> {
    let len = u32::from_le_bytes(prefix);
    if len == 0 {
        return Err(FrameLengthError::Empty);
    }
    match usize::try_from(len) {
        Ok(len) if len <= max => Ok(len),
        _ => Err(FrameLengthError::TooLarge {
            len: u64::from(len),
            max,
        }),
    }
}

/// Appends a frame holding `body` to `out`.
pub fn put_frame(out: &mut BytesMut, body: &[u8]) {
    out.reserve(FRAME_HEADER_BYTES + body.len());
    // Bodies are bounded by max_frame_bytes (at most u32::MAX + 1 only in theory; the
    // dictated max message size is far below).
    out.put_u32_le(body.len() as u32);
    out.put_slice(body);
}

/// Appends a data frame: the channel id, then the message.
pub fn put_data_frame(out: &mut BytesMut, channel: u8, message: &[u8]) {
    out.reserve(FRAME_HEADER_BYTES + 1 + message.len());
    out.put_u32_le(1 + message.len() as u32);
    out.put_u8(channel);
    out.put_slice(message);
}

/// A close frame with `code` and `reason` (cut to 123 bytes on a character boundary).
pub fn close_frame(code: u16, reason: &str) -> BytesMut {
    let reason = clamp_close_reason(reason);
    let mut body = Vec::with_capacity(3 + reason.len());
    body.push(CLOSE_FRAME_TAG);
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(reason.as_bytes());
    let mut out = BytesMut::new();
    put_frame(&mut out, &body);
    out
}

/// A frame body after the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A message on a channel.
    Data(u8, Bytes),
    /// The peer closes: its code and reason (lossily decoded).
    Close(u16, String),
}

/// Why a frame body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The channel id is not one of the connection's channels.
    #[error("channel {channel} does not exist; the connection has {count} channels")]
    UnknownChannel {
        /// The channel id received.
        channel: u8,
        /// Channels the connection has.
        count: usize,
    },
    /// A close frame needs its two code bytes.
    #[error("close frame without a code")]
    ShortClose,
    /// A frame holds at least one byte.
    #[error("empty frame")]
    Empty,
}

/// Reads a frame body (sharing its buffer).
pub fn parse_frame(body: Bytes, channel_count: usize) -> Result<Frame, FrameError> {
    let &first = body.first().ok_or(FrameError::Empty)?;
    if first == CLOSE_FRAME_TAG {
        if body.len() < 3 {
            return Err(FrameError::ShortClose);
        }
        let code = u16::from_le_bytes([body[1], body[2]]);
        let reason = String::from_utf8_lossy(&body[3..]).into_owned();
        return Ok(Frame::Close(code, reason));
    }
    if usize::from(first) >= channel_count {
        return Err(FrameError::UnknownChannel {
            channel: first,
            count: channel_count,
        });
    }
    Ok(Frame::Data(first, body.slice(1..)))
}

/// Header bytes a datagram on a channel of `kind` carries before the message (none for
/// Reliable: its messages never ride datagrams).
pub fn datagram_header_bytes(kind: ChannelKind) -> usize {
    match kind {
        ChannelKind::Unreliable => 1,
        ChannelKind::UnreliableSequenced => 3,
        ChannelKind::Reliable => 0,
    }
}

/// Writes a datagram for `message` on `channel` (of `kind`, not Reliable) into `out`,
/// replacing its contents; `sequence` is used for sequenced channels.
pub fn write_datagram(
    out: &mut Vec<u8>,
    channel: u8,
    kind: ChannelKind,
    sequence: u16,
    message: &[u8],
) {
    out.clear();
    out.push(channel);
    if kind == ChannelKind::UnreliableSequenced {
        out.extend_from_slice(&sequence.to_le_bytes());
    }
    out.extend_from_slice(message);
}

/// Why a received datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramDrop {
    /// No bytes, or a sequenced datagram without its sequence.
    Short,
    /// No such channel.
    UnknownChannel,
    /// A Reliable channel's messages never ride datagrams.
    ReliableChannel,
    /// Not newer than the newest seen on its sequenced channel.
    Stale,
}

/// Per-channel receive state for sequenced channels: the newest sequence seen.
#[derive(Debug, Clone, Default)]
pub struct DatagramReceiver {
    newest: Vec<Option<u16>>,
}

impl DatagramReceiver {
    /// State for a connection with `channels`.
    pub fn new(channel_count: usize) -> Self {
        Self {
            newest: vec![None; channel_count],
        }
    }

    /// Reads a datagram: its channel and message (sharing the buffer), or why it is dropped.
    pub fn accept(
        &mut self,
        datagram: Bytes,
        channels: &[ChannelKind],
    ) -> Result<(u8, Bytes), DatagramDrop> {
        let &channel = datagram.first().ok_or(DatagramDrop::Short)?;
        let kind = *channels
            .get(usize::from(channel))
            .ok_or(DatagramDrop::UnknownChannel)?;
        match kind {
            ChannelKind::Reliable => Err(DatagramDrop::ReliableChannel),
            ChannelKind::Unreliable => Ok((channel, datagram.slice(1..))),
            ChannelKind::UnreliableSequenced => {
                if datagram.len() < 3 {
                    return Err(DatagramDrop::Short);
                }
                let sequence = u16::from_le_bytes([datagram[1], datagram[2]]);
                let newest = &mut self.newest[usize::from(channel)];
                if let Some(last) = *newest
                    && !sequence_newer(sequence, last)
                {
                    return Err(DatagramDrop::Stale);
                }
                *newest = Some(sequence);
                Ok((channel, datagram.slice(3..)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANNELS: [ChannelKind; 3] = [
        ChannelKind::Reliable,
        ChannelKind::Unreliable,
        ChannelKind::UnreliableSequenced,
    ];

    #[test]
    fn lengths_are_checked_before_buffering() {
        assert_eq!(check_frame_length(5u32.to_le_bytes(), 10), Ok(5));
        assert_eq!(check_frame_length(10u32.to_le_bytes(), 10), Ok(10));
        assert_eq!(
            check_frame_length(0u32.to_le_bytes(), 10),
            Err(FrameLengthError::Empty)
        );
        assert_eq!(
            check_frame_length(u32::MAX.to_le_bytes(), 10),
            Err(FrameLengthError::TooLarge {
                len: u64::from(u32::MAX),
                max: 10
            })
        );
        assert_eq!(max_frame_bytes(100), LOGIN_BYTES, "a login always fits");
        assert_eq!(max_frame_bytes(262_144), 262_145);
    }

    #[test]
    fn frames_round_trip() {
        let mut out = BytesMut::new();
        put_data_frame(&mut out, 2, b"hi");
        assert_eq!(&out[..], b"\x03\x00\x00\x00\x02hi");
        let body = out.freeze().slice(4..);
        assert_eq!(
            parse_frame(body, 3),
            Ok(Frame::Data(2, Bytes::from_static(b"hi")))
        );
        let close = close_frame(4001, "bye");
        assert_eq!(&close[..], b"\x06\x00\x00\x00\xff\xa1\x0fbye");
        assert_eq!(
            parse_frame(close.freeze().slice(4..), 3),
            Ok(Frame::Close(4001, "bye".into()))
        );
        assert_eq!(
            parse_frame(Bytes::from_static(b"\x03x"), 3),
            Err(FrameError::UnknownChannel {
                channel: 3,
                count: 3
            })
        );
        assert_eq!(
            parse_frame(Bytes::from_static(b"\xff\x01"), 3),
            Err(FrameError::ShortClose)
        );
        let long = close_frame(4004, &"é".repeat(100));
        assert_eq!(long.len(), 4 + 3 + 122, "the reason is cut to 123 bytes");
    }

    #[test]
    fn datagrams_carry_channel_and_sequence() {
        let mut out = Vec::new();
        write_datagram(&mut out, 1, ChannelKind::Unreliable, 9, b"x");
        assert_eq!(out, b"\x01x");
        write_datagram(&mut out, 2, ChannelKind::UnreliableSequenced, 0x0102, b"y");
        assert_eq!(out, b"\x02\x02\x01y");

        let mut receiver = DatagramReceiver::new(3);
        let got = receiver.accept(Bytes::from(out.clone()), &CHANNELS);
        assert_eq!(got, Ok((2, Bytes::from_static(b"y"))));
        assert_eq!(
            receiver.accept(Bytes::from(out), &CHANNELS),
            Err(DatagramDrop::Stale),
            "the same sequence again is not newer"
        );
        assert_eq!(
            receiver.accept(Bytes::from_static(b"\x02\x01\x01z"), &CHANNELS),
            Err(DatagramDrop::Stale),
            "an older one is dropped"
        );
        assert_eq!(
            receiver.accept(Bytes::from_static(b"\x00a"), &CHANNELS),
            Err(DatagramDrop::ReliableChannel)
        );
        assert_eq!(
            receiver.accept(Bytes::from_static(b"\x07a"), &CHANNELS),
            Err(DatagramDrop::UnknownChannel)
        );
        assert_eq!(
            receiver.accept(Bytes::new(), &CHANNELS),
            Err(DatagramDrop::Short)
        );
        assert_eq!(
            receiver.accept(Bytes::from_static(b"\x02\x01"), &CHANNELS),
            Err(DatagramDrop::Short)
        );
        assert_eq!(
            receiver.accept(Bytes::from_static(b"\x01"), &CHANNELS),
            Ok((1, Bytes::new())),
            "an empty unreliable message is a message"
        );
    }
}
