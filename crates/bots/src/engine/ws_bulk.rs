//! A group of plain-TCP WebSocket bots driven by one task, as the UDP group is: every
//! bot's non-blocking socket sits in one epoll set that the 1 ms tick asks without waiting;
//! each readable socket is read until it would block into the group's one scratch buffer,
//! its frames parsed with [`tickwire_proto::websocket`] and its messages handed to the
//! bot's logic; due sends come from the group's timer heap, and each bot's queued frames
//! leave with one `write` per tick. (A tokio task per bot around a `Link` cost 1.16–1.18
//! times the server's CPU at 1,500 players.)
//!
//! A bot's own state is what TCP makes per connection: its socket, the bytes of a frame
//! not yet whole, the bytes the kernel has not taken yet, and its frame reader.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use std::cell::RefCell;

use bytes::Bytes;
use tickwire_client::{Ended, MatchAnswer};
use tickwire_net::due::{DueTimes, earliest};
use tickwire_proto::ConnectionParams;
use tickwire_proto::login::{ServerNonce, login_for_token};
use tickwire_proto::websocket::{
    Inbound, MessageReader, opcode, write_masked_close, write_masked_frame,
};

use super::ledger::Ledger;
use super::udp::{EPOLL_EVENTS, Readiness};
use super::{
    CLOSE_PACE, GroupResult, GroupSpec, OneTask, Pending, Queue, TICK, close_batches, drive,
};
use crate::plan::Plan;
use crate::scenario::BotLogic;

/// The largest message read from the server (as `tickwire_client`'s WebSocket link).
const MAX_INBOUND_BYTES: usize = 4 << 20;
/// The group's read buffer: one `read` takes up to this much of one socket.
const SCRATCH_BYTES: usize = 64 << 10;
/// The longest upgrade response read.
const MAX_RESPONSE_BYTES: usize = 8 << 10;
/// How long the bots wait, once every close frame is out, for the server to close.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Where a bot's connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The upgrade request is out; the `101` response is awaited.
    Upgrading,
    /// Upgraded; the server's challenge (the first binary message) is awaited.
    Challenged,
    /// The login is out; the accepted parameters (the next binary message) are awaited.
    Admitting,
    /// Connected: messages both ways.
    Open,
    /// Over (failed, disconnected, or closed at the end).
    Ended,
}

/// A bot's frames not yet written: masked, as a client's must be, each with a fresh mask.
struct Outgoing {
    bytes: Vec<u8>,
    /// Messages queued since the last flush.
    frames: u64,
    /// An xorshift state: masks need not be secret from a load tool's own server.
    mask: u32,
}

impl Outgoing {
    fn next_mask(&mut self) -> [u8; 4] {
        let mut x = self.mask;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.mask = x;
        x.to_ne_bytes()
    }

    fn frame(&mut self, opcode: u8, prefix: &[u8], payload: &[u8]) {
        let mask = self.next_mask();
        write_masked_frame(&mut self.bytes, opcode, prefix, payload, mask);
    }
}

impl Queue for Outgoing {
    /// One binary message: the channel byte, then the message (docs/PROTOCOL.md).
    fn queue(&mut self, channel: u8, message: Bytes) -> bool {
        self.frame(opcode::BINARY, &[channel], &message);
        self.frames += 1;
        true
    }
}

struct Bot {
    id: u32,
    room: u64,
    stage: Stage,
    socket: Option<TcpStream>,
    /// Bytes read but not yet a whole frame (or, while upgrading, a whole response).
    partial: Vec<u8>,
    /// The connect token, sent with its proof once the challenge is in.
    token: Option<Vec<u8>>,
    reader: MessageReader,
    out: Outgoing,
    /// The handshake's bound, until connected.
    deadline: Option<Instant>,
    logic: Option<Box<dyn BotLogic>>,
    /// The ping in flight (its payload) and when it left.
    ping: Option<(u64, Instant)>,
    rtt_us: Option<u64>,
    dirty: bool,
}

/// Bots whose TCP connection was dialed (or failed to be).
type Dialed = Rc<RefCell<Vec<(u32, MatchAnswer, io::Result<TcpStream>)>>>;

struct Group {
    bots: Vec<Bot>,
    readiness: Readiness,
    dialed: Dialed,
    due: DueTimes,
    expired: Vec<usize>,
    dirty: Vec<usize>,
    /// Sockets epoll reported readable in this pass.
    ready: Vec<usize>,
    scratch: Box<[u8]>,
    /// The run is over: what arrives is read and dropped until the server closes.
    closing: bool,
    pings_sent: u64,
    ledger: Ledger,
}

pub(super) async fn run(spec: GroupSpec) -> Option<GroupResult> {
    let readiness = match Readiness::new() {
        Ok(readiness) => readiness,
        Err(error) => {
            for &bot in &spec.bots {
                spec.connect_failed(bot, format!("epoll: {error}"));
            }
            return None;
        }
    };
    let group = Group {
        bots: Vec::with_capacity(spec.bots.len()),
        readiness,
        dialed: Dialed::default(),
        due: DueTimes::default(),
        expired: Vec::new(),
        dirty: Vec::new(),
        ready: Vec::new(),
        scratch: vec![0; SCRATCH_BYTES].into_boxed_slice(),
        closing: false,
        pings_sent: 0,
        ledger: Ledger::new(Rc::new(spec)),
    };
    drive(group, Pending::default()).await
}

impl OneTask for Group {
    fn ledger(&mut self) -> &mut Ledger {
        &mut self.ledger
    }

    /// A server tick arrives as a burst of a snapshot per bot; taking it whole would hold
    /// every due send behind it, so each pass reads at most [`EPOLL_EVENTS`] sockets and
    /// the bots send what is due between passes (as the UDP group does).
    async fn tick(&mut self, pending: &Pending) {
        self.dial(pending);
        self.adopt();
        loop {
            let more = self.receive_pass();
            self.sweep();
            self.ledger.publish();
            self.flush_dirty();
            if !more {
                break;
            }
        }
    }

    fn start(&mut self, plan: Arc<Plan>) {
        let logics = self.bots.iter_mut().filter_map(|bot| bot.logic.as_mut());
        self.ledger.start(plan, logics);
        self.due.set_all(Instant::now());
    }

    /// Closes every connection with 4001 (the player left), paced
    /// ([`close_batches`]), as the other engines; then reads what still arrives until the server
    /// has closed every connection (or [`CLOSE_WAIT`]), so no socket is dropped with unread
    /// bytes (a reset, not a close, to the server).
    async fn close(&mut self) {
        self.closing = true;
        for batch in close_batches(self.bots.len()) {
            for key in batch {
                let bot = &mut self.bots[key];
                if !matches!(
                    bot.stage,
                    Stage::Challenged | Stage::Admitting | Stage::Open
                ) {
                    continue;
                }
                let mask = bot.out.next_mask();
                write_masked_close(&mut bot.out.bytes, 4001, "", mask);
                self.mark_dirty(key);
            }
            self.flush_dirty();
            self.receive_ready();
            tokio::time::sleep(CLOSE_PACE).await;
        }
        let until = Instant::now() + CLOSE_WAIT;
        while Instant::now() < until && self.bots.iter().any(|bot| bot.socket.is_some()) {
            self.flush_dirty();
            self.receive_ready();
            tokio::time::sleep(TICK).await;
        }
        for bot in &mut self.bots {
            bot.socket = None;
            bot.stage = Stage::Ended;
        }
    }

    fn into_ledger(self) -> Ledger {
        self.ledger
    }
}

impl Group {
    /// Dials each matchmade bot's TCP connection in a task of its own (a remote server's
    /// connect takes a round trip); [`Group::adopt`] takes them as they complete.
    fn dial(&mut self, pending: &Pending) {
        let answers: Vec<_> = pending.borrow_mut().drain(..).collect();
        let timeout = self.ledger.spec.config.connect_timeout;
        for (id, answer) in answers {
            let dialed = self.dialed.clone();
            tokio::task::spawn_local(async move {
                let connected = match authority(&answer.endpoints.ws) {
                    Some((host, _)) => {
                        match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(host))
                            .await
                        {
                            Ok(Ok(stream)) => stream.into_std().and_then(|stream| {
                                stream.set_nodelay(true)?;
                                Ok(stream)
                            }),
                            Ok(Err(error)) => Err(error),
                            Err(_) => Err(io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!("not connected within {timeout:?}"),
                            )),
                        }
                    }
                    None => Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("bad WebSocket URL {:?}", answer.endpoints.ws),
                    )),
                };
                dialed.borrow_mut().push((id, answer, connected));
            });
        }
    }

    /// Takes each dialed bot into the epoll set and sends its upgrade request.
    fn adopt(&mut self) {
        let dialed: Vec<_> = self.dialed.borrow_mut().drain(..).collect();
        for (id, answer, connected) in dialed {
            let socket = match connected {
                Ok(socket) => socket,
                Err(error) => {
                    self.ledger.fail(id, format!("connect: {error}"));
                    continue;
                }
            };
            let key = self.bots.len();
            if let Err(error) = self.readiness.add(socket.as_raw_fd(), key) {
                self.ledger.fail(id, format!("epoll: {error}"));
                continue;
            }
            let mut out = Outgoing {
                bytes: Vec::new(),
                frames: 0,
                // Never zero (xorshift's fixed point).
                mask: (id ^ 0x9E37_79B9) | 1,
            };
            let (host, path) = authority(&answer.endpoints.ws).unwrap_or_default();
            let key_text = websocket_key(out.next_mask(), out.next_mask());
            out.bytes.extend_from_slice(
                format!(
                    "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n\
                     Connection: Upgrade\r\nSec-WebSocket-Key: {key_text}\r\n\
                     Sec-WebSocket-Version: 13\r\n\r\n"
                )
                .as_bytes(),
            );
            let token = match answer.token.to_bytes() {
                Ok(token) => token[..].to_vec(),
                Err(error) => {
                    self.ledger.fail(id, format!("token: {error}"));
                    continue;
                }
            };
            let deadline = Instant::now() + self.ledger.spec.config.connect_timeout;
            self.bots.push(Bot {
                id,
                room: answer.room,
                stage: Stage::Upgrading,
                socket: Some(socket),
                partial: Vec::new(),
                token: Some(token),
                reader: MessageReader::for_server_frames(),
                out,
                deadline: Some(deadline),
                logic: None,
                ping: None,
                rtt_us: None,
                dirty: false,
            });
            self.due.add(key);
            self.due.set(key, Some(deadline));
            self.mark_dirty(key);
        }
    }

    fn mark_dirty(&mut self, key: usize) {
        let bot = &mut self.bots[key];
        if !bot.dirty {
            bot.dirty = true;
            self.dirty.push(key);
        }
    }

    /// Reads every socket epoll reports readable.
    fn receive_ready(&mut self) {
        for _ in 0..8 {
            if !self.receive_pass() {
                break;
            }
        }
    }

    /// Reads up to [`EPOLL_EVENTS`] sockets epoll reports readable; true if there may be
    /// more (level-triggered: a socket left with data is reported again).
    fn receive_pass(&mut self) -> bool {
        self.ready.clear();
        self.ready.extend(self.readiness.ready());
        for index in 0..self.ready.len() {
            let key = self.ready[index];
            self.receive(key);
        }
        self.ready.len() == EPOLL_EVENTS
    }

    /// Reads bot `key`'s socket until it would block, handling what arrived.
    fn receive(&mut self, key: usize) {
        loop {
            let Some(socket) = self.bots.get_mut(key).and_then(|bot| bot.socket.as_mut()) else {
                return;
            };
            match socket.read(&mut self.scratch) {
                Ok(0) => return self.end(key, "the server closed the stream".into()),
                Ok(read) => {
                    if self.closing {
                        continue;
                    }
                    let bot = &mut self.bots[key];
                    bot.partial.extend_from_slice(&self.scratch[..read]);
                    if let Err(why) = self.handle_bytes(key) {
                        return self.end(key, why);
                    }
                    if read < self.scratch.len() {
                        return;
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return self.end(key, format!("receive: {error}")),
            }
        }
    }

    /// Handles the whole frames (or the upgrade response) in bot `key`'s `partial`.
    fn handle_bytes(&mut self, key: usize) -> Result<(), String> {
        if self.bots[key].stage == Stage::Upgrading && !self.upgraded(key)? {
            return Ok(());
        }
        let mut partial = std::mem::take(&mut self.bots[key].partial);
        let mut pos = 0;
        let now = Instant::now();
        let now_ns = self.ledger.now_ns(now);
        let result = loop {
            let item = self.bots[key]
                .reader
                .next(&mut partial, &mut pos, MAX_INBOUND_BYTES);
            match item {
                Ok(Some(item)) => {
                    if let Err(why) = self.inbound(key, item, now, now_ns) {
                        break Err(why);
                    }
                }
                Ok(None) => break Ok(()),
                Err(error) => break Err(format!("framing: {error}")),
            }
        };
        partial.drain(..pos);
        self.bots[key].partial = partial;
        result
    }

    /// Reads the upgrade's response from `partial`; true once upgraded, with `partial`
    /// holding what followed the response.
    fn upgraded(&mut self, key: usize) -> Result<bool, String> {
        let bot = &mut self.bots[key];
        let response = &bot.partial[..];
        let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
            if response.len() > MAX_RESPONSE_BYTES {
                return Err("upgrade: response too long".into());
            }
            return Ok(false);
        };
        if !response.starts_with(b"HTTP/1.1 101") {
            let status = response.split(|&b| b == b'\r').next().unwrap_or_default();
            return Err(format!(
                "upgrade: {}",
                String::from_utf8_lossy(status).trim()
            ));
        }
        bot.partial.drain(..end + 4);
        bot.stage = Stage::Challenged;
        Ok(true)
    }

    /// One message or control frame from the server.
    fn inbound(
        &mut self,
        key: usize,
        item: Inbound,
        now: Instant,
        now_ns: u64,
    ) -> Result<(), String> {
        let bot = &mut self.bots[key];
        match item {
            Inbound::Binary(body) if bot.stage == Stage::Challenged => {
                let nonce = ServerNonce::read(&body)
                    .ok_or_else(|| format!("the challenge is {} bytes", body.len()))?;
                let token = bot.token.take().unwrap_or_default();
                let login =
                    login_for_token(&token, &nonce).map_err(|error| format!("token: {error}"))?;
                bot.out.frame(opcode::BINARY, &[], &login);
                bot.stage = Stage::Admitting;
                self.mark_dirty(key);
            }
            Inbound::Binary(body) if bot.stage == Stage::Admitting => {
                if ConnectionParams::read(&body).is_none() {
                    return Err(format!(
                        "the accepted message ({} bytes) does not parse",
                        body.len()
                    ));
                }
                bot.stage = Stage::Open;
                bot.deadline = None;
                let (id, room) = (bot.id, bot.room);
                let logic = self.ledger.connected(id, room);
                self.bots[key].logic = Some(logic);
                self.refresh_due(key);
            }
            Inbound::Binary(body) => {
                let Some((&channel, message)) = body.split_first() else {
                    return Err("an empty data message".into());
                };
                self.ledger.datagrams(true, 1, now_ns);
                self.ledger
                    .arrived(bot.logic.as_mut(), channel, message, now_ns);
            }
            Inbound::Ping(payload) => {
                bot.out.frame(opcode::PONG, &[], &payload);
                self.mark_dirty(key);
            }
            Inbound::Pong => {
                if let Some((_, sent)) = bot.ping.take() {
                    bot.rtt_us = Some(now.duration_since(sent).as_micros() as u64);
                }
            }
            Inbound::Close(frame) => {
                let ended = match frame {
                    Some((code, reason)) => Ended::from_close(code, &reason),
                    None => Ended::from_close(1005, ""),
                };
                return Err(ended.to_string());
            }
            Inbound::Text => return Err("a text message".into()),
        }
        Ok(())
    }

    /// Bot `key`'s connection is over: a failed handshake, or a disconnect.
    fn end(&mut self, key: usize, why: String) {
        let bot = &mut self.bots[key];
        bot.socket = None;
        if bot.stage == Stage::Ended {
            return;
        }
        let connected = bot.stage == Stage::Open;
        bot.stage = Stage::Ended;
        if !self.closing {
            self.ledger.ended(bot.id, connected, &why);
        }
    }

    /// Due handshake bounds and due sends; round trips sampled (and pings sent) once a
    /// second.
    fn sweep(&mut self) {
        let now = Instant::now();
        let now_ns = self.ledger.now_ns(now);
        if self.ledger.rtt_sample_due(now_ns) {
            for key in 0..self.bots.len() {
                let bot = &mut self.bots[key];
                if bot.stage != Stage::Open {
                    continue;
                }
                if let Some(rtt_us) = bot.rtt_us {
                    self.ledger.record_rtt(rtt_us);
                }
                // The next sample's probe; one still unanswered is written off.
                self.pings_sent += 1;
                let payload = self.pings_sent.to_le_bytes();
                bot.ping = Some((self.pings_sent, now));
                bot.out.frame(opcode::PING, &[], &payload);
                self.mark_dirty(key);
            }
        }
        self.due.take_expired(now, &mut self.expired);
        for index in 0..self.expired.len() {
            let key = self.expired[index];
            let bot = &mut self.bots[key];
            if bot.deadline.is_some_and(|at| at <= now) && bot.stage != Stage::Ended {
                self.end(key, "timed out".into());
                continue;
            }
            if let (Stage::Open, Some(logic)) = (bot.stage, bot.logic.as_mut()) {
                let sent = self.ledger.send_due(logic.as_mut(), &mut bot.out, now_ns);
                if sent > 0 {
                    self.mark_dirty(key);
                }
            }
            self.refresh_due(key);
        }
    }

    /// Files when bot `key` next needs the sweep: its handshake bound or its next send.
    fn refresh_due(&mut self, key: usize) {
        let bot = &self.bots[key];
        let send = match (self.ledger.plan.as_deref(), &bot.logic) {
            (Some(plan), Some(logic)) if bot.stage == Stage::Open => {
                let ns = logic.next_send_ns();
                (ns != u64::MAX).then(|| plan.at(ns))
            }
            _ => None,
        };
        self.due.set(key, earliest(bot.deadline, send));
    }

    /// One `write` per bot with something queued; what the kernel does not take waits
    /// for the next tick.
    fn flush_dirty(&mut self) {
        let now_ns = self.ledger.now_ns(Instant::now());
        let dirty = std::mem::take(&mut self.dirty);
        for key in dirty {
            let bot = &mut self.bots[key];
            bot.dirty = false;
            let Some(socket) = bot.socket.as_mut() else {
                bot.out.bytes.clear();
                continue;
            };
            let frames = std::mem::take(&mut bot.out.frames);
            self.ledger.datagrams(false, frames, now_ns);
            if bot.out.bytes.is_empty() {
                continue;
            }
            match socket.write(&bot.out.bytes) {
                Ok(written) => {
                    bot.out.bytes.drain(..written);
                    // See the UDP engine's flush: a burst's sends leave over milliseconds.
                    if let Some(logic) = bot.logic.as_mut() {
                        logic.left(self.ledger.now_ns(Instant::now()));
                    }
                }
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(error) => {
                    self.end(key, format!("send: {error}"));
                    continue;
                }
            }
            if !self.bots[key].out.bytes.is_empty() {
                self.mark_dirty(key);
            }
        }
    }
}

/// The `host:port` and path of a `ws://` URL.
fn authority(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("ws://")?;
    let (host, path) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, "/"),
    };
    if host.is_empty() {
        return None;
    }
    let host = if host
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.contains(']'))
    {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    Some((host, path.to_string()))
}

/// A `Sec-WebSocket-Key`: 16 bytes (from the two masks' words and their mix) in base64.
fn websocket_key(a: [u8; 4], b: [u8; 4]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut raw = [0u8; 16];
    for (index, byte) in raw.iter_mut().enumerate() {
        *byte = a[index % 4].rotate_left(index as u32) ^ b[(index / 4) % 4];
    }
    let mut text = String::with_capacity(24);
    for chunk in raw.chunks(3) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |word, (i, &b)| word | (u32::from(b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            text.push(ALPHABET[((word >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    text.push_str("==");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_the_address_to_dial_and_the_path() {
        assert_eq!(
            authority("ws://127.0.0.1:8080/ws"),
            Some(("127.0.0.1:8080".into(), "/ws".into()))
        );
        assert_eq!(
            authority("ws://[::1]:9000/ws"),
            Some(("[::1]:9000".into(), "/ws".into()))
        );
        assert_eq!(
            authority("ws://game.example/ws"),
            Some(("game.example:80".into(), "/ws".into()))
        );
        assert_eq!(authority("wss://x/ws"), None, "TLS takes the task path");
    }

    #[test]
    fn a_websocket_key_is_sixteen_bytes_of_base64() {
        let key = websocket_key([1, 2, 3, 4], [5, 6, 7, 8]);
        assert_eq!(key.len(), 24, "{key}");
        assert!(key.ends_with("=="));
    }
}
