//! One WebTransport session on one QUIC connection, as a state machine over quinn-proto's
//! [`Connection`]: HTTP/3 (the control streams, the CONNECT request), then tickwire's
//! control stream (the token, frames both ways) and datagrams, then the close. It never
//! touches a socket; [`WtLinks`](super::WtLinks) moves its packets and calls it.

mod outbound;
mod streams;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use quinn_proto::{Connection, ConnectionError, Event, ReadError, StreamEvent, StreamId, VarInt};
use tickwire_proto::login::ServerNonce;
use tickwire_proto::reliable::ChannelKind;
use tickwire_proto::websocket::clamp_close_reason;
use wtransport_proto::error::ErrorCode;

use self::streams::H3Stream;
use super::{LocalCounts, WtLinkEvent, WtLinkId};
use crate::ws::{CloseCode, WsClosed, WsCounters, WsSendError};
use crate::wt::config::{MAX_EXTRA_STREAMS, client_close};
use crate::wt::framing::{
    DatagramReceiver, FRAME_HEADER_BYTES, Frame, FrameLengthError, check_frame_length, close_frame,
    parse_frame, put_frame,
};
use crate::wt::h3;
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

impl Ctx<'_> {
    /// A message from the client (a frame's or a datagram's), counted and reported. It is
    /// copied out of the received packet, which lives in a block shared with others
    /// (`WtLinks`' arena): a room that keeps the message keeps only the message.
    fn deliver(&mut self, channel: u8, message: Bytes) {
        self.counts.messages_received += 1;
        self.counts.bytes_received += message.len() as u64;
        self.events.push_back(WtLinkEvent::Message {
            link: self.link,
            channel,
            message: Bytes::copy_from_slice(&message),
        });
    }
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
    /// The session is open: the control stream (answered with the challenge) and the
    /// client's login frame are awaited.
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
    /// Its place among the server's open connections, from [`WtLinks::admit`](super::WtLinks::admit)
    /// until the session is dropped.
    pub(super) slot: Option<crate::ws::socket::ConnectionSlot>,
    /// The challenge sent on the control stream, which the client's login answers.
    pub(super) nonce: ServerNonce,
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
    /// A refusal (the session was never accepted): the QUIC close follows as soon as the
    /// close frame is acknowledged, without waiting for the client to close. A refused
    /// client is nobody's player, and a raw client may never answer.
    close_on_ack: bool,
    receiver: DatagramReceiver,
    sequences: Vec<u16>,
    /// Where this session's datagrams are built, [`SEND_BLOCK_DATAGRAMS`] to a block: the
    /// session's own, so what quinn holds of a slow client's queue pins about the queue
    /// and one block, never blocks shared with other sessions.
    send_block: BytesMut,
    extra_streams: u32,
}

/// Datagrams of a session's size built in one block ([`Conn::send_block`]): one
/// allocation (and one shared header) for that many sends.
pub(super) const SEND_BLOCK_DATAGRAMS: usize = 4;

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
            dirty: false,
            touched: false,
            announced: false,
            opened: false,
            accepted: false,
            slot: None,
            nonce: ServerNonce::random(&mut rand::rng()),
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
            close_on_ack: false,
            receiver: DatagramReceiver::new(shared.channels.len()),
            sequences: vec![0; shared.channels.len()],
            send_block: BytesMut::new(),
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
            Event::Stream(StreamEvent::Opened { dir }) => self.streams_opened(dir, ctx),
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
            Event::Stream(StreamEvent::Finished { id })
                if self.close_on_ack && Some(id) == self.control =>
            {
                // A refusal's close frame is acknowledged: the client has its code.
                if let Phase::Closing { code, reason } = self.phase.clone() {
                    self.close_quic(code.code().into(), &reason, ctx.now);
                }
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
                    Ok(Frame::Data(channel, message)) => ctx.deliver(channel, message),
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
                    ctx.deliver(channel, message);
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
                self.close_on_ack = self.phase != Phase::Open;
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
