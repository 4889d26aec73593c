//! The HTTP/3 bytes of a WebTransport session, spoken as wtransport 0.7 speaks them (the
//! Rust client and browsers connect to both alike): the control stream with its SETTINGS
//! (the same on both sides), the CONNECT request and its answer, the WebTransport stream
//! signal and the datagram prefix. The server's sessions ([`WtLinks`](super::WtLinks)) and
//! the load tool's sans-IO clients both speak through here. Encoding and decoding go through
//! `wtransport-proto`; this module only cuts streams into frames. Sans-IO: no socket, no
//! clock.

use std::borrow::Cow;

use wtransport_proto::bytes::{BytesReader, BytesWriter};
use wtransport_proto::error::ErrorCode;
use wtransport_proto::frame::Frame;
use wtransport_proto::session::SessionResponse;
use wtransport_proto::settings::Settings;
use wtransport_proto::stream_header::StreamHeader;
use wtransport_proto::varint::VarInt;

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2, WebTransport over HTTP/3).
pub mod stream_type {
    /// The peer's control stream: SETTINGS first.
    pub const CONTROL: u64 = 0x00;
    /// QPACK's encoder stream (nothing to read with a table of 0 bytes).
    pub const QPACK_ENCODER: u64 = 0x02;
    /// QPACK's decoder stream.
    pub const QPACK_DECODER: u64 = 0x03;
    /// A WebTransport unidirectional stream, followed by its session id.
    pub const WEBTRANSPORT: u64 = 0x54;
}

/// HTTP/3 frame types this side reads.
pub mod frame_type {
    /// DATA: on the CONNECT stream, capsules.
    pub const DATA: u64 = 0x00;
    /// HEADERS: the CONNECT request.
    pub const HEADERS: u64 = 0x01;
    /// SETTINGS: first on the peer's control stream.
    pub const SETTINGS: u64 = 0x04;
    /// WEBTRANSPORT_STREAM: a bidirectional stream's signal, followed by its session id
    /// and then the stream's own bytes (no length).
    pub const WEBTRANSPORT_STREAM: u64 = 0x41;
}

/// Largest HTTP/3 frame payload read (HEADERS, SETTINGS, a capsule's DATA), wtransport's
/// bound too; a CONNECT request is a few hundred bytes.
const MAX_FRAME_PAYLOAD: u64 = 4096;

/// An HTTP/3 error code as a QUIC application error code.
pub fn code(error: ErrorCode) -> u64 {
    error.to_code().into_inner()
}

/// A control stream as wtransport opens it on either side: the stream type, then SETTINGS
/// with QPACK's dynamic table off, extended CONNECT, WebTransport, HTTP/3 datagrams and one
/// session per connection.
pub fn control_stream_opening() -> Vec<u8> {
    let settings = Settings::builder()
        .qpack_max_table_capacity(VarInt::from_u32(0))
        .qpack_blocked_streams(VarInt::from_u32(0))
        .enable_connect_protocol()
        .enable_webtransport()
        .enable_h3_datagrams()
        .webtransport_max_sessions(VarInt::from_u32(1))
        .build();
    let mut out = Vec::new();
    // Writing into a Vec cannot run out of room.
    let _ = StreamHeader::new_control().write(&mut out);
    let _ = settings.generate_frame().write(&mut out);
    out
}

/// The answer to a CONNECT request: a HEADERS frame with `response`'s status.
pub fn response(response: &SessionResponse) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = response.headers().generate_frame().write(&mut out);
    out
}

/// A client's CONNECT request for `url` (`https://host:port/wt`): a HEADERS frame with
/// `:method CONNECT`, `:protocol webtransport`, `:scheme`, `:authority` and `:path`.
pub fn connect_request(url: &str) -> Result<Vec<u8>, wtransport_proto::session::UrlParseError> {
    let request = wtransport_proto::session::SessionRequest::new(url)?;
    let mut out = Vec::new();
    let _ = request.headers().generate_frame().write(&mut out);
    Ok(out)
}

/// The status of the server's answer to a CONNECT request (a HEADERS frame's payload), or
/// the HTTP/3 error to close the connection with.
pub fn response_status(payload: &[u8]) -> Result<u16, ErrorCode> {
    let frame = Frame::new_headers(Cow::Borrowed(payload));
    let headers = wtransport_proto::headers::Headers::with_frame(&frame)?;
    SessionResponse::try_from(headers)
        .map(|response| response.code().into_inner())
        .map_err(|_| ErrorCode::Message)
}

/// The first bytes a client writes on a bidirectional WebTransport stream of the session
/// on the CONNECT stream `session`: the stream signal and the session id. The stream's own
/// bytes follow without a length.
pub fn webtransport_stream_opening(session: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for value in [frame_type::WEBTRANSPORT_STREAM, session] {
        if let Ok(value) = VarInt::try_from_u64(value) {
            let _ = out.put_varint(value);
        }
    }
    out
}

/// Whether SETTINGS' payload is well formed (unknown settings are ignored; a repeated one is
/// an error), as wtransport checks it.
pub fn check_settings(payload: &[u8]) -> Result<(), ErrorCode> {
    Settings::with_frame(&Frame::new_settings(Cow::Borrowed(payload))).map(drop)
}

/// A CONNECT request's path, or the error to answer it with: the connection's (a frame
/// QPACK cannot read) or the request stream's (not a WebTransport CONNECT).
pub fn connect_path(payload: &[u8]) -> Result<String, RequestError> {
    let frame = Frame::new_headers(Cow::Borrowed(payload));
    let headers =
        wtransport_proto::headers::Headers::with_frame(&frame).map_err(RequestError::Connection)?;
    match wtransport_proto::session::SessionRequest::try_from(headers) {
        Ok(request) => Ok(request.path().to_owned()),
        Err(wtransport_proto::session::HeadersParseError::MethodNotConnect) => {
            Err(RequestError::Stream(ErrorCode::RequestRejected))
        }
        Err(_) => Err(RequestError::Stream(ErrorCode::Message)),
    }
}

/// Why a CONNECT request was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    /// Close the connection with this error.
    Connection(ErrorCode),
    /// Stop and reset the request stream with this error; the connection stays.
    Stream(ErrorCode),
}

/// The code of a CLOSE_WEBTRANSPORT_SESSION capsule in a DATA frame's `payload` (a page's
/// `WebTransport.close({closeCode, reason})`), with its reason; `None` for other capsules.
pub fn session_close(payload: &[u8]) -> Option<Result<(u64, String), ErrorCode>> {
    use wtransport_proto::capsule::{Capsule, CapsuleKind, capsules::CloseWebTransportSession};
    let frame = Frame::new_data(Cow::Borrowed(payload));
    let capsule = Capsule::with_frame(&frame)?;
    match capsule.kind() {
        CapsuleKind::CloseWebTransportSession => Some(
            CloseWebTransportSession::with_capsule(&capsule)
                .map(|close| (close.error_code().into_inner(), close.reason().to_owned())),
        ),
    }
}

/// Reads a QUIC variable-length integer at the start of `input`: its value and length.
pub fn read_varint(input: &[u8]) -> Option<(u64, usize)> {
    let mut reader = input;
    let value = reader.get_varint()?;
    Some((value.into_inner(), input.len() - reader.len()))
}

/// The prefix of every datagram of the session on the CONNECT stream `session`: its quarter
/// stream id.
pub fn datagram_prefix(session: u64) -> Vec<u8> {
    let mut out = Vec::new();
    if let Ok(quarter) = VarInt::try_from_u64(session >> 2) {
        let _ = out.put_varint(quarter);
    }
    out
}

/// Cuts an HTTP/3 stream into the frames a caller wants, skipping the others (reserved
/// "grease" types, and any type the caller does not read) without buffering them.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
    /// Bytes of a skipped frame still to come.
    skip: u64,
}

impl FrameReader {
    /// Takes the next bytes of the stream.
    pub fn feed(&mut self, mut data: &[u8]) {
        if self.skip > 0 {
            let n = usize::try_from(self.skip)
                .unwrap_or(usize::MAX)
                .min(data.len());
            self.skip -= n as u64;
            data = &data[n..];
        }
        self.buf.extend_from_slice(data);
    }

    /// The next whole frame of a type `wanted` says yes to: its type and payload. A wanted
    /// frame longer than 4096 bytes is an error (wtransport's bound).
    pub fn next(
        &mut self,
        wanted: impl Fn(u64) -> bool,
    ) -> Result<Option<(u64, Vec<u8>)>, ErrorCode> {
        loop {
            if self.skip > 0 {
                let n = usize::try_from(self.skip)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                self.skip -= n as u64;
                self.buf.drain(..n);
                if self.skip > 0 {
                    return Ok(None);
                }
            }
            let Some((kind, kind_len)) = read_varint(&self.buf) else {
                return Ok(None);
            };
            let Some((len, len_len)) = read_varint(&self.buf[kind_len..]) else {
                return Ok(None);
            };
            let header = kind_len + len_len;
            if !wanted(kind) {
                self.buf.drain(..header);
                self.skip = len;
                continue;
            }
            if len > MAX_FRAME_PAYLOAD {
                return Err(ErrorCode::ExcessiveLoad);
            }
            let end = header + len as usize;
            if self.buf.len() < end {
                return Ok(None);
            }
            let payload = self.buf[header..end].to_vec();
            self.buf.drain(..end);
            return Ok(Some((kind, payload)));
        }
    }

    /// What was fed and not yet taken as frames (a bidirectional stream's bytes after its
    /// WebTransport signal).
    pub fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// The bytes fed and not yet taken, to look at the start of a stream.
    pub fn peek(&self) -> &[u8] {
        &self.buf
    }

    /// Drops the first `n` bytes (a stream signal already read with [`peek`](Self::peek)).
    pub fn consume(&mut self, n: usize) {
        self.buf.drain(..n.min(self.buf.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_varint(VarInt::try_from_u64(kind).unwrap()).unwrap();
        out.put_varint(VarInt::try_from_u64(payload.len() as u64).unwrap())
            .unwrap();
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn the_reader_skips_unwanted_frames_byte_by_byte() {
        let mut stream = frame(0x21, &[9; 300]);
        stream.extend(frame(frame_type::SETTINGS, b"abc"));
        let mut reader = FrameReader::default();
        let mut got = Vec::new();
        for byte in &stream {
            reader.feed(std::slice::from_ref(byte));
            while let Some(frame) = reader.next(|kind| kind == frame_type::SETTINGS).unwrap() {
                got.push(frame);
            }
        }
        assert_eq!(got, vec![(frame_type::SETTINGS, b"abc".to_vec())]);
        assert!(reader.peek().is_empty(), "nothing left over");
    }

    #[test]
    fn a_wanted_frame_past_4096_bytes_is_refused_from_its_header() {
        let mut reader = FrameReader::default();
        reader.feed(&frame(frame_type::HEADERS, &[0; 5000])[..8]);
        assert_eq!(
            reader.next(|_| true),
            Err(ErrorCode::ExcessiveLoad),
            "refused before the payload arrives"
        );
    }

    #[test]
    fn the_clients_request_and_signal_read_back_as_the_server_reads_them() {
        let request = connect_request("https://127.0.0.1:4433/wt").unwrap();
        let mut reader = FrameReader::default();
        reader.feed(&request);
        let (kind, payload) = reader.next(|_| true).unwrap().unwrap();
        assert_eq!(kind, frame_type::HEADERS);
        assert_eq!(connect_path(&payload), Ok("/wt".to_owned()));

        for (answer, status) in [
            (SessionResponse::ok(), 200),
            (SessionResponse::not_found(), 404),
        ] {
            let mut reader = FrameReader::default();
            reader.feed(&response(&answer));
            let (_, payload) = reader.next(|_| true).unwrap().unwrap();
            assert_eq!(response_status(&payload), Ok(status));
        }

        let opening = webtransport_stream_opening(4);
        let (kind, len) = read_varint(&opening).unwrap();
        assert_eq!(kind, frame_type::WEBTRANSPORT_STREAM);
        assert_eq!(
            read_varint(&opening[len..]),
            Some((4, 1)),
            "the session id follows"
        );
    }

    #[test]
    fn our_settings_read_back_and_the_datagram_prefix_is_a_quarter_stream_id() {
        let opening = control_stream_opening();
        assert_eq!(opening[0], stream_type::CONTROL as u8);
        let mut reader = FrameReader::default();
        reader.feed(&opening[1..]);
        let (kind, payload) = reader.next(|_| true).unwrap().unwrap();
        assert_eq!(kind, frame_type::SETTINGS);
        check_settings(&payload).unwrap();
        assert_eq!(datagram_prefix(0), vec![0]);
        assert_eq!(datagram_prefix(4 * 100), vec![0x40, 100]);
    }
}
