//! One bot's WebTransport session as a sans-IO state machine over quinn-proto's
//! [`Connection`], the client-side mirror of the server's (`tickwire_net::wt::WtLinks`):
//! HTTP/3 (the control stream with SETTINGS, the CONNECT request on a bidirectional stream
//! and its 200), then tickwire's control stream (the connect token, the connection
//! parameters, frames both ways) and datagrams, then the close. It never touches a socket
//! or a clock: the group ([`super::Group`]) moves its packets and gives it the time.
//!
//! A driver calls, for each input: the connection's `handle_event` / `handle_timeout`
//! (quinn), then [`Session::drive`] (quinn's events into the session), then
//! [`Session::poll_event`] until `None`; and before building packets,
//! [`Session::write_out`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use quinn_proto::{
    Connection, ConnectionError, Dir, Event, ReadError, StreamEvent, StreamId, VarInt, WriteError,
};
use tickwire_client::Ended;
use tickwire_net::ws::CloseCode;
use tickwire_net::wt::framing::{
    CLOSE_FRAME_TAG, DatagramReceiver, FRAME_HEADER_BYTES, Frame, check_frame_length, close_frame,
    datagram_header_bytes, max_frame_bytes, parse_frame, put_data_frame, put_frame, write_datagram,
};
use tickwire_net::wt::h3::{self, FrameReader, frame_type};
use tickwire_proto::ConnectionParams;
use tickwire_proto::login::{ServerNonce, login_for_token};
use tickwire_proto::reliable::ChannelKind;

/// What every session of a group says the same way: HTTP/3's opening bytes for one server.
pub(super) struct Greeting {
    /// The client's HTTP/3 control stream: its type and SETTINGS.
    pub(super) control: Vec<u8>,
    /// The CONNECT request for the server's URL (a HEADERS frame).
    pub(super) request: Vec<u8>,
}

/// What a session tells its driver.
#[derive(Debug)]
pub(super) enum SessionEvent {
    /// The server accepted the token: its connection parameters arrived.
    Connected,
    /// A message on a channel.
    Message { channel: u8, message: Bytes },
    /// The session is over (before or after it connected), and why; nothing follows.
    Ended(String),
}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// QUIC's handshake.
    Quic,
    /// The CONNECT request went; its answer is awaited.
    Requested,
    /// tickwire's control stream is open; the server's challenge (or a close frame) is
    /// awaited.
    AwaitChallenge,
    /// The login (the token and its proof) went on the control stream; the connection
    /// parameters (or a close frame) are awaited.
    AwaitParams,
    /// Messages both ways.
    Open,
    /// This side's close frame went; the server's QUIC close is awaited.
    Closing,
    /// Over: QUIC closed (either side).
    Ended,
}

pub(super) struct Session {
    pub(super) quic: Connection,
    phase: Phase,
    /// The connect token, until its login is written.
    token: Option<Box<[u8]>>,
    /// The CONNECT request's stream; its answer arrives through `answer`.
    connect: Option<StreamId>,
    answer: FrameReader,
    /// tickwire's control stream (a WebTransport bidirectional stream).
    control: Option<StreamId>,
    /// The datagram prefix of the session (its quarter stream id).
    prefix: Vec<u8>,
    /// The start of a frame still arriving on the control stream.
    inbuf: BytesMut,
    /// Framed bytes QUIC has not taken yet, in order.
    out: BytesMut,
    /// Finish the control stream once `out` is written (a close frame is in it).
    finish: bool,
    channels: Arc<[ChannelKind]>,
    max_frame: usize,
    receiver: DatagramReceiver,
    sequences: Vec<u16>,
    events: VecDeque<SessionEvent>,
}

impl Session {
    /// A session over `quic` (just made by the endpoint's `connect`), presenting `token`.
    pub(super) fn new(quic: Connection, token: Box<[u8]>) -> Self {
        Self {
            quic,
            phase: Phase::Quic,
            token: Some(token),
            connect: None,
            answer: FrameReader::default(),
            control: None,
            prefix: Vec::new(),
            inbuf: BytesMut::new(),
            out: BytesMut::new(),
            finish: false,
            channels: Arc::from([]),
            max_frame: max_frame_bytes(0),
            receiver: DatagramReceiver::new(0),
            sequences: Vec::new(),
            events: VecDeque::new(),
        }
    }

    /// Whether the session is over (nothing more comes from it).
    pub(super) fn is_ended(&self) -> bool {
        self.phase == Phase::Ended
    }

    /// The next event, if any.
    pub(super) fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// Takes quinn's events: streams, datagrams, the connection's end.
    pub(super) fn drive(&mut self, greeting: &Greeting, now: Instant) {
        while let Some(event) = self.quic.poll() {
            self.handle_event(event, greeting, now);
        }
    }

    fn handle_event(&mut self, event: Event, greeting: &Greeting, now: Instant) {
        match event {
            Event::Connected => self.request(greeting, now),
            Event::ConnectionLost { reason } => self.connection_lost(reason),
            Event::Stream(StreamEvent::Opened { dir }) => {
                while let Some(id) = self.quic.streams().accept(dir) {
                    if dir == Dir::Bi {
                        // The server opens none; a stray one is refused.
                        let _ = self.quic.recv_stream(id).stop(VarInt::from_u32(0));
                        let _ = self.quic.send_stream(id).reset(VarInt::from_u32(0));
                    } else {
                        self.read_stream(id, now);
                    }
                }
            }
            Event::Stream(StreamEvent::Readable { id }) => self.read_stream(id, now),
            Event::Stream(StreamEvent::Writable { id }) if Some(id) == self.control => {
                self.write_out();
            }
            Event::Stream(StreamEvent::Stopped { id, .. }) if Some(id) == self.control => {
                self.fail("the server stopped reading the control stream", now);
            }
            Event::DatagramReceived => self.read_datagrams(),
            Event::HandshakeDataReady
            | Event::DatagramsUnblocked
            | Event::Stream(
                StreamEvent::Writable { .. }
                | StreamEvent::Stopped { .. }
                | StreamEvent::Finished { .. }
                | StreamEvent::Available { .. },
            ) => {}
        }
    }

    /// QUIC is up: the HTTP/3 control stream with SETTINGS, and the CONNECT request on a
    /// bidirectional stream (the server holds the request until the SETTINGS are in).
    fn request(&mut self, greeting: &Greeting, now: Instant) {
        let (Some(control), Some(connect)) = (
            self.quic.streams().open(Dir::Uni),
            self.quic.streams().open(Dir::Bi),
        ) else {
            return self.fail("the server allows no streams", now);
        };
        // Fresh streams take these few hundred bytes whole: the server's initial windows
        // are far larger.
        let written = [(control, &greeting.control), (connect, &greeting.request)]
            .into_iter()
            .all(|(id, bytes)| {
                matches!(self.quic.send_stream(id).write(bytes), Ok(n) if n == bytes.len())
            });
        if !written {
            return self.fail("the server's stream windows refused the request", now);
        }
        self.connect = Some(connect);
        self.phase = Phase::Requested;
    }

    /// The CONNECT request's answer: on a 200, tickwire's control stream opens with the
    /// WebTransport signal; the server's challenge comes on it.
    fn answered(&mut self, now: Instant) {
        let status = match self.answer.next(|kind| kind == frame_type::HEADERS) {
            Ok(Some((_, payload))) => h3::response_status(&payload),
            Ok(None) => return,
            Err(error) => Err(error),
        };
        let session = match (status, self.connect) {
            (Ok(200), Some(connect)) => u64::from(connect),
            (Ok(status), _) => return self.fail(&format!("the server answered {status}"), now),
            (Err(error), _) => {
                return self.fail(&format!("unreadable CONNECT answer: {error:?}"), now);
            }
        };
        let Some(id) = self.quic.streams().open(Dir::Bi) else {
            return self.fail("the server allows no session stream", now);
        };
        self.control = Some(id);
        self.prefix = h3::datagram_prefix(session);
        self.out
            .extend_from_slice(&h3::webtransport_stream_opening(session));
        self.phase = Phase::AwaitChallenge;
        self.write_out();
    }

    /// Reads what a stream has: the CONNECT answer, tickwire's frames, or the server's
    /// HTTP/3 control stream (read and dropped: its SETTINGS ask nothing of a client that
    /// sent its request already).
    fn read_stream(&mut self, id: StreamId, now: Instant) {
        let (control, connect) = (self.control, self.connect);
        let mut stream = self.quic.recv_stream(id);
        let Ok(mut read) = stream.read(true) else {
            return;
        };
        let mut ended = false;
        loop {
            match read.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    if Some(id) == control {
                        self.inbuf.extend_from_slice(&chunk.bytes);
                    } else if Some(id) == connect {
                        self.answer.feed(&chunk.bytes);
                    }
                }
                Ok(None) | Err(ReadError::Reset(_)) => {
                    ended = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
            }
        }
        // Flow-control credit goes out with the next packets.
        let _ = read.finalize();
        if Some(id) == self.connect && self.phase == Phase::Requested {
            self.answered(now);
        } else if Some(id) == self.control {
            self.parse_control(now);
            if ended
                && matches!(
                    self.phase,
                    Phase::AwaitChallenge | Phase::AwaitParams | Phase::Open
                )
            {
                self.fail("the server ended the control stream", now);
            }
        }
    }

    /// Whole frames off the control stream: the challenge first, then the connection
    /// parameters, then messages, or a close frame at any point.
    fn parse_control(&mut self, now: Instant) {
        while self.inbuf.len() >= FRAME_HEADER_BYTES
            && matches!(
                self.phase,
                Phase::AwaitChallenge | Phase::AwaitParams | Phase::Open
            )
        {
            let mut prefix = [0u8; FRAME_HEADER_BYTES];
            prefix.copy_from_slice(&self.inbuf[..FRAME_HEADER_BYTES]);
            let len = match check_frame_length(prefix, self.max_frame) {
                Ok(len) => len,
                Err(error) => return self.fail(&error.to_string(), now),
            };
            if self.inbuf.len() < FRAME_HEADER_BYTES + len {
                return;
            }
            self.inbuf.advance(FRAME_HEADER_BYTES);
            let body = self.inbuf.split_to(len).freeze();
            // The challenge is always the server's first frame, whatever its first byte (one
            // nonce in 256 starts with the close frame's tag).
            if self.phase == Phase::AwaitChallenge {
                self.challenged(&body, now);
                continue;
            }
            if self.phase == Phase::AwaitParams && body.first() != Some(&CLOSE_FRAME_TAG) {
                self.connected(&body, now);
                continue;
            }
            match parse_frame(body, self.channels.len()) {
                Ok(Frame::Data(channel, message)) => {
                    self.events
                        .push_back(SessionEvent::Message { channel, message });
                }
                Ok(Frame::Close(code, reason)) => self.closed_by_server(code, &reason),
                Err(error) => return self.fail(&error.to_string(), now),
            }
        }
    }

    /// The server's challenge: answered with the login.
    fn challenged(&mut self, body: &[u8], now: Instant) {
        let Some(nonce) = ServerNonce::read(body) else {
            return self.fail(&format!("the challenge is {} bytes", body.len()), now);
        };
        let token = self.token.take().unwrap_or_default();
        match login_for_token(&token, &nonce) {
            Ok(login) => put_frame(&mut self.out, &login),
            Err(error) => return self.fail(&format!("token: {error}"), now),
        }
        self.phase = Phase::AwaitParams;
        self.write_out();
    }

    fn connected(&mut self, body: &[u8], now: Instant) {
        let Some(params) = ConnectionParams::read(body) else {
            return self.fail("malformed connection parameters", now);
        };
        self.receiver = DatagramReceiver::new(params.channels.len());
        self.sequences = vec![0; params.channels.len()];
        self.max_frame = max_frame_bytes(params.max_message_size);
        self.channels = params.channels.into();
        self.phase = Phase::Open;
        self.events.push_back(SessionEvent::Connected);
        // Datagrams that came with the parameters waited for the channels.
        self.read_datagrams();
    }

    /// The server's close frame: answered with ours (which ends its wait), then its QUIC
    /// close ends the session.
    fn closed_by_server(&mut self, code: u16, reason: &str) {
        self.events.push_back(SessionEvent::Ended(
            Ended::from_close(code, reason).to_string(),
        ));
        self.out.extend_from_slice(&close_frame(code, ""));
        self.finish = true;
        self.phase = Phase::Closing;
    }

    fn read_datagrams(&mut self) {
        if self.phase != Phase::Open {
            // Before the parameters they stay queued in QUIC (its buffer drops the oldest).
            return;
        }
        while let Some(datagram) = self.quic.datagrams().recv() {
            if !datagram.starts_with(&self.prefix) {
                continue;
            }
            let payload = datagram.slice(self.prefix.len()..);
            if let Ok((channel, message)) = self.receiver.accept(payload, &self.channels) {
                self.events
                    .push_back(SessionEvent::Message { channel, message });
            }
        }
    }

    fn connection_lost(&mut self, reason: ConnectionError) {
        let was = std::mem::replace(&mut self.phase, Phase::Ended);
        // A close this side asked for (its close frame answered) says nothing new.
        if matches!(was, Phase::Closing | Phase::Ended) {
            return;
        }
        let why = match reason {
            ConnectionError::ApplicationClosed(close) => {
                match u16::try_from(close.error_code.into_inner()) {
                    Ok(code @ 4000..=4999) => {
                        Ended::from_close(code, &String::from_utf8_lossy(&close.reason)).to_string()
                    }
                    _ => format!("closed with code {}", close.error_code),
                }
            }
            other => other.to_string(),
        };
        self.events.push_back(SessionEvent::Ended(why));
    }

    /// Something went wrong on this side's reading of the server: the session ends, and
    /// QUIC closes with tickwire's protocol-violation code.
    fn fail(&mut self, why: &str, now: Instant) {
        if self.phase == Phase::Ended {
            return;
        }
        self.events.push_back(SessionEvent::Ended(why.to_owned()));
        let code = CloseCode::ProtocolViolation;
        self.close_quic(code, now);
    }

    /// Leaves: a close frame (4001) on the open control stream, answered by the server's
    /// QUIC close; before that, the QUIC close with 4001 at once.
    pub(super) fn close(&mut self, now: Instant) {
        match self.phase {
            Phase::Open => {
                let code = CloseCode::Requested;
                self.out
                    .extend_from_slice(&close_frame(code.code(), code.default_reason()));
                self.finish = true;
                self.phase = Phase::Closing;
            }
            Phase::Closing | Phase::Ended => {}
            Phase::Quic | Phase::Requested | Phase::AwaitChallenge | Phase::AwaitParams => {
                self.close_quic(CloseCode::Requested, now);
            }
        }
    }

    /// Ends QUIC at once with `code` (a close that is not answered in time, a failure).
    pub(super) fn close_quic(&mut self, code: CloseCode, now: Instant) {
        if !self.quic.is_closed() {
            let reason = Bytes::from_static(code.default_reason().as_bytes());
            self.quic
                .close(now, VarInt::from_u32(code.code().into()), reason);
        }
        self.phase = Phase::Ended;
        self.out.clear();
    }

    /// Queues `message` on `channel`: a datagram (built in `arena`) for an unreliable
    /// channel when it fits the path, a frame otherwise; false if the session is not open
    /// or has no such channel.
    pub(super) fn queue(
        &mut self,
        channel: u8,
        message: &[u8],
        arena: &mut BytesMut,
        scratch: &mut Vec<u8>,
    ) -> bool {
        if self.phase != Phase::Open {
            return false;
        }
        let Some(&kind) = self.channels.get(usize::from(channel)) else {
            return false;
        };
        if kind != ChannelKind::Reliable {
            let size = self.prefix.len() + datagram_header_bytes(kind) + message.len();
            if self
                .quic
                .datagrams()
                .max_size()
                .is_some_and(|max| size <= max)
            {
                let sequence = &mut self.sequences[usize::from(channel)];
                *sequence = sequence.wrapping_add(1);
                write_datagram(scratch, channel, kind, *sequence, message);
                arena.reserve(size);
                arena.extend_from_slice(&self.prefix);
                arena.extend_from_slice(scratch);
                // Dropping the oldest when QUIC's send buffer is full: an unreliable
                // message waits for nobody.
                return self
                    .quic
                    .datagrams()
                    .send(arena.split().freeze(), true)
                    .is_ok();
            }
        }
        put_data_frame(&mut self.out, channel, message);
        self.write_out();
        true
    }

    /// Moves framed bytes into QUIC's stream, and finishes the stream behind a close frame.
    pub(super) fn write_out(&mut self) {
        let Some(id) = self.control else {
            return;
        };
        while !self.out.is_empty() {
            match self.quic.send_stream(id).write(&self.out) {
                Ok(0) | Err(WriteError::Blocked) => return,
                Ok(n) => self.out.advance(n),
                Err(WriteError::Stopped(_) | WriteError::ClosedStream) => {
                    self.out.clear();
                    return;
                }
            }
        }
        if std::mem::take(&mut self.finish) {
            let _ = self.quic.send_stream(id).finish();
        }
    }
}
