//! The HTTP/3 streams a client opens besides tickwire's control stream: its control stream
//! (SETTINGS), its QPACK streams, the CONNECT request and its capsules, and the
//! WebTransport streams, sorted by their first bytes as wtransport 0.7's driver sorts them.

use quinn_proto::{Dir, StreamId};
use wtransport_proto::error::ErrorCode;
use wtransport_proto::session::SessionResponse;

use super::{Conn, Ctx, Phase, ReadEnd, pull, refusal, varint};
use crate::ws::WsClosed;
use crate::wt::config::client_close;
use crate::wt::framing::{WT_PATH, put_frame};
use crate::wt::h3::{self, FrameReader, RequestError, frame_type, stream_type};
use crate::wt::stats::WtCounters;

/// An HTTP/3 stream the client opened, by what it has shown itself to be.
pub(super) enum Role {
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

pub(super) struct H3Stream {
    id: StreamId,
    role: Role,
    reader: FrameReader,
}

impl Conn {
    /// Takes the streams the client opened and reads what they hold.
    pub(super) fn streams_opened(&mut self, dir: Dir, ctx: &mut Ctx<'_>) {
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

    /// Opens the server's HTTP/3 control stream with its SETTINGS, as soon as the QUIC
    /// handshake is done (the client waits for them before its CONNECT).
    pub(super) fn open_local_control(&mut self, ctx: &mut Ctx<'_>) {
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

    /// Reads what an HTTP/3 stream has and acts on it by its role.
    pub(super) fn read_h3(&mut self, id: StreamId, ctx: &mut Ctx<'_>) {
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
                    // The challenge the client's login answers, first on the stream.
                    put_frame(&mut self.out, &self.nonce.0);
                    ctx.counts.frames_sent += 1;
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

    /// The client broke HTTP/3: the connection closes with the error.
    pub(super) fn connection_error(&mut self, error: ErrorCode, ctx: &mut Ctx<'_>) {
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
}
