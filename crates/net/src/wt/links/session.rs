//! One WebTransport session on one QUIC connection, as a state machine over quinn-proto's
//! [`Connection`]: HTTP/3 (the control streams, the CONNECT request), then tickwire's
//! control stream (the token, frames both ways) and datagrams, then the close. It never
//! touches a socket; [`WtLinks`](super::WtLinks) moves its packets and calls it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use quinn_proto::{
    Connection, ConnectionError, Dir, Event, ReadError, SendDatagramError, StreamEvent, StreamId,
    VarInt, WriteError,
};
use tickwire_proto::reliable::ChannelKind;
use tickwire_proto::websocket::clamp_close_reason;
use wtransport_proto::error::ErrorCode;
use wtransport_proto::session::SessionResponse;

use super::h3::{self, FrameReader, RequestError, frame_type, stream_type};
use super::{LocalCounts, WtLinkEvent, WtLinkId};
use crate::ws::{CloseCode, WsClosed, WsCounters, WsSendError};
use crate::wt::config::{MAX_EXTRA_STREAMS, client_close};
use crate::wt::framing::{
    DatagramReceiver, FRAME_HEADER_BYTES, Frame, FrameLengthError, WT_PATH, check_frame_length,
    close_frame, datagram_header_bytes, parse_frame, put_data_frame, put_frame,
};
use crate::wt::stats::WtCounters;

/// What every session of one [`WtLinks`](super::WtLinks) shares.
pub(super) struct Shared {
    /// Each channel's kind, by channel id.
    pub(super) channels: Arc<[ChannelKind]>,
    /// Longest frame body a client may send (the token included).
    pub(super) max_frame: usize,
    /// Longest message the server sends (the dictated `max_message_size`).
    pub(super) max_payload: usize,
    /// Framed bytes a session may hold that QUIC has not taken yet; past it the session
    /// closes with [`CloseCode::SlowClient`].
    pub(super) max_reliable_bytes: usize,
    pub(super) handshake_timeout: Duration,
    pub(super) close_timeout: Duration,
    /// The server's HTTP/3 control stream: its type and SETTINGS.
    pub(super) control_opening: Vec<u8>,
}

/// What a session reaches beyond itself while it handles something.
pub(super) struct Ctx<'a> {
    pub(super) now: Instant,
    pub(super) link: WtLinkId,
    pub(super) shared: &'a Shared,
    pub(super) counters: &'a WtCounters,
    pub(super) messages: &'a WsCounters,
    pub(super) counts: &'a mut LocalCounts,
    pub(super) events: &'a mut VecDeque<WtLinkEvent>,
    /// Scratch for the chunks of one stream read.
    pub(super) chunks: &'a mut Vec<Bytes>,
}

/// Where a session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Phase {
    /// QUIC's and HTTP/3's handshakes, until the CONNECT request is answered; the deadline
    /// is the handshake timeout.
    Handshake,
    /// The request was answered 404: the QUIC close follows once the answer is acknowledged
    /// (or at the handshake deadline).
    Rejected,
    /// The session is open: the control stream and its token frame are awaited.
    AwaitToken,
    /// The token went to the caller ([`WtLinkEvent::Token`]), who accepts or refuses; the
    /// control stream is not read meanwhile (QUIC's flow control holds the client).
    AwaitAdmission,
    /// Accepted: messages both ways.
    Open,
    /// The server closes: what was framed, then the close frame, are written and the stream
    /// finished; the client's close is awaited until the close deadline, then QUIC closes
    /// with `code`.
    Closing { code: CloseCode, reason: String },
    /// QUIC closed (either side): quinn drains the connection, then it is dropped.
    Closed,
}

/// An HTTP/3 stream the client opened, by what it has shown itself to be.
enum Role {
    /// A unidirectional stream whose type has not arrived.
    UniOpening,
    /// The client's control stream.
    PeerControl { settings: bool },
    /// A QPACK stream: read and dropped (the dynamic table is 0 bytes).
    Discard,
    /// A bidirectional stream whose first frame has not arrived.
    BiOpening,
    /// The CONNECT request's stream, after its HEADERS: capsules.
    Connect,
}

struct H3Stream {
    id: StreamId,
    role: Role,
    reader: FrameReader,
}

/// How a stream read ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadEnd {
    /// Everything available was read; more may come.
    Open,
    /// The stream finished.
    Fin,
    /// The client reset it.
    Reset,
    /// It is gone (stopped, or already finished).
    Gone,
}

pub(super) struct Conn {
    pub(super) generation: u32,
    pub(super) quic: Connection,
    pub(super) peer: SocketAddr,
    pub(super) phase: Phase,
    /// The handshake or close deadline.
    pub(super) deadline: Option<Instant>,
    /// The instant this session is filed under in the links' timer set.
    pub(super) timer: Option<Instant>,
    /// Listed for the next flush.
    pub(super) dirty: bool,
    /// Listed to be driven at the end of this `handle_io` or `handle_timeout`.
    pub(super) touched: bool,
    /// The caller knows this link (it had its token) and has not closed it: an end it did
    /// not ask for is reported as [`WtLinkEvent::Closed`].
    pub(super) announced: bool,
    /// A 200 went out (counted as a session opened).
    pub(super) opened: bool,
    /// The caller accepted it (counted as a connection accepted).
    pub(super) accepted: bool,
    streams: Vec<H3Stream>,
    local_control: Option<StreamId>,
    peer_control: bool,
    settings: bool,
    connect: Option<StreamId>,
    /// The CONNECT request's HEADERS, held until the client's SETTINGS are in.
    request: Option<Vec<u8>>,
    /// The datagram prefix of the session (its quarter stream id), once it is open.
    prefix: Vec<u8>,
    /// tickwire's control stream.
    control: Option<StreamId>,
    /// The start of a frame still arriving on the control stream.
    inbuf: BytesMut,
    /// The control stream ended or broke: nothing more is parsed from it.
    control_done: bool,
    /// Framed bytes QUIC has not taken yet, in order.
    out: BytesMut,
    /// QUIC did not take all of `out` (its windows are full): the client is behind.
    blocked: bool,
    /// Finish the control stream once `out` is written (a close frame is in it).
    finish: bool,
    receiver: DatagramReceiver,
    sequences: Vec<u16>,
    extra_streams: u32,
}

/// An out buffer larger than this is given back once it drains.
const KEEP_BUFFER_BYTES: usize = 16 << 10;

impl Conn {
    pub(super) fn new(quic: Connection, generation: u32, now: Instant, shared: &Shared) -> Self {
        Self {
            generation,
            peer: quic.remote_address(),
            quic,
            phase: Phase::Handshake,
            deadline: Some(now + shared.handshake_timeout),
            timer: None,
            dirty: false,
            touched: false,
            announced: false,
            opened: false,
            accepted: false,
            streams: Vec::new(),
            local_control: None,
            peer_control: false,
            settings: false,
            connect: None,
            request: None,
            prefix: Vec::new(),
            control: None,
            inbuf: BytesMut::new(),
            control_done: false,
            out: BytesMut::new(),
            blocked: false,
            finish: false,
            receiver: DatagramReceiver::new(shared.channels.len()),
            sequences: vec![0; shared.channels.len()],
            extra_streams: 0,
        }
    }

    /// The earliest of QUIC's timers and this session's deadline.
    pub(super) fn next_timeout(&mut self) -> Option<Instant> {
        match (self.quic.poll_timeout(), self.deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Acts on one of quinn's events.
    pub(super) fn handle_event(&mut self, event: Event, ctx: &mut Ctx<'_>) {
        match event {
            Event::Connected => self.open_local_control(ctx),
            Event::ConnectionLost { reason } => self.connection_lost(reason, ctx),
            Event::Stream(StreamEvent::Opened { dir }) => {
                while let Some(id) = self.quic.streams().accept(dir) {
                    let role = match dir {
                        Dir::Uni => Role::UniOpening,
                        Dir::Bi => Role::BiOpening,
                    };
                    self.streams.push(H3Stream {
                        id,
                        role,
                        reader: FrameReader::default(),
                    });
                    self.read_h3(id, ctx);
                }
            }
            Event::Stream(StreamEvent::Readable { id }) => {
                if Some(id) == self.control {
                    self.read_control(ctx);
                } else {
                    self.read_h3(id, ctx);
                }
            }
            Event::Stream(StreamEvent::Writable { id }) if Some(id) == self.control => {
                self.write_out(ctx);
            }
            Event::Stream(StreamEvent::Finished { id })
                if self.phase == Phase::Rejected && Some(id) == self.connect =>
            {
                // The 404 is acknowledged: the client has it.
                self.close_quic(h3::code(ErrorCode::NoError), "", ctx.now);
            }
            Event::Stream(StreamEvent::Stopped { id, .. }) => {
                if Some(id) == self.control {
                    self.control_stopped(ctx);
                } else if Some(id) == self.local_control {
                    self.connection_error(ErrorCode::ClosedCriticalStream, ctx);
                }
            }
            Event::DatagramReceived => self.read_datagrams(ctx),
            Event::HandshakeDataReady
            | Event::DatagramsUnblocked
            | Event::Stream(
                StreamEvent::Writable { .. }
                | StreamEvent::Finished { .. }
                | StreamEvent::Available { .. },
            ) => {}
        }
    }

    /// Opens the server's HTTP/3 control stream with its SETTINGS, as soon as the QUIC
    /// handshake is done (the client waits for them before its CONNECT).
    fn open_local_control(&mut self, ctx: &mut Ctx<'_>) {
        let Some(id) = self.quic.streams().open(Dir::Uni) else {
            self.connection_error(ErrorCode::ClosedCriticalStream, ctx);
            return;
        };
        self.local_control = Some(id);
        let opening = &ctx.shared.control_opening;
        // A fresh stream takes these few bytes whole: the client's initial stream window
        // is far larger.
        if !matches!(self.quic.send_stream(id).write(opening), Ok(n) if n == opening.len()) {
            self.connection_error(ErrorCode::ClosedCriticalStream, ctx);
        }
    }

    fn connection_lost(&mut self, reason: ConnectionError, ctx: &mut Ctx<'_>) {
        let closed = match reason {
            ConnectionError::ApplicationClosed(close) => {
                match client_close(close.error_code.into_inner(), &close.reason) {
                    Some((code, reason)) => WsClosed::ByClient {
                        code: Some(code),
                        reason,
                    },
                    None => WsClosed::Lost,
                }
            }
            _ => WsClosed::Lost,
        };
        if self.phase == Phase::Handshake {
            WtCounters::bump(&ctx.counters.handshakes_failed);
        }
        self.report(closed, ctx);
        self.phase = Phase::Closed;
        self.deadline = None;
    }

    /// Reads what an HTTP/3 stream has and acts on it by its role.
    fn read_h3(&mut self, id: StreamId, ctx: &mut Ctx<'_>) {
        let Some(at) = self.streams.iter().position(|stream| stream.id == id) else {
            return;
        };
        let end = pull(&mut self.quic, id, ctx.chunks);
        let discard = matches!(self.streams[at].role, Role::Discard);
        for chunk in ctx.chunks.drain(..) {
            if !discard {
                self.streams[at].reader.feed(&chunk);
            }
        }
        self.parse_h3(at, end, ctx);
    }

    fn parse_h3(&mut self, at: usize, end: ReadEnd, ctx: &mut Ctx<'_>) {
        let id = self.streams[at].id;
        let result = match self.streams[at].role {
            Role::UniOpening => return self.uni_opening(at, end, ctx),
            Role::BiOpening => return self.bi_opening(at, end, ctx),
            Role::PeerControl { settings } => self.peer_control(at, settings, ctx),
            Role::Discard => Ok(()),
            Role::Connect => return self.connect_stream(at, end, ctx),
        };
        if let Err(error) = result {
            return self.connection_error(error, ctx);
        }
        if end != ReadEnd::Open {
            // The client's control and QPACK streams live as long as the connection.
            self.streams.retain(|stream| stream.id != id);
            if self.phase != Phase::Closed {
                self.connection_error(ErrorCode::ClosedCriticalStream, ctx);
            }
        }
    }

    fn uni_opening(&mut self, at: usize, end: ReadEnd, ctx: &mut Ctx<'_>) {
        let stream = &mut self.streams[at];
        let id = stream.id;
        let Some((kind, len)) = h3::read_varint(stream.reader.peek()) else {
            if end != ReadEnd::Open {
                self.streams.remove(at);
            }
            return;
        };
        stream.reader.consume(len);
        match kind {
            stream_type::CONTROL if !self.peer_control => {
                self.peer_control = true;
                stream.role = Role::PeerControl { settings: false };
                self.parse_h3(at, end, ctx);
            }
            stream_type::CONTROL => self.connection_error(ErrorCode::StreamCreation, ctx),
            stream_type::QPACK_ENCODER | stream_type::QPACK_DECODER => {
                stream.role = Role::Discard;
                stream.reader = FrameReader::default();
                self.parse_h3(at, end, ctx);
            }
            stream_type::WEBTRANSPORT => {
                self.streams.remove(at);
                let _ = self.quic.recv_stream(id).stop(refusal());
                self.extra_stream(ctx);
            }
            // Reserved and unknown types are read no further (RFC 9114 §6.2).
            _ => {
                self.streams.remove(at);
                let _ = self
                    .quic
                    .recv_stream(id)
                    .stop(varint(h3::code(ErrorCode::StreamCreation)));
            }
        }
    }

    fn peer_control(&mut self, at: usize, seen: bool, ctx: &mut Ctx<'_>) -> Result<(), ErrorCode> {
        if !seen {
            let Some((kind, payload)) = self.streams[at].reader.next(|_| true)? else {
                return Ok(());
            };
            if kind != frame_type::SETTINGS {
                return Err(ErrorCode::MissingSettings);
            }
            h3::check_settings(&payload)?;
            self.streams[at].role = Role::PeerControl { settings: true };
            self.settings = true;
        }
        // Anything after SETTINGS (GOAWAY, grease) needs no answer from this server.
        self.streams[at].reader.next(|_| false)?;
        if !seen {
            // Last: answering the request may change the stream list.
            self.take_request(ctx);
        }
        Ok(())
    }

    fn bi_opening(&mut self, at: usize, end: ReadEnd, ctx: &mut Ctx<'_>) {
        let id = self.streams[at].id;
        let start = self.streams[at].reader.peek();
        match h3::read_varint(start) {
            None => {}
            Some((frame_type::WEBTRANSPORT_STREAM, len)) => {
                let Some((session, session_len)) = h3::read_varint(&start[len..]) else {
                    if end != ReadEnd::Open {
                        self.streams.remove(at);
                    }
                    return;
                };
                let mut stream = self.streams.remove(at);
                stream.reader.consume(len + session_len);
                let ours = self.phase == Phase::AwaitToken
                    && self.control.is_none()
                    && self.connect.map(u64::from) == Some(session);
                if ours {
                    self.control = Some(id);
                    self.inbuf.extend_from_slice(&stream.reader.take_rest());
                    self.parse_control(ctx);
                    if end != ReadEnd::Open {
                        self.control_ended(ctx);
                    }
                } else {
                    let _ = self.quic.recv_stream(id).stop(refusal());
                    let _ = self.quic.send_stream(id).reset(refusal());
                    self.extra_stream(ctx);
                }
                return;
            }
            Some(_) => {
                let wanted = |kind| kind == frame_type::HEADERS || kind == frame_type::DATA;
                match self.streams[at].reader.next(wanted) {
                    Err(error) => return self.connection_error(error, ctx),
                    Ok(None) => {}
                    Ok(Some((frame_type::HEADERS, payload))) if self.connect.is_none() => {
                        self.connect = Some(id);
                        self.request = Some(payload);
                        self.streams[at].role = Role::Connect;
                        self.take_request(ctx);
                        return;
                    }
                    Ok(Some((frame_type::HEADERS, _))) => {
                        // One session per connection, as the SETTINGS said.
                        self.streams.remove(at);
                        self.reject_stream(id, ErrorCode::RequestRejected);
                        return;
                    }
                    Ok(Some(_)) => return self.connection_error(ErrorCode::FrameUnexpected, ctx),
                }
            }
        }
        if end != ReadEnd::Open {
            self.streams.remove(at);
        }
    }

    /// Answers the CONNECT request once both it and the client's SETTINGS are in.
    fn take_request(&mut self, ctx: &mut Ctx<'_>) {
        if !self.settings || self.phase != Phase::Handshake {
            return;
        }
        let (Some(id), Some(request)) = (self.connect, self.request.take()) else {
            return;
        };
        match h3::connect_path(&request) {
            Err(RequestError::Connection(error)) => self.connection_error(error, ctx),
            Err(RequestError::Stream(error)) => {
                self.streams.retain(|stream| stream.id != id);
                self.connect = None;
                self.reject_stream(id, error);
            }
            Ok(path) if path != WT_PATH => {
                WtCounters::bump(&ctx.counters.refused_path);
                let answer = h3::response(&SessionResponse::not_found());
                let mut send = self.quic.send_stream(id);
                let _ = send.write(&answer);
                let _ = send.finish();
                self.phase = Phase::Rejected;
            }
            Ok(_) => {
                let answer = h3::response(&SessionResponse::ok());
                let _ = self.quic.send_stream(id).write(&answer);
                self.prefix = h3::datagram_prefix(u64::from(id));
                self.phase = Phase::AwaitToken;
                self.opened = true;
                WtCounters::bump(&ctx.counters.sessions_opened);
            }
        }
    }

    /// Capsules on the CONNECT stream: a page's `close({closeCode, reason})` ends the
    /// session; so does the stream's end.
    fn connect_stream(&mut self, at: usize, end: ReadEnd, ctx: &mut Ctx<'_>) {
        loop {
            match self.streams[at]
                .reader
                .next(|kind| kind == frame_type::DATA)
            {
                Err(error) => return self.connection_error(error, ctx),
                Ok(None) => break,
                Ok(Some((_, payload))) => match h3::session_close(&payload) {
                    None => {}
                    Some(Err(error)) => return self.connection_error(error, ctx),
                    Some(Ok((code, reason))) => {
                        let closed = match client_close(code, reason.as_bytes()) {
                            Some((code, reason)) => WsClosed::ByClient {
                                code: Some(code),
                                reason,
                            },
                            None => WsClosed::Lost,
                        };
                        return self.session_ended(closed, ctx);
                    }
                },
            }
        }
        if end != ReadEnd::Open {
            self.streams.remove(at);
            // Ending the CONNECT stream without a capsule is a close with code 0.
            self.session_ended(WsClosed::Lost, ctx);
        }
    }

    /// The client ended the session on its CONNECT stream: the QUIC close follows, as
    /// wtransport does it.
    fn session_ended(&mut self, closed: WsClosed, ctx: &mut Ctx<'_>) {
        if matches!(self.phase, Phase::Rejected | Phase::Closed) {
            return;
        }
        if let Phase::Closing { code, reason } = &self.phase {
            // The client's answer to our close.
            let (code, reason) = (*code, reason.clone());
            return self.close_quic(code.code().into(), &reason, ctx.now);
        }
        self.report(closed, ctx);
        self.close_quic(h3::code(ErrorCode::NoError), "", ctx.now);
    }

    /// Reads tickwire's control stream, except while the caller decides on the token.
    pub(super) fn read_control(&mut self, ctx: &mut Ctx<'_>) {
        let Some(id) = self.control else {
            return;
        };
        if matches!(self.phase, Phase::AwaitAdmission | Phase::Closed) || self.control_done {
            return;
        }
        let end = pull(&mut self.quic, id, ctx.chunks);
        for chunk in ctx.chunks.drain(..) {
            self.inbuf.extend_from_slice(&chunk);
        }
        self.parse_control(ctx);
        if end != ReadEnd::Open {
            self.control_ended(ctx);
        }
    }

    /// Parses whole frames out of what the control stream gave, as the phase says.
    pub(super) fn parse_control(&mut self, ctx: &mut Ctx<'_>) {
        while !self.control_done && self.inbuf.len() >= FRAME_HEADER_BYTES {
            if !matches!(
                self.phase,
                Phase::AwaitToken | Phase::Open | Phase::Closing { .. }
            ) {
                return;
            }
            let mut prefix = [0u8; FRAME_HEADER_BYTES];
            prefix.copy_from_slice(&self.inbuf[..FRAME_HEADER_BYTES]);
            let len = match check_frame_length(prefix, ctx.shared.max_frame) {
                Ok(len) => len,
                Err(error) => return self.bad_frame_length(error, ctx),
            };
            if self.inbuf.len() < FRAME_HEADER_BYTES + len {
                return;
            }
            self.inbuf.advance(FRAME_HEADER_BYTES);
            let body = self.inbuf.split_to(len).freeze();
            ctx.counts.frames_received += 1;
            match &self.phase {
                Phase::AwaitToken => {
                    self.phase = Phase::AwaitAdmission;
                    self.announced = true;
                    ctx.events.push_back(WtLinkEvent::Token {
                        link: ctx.link,
                        token: body,
                        peer: self.peer,
                    });
                    return;
                }
                Phase::Closing { code, reason } => {
                    // Only the client's close answers ours; its data is dropped.
                    if let Ok(Frame::Close(..)) = parse_frame(body, 0) {
                        let (code, reason) = (*code, reason.clone());
                        self.control_done = true;
                        return self.close_quic(code.code().into(), &reason, ctx.now);
                    }
                }
                _ => match parse_frame(body, ctx.shared.channels.len()) {
                    Ok(Frame::Data(channel, message)) => {
                        ctx.counts.messages_received += 1;
                        ctx.counts.bytes_received += message.len() as u64;
                        ctx.events.push_back(WtLinkEvent::Message {
                            link: ctx.link,
                            channel,
                            message,
                        });
                    }
                    Ok(Frame::Close(code, reason)) => {
                        self.control_done = true;
                        self.report(
                            WsClosed::ByClient {
                                code: Some(code),
                                reason,
                            },
                            ctx,
                        );
                        if let Some(id) = self.control {
                            let _ = self.quic.send_stream(id).finish();
                        }
                        return self.close_quic(code.into(), "", ctx.now);
                    }
                    Err(error) => {
                        WsCounters::bump(&ctx.messages.closed_protocol_violation);
                        self.control_done = true;
                        self.close_server(
                            CloseCode::ProtocolViolation,
                            &error.to_string(),
                            true,
                            ctx,
                        );
                        return;
                    }
                },
            }
        }
    }

    fn bad_frame_length(&mut self, error: FrameLengthError, ctx: &mut Ctx<'_>) {
        self.control_done = true;
        self.inbuf = BytesMut::new();
        if matches!(self.phase, Phase::Closing { .. }) {
            return;
        }
        let token = self.phase == Phase::AwaitToken;
        let code = match error {
            FrameLengthError::TooLarge { .. } => {
                WsCounters::bump(&ctx.messages.closed_too_large);
                CloseCode::MessageTooLarge
            }
            FrameLengthError::Empty if token => {
                WsCounters::bump(&ctx.messages.refused_malformed);
                CloseCode::ProtocolViolation
            }
            FrameLengthError::Empty => {
                WsCounters::bump(&ctx.messages.closed_protocol_violation);
                CloseCode::ProtocolViolation
            }
        };
        self.close_server(code, &error.to_string(), true, ctx);
    }

    /// The control stream finished or was reset by the client.
    fn control_ended(&mut self, ctx: &mut Ctx<'_>) {
        self.control_done = true;
        match self.phase {
            // Before its token the client gave up: nothing to tell anyone.
            Phase::AwaitToken => self.close_quic(0, "", ctx.now),
            Phase::Open => self.lost(ctx),
            _ => {}
        }
    }

    /// The client stopped reading the control stream.
    fn control_stopped(&mut self, ctx: &mut Ctx<'_>) {
        self.out.clear();
        self.finish = false;
        match &self.phase {
            Phase::Closing { code, reason } => {
                let (code, reason) = (*code, reason.clone());
                self.close_quic(code.code().into(), &reason, ctx.now);
            }
            Phase::Closed | Phase::Rejected | Phase::Handshake => {}
            _ => self.lost(ctx),
        }
    }

    /// The session broke under an accepted client: it is told, and QUIC closes.
    fn lost(&mut self, ctx: &mut Ctx<'_>) {
        self.report(WsClosed::Lost, ctx);
        let code = CloseCode::TimedOut;
        self.close_quic(code.code().into(), code.default_reason(), ctx.now);
    }

    fn read_datagrams(&mut self, ctx: &mut Ctx<'_>) {
        while let Some(datagram) = self.quic.datagrams().recv() {
            // The prefix's first byte fixes its length, so a datagram starting with it is
            // for this session.
            let message = if self.phase == Phase::Open && datagram.starts_with(&self.prefix) {
                self.receiver
                    .accept(datagram.slice(self.prefix.len()..), &ctx.shared.channels)
                    .ok()
            } else {
                None
            };
            match message {
                Some((channel, message)) => {
                    ctx.counts.datagrams_received += 1;
                    ctx.counts.messages_received += 1;
                    ctx.counts.bytes_received += message.len() as u64;
                    ctx.events.push_back(WtLinkEvent::Message {
                        link: ctx.link,
                        channel,
                        message,
                    });
                }
                None => WtCounters::bump(&ctx.counters.datagrams_dropped),
            }
        }
    }

    /// Answers the token: the connection parameters' frame, then the client's messages.
    pub(super) fn accept(&mut self, accepted: &[u8], ctx: &mut Ctx<'_>) -> Result<(), WsSendError> {
        if self.phase != Phase::AwaitAdmission {
            return Err(WsSendError::Closed);
        }
        put_frame(&mut self.out, accepted);
        ctx.counts.frames_sent += 1;
        self.phase = Phase::Open;
        self.deadline = None;
        self.accepted = true;
        WsCounters::bump(&ctx.messages.connections_accepted);
        // What the client sent after its token waited in QUIC's buffers.
        self.parse_control(ctx);
        self.read_control(ctx);
        Ok(())
    }

    /// Queues `message`: a datagram for an unreliable channel when it fits, a frame
    /// otherwise. Returns whether anything was queued for the next flush.
    pub(super) fn send(
        &mut self,
        channel: u8,
        message: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<(), WsSendError> {
        if self.phase != Phase::Open {
            return Err(WsSendError::Closed);
        }
        let shared = ctx.shared;
        let Some(&kind) = shared.channels.get(usize::from(channel)) else {
            return Err(WsSendError::UnknownChannel {
                channel,
                count: shared.channels.len(),
            });
        };
        let len = message.len();
        if len > shared.max_payload {
            WsCounters::bump(&ctx.messages.sends_too_large);
            return Err(WsSendError::TooLarge {
                len,
                max: shared.max_payload,
            });
        }
        if kind != ChannelKind::Reliable {
            if self.send_datagram(channel, kind, message, ctx) {
                return Ok(());
            }
            WtCounters::bump(&ctx.counters.datagrams_too_large);
            if self.blocked {
                // An unreliable message waits for nobody: behind a backlog it is stale.
                WsCounters::bump(&ctx.messages.unreliable_dropped);
                return Ok(());
            }
        }
        let queued = self.out.len();
        if queued + FRAME_HEADER_BYTES + 1 + len > shared.max_reliable_bytes {
            WsCounters::bump(&ctx.messages.closed_slow_client);
            let error = WsSendError::SlowClient {
                queued,
                len,
                max: shared.max_reliable_bytes,
            };
            self.close_server(CloseCode::SlowClient, &error.to_string(), true, ctx);
            return Err(error);
        }
        put_data_frame(&mut self.out, channel, message);
        ctx.counts.frames_sent += 1;
        ctx.counts.messages_sent += 1;
        ctx.counts.bytes_sent += len as u64;
        Ok(())
    }

    /// Hands a datagram to QUIC (whose send buffer drops its oldest past 64 KiB, so a slow
    /// client never holds snapshots back); false if it does not fit the path.
    fn send_datagram(
        &mut self,
        channel: u8,
        kind: ChannelKind,
        message: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let size = self.prefix.len() + datagram_header_bytes(kind) + message.len();
        if self
            .quic
            .datagrams()
            .max_size()
            .is_none_or(|max| size > max)
        {
            return false;
        }
        let mut datagram = BytesMut::with_capacity(size);
        datagram.extend_from_slice(&self.prefix);
        datagram.extend_from_slice(&[channel]);
        if kind == ChannelKind::UnreliableSequenced {
            let sequence = &mut self.sequences[usize::from(channel)];
            *sequence = sequence.wrapping_add(1);
            datagram.extend_from_slice(&sequence.to_le_bytes());
        }
        datagram.extend_from_slice(message);
        match self.quic.datagrams().send(datagram.freeze(), true) {
            Ok(()) => {
                ctx.counts.datagrams_sent += 1;
                ctx.counts.messages_sent += 1;
                ctx.counts.bytes_sent += message.len() as u64;
                true
            }
            Err(SendDatagramError::TooLarge) => false,
            // The client took no datagrams: an unreliable message is dropped.
            Err(_) => true,
        }
    }

    /// Moves framed bytes into QUIC's stream (one write per flush), and finishes the stream
    /// behind a close frame.
    pub(super) fn write_out(&mut self, ctx: &mut Ctx<'_>) {
        let Some(id) = self.control else {
            self.out.clear();
            return;
        };
        while !self.out.is_empty() {
            match self.quic.send_stream(id).write(&self.out) {
                Ok(0) | Err(WriteError::Blocked) => {
                    self.blocked = true;
                    return;
                }
                Ok(n) => self.out.advance(n),
                Err(WriteError::Stopped(_) | WriteError::ClosedStream) => {
                    return self.control_stopped(ctx);
                }
            }
        }
        self.blocked = false;
        if self.out.capacity() > KEEP_BUFFER_BYTES {
            self.out = BytesMut::new();
        }
        if self.finish {
            self.finish = false;
            let _ = self.quic.send_stream(id).finish();
        }
    }

    /// Starts a server close: reliable data already framed goes first, then the close
    /// frame; or, with no control stream yet, the QUIC close at once. `loud` tells the
    /// caller (an event) if it knows the link. False if the session was already ending.
    pub(super) fn close_server(
        &mut self,
        code: CloseCode,
        reason: &str,
        loud: bool,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let reason = clamp_close_reason(reason);
        match self.phase {
            Phase::Closing { .. } | Phase::Closed | Phase::Rejected => return false,
            Phase::AwaitToken | Phase::AwaitAdmission | Phase::Open if self.control.is_some() => {
                self.out
                    .extend_from_slice(&close_frame(code.code(), reason));
                ctx.counts.frames_sent += 1;
                self.finish = true;
                self.phase = Phase::Closing {
                    code,
                    reason: reason.to_owned(),
                };
                self.deadline = Some(ctx.now + ctx.shared.close_timeout);
            }
            // No stream to carry a close frame: the QUIC close carries the code.
            _ => self.close_quic(code.code().into(), reason, ctx.now),
        }
        if loud {
            self.report(
                WsClosed::ByServer {
                    code,
                    reason: reason.to_owned(),
                },
                ctx,
            );
        } else {
            self.announced = false;
        }
        true
    }

    /// What is due at the session's own deadline.
    pub(super) fn handle_deadline(&mut self, ctx: &mut Ctx<'_>) {
        if self.deadline.is_none_or(|at| at > ctx.now) {
            return;
        }
        self.deadline = None;
        let handshake_timeout = ctx.shared.handshake_timeout;
        let timed_out = || format!("no connect token within {handshake_timeout:?}");
        match self.phase.clone() {
            Phase::Handshake => {
                WtCounters::bump(&ctx.counters.handshake_timeouts);
                let code = CloseCode::HandshakeTimedOut;
                self.close_quic(code.code().into(), &timed_out(), ctx.now);
            }
            Phase::Rejected => self.close_quic(h3::code(ErrorCode::NoError), "", ctx.now),
            Phase::AwaitToken => {
                WtCounters::bump(&ctx.counters.handshake_timeouts);
                WsCounters::bump(&ctx.messages.handshake_timeouts);
                let reason = timed_out();
                self.close_server(CloseCode::HandshakeTimedOut, &reason, false, ctx);
            }
            Phase::AwaitAdmission => {
                // The caller held the token past the handshake timeout.
                WsCounters::bump(&ctx.messages.refused_full);
                self.close_server(CloseCode::ServerFull, "server busy", true, ctx);
            }
            Phase::Closing { code, reason } => {
                if !self.out.is_empty() {
                    WsCounters::bump(&ctx.messages.close_timeouts);
                }
                self.close_quic(code.code().into(), &reason, ctx.now);
            }
            Phase::Open | Phase::Closed => {}
        }
    }

    /// Closes the QUIC connection with `code` as its application error code.
    fn close_quic(&mut self, code: u64, reason: &str, now: Instant) {
        let reason = Bytes::copy_from_slice(clamp_close_reason(reason).as_bytes());
        self.quic.close(now, varint(code), reason);
        self.phase = Phase::Closed;
        self.deadline = None;
        self.out.clear();
    }

    /// The client broke HTTP/3: the connection closes with the error.
    fn connection_error(&mut self, error: ErrorCode, ctx: &mut Ctx<'_>) {
        if self.phase == Phase::Handshake {
            WtCounters::bump(&ctx.counters.handshakes_failed);
        }
        self.report(WsClosed::Lost, ctx);
        self.close_quic(h3::code(error), "", ctx.now);
    }

    fn reject_stream(&mut self, id: StreamId, error: ErrorCode) {
        let code = varint(h3::code(error));
        let _ = self.quic.recv_stream(id).stop(code);
        let _ = self.quic.send_stream(id).reset(code);
    }

    /// A stream past the control stream: stopped at once, and past a few the session closes.
    fn extra_stream(&mut self, ctx: &mut Ctx<'_>) {
        self.extra_streams += 1;
        WtCounters::bump(&ctx.counters.extra_streams);
        // A client that keeps opening streams is not a confused one.
        if self.extra_streams > MAX_EXTRA_STREAMS {
            let reason =
                format!("more than {MAX_EXTRA_STREAMS} streams besides the control stream");
            self.close_server(CloseCode::ProtocolViolation, &reason, true, ctx);
        }
    }

    /// Tells the caller the link ended, once, if it knows the link.
    pub(super) fn report(&mut self, closed: WsClosed, ctx: &mut Ctx<'_>) {
        if std::mem::take(&mut self.announced) {
            ctx.events.push_back(WtLinkEvent::Closed {
                link: ctx.link,
                closed,
            });
        }
    }
}

/// Reads everything a stream has into `chunks`, and how the read ended.
fn pull(quic: &mut Connection, id: StreamId, chunks: &mut Vec<Bytes>) -> ReadEnd {
    let mut stream = quic.recv_stream(id);
    let Ok(mut read) = stream.read(true) else {
        return ReadEnd::Gone;
    };
    let end = loop {
        match read.next(usize::MAX) {
            Ok(Some(chunk)) => chunks.push(chunk.bytes),
            Ok(None) => break ReadEnd::Fin,
            Err(ReadError::Blocked) => break ReadEnd::Open,
            Err(ReadError::Reset(_)) => break ReadEnd::Reset,
        }
    };
    // Flow-control credit goes out with the session's next flush.
    let _ = read.finalize();
    end
}

/// The code streams past the control stream are stopped and reset with.
fn refusal() -> VarInt {
    varint(CloseCode::ProtocolViolation.code().into())
}

fn varint(code: u64) -> VarInt {
    VarInt::from_u64(code).unwrap_or(VarInt::MAX)
}
