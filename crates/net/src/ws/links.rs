//! The WebSocket connections of one shard, driven by the shard's own thread: see [`WsLinks`].

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_proto::reliable::ChannelKind;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::connection::WsClosed;
use super::endpoint::Shared;
use super::framing::{CloseCode, parse_data_message};
use super::outbox::WsSendError;
use super::socket::{ByteStream, ConnectionSlot, ReadOutcome, WsSocket};
use super::stats::WsCounters;
use crate::worklist;
use tickwire_proto::websocket::{self as frame, FrameError, Inbound, MessageReader, opcode};

slot_id! {
    /// Identifies one connection among a [`WsLinks`]' for as long as it lives; never reused.
    WsLinkId
}

/// What happened on a connection.
#[derive(Debug)]
pub enum WsLinkEvent {
    /// A data message: its channel and payload.
    Message {
        /// Which connection.
        link: WsLinkId,
        /// The channel id (checked against the connection's channels).
        channel: u8,
        /// The payload.
        message: Bytes,
    },
    /// The connection ended or started closing, other than by [`WsLinks::close`]; nothing
    /// more comes from it and sends to it are refused.
    Closed {
        /// Which connection.
        link: WsLinkId,
        /// How.
        closed: WsClosed,
    },
}

/// What one connection holds unwritten, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WsLinkDepth {
    /// Framed bytes committed to the socket in order and not yet written: reliable data,
    /// and whatever was framed before the socket stopped taking bytes.
    pub unwritten_bytes: usize,
    /// Bytes allocated for the write buffer, written, unwritten or spare: what the
    /// connection's outbound bytes cost in memory, beyond the messages waiting aside.
    pub buffer_capacity: usize,
    /// Unreliable messages waiting aside.
    pub unreliable_messages: usize,
    /// Sequenced channels holding a newest unsent message aside.
    pub sequenced_pending: usize,
}

/// Events one `epoll_wait` takes.
const EPOLL_BATCH: usize = 256;
/// Bytes read per `read` call: the scratch buffer's size.
const READ_CHUNK: usize = 16 << 10;
/// Bytes one connection may read in one turn before others get theirs.
const READ_BUDGET: usize = 64 << 10;
/// How often idle timeouts, pings and close deadlines are checked.
const SWEEP_INTERVAL: Duration = Duration::from_millis(100);
/// A write buffer larger than this is given back once it drains.
const KEEP_BUFFER_BYTES: usize = 16 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// Closing: whatever is in `out` (ending with a close frame) is written, then the
    /// connection lingers for the client's close answer until `deadline`.
    Closing {
        deadline: Instant,
        /// False once the byte stream cannot be parsed (a framing error): the rest is
        /// discarded while lingering.
        parseable: bool,
        /// The client already sent its close: drop the socket once `out` is written.
        answered: bool,
    },
}

struct Conn {
    generation: u32,
    stream: ByteStream,
    shared: Arc<Shared>,
    _slot: ConnectionSlot,
    state: State,
    reader: MessageReader,
    /// The start of a frame whose rest has not arrived (empty between messages).
    inbuf: Vec<u8>,
    /// Framed bytes committed to the socket, in order; `out[written..]` is still to write.
    /// `out[0]` is always the start of a frame.
    out: Vec<u8>,
    written: usize,
    /// A frame start at or before `written`, where a walk over the frames already written
    /// resumes (see [`Conn::settle`]).
    frame_start: usize,
    /// The socket did not take everything: wait for it to be writable, and keep
    /// unreliable messages aside (latest wins, drop-oldest) meanwhile.
    blocked: bool,
    /// Listed in `dirty` for the next flush.
    dirty: bool,
    /// By channel id: the newest unsent message of a sequenced channel while blocked.
    sequenced: Vec<Option<Bytes>>,
    unreliable: VecDeque<(u8, Bytes)>,
    unreliable_bytes: usize,
    last_received: Instant,
    /// When the last ping went out: one per ping interval while the client is quiet.
    last_ping: Instant,
}

/// Where [`Conn::queue`] put a message.
enum Queued {
    /// Framed into the write buffer: this many payload bytes.
    Framed(usize),
    /// Kept aside while the socket is blocked.
    Aside,
}

impl Conn {
    fn fd(&self) -> RawFd {
        self.stream.fd()
    }

    /// Frames `message` into the write buffer, or keeps it aside while blocked as its
    /// channel's kind says.
    fn queue(&mut self, channel: u8, message: Bytes) -> Result<Queued, WsSendError> {
        if self.state != State::Open {
            return Err(WsSendError::Closed);
        }
        let shared = &self.shared;
        let Some(&kind) = shared.channels.get(usize::from(channel)) else {
            return Err(WsSendError::UnknownChannel {
                channel,
                count: shared.channels.len(),
            });
        };
        let len = message.len();
        let max = shared.max_payload;
        if len > max {
            WsCounters::bump(&shared.counters.sends_too_large);
            return Err(WsSendError::TooLarge { len, max });
        }
        let limits = shared.outbox;
        match kind {
            // Checked on every message, not only once the socket pushed back: a room can
            // frame megabytes within one turn, before any write finds the client slow.
            ChannelKind::Reliable => {
                let queued = self.pending();
                if queued + len > limits.max_reliable_bytes {
                    WsCounters::bump(&shared.counters.closed_slow_client);
                    return Err(WsSendError::SlowClient {
                        queued,
                        len,
                        max: limits.max_reliable_bytes,
                    });
                }
            }
            ChannelKind::UnreliableSequenced if self.blocked => {
                if self.sequenced[usize::from(channel)]
                    .replace(message)
                    .is_some()
                {
                    WsCounters::bump(&shared.counters.sequenced_replaced);
                }
                return Ok(Queued::Aside);
            }
            ChannelKind::Unreliable if self.blocked => {
                self.unreliable_bytes += len;
                self.unreliable.push_back((channel, message));
                while self.unreliable.len() > limits.max_unreliable_messages
                    || self.unreliable_bytes > limits.max_unreliable_bytes
                {
                    let Some((_, dropped)) = self.unreliable.pop_front() else {
                        break;
                    };
                    self.unreliable_bytes -= dropped.len();
                    WsCounters::bump(&shared.counters.unreliable_dropped);
                }
                return Ok(Queued::Aside);
            }
            ChannelKind::UnreliableSequenced | ChannelKind::Unreliable => {}
        }
        frame::write_frame(&mut self.out, opcode::BINARY, &[channel], &message);
        Ok(Queued::Framed(len))
    }

    /// Forgets what waited aside (closing: only reliable data still goes out).
    fn drop_aside(&mut self) {
        self.sequenced.iter_mut().for_each(|slot| *slot = None);
        self.unreliable.clear();
        self.unreliable_bytes = 0;
    }

    fn pending(&self) -> usize {
        self.out.len() - self.written
    }

    /// Moves `frame_start` to the start of the frame `written` falls in (`written` itself
    /// between frames). Each frame is walked over once, however often this is called.
    fn settle(&mut self) {
        while self.frame_start < self.written {
            let end = self.frame_start + framed_len(&self.out[self.frame_start..]);
            if end > self.written {
                break;
            }
            self.frame_start = end;
        }
    }

    /// Drops the frames already written from the buffer's front once they are most of it, so
    /// a client that reads slowly but never catches up does not grow the buffer without
    /// end. Moves no more bytes than it frees.
    fn compact(&mut self) {
        if self.written < KEEP_BUFFER_BYTES {
            return;
        }
        self.settle();
        let done = self.frame_start;
        if done >= KEEP_BUFFER_BYTES && done >= self.out.len() - done {
            self.drain_written_frames();
        }
    }

    fn drain_written_frames(&mut self) {
        let done = self.frame_start;
        self.out.drain(..done);
        self.written -= done;
        self.frame_start = 0;
    }

    /// Forgets every byte not yet handed to the socket, except the rest of the frame being
    /// written (cutting it would leave the client's byte stream unparseable); how many
    /// bytes it dropped.
    fn discard_unwritten(&mut self) -> usize {
        self.settle();
        let keep = if self.frame_start == self.written {
            self.written
        } else {
            self.frame_start + framed_len(&self.out[self.frame_start..])
        };
        let dropped = self.out.len() - keep;
        self.out.truncate(keep);
        self.drain_written_frames();
        dropped
    }
}

/// The length, header included, of the frame `frame` starts with. `out` holds only frames
/// this side wrote whole: unmasked, each header complete.
fn framed_len(frame: &[u8]) -> usize {
    match frame[1] & 0x7f {
        126 => 4 + usize::from(u16::from_be_bytes([frame[2], frame[3]])),
        127 => {
            let mut len = [0; 8];
            len.copy_from_slice(&frame[2..10]);
            10 + u64::from_be_bytes(len) as usize
        }
        len => 2 + usize::from(len),
    }
}

/// Whether a server close with `code` drops what is queued for the client rather than
/// writing it first: a client that cannot keep up, or one that broke the protocol, is owed
/// nothing more, and its backlog is exactly the memory the close should free.
fn discards_backlog(code: CloseCode) -> bool {
    matches!(
        code,
        CloseCode::SlowClient
            | CloseCode::ProtocolViolation
            | CloseCode::WsProtocolError
            | CloseCode::WsInvalidPayload
            | CloseCode::WsMessageTooBig
    )
}

/// Counts kept on the thread and added to the endpoint's shared counters at each flush.
#[derive(Default)]
struct LocalCounts {
    messages_sent: u64,
    bytes_sent: u64,
    messages_received: u64,
    bytes_received: u64,
}

/// The WebSocket connections of one shard, driven by the shard's own thread: no task per
/// connection, no lock, no hand-off between threads. A message a client sends goes from the
/// kernel to the shard in one read; a message the shard sends is framed into the
/// connection's buffer and written with one `write` per connection per turn.
///
/// The sockets sit in an epoll set of the links' own, which the shard's loop awaits as one
/// file descriptor beside its UDP socket ([`WsLinks::readable`]). A driver calls, each turn:
///
/// 1. [`handle_io`](WsLinks::handle_io) when [`readable`](WsLinks::readable) fires: reads
///    every ready socket, parses frames, answers pings, and queues [`WsLinkEvent`]s;
/// 2. [`handle_timeout`](WsLinks::handle_timeout) when [`poll_timeout`](WsLinks::poll_timeout)
///    is due: idle timeouts, keepalive pings, close deadlines;
/// 3. [`poll_event`](WsLinks::poll_event) until `None`;
/// 4. [`send`](WsLinks::send) and [`close`](WsLinks::close) as the rooms decide;
/// 5. [`flush`](WsLinks::flush) once at the end: each connection given something writes it.
///
/// A client that does not drain its socket is handled per channel kind, as the outbox of
/// the task-driven transports does: reliable bytes wait in order up to a bound, checked on
/// every message (past it the connection closes with [`CloseCode::SlowClient`], and
/// everything not yet handed to the socket is discarded but the rest of the frame being
/// written, so the close frame is next on the wire); a sequenced channel keeps only its
/// newest unsent message (latest wins, never a queue of stale snapshots); unreliable
/// messages wait in a bounded queue that drops its oldest.
pub struct WsLinks {
    epoll: AsyncFd<OwnedFd>,
    conns: Vec<Option<Conn>>,
    generations: Vec<u32>,
    free: Vec<usize>,
    live: usize,
    dirty: Vec<usize>,
    events: VecDeque<WsLinkEvent>,
    /// Connections whose read budget ran out with data left: read again next turn.
    again: Vec<usize>,
    next_sweep: Option<Instant>,
    counts: LocalCounts,
    counters: Option<Arc<WsCounters>>,
    ready: Vec<libc::epoll_event>,
    /// Where every read lands first (see [`read`](Self::read)).
    scratch: Vec<u8>,
}

impl std::fmt::Debug for WsLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsLinks")
            .field("connections", &self.live)
            .finish_non_exhaustive()
    }
}

impl WsLinks {
    /// An empty set. Must be called inside a tokio runtime with I/O enabled: the set's epoll
    /// descriptor is registered with it.
    pub fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is a new
        // descriptor that nothing else owns.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            // SAFETY: the AsyncFd owns `owned`, so the descriptor stays open and the same for
            // its whole life.
            epoll: unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
                .map_err(|error| error.into_parts().1)?,
            conns: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            live: 0,
            dirty: Vec::new(),
            events: VecDeque::new(),
            again: Vec::new(),
            next_sweep: None,
            counts: LocalCounts::default(),
            counters: None,
            ready: vec![libc::epoll_event { events: 0, u64: 0 }; EPOLL_BATCH],
            scratch: vec![0; READ_CHUNK],
        })
    }

    /// Connections held (open or closing).
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no connection is held.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Takes over an admitted client: sends the accepted message (the endpoint's
    /// parameters with `tick_rate_hz`, the rate of the room the player is seated in), then
    /// reads what the client sent after its token. The caller has seated the player, so
    /// anything the player's room sends from now on reaches them after the accepted message.
    pub fn attach(
        &mut self,
        now: Instant,
        socket: WsSocket,
        tick_rate_hz: u8,
    ) -> io::Result<WsLinkId> {
        let link = self.insert(now, socket)?;
        let conn = self.conn_mut(link).expect("just inserted");
        let accepted = conn.shared.accepted_at(tick_rate_hz);
        frame::write_frame(&mut conn.out, opcode::BINARY, &[], &accepted);
        self.mark_dirty(link.index());
        self.parse_held(link.index(), now);
        Ok(link)
    }

    /// Refuses an admitted client the caller could not seat: a close frame with `code` and
    /// `reason`, then the connection lingers for the client's answer as any close does.
    pub fn refuse(&mut self, now: Instant, socket: WsSocket, code: CloseCode, reason: &str) {
        if let Ok(link) = self.insert(now, socket) {
            self.close_quietly(link.index(), now, code, reason);
        }
    }

    fn insert(&mut self, now: Instant, socket: WsSocket) -> io::Result<WsLinkId> {
        let WsSocket {
            stream,
            leftover,
            shared,
            slot,
            ..
        } = socket;
        if self.counters.is_none() {
            self.counters = Some(shared.counters.clone());
        }
        let index = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.generations.push(0);
            self.conns.len() - 1
        });
        self.generations[index] = self.generations[index].wrapping_add(1);
        let generation = self.generations[index];
        let link = WsLinkId::new(index, generation);
        let fd = stream.fd();
        if let Err(error) = self.epoll_ctl(libc::EPOLL_CTL_ADD, fd, interest(false), link) {
            self.free.push(index);
            return Err(error);
        }
        let channels = shared.channels.len();
        self.conns[index] = Some(Conn {
            generation,
            stream,
            shared,
            _slot: slot,
            state: State::Open,
            reader: MessageReader::default(),
            inbuf: leftover,
            out: Vec::new(),
            written: 0,
            frame_start: 0,
            blocked: false,
            dirty: false,
            sequenced: vec![None; channels],
            unreliable: VecDeque::new(),
            unreliable_bytes: 0,
            last_received: now,
            last_ping: now,
        });
        self.live += 1;
        self.next_sweep.get_or_insert(now + SWEEP_INTERVAL);
        Ok(link)
    }

    /// Queues `message` for `link` on `channel`, without waiting; see [`WsLinks`] for what
    /// a client that does not read gets.
    pub fn send(&mut self, link: WsLinkId, channel: u8, message: Bytes) -> Result<(), WsSendError> {
        let Some(conn) = self.conn_mut(link) else {
            return Err(WsSendError::Closed);
        };
        match conn.queue(channel, message) {
            Ok(Queued::Framed(len)) => {
                self.counts.messages_sent += 1;
                self.counts.bytes_sent += len as u64;
                self.mark_dirty(link.index());
                Ok(())
            }
            Ok(Queued::Aside) => Ok(()),
            Err(error) => {
                if let WsSendError::SlowClient { queued, len, max } = error {
                    let reason = format!(
                        "reliable queue of {queued} bytes plus {len} exceeds the maximum of {max}"
                    );
                    self.close_loudly(link.index(), Instant::now(), CloseCode::SlowClient, &reason);
                }
                Err(error)
            }
        }
    }

    /// What `link` holds unwritten; `None` once it is gone.
    pub fn depth(&mut self, link: WsLinkId) -> Option<WsLinkDepth> {
        let conn = self.conn_mut(link)?;
        Some(WsLinkDepth {
            unwritten_bytes: conn.pending(),
            buffer_capacity: conn.out.capacity(),
            unreliable_messages: conn.unreliable.len(),
            sequenced_pending: conn.sequenced.iter().filter(|slot| slot.is_some()).count(),
        })
    }

    /// Whether `link` is open: not closing, not gone.
    pub fn is_open(&mut self, link: WsLinkId) -> bool {
        self.conn_mut(link)
            .is_some_and(|conn| conn.state == State::Open)
    }

    /// Closes `link` with `code` and `reason` (a kick, a replacement, a shutdown). No
    /// [`WsLinkEvent::Closed`] follows: the caller knows.
    pub fn close(&mut self, link: WsLinkId, code: CloseCode, reason: &str) {
        if let Some(conn) = self.conn_mut(link) {
            if code == CloseCode::AlreadyConnected {
                WsCounters::bump(&conn.shared.counters.connections_replaced);
            }
            self.close_quietly(link.index(), Instant::now(), code, reason);
        }
    }

    /// Closes every connection with `code` and `reason`, as [`close`](Self::close) does.
    pub fn close_all(&mut self, code: CloseCode, reason: &str) {
        let now = Instant::now();
        for index in 0..self.conns.len() {
            if self.conns[index].is_some() {
                self.close_quietly(index, now, code, reason);
            }
        }
    }

    /// Waits until some connection may have something to read (or may take writes again).
    /// Call [`handle_io`](Self::handle_io) after it returns.
    pub async fn readable(&self) -> io::Result<()> {
        if !self.again.is_empty() {
            return Ok(());
        }
        let mut guard = self.epoll.readable().await?;
        guard.retain_ready();
        Ok(())
    }

    /// Reads every socket that is ready, and writes to those that can take their backlog.
    pub fn handle_io(&mut self, now: Instant) {
        let again = std::mem::take(&mut self.again);
        for &index in &again {
            self.read(index, now);
        }
        self.again = worklist::reuse(again, &mut self.again);
        // Taken before the wait, so readiness that arrives during it is not cleared below.
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let guard = match self.epoll.poll_read_ready(&mut context) {
            std::task::Poll::Ready(Ok(guard)) => Some(guard),
            _ => None,
        };
        // SAFETY: `ready` holds EPOLL_BATCH events; the kernel writes at most that many.
        let count = unsafe {
            libc::epoll_wait(
                self.epoll.get_ref().as_raw_fd(),
                self.ready.as_mut_ptr(),
                EPOLL_BATCH as i32,
                0,
            )
        };
        let count = usize::try_from(count).unwrap_or(0);
        if let Some(mut guard) = guard
            && count < EPOLL_BATCH
        {
            // Every ready socket is about to be read until it would block (or listed in
            // `again`): the next readiness is a new event. A full batch may have more.
            guard.clear_ready();
        }
        for i in 0..count {
            let event = self.ready[i];
            let link = WsLinkId(event.u64);
            let bits = event.events;
            if self.conn_mut(link).is_none() {
                continue;
            }
            let index = link.index();
            if bits & (libc::EPOLLOUT as u32) != 0 {
                self.write_backlog(index);
            }
            if bits & ((libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32)
                != 0
            {
                self.read(index, now);
            }
        }
    }

    /// The next deadline (idle timeouts, pings, close deadlines), if any connection is held.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Runs what is due: idle clients are closed, quiet ones pinged, closes past their
    /// deadline dropped.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_sweep.is_none_or(|at| at > now) {
            return;
        }
        for index in 0..self.conns.len() {
            let Some(conn) = self.conns[index].as_mut() else {
                continue;
            };
            let timings = conn.shared.timings;
            match conn.state {
                State::Open
                    if now.saturating_duration_since(conn.last_received)
                        >= timings.idle_timeout =>
                {
                    WsCounters::bump(&conn.shared.counters.closed_idle);
                    let reason = format!("nothing received for {:?}", timings.idle_timeout);
                    self.close_loudly(index, now, CloseCode::TimedOut, &reason);
                }
                // Pinged by what it has *received*, not written: a client that only listens
                // while the room streams to it (a spectator; a browser, which cannot send
                // pings of its own) answers with a pong and so stays connected.
                State::Open => {
                    if !conn.blocked
                        && now.saturating_duration_since(conn.last_received)
                            >= timings.ping_interval
                        && now.saturating_duration_since(conn.last_ping) >= timings.ping_interval
                    {
                        frame::write_frame(&mut conn.out, opcode::PING, &[], &[]);
                        conn.last_ping = now;
                        WsCounters::bump(&conn.shared.counters.pings_sent);
                        self.mark_dirty(index);
                    }
                }
                State::Closing { deadline, .. } if now >= deadline => {
                    if conn.pending() > 0 {
                        WsCounters::bump(&conn.shared.counters.close_timeouts);
                    }
                    self.remove(index);
                }
                State::Closing { .. } => {}
            }
        }
        self.next_sweep = (self.live > 0).then(|| now + SWEEP_INTERVAL);
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<WsLinkEvent> {
        self.events.pop_front()
    }

    /// Writes what each connection was given since the last flush.
    pub fn flush(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        for &index in &dirty {
            if let Some(conn) = self.conns[index].as_mut() {
                conn.dirty = false;
                self.write_backlog(index);
            }
        }
        self.dirty = worklist::reuse(dirty, &mut self.dirty);
        if let Some(counters) = &self.counters {
            let counts = std::mem::take(&mut self.counts);
            for (counter, n) in [
                (&counters.messages_sent, counts.messages_sent),
                (&counters.bytes_sent, counts.bytes_sent),
                (&counters.messages_received, counts.messages_received),
                (&counters.bytes_received, counts.bytes_received),
            ] {
                if n > 0 {
                    WsCounters::add(counter, n);
                }
            }
        }
    }

    fn conn_mut(&mut self, link: WsLinkId) -> Option<&mut Conn> {
        self.conns
            .get_mut(link.index())?
            .as_mut()
            .filter(|conn| conn.generation == link.generation())
    }

    fn link_of(&self, index: usize) -> WsLinkId {
        WsLinkId::new(index, self.generations[index])
    }

    fn mark_dirty(&mut self, index: usize) {
        if let Some(conn) = self.conns[index].as_mut()
            && !conn.dirty
        {
            conn.dirty = true;
            self.dirty.push(index);
        }
    }

    /// Reads what the socket has (up to the budget) and parses it as it comes.
    fn read(&mut self, index: usize, now: Instant) {
        let mut budget = READ_BUDGET;
        // Reads land in the links' one scratch buffer and are parsed there; only the tail
        // of a frame that has not fully arrived is kept by the connection. So a connection
        // holds no read buffer between messages, and nothing is zeroed per read.
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(conn) = self.conns[index].as_mut() {
            if budget == 0 {
                self.again.push(index);
                break;
            }
            match conn.stream.read(&mut scratch) {
                Ok(ReadOutcome::Data(n)) => {
                    budget = budget.saturating_sub(n.max(1));
                    // A short read of plain TCP emptied the socket: asking again would only
                    // get EAGAIN, one more syscall per input. Anything arriving later is a new
                    // readiness event (`handle_io` clears readiness before reading).
                    let drained = n > 0 && n < scratch.len() && conn.stream.short_read_drains();
                    if conn.inbuf.is_empty() {
                        let consumed = self.parse(index, now, &mut scratch[..n]);
                        if let Some(conn) = self.conns[index].as_mut() {
                            conn.inbuf.extend_from_slice(&scratch[consumed..n]);
                        }
                    } else {
                        // The connection's input never holds more than one largest frame:
                        // parsing refuses a longer one from its header.
                        conn.inbuf.extend_from_slice(&scratch[..n]);
                        self.parse_held(index, now);
                    }
                    if drained {
                        break;
                    }
                }
                Ok(ReadOutcome::WouldBlock) => break,
                Ok(ReadOutcome::Closed) => {
                    self.lost(index);
                    break;
                }
                Err(error) => {
                    tracing::debug!(%error, "websocket read failed");
                    self.lost(index);
                    break;
                }
            }
        }
        self.scratch = scratch;
    }

    /// Parses what the connection holds (the leftover after its token, or a frame's tail
    /// and what followed it).
    fn parse_held(&mut self, index: usize, now: Instant) {
        let Some(conn) = self.conns[index].as_mut() else {
            return;
        };
        let mut held = std::mem::take(&mut conn.inbuf);
        let consumed = self.parse(index, now, &mut held);
        if let Some(conn) = self.conns[index].as_mut() {
            held.drain(..consumed);
            if held.capacity() > KEEP_BUFFER_BYTES && held.is_empty() {
                held = Vec::new();
            }
            conn.inbuf = held;
        }
    }

    /// Parses whole frames out of `input` and acts on each; how many bytes it consumed
    /// (everything, once the connection stopped reading messages).
    fn parse(&mut self, index: usize, now: Instant, input: &mut [u8]) -> usize {
        let mut pos = 0;
        loop {
            let Some(conn) = self.conns[index].as_mut() else {
                return input.len();
            };
            if matches!(
                conn.state,
                State::Closing {
                    parseable: false,
                    ..
                }
            ) {
                return input.len();
            }
            let max = conn.shared.max_inbound;
            let item = match conn.reader.next(input, &mut pos, max) {
                Ok(Some(item)) => item,
                Ok(None) => return pos,
                Err(error) => {
                    self.framing_error(index, now, &error);
                    return input.len();
                }
            };
            if !self.inbound(index, now, item) {
                return input.len();
            }
        }
    }

    /// Acts on one complete item from the client; false once the connection stopped
    /// reading messages (closing or gone).
    fn inbound(&mut self, index: usize, now: Instant, item: Inbound) -> bool {
        let link = self.link_of(index);
        let Some(conn) = self.conns[index].as_mut() else {
            return false;
        };
        let open = conn.state == State::Open;
        conn.last_received = now;
        match item {
            Inbound::Pong => true,
            Inbound::Ping(payload) => {
                // Only a connection keeping up answers: a pong is not worth queueing behind
                // a backlog, and the next ping gets one.
                if open && !conn.blocked {
                    frame::write_frame(&mut conn.out, opcode::PONG, &[], &payload);
                    self.mark_dirty(index);
                }
                true
            }
            Inbound::Close(frame) => {
                if let State::Closing { answered, .. } = &mut conn.state {
                    // The answer to our close: done once our frame is out.
                    *answered = true;
                    if conn.pending() == 0 {
                        self.remove(index);
                    }
                    return false;
                }
                let code = frame.as_ref().map(|(code, _)| *code);
                conn.drop_aside();
                // Echo the close (RFC 6455 §5.5.1); the socket is dropped once it is out.
                match code {
                    Some(code) => frame::write_close(&mut conn.out, code, ""),
                    None => frame::write_frame(&mut conn.out, opcode::CLOSE, &[], &[]),
                }
                conn.state = State::Closing {
                    deadline: now + conn.shared.timings.close_timeout,
                    parseable: true,
                    answered: true,
                };
                let reason = frame.map(|(_, reason)| reason).unwrap_or_default();
                self.events.push_back(WsLinkEvent::Closed {
                    link,
                    closed: WsClosed::ByClient { code, reason },
                });
                self.mark_dirty(index);
                false
            }
            // Data after our close is discarded while we wait for the answer.
            Inbound::Text | Inbound::Binary(_) if !open => true,
            Inbound::Text => {
                WsCounters::bump(&conn.shared.counters.closed_protocol_violation);
                self.close_loudly(
                    index,
                    now,
                    CloseCode::ProtocolViolation,
                    "text message; tickwire messages are binary",
                );
                false
            }
            Inbound::Binary(message) => {
                let len = message.len();
                match parse_data_message(message, conn.shared.channels.len()) {
                    Ok((channel, message)) => {
                        self.counts.messages_received += 1;
                        self.counts.bytes_received += len as u64 - 1;
                        self.events.push_back(WsLinkEvent::Message {
                            link,
                            channel,
                            message,
                        });
                        true
                    }
                    Err(error) => {
                        WsCounters::bump(&conn.shared.counters.closed_protocol_violation);
                        self.close_loudly(
                            index,
                            now,
                            CloseCode::ProtocolViolation,
                            &error.to_string(),
                        );
                        false
                    }
                }
            }
        }
    }

    fn framing_error(&mut self, index: usize, now: Instant, error: &FrameError) {
        let Some(conn) = self.conns[index].as_mut() else {
            return;
        };
        if conn.state != State::Open {
            // Lingering after our close: the rest is discarded.
            if let State::Closing { parseable, .. } = &mut conn.state {
                *parseable = false;
            }
            return;
        }
        let code = CloseCode::from(error);
        let counters = &conn.shared.counters;
        WsCounters::bump(if code == CloseCode::WsMessageTooBig {
            &counters.closed_too_large
        } else {
            &counters.closed_protocol_violation
        });
        self.close_loudly(index, now, code, &error.to_string());
        if let Some(State::Closing { parseable, .. }) =
            self.conns[index].as_mut().map(|conn| &mut conn.state)
        {
            *parseable = false;
        }
    }

    /// Starts a server close and tells the driver (an event).
    fn close_loudly(&mut self, index: usize, now: Instant, code: CloseCode, reason: &str) {
        if self.close_quietly(index, now, code, reason) {
            self.events.push_back(WsLinkEvent::Closed {
                link: self.link_of(index),
                closed: WsClosed::ByServer {
                    code,
                    reason: frame::clamp_close_reason(reason).to_owned(),
                },
            });
        }
    }

    /// Starts a server close: unsent unreliable messages are dropped; reliable ones stay
    /// ahead of the close frame, written within the close timeout, unless the code
    /// [discards the backlog](discards_backlog), in which case only the frame being written
    /// finishes first. False if it was closing.
    fn close_quietly(&mut self, index: usize, now: Instant, code: CloseCode, reason: &str) -> bool {
        let Some(conn) = self.conns[index].as_mut() else {
            return false;
        };
        if conn.state != State::Open {
            return false;
        }
        conn.drop_aside();
        let discard = discards_backlog(code);
        if discard {
            let dropped = conn.discard_unwritten();
            WsCounters::add(&conn.shared.counters.discarded_bytes, dropped as u64);
        }
        frame::write_close(&mut conn.out, code.code(), reason);
        if discard {
            // What was dropped gives its memory back now, not once the close frame is out.
            conn.out.shrink_to(KEEP_BUFFER_BYTES);
        }
        conn.state = State::Closing {
            deadline: now + conn.shared.timings.close_timeout,
            parseable: true,
            answered: false,
        };
        self.mark_dirty(index);
        true
    }

    /// The socket ended or failed: tell the driver if it was open, and drop it.
    fn lost(&mut self, index: usize) {
        let Some(conn) = self.conns[index].as_ref() else {
            return;
        };
        if conn.state == State::Open {
            self.events.push_back(WsLinkEvent::Closed {
                link: self.link_of(index),
                closed: WsClosed::Lost,
            });
        }
        self.remove(index);
    }

    fn remove(&mut self, index: usize) {
        if let Some(conn) = self.conns[index].take() {
            WsCounters::bump(&conn.shared.counters.connections_closed);
            // Closing the descriptor takes it out of the epoll set.
            drop(conn);
            self.live -= 1;
            self.free.push(index);
        }
    }

    /// Writes the connection's backlog: committed bytes first, then (once they are out)
    /// what waited aside while it was blocked.
    fn write_backlog(&mut self, index: usize) {
        let Some(conn) = self.conns[index].as_mut() else {
            return;
        };
        let was_blocked = conn.blocked;
        let mut failed = false;
        loop {
            if conn.pending() > 0 {
                match conn.stream.write_some(&conn.out[conn.written..]) {
                    Ok(n) => {
                        conn.written += n;
                        if conn.pending() > 0 {
                            conn.blocked = true;
                            conn.compact();
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::debug!(%error, "websocket write failed");
                        failed = true;
                        break;
                    }
                }
            }
            conn.out.clear();
            conn.written = 0;
            conn.frame_start = 0;
            if conn.out.capacity() > KEEP_BUFFER_BYTES {
                conn.out = Vec::new();
            }
            if !take_aside(conn, &mut self.counts) {
                conn.blocked = match conn.stream.has_backlog() {
                    Ok(backlog) => backlog,
                    Err(_) => {
                        failed = true;
                        false
                    }
                };
                break;
            }
        }
        if failed {
            self.lost(index);
            return;
        }
        let conn = self.conns[index].as_mut().expect("present");
        if let State::Closing { answered: true, .. } = conn.state
            && conn.pending() == 0
            && !conn.blocked
        {
            // Both closes are out: the server drops the TCP connection first.
            self.remove(index);
            return;
        }
        let blocked = conn.blocked;
        if blocked != was_blocked {
            let fd = conn.fd();
            let link = self.link_of(index);
            if self
                .epoll_ctl(libc::EPOLL_CTL_MOD, fd, interest(blocked), link)
                .is_err()
            {
                self.lost(index);
            }
        }
    }

    fn epoll_ctl(&self, op: i32, fd: RawFd, events: u32, link: WsLinkId) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events,
            u64: link.0,
        };
        // SAFETY: `event` is a valid epoll_event for the call's duration; the kernel copies
        // it.
        let result =
            unsafe { libc::epoll_ctl(self.epoll.get_ref().as_raw_fd(), op, fd, &mut event) };
        if result < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// Level-triggered readability always; writability only while blocked (it would fire on
/// every wait otherwise).
fn interest(blocked: bool) -> u32 {
    let mut events = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
    if blocked {
        events |= libc::EPOLLOUT as u32;
    }
    events
}

/// Moves what waited aside while blocked into the write buffer; false if there was none.
fn take_aside(conn: &mut Conn, counts: &mut LocalCounts) -> bool {
    let mut any = false;
    for (channel, slot) in conn.sequenced.iter_mut().enumerate() {
        if let Some(message) = slot.take() {
            frame::write_frame(&mut conn.out, opcode::BINARY, &[channel as u8], &message);
            counts.messages_sent += 1;
            counts.bytes_sent += message.len() as u64;
            any = true;
        }
    }
    for (channel, message) in conn.unreliable.drain(..) {
        frame::write_frame(&mut conn.out, opcode::BINARY, &[channel], &message);
        counts.messages_sent += 1;
        counts.bytes_sent += message.len() as u64;
        any = true;
    }
    conn.unreliable_bytes = 0;
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framed_len_reads_each_header_form() {
        // The channel byte plus payloads at each edge of the 7-bit, 16-bit and 64-bit forms.
        for payload in [0, 124, 125, 65534, 65535, 300_000] {
            let mut out = Vec::new();
            frame::write_frame(&mut out, opcode::BINARY, &[0], &vec![0; payload]);
            let next = out.len();
            frame::write_close(&mut out, 4005, "slow");
            assert_eq!(framed_len(&out), next, "a frame of {} bytes", payload + 1);
            assert_eq!(
                next + framed_len(&out[next..]),
                out.len(),
                "the close frame after it"
            );
        }
    }
}
