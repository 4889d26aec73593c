//! RFC 6455 framing, sans-IO: the server's side of it. Client frames are parsed (and
//! unmasked in place) out of a connection's read buffer; server frames are appended to its
//! write buffer. The client's side (masked writes, unmasked reads) is here too for the load
//! tool's bots: [`write_masked_frame`] and [`MessageReader::for_server_frames`]. No socket, no clock, no allocation but the buffers the caller owns, so the
//! shard that drives a connection (`tickwire-net`'s `WsLinks`) and the HTTP side that reads
//! the connect token call it directly, and the fuzz target feeds it anything.
//!
//! What is refused, and why ([`FrameError`]): a client frame without a mask, a reserved bit
//! (tickwire negotiates no extension), a reserved opcode, a control frame that is fragmented
//! or longer than 125 bytes, a continuation with no message to continue, a new message
//! before the last one finished, a one-byte close payload, a close code no endpoint may send,
//! a close reason or a text message that is not UTF-8, and any frame or message longer than
//! the connection's limit (checked on the header, before a byte of the body is buffered).

/// Opcodes (RFC 6455 §5.2).
pub mod opcode {
    /// Continuation of a fragmented message.
    pub const CONTINUATION: u8 = 0x0;
    /// A text message (never valid in tickwire's framing).
    pub const TEXT: u8 = 0x1;
    /// A binary message.
    pub const BINARY: u8 = 0x2;
    /// Close.
    pub const CLOSE: u8 = 0x8;
    /// Ping.
    pub const PING: u8 = 0x9;
    /// Pong.
    pub const PONG: u8 = 0xA;
}

/// Longest close reason, in bytes: a close frame's payload is at most 125 bytes, two of
/// which hold the code. WebTransport's close frames keep the same bound.
pub const MAX_CLOSE_REASON_BYTES: usize = 123;

/// Cuts `reason` to [`MAX_CLOSE_REASON_BYTES`] on a character boundary.
pub fn clamp_close_reason(reason: &str) -> &str {
    if reason.len() <= MAX_CLOSE_REASON_BYTES {
        return reason;
    }
    let mut end = MAX_CLOSE_REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// Longest control frame payload (RFC 6455 §5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;

/// Why a client's bytes are not a valid frame sequence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A client frame must be masked (RFC 6455 §5.1).
    #[error("unmasked client frame")]
    Unmasked,
    /// A server frame must not be masked (RFC 6455 §5.1).
    #[error("masked server frame")]
    MaskedServerFrame,
    /// A reserved bit is set, but no extension was negotiated.
    #[error("reserved bits {0:#x} set without an extension")]
    ReservedBits(u8),
    /// An opcode RFC 6455 reserves.
    #[error("reserved opcode {0:#x}")]
    ReservedOpcode(u8),
    /// A control frame with FIN clear, or longer than 125 bytes.
    #[error("control frame fragmented or longer than 125 bytes")]
    BadControlFrame,
    /// A continuation frame with no fragmented message under way.
    #[error("continuation frame with no message to continue")]
    StrayContinuation,
    /// A text or binary frame while a fragmented message is still under way.
    #[error("new message before the fragmented one finished")]
    InterleavedMessage,
    /// A close payload of one byte (a code takes two).
    #[error("close payload of 1 byte")]
    BadClosePayload,
    /// A close code no endpoint may put in a close frame (RFC 6455 §7.4).
    #[error("close code {0} may not be sent in a close frame")]
    BadCloseCode(u16),
    /// A close reason that is not UTF-8 (RFC 6455 §5.5.1).
    #[error("close reason is not UTF-8")]
    CloseReasonNotUtf8,
    /// A text message that is not UTF-8 (RFC 6455 §8.1).
    #[error("text message is not UTF-8")]
    TextNotUtf8,
    /// A frame's or message's length passes the limit.
    #[error("message of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// The length announced (or reached by fragments).
        len: u64,
        /// The limit.
        max: usize,
    },
}

/// One frame's header, as parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// FIN: the last frame of its message.
    pub fin: bool,
    /// The opcode.
    pub opcode: u8,
    /// Header bytes (payload starts here).
    pub header_len: usize,
    /// Payload bytes.
    pub payload_len: usize,
}

/// Parses the frame at the start of `buf` and unmasks its payload in place. `Ok(None)`: the
/// frame is not complete yet (read more). `max_payload` bounds a data frame's payload; the
/// message bound (across fragments) is the caller's, with `already` bytes of the message
/// under way counted against it.
pub fn parse_client_frame(
    buf: &mut [u8],
    max_payload: usize,
    already: usize,
) -> Result<Option<FrameHeader>, FrameError> {
    parse_frame(buf, max_payload, already, true)
}

/// [`parse_client_frame`] for either side: `masked` is what a frame from the peer must be
/// (true from a client, false from a server).
fn parse_frame(
    buf: &mut [u8],
    max_payload: usize,
    already: usize,
    masked: bool,
) -> Result<Option<FrameHeader>, FrameError> {
    let [first, second, ..] = *buf else {
        return Ok(None);
    };
    let fin = first & 0x80 != 0;
    let reserved = first & 0x70;
    let opcode = first & 0x0F;
    if reserved != 0 {
        return Err(FrameError::ReservedBits(reserved >> 4));
    }
    if !matches!(
        opcode,
        opcode::CONTINUATION
            | opcode::TEXT
            | opcode::BINARY
            | opcode::CLOSE
            | opcode::PING
            | opcode::PONG
    ) {
        return Err(FrameError::ReservedOpcode(opcode));
    }
    match (masked, second & 0x80 != 0) {
        (true, false) => return Err(FrameError::Unmasked),
        (false, true) => return Err(FrameError::MaskedServerFrame),
        _ => {}
    }
    let (len, len_bytes) = match second & 0x7F {
        126 => match buf.get(2..4) {
            Some(bytes) => (u64::from(u16::from_be_bytes([bytes[0], bytes[1]])), 2),
            None => return Ok(None),
        },
        127 => match buf.get(2..10) {
            Some(bytes) => {
                let mut word = [0u8; 8];
                word.copy_from_slice(bytes);
                (u64::from_be_bytes(word), 8)
            }
            None => return Ok(None),
        },
        short => (u64::from(short), 0),
    };
    let control = opcode >= opcode::CLOSE;
    if control && (!fin || len > MAX_CONTROL_PAYLOAD as u64) {
        return Err(FrameError::BadControlFrame);
    }
    if !control && len.saturating_add(already as u64) > max_payload as u64 {
        return Err(FrameError::TooLarge {
            len: len.saturating_add(already as u64),
            max: max_payload,
        });
    }
    let header_len = 2 + len_bytes + if masked { 4 } else { 0 };
    // Bounded by max_payload (or 125) above, so it fits a usize.
    let payload_len = len as usize;
    if buf.len() < header_len + payload_len {
        return Ok(None);
    }
    if masked {
        let mut mask = [0u8; 4];
        mask.copy_from_slice(&buf[header_len - 4..header_len]);
        unmask(&mut buf[header_len..header_len + payload_len], mask);
    }
    Ok(Some(FrameHeader {
        fin,
        opcode,
        header_len,
        payload_len,
    }))
}

/// XORs `payload` with the repeating 4-byte `mask`, a word at a time where it can.
fn unmask(payload: &mut [u8], mask: [u8; 4]) {
    let word = u32::from_ne_bytes(mask);
    let mut chunks = payload.chunks_exact_mut(4);
    for chunk in &mut chunks {
        let value = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) ^ word;
        chunk.copy_from_slice(&value.to_ne_bytes());
    }
    for (byte, key) in chunks.into_remainder().iter_mut().zip(mask) {
        *byte ^= key;
    }
}

/// Appends a server frame (FIN set, unmasked) whose payload is `prefix` then `payload`.
pub fn write_frame(out: &mut Vec<u8>, opcode: u8, prefix: &[u8], payload: &[u8]) {
    write_header(out, opcode, prefix.len() + payload.len(), 0);
    out.extend_from_slice(prefix);
    out.extend_from_slice(payload);
}

/// Appends a client frame (FIN set, masked with `mask`, which the caller draws at random for
/// each frame) whose payload is `prefix` then `payload`.
pub fn write_masked_frame(
    out: &mut Vec<u8>,
    opcode: u8,
    prefix: &[u8],
    payload: &[u8],
    mask: [u8; 4],
) {
    write_header(out, opcode, prefix.len() + payload.len(), 0x80);
    out.extend_from_slice(&mask);
    let start = out.len();
    out.extend_from_slice(prefix);
    out.extend_from_slice(payload);
    unmask(&mut out[start..], mask);
}

/// A frame's first bytes up to its mask: FIN and `opcode`, then `len` in its shortest form
/// with the mask bit `masked` (0x80 or 0).
fn write_header(out: &mut Vec<u8>, opcode: u8, len: usize, masked: u8) {
    out.push(0x80 | opcode);
    if len < 126 {
        out.push(masked | len as u8);
    } else if let Ok(short) = u16::try_from(len) {
        out.push(masked | 126);
        out.extend_from_slice(&short.to_be_bytes());
    } else {
        out.push(masked | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// Appends a close frame with `code` and `reason` (cut to fit a control frame).
pub fn write_close(out: &mut Vec<u8>, code: u16, reason: &str) {
    let reason = clamp_close_reason(reason);
    write_frame(out, opcode::CLOSE, &code.to_be_bytes(), reason.as_bytes());
}

/// Appends a client's close frame (masked with `mask`) with `code` and `reason`.
pub fn write_masked_close(out: &mut Vec<u8>, code: u16, reason: &str, mask: [u8; 4]) {
    let reason = clamp_close_reason(reason);
    write_masked_frame(
        out,
        opcode::CLOSE,
        &code.to_be_bytes(),
        reason.as_bytes(),
        mask,
    );
}

/// A close frame's code and reason; `None` for an empty payload. A reason that is not UTF-8
/// is read lossily (the code is what tickwire acts on); [`check_close`] is the strict
/// reading of a peer's close.
pub fn parse_close(payload: &[u8]) -> Option<(u16, String)> {
    let (code, reason) = payload.split_first_chunk::<2>()?;
    Some((
        u16::from_be_bytes(*code),
        String::from_utf8_lossy(reason).into_owned(),
    ))
}

/// Whether an endpoint may put `code` in a close frame (RFC 6455 §7.4): 1000–1003,
/// 1007–1011 and 3000–4999. 1004–1006 and 1015 are reserved or only reported locally.
pub fn is_sendable_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999)
}

/// A client's close frame read as RFC 6455 asks: `None` for an empty payload, an error for
/// a one-byte payload, a code no endpoint may send, or a reason that is not UTF-8.
pub fn check_close(payload: &[u8]) -> Result<Option<(u16, String)>, FrameError> {
    let Some((code, reason)) = payload.split_first_chunk::<2>() else {
        return match payload.len() {
            0 => Ok(None),
            _ => Err(FrameError::BadClosePayload),
        };
    };
    let code = u16::from_be_bytes(*code);
    if !is_sendable_close_code(code) {
        return Err(FrameError::BadCloseCode(code));
    }
    let reason = std::str::from_utf8(reason).map_err(|_| FrameError::CloseReasonNotUtf8)?;
    Ok(Some((code, reason.to_owned())))
}

/// One complete thing a client sent, once its frames are in.
#[derive(Debug, PartialEq, Eq)]
pub enum Inbound {
    /// A binary message.
    Binary(bytes::Bytes),
    /// A text message, valid UTF-8 (never valid in tickwire's framing all the same).
    Text,
    /// A ping, with the payload its pong must echo.
    Ping(Vec<u8>),
    /// A pong.
    Pong,
    /// A close frame: its code and reason, if it had any.
    Close(Option<(u16, String)>),
}

/// Assembles a client's frames into [`Inbound`]s: control frames as they come, data
/// messages once their last fragment is in, each bounded by `max_message` bytes.
#[derive(Debug, Default)]
pub struct MessageReader {
    /// A fragmented message under way: its opcode and the payload so far.
    partial: Option<(u8, Vec<u8>)>,
    /// Reading a server's unmasked frames (a client's side) rather than a client's.
    server_frames: bool,
}

impl MessageReader {
    /// A reader of a server's frames, which are unmasked (a client's side, as the load
    /// tool's bots); a masked one is refused. [`Default`] reads a client's frames.
    pub fn for_server_frames() -> Self {
        Self {
            partial: None,
            server_frames: true,
        }
    }

    /// The next complete item in `buf[*pos..]`, moving `*pos` past what it consumed.
    /// `Ok(None)`: more bytes are needed (nothing was consumed that is not accounted for).
    pub fn next(
        &mut self,
        buf: &mut [u8],
        pos: &mut usize,
        max_message: usize,
    ) -> Result<Option<Inbound>, FrameError> {
        loop {
            let already = self.partial.as_ref().map_or(0, |(_, body)| body.len());
            let Some(header) =
                parse_frame(&mut buf[*pos..], max_message, already, !self.server_frames)?
            else {
                return Ok(None);
            };
            let start = *pos + header.header_len;
            let payload = &buf[start..start + header.payload_len];
            *pos = start + header.payload_len;
            match header.opcode {
                opcode::PING => return Ok(Some(Inbound::Ping(payload.to_vec()))),
                opcode::PONG => return Ok(Some(Inbound::Pong)),
                opcode::CLOSE => return Ok(Some(Inbound::Close(check_close(payload)?))),
                opcode::CONTINUATION => {
                    let Some((_, body)) = self.partial.as_mut() else {
                        return Err(FrameError::StrayContinuation);
                    };
                    body.extend_from_slice(payload);
                    if header.fin {
                        let (kind, body) = self.partial.take().unwrap_or_default();
                        return data(kind, body.into()).map(Some);
                    }
                }
                kind => {
                    if self.partial.is_some() {
                        return Err(FrameError::InterleavedMessage);
                    }
                    if header.fin {
                        return data(kind, bytes::Bytes::copy_from_slice(payload)).map(Some);
                    }
                    self.partial = Some((kind, payload.to_vec()));
                }
            }
        }
    }
}

fn data(kind: u8, body: bytes::Bytes) -> Result<Inbound, FrameError> {
    if kind != opcode::TEXT {
        return Ok(Inbound::Binary(body));
    }
    std::str::from_utf8(&body).map_err(|_| FrameError::TextNotUtf8)?;
    Ok(Inbound::Text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A masked client frame, as a browser would send it.
    fn client_frame(first: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut out = vec![first];
        match payload.len() {
            len if len < 126 => out.push(0x80 | len as u8),
            len if len <= 0xFFFF => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
        out
    }

    #[test]
    fn masked_frames_of_every_length_form_parse_and_unmask() {
        for len in [0usize, 1, 5, 125, 126, 1000, 65_535, 65_536, 70_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let mut frame = client_frame(0x82, &payload, [1, 2, 3, 4]);
            let header = parse_client_frame(&mut frame, 100_000, 0)
                .expect("valid")
                .expect("complete");
            assert!(header.fin);
            assert_eq!(header.opcode, opcode::BINARY);
            assert_eq!(header.payload_len, len);
            assert_eq!(
                &frame[header.header_len..header.header_len + len],
                &payload[..]
            );
            // Every shorter prefix is incomplete, never an error.
            let full = client_frame(0x82, &payload, [1, 2, 3, 4]);
            for cut in [0, 1, 2, header.header_len - 1, full.len() - 1] {
                let mut part = full[..cut].to_vec();
                assert_eq!(parse_client_frame(&mut part, 100_000, 0), Ok(None), "{cut}");
            }
        }
    }

    #[test]
    fn violations_are_refused_with_their_reason() {
        let cases: [(Vec<u8>, FrameError); 6] = [
            (vec![0x82, 0x01, 0xAA], FrameError::Unmasked),
            (
                client_frame(0xC2, b"x", [0; 4]),
                FrameError::ReservedBits(4),
            ),
            (
                client_frame(0x83, b"x", [0; 4]),
                FrameError::ReservedOpcode(3),
            ),
            (client_frame(0x09, b"", [0; 4]), FrameError::BadControlFrame),
            (
                client_frame(0x89, &[0; 126], [0; 4]),
                FrameError::BadControlFrame,
            ),
            (
                client_frame(0x82, &[0; 101], [0; 4]),
                FrameError::TooLarge { len: 101, max: 100 },
            ),
        ];
        for (mut frame, expected) in cases {
            assert_eq!(
                parse_client_frame(&mut frame, 100, 0),
                Err(expected.clone()),
                "{expected}"
            );
        }
        // The limit counts what the message already has.
        let mut frame = client_frame(0x00, &[0; 60], [0; 4]);
        assert_eq!(
            parse_client_frame(&mut frame, 100, 50),
            Err(FrameError::TooLarge { len: 110, max: 100 })
        );
        // A length announced past the limit is refused from the header alone.
        let mut header = vec![0x82, 0x80 | 127, 0xFF, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            parse_client_frame(&mut header, 100, 0),
            Err(FrameError::TooLarge { .. })
        ));
    }

    #[test]
    fn fragments_make_one_message_and_control_frames_pass_between_them() {
        let mut buf = client_frame(0x02, b"he", [9, 8, 7, 6]);
        buf.extend(client_frame(0x89, b"hi", [1, 1, 1, 1]));
        buf.extend(client_frame(0x00, b"ll", [2, 2, 2, 2]));
        buf.extend(client_frame(0x80, b"o", [3, 3, 3, 3]));
        buf.extend(client_frame(0x81, b"text", [0; 4]));
        buf.extend(client_frame(0x88, b"\x03\xe8bye", [5; 4]));
        let mut reader = MessageReader::default();
        let mut pos = 0;
        let mut items = Vec::new();
        while let Some(item) = reader.next(&mut buf, &mut pos, 100).expect("valid") {
            items.push(item);
        }
        assert_eq!(pos, buf.len(), "everything consumed");
        assert_eq!(
            items,
            [
                Inbound::Ping(b"hi".to_vec()),
                Inbound::Binary(bytes::Bytes::from_static(b"hello")),
                Inbound::Text,
                Inbound::Close(Some((1000, "bye".to_owned()))),
            ]
        );
        // A continuation with nothing to continue, and a message inside another.
        let mut stray = client_frame(0x80, b"x", [0; 4]);
        assert_eq!(
            MessageReader::default().next(&mut stray, &mut 0, 100),
            Err(FrameError::StrayContinuation)
        );
        let mut nested = client_frame(0x02, b"a", [0; 4]);
        nested.extend(client_frame(0x82, b"b", [0; 4]));
        assert_eq!(
            MessageReader::default().next(&mut nested, &mut 0, 100),
            Err(FrameError::InterleavedMessage)
        );
        // Text must be UTF-8, whole or in fragments (a character may span two).
        let mut bad_text = client_frame(0x81, b"\xff", [0; 4]);
        assert_eq!(
            MessageReader::default().next(&mut bad_text, &mut 0, 100),
            Err(FrameError::TextNotUtf8)
        );
        let mut split = client_frame(0x01, b"\xc3", [0; 4]);
        split.extend(client_frame(0x80, b"\xa9", [0; 4]));
        assert_eq!(
            MessageReader::default().next(&mut split, &mut 0, 100),
            Ok(Some(Inbound::Text))
        );
        // Fragments count together against the bound.
        let mut long = client_frame(0x02, &[0; 60], [0; 4]);
        long.extend(client_frame(0x80, &[0; 60], [0; 4]));
        assert!(matches!(
            MessageReader::default().next(&mut long, &mut 0, 100),
            Err(FrameError::TooLarge { len: 120, .. })
        ));
    }

    #[test]
    fn a_close_frame_needs_a_sendable_code_and_a_utf8_reason() {
        let close = |payload: &[u8]| {
            let mut frame = client_frame(0x88, payload, [7, 7, 7, 7]);
            MessageReader::default().next(&mut frame, &mut 0, 100)
        };
        assert_eq!(close(b""), Ok(Some(Inbound::Close(None))));
        assert_eq!(
            close(b"\x0f\xa1ok"),
            Ok(Some(Inbound::Close(Some((4001, "ok".to_owned())))))
        );
        assert_eq!(close(b"\x03"), Err(FrameError::BadClosePayload));
        assert_eq!(close(b"\x03\xe8\xff"), Err(FrameError::CloseReasonNotUtf8));
        for code in [0u16, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000] {
            assert_eq!(
                close(&code.to_be_bytes()),
                Err(FrameError::BadCloseCode(code)),
                "{code}"
            );
        }
        for code in [1000u16, 1001, 1002, 1003, 1007, 1011, 3000, 4999] {
            assert!(close(&code.to_be_bytes()).is_ok(), "{code}");
        }
    }

    #[test]
    fn a_clients_masked_frames_read_back_and_a_servers_read_unmasked() {
        for len in [0usize, 3, 125, 126, 65_536] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 3) as u8).collect();
            let mut masked = Vec::new();
            write_masked_frame(&mut masked, opcode::BINARY, &[7], &payload, [9, 8, 7, 6]);
            assert_eq!(
                masked,
                client_frame(0x82, &[&[7][..], &payload].concat(), [9, 8, 7, 6]),
                "a masked frame of {len} bytes is what a browser sends"
            );
            let mut reader = MessageReader::default();
            let item = reader.next(&mut masked, &mut 0, 100_000).expect("valid");
            let expected = bytes::Bytes::from([&[7][..], &payload].concat());
            assert_eq!(item, Some(Inbound::Binary(expected.clone())));
            let mut plain = Vec::new();
            write_frame(&mut plain, opcode::BINARY, &[7], &payload);
            let mut reader = MessageReader::for_server_frames();
            let item = reader.next(&mut plain, &mut 0, 100_000).expect("valid");
            assert_eq!(
                item,
                Some(Inbound::Binary(expected)),
                "server frame of {len}"
            );
        }
        let mut masked = client_frame(0x82, b"x", [1, 2, 3, 4]);
        assert_eq!(
            MessageReader::for_server_frames().next(&mut masked, &mut 0, 100),
            Err(FrameError::MaskedServerFrame),
            "a client refuses a masked server frame"
        );
    }

    #[test]
    fn server_frames_use_the_shortest_length_form() {
        for (len, header) in [
            (0usize, 2usize),
            (125, 2),
            (126, 4),
            (65_535, 4),
            (65_536, 10),
        ] {
            let mut out = Vec::new();
            let payload = vec![9u8; len.saturating_sub(1)];
            write_frame(&mut out, opcode::BINARY, &[7][..len.min(1)], &payload);
            assert_eq!(out.len(), header + len, "{len}");
            assert_eq!(out[0], 0x82);
        }
        let mut out = Vec::new();
        write_close(&mut out, 4004, &"é".repeat(100));
        assert_eq!(out[0], 0x88);
        assert!(usize::from(out[1]) <= MAX_CONTROL_PAYLOAD);
        let (code, reason) = parse_close(&out[2..]).expect("code");
        assert_eq!(code, 4004);
        assert_eq!(reason.chars().count(), 61);
        assert_eq!(parse_close(&[]), None);
    }
}
