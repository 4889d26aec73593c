//! The WebTransport sessions of one shard, driven by the shard's own thread: see [`WtLinks`].

mod packets;
mod session;
mod tls;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use quinn_proto::{Endpoint, EndpointConfig, ServerConfig};

use self::packets::dont_fragment;
use self::session::{Conn, Ctx, Phase, Shared};
use self::tls::{quic_crypto, quic_crypto_of};
use super::config::{
    MIN_RENEWAL, RandomConnectionIds, WtCertificate, WtConfig, WtError, self_signed,
    transport_config,
};
use super::framing::max_frame_bytes;
use super::stats::{WtCounters, WtCounts};
use crate::due::{DueTimes, earliest};
use crate::udp::{RecvBatch, RecvStats, SendBatch, SendStats};
use crate::ws::{
    AdmittedClient, CloseCode, TlsIdentity, WsClosed, WsConfig, WsCounters, WsEndpoint,
    WsSendError, WsStats,
};

slot_id! {
    /// Identifies one session among a [`WtLinks`]' for as long as it lives; never reused.
    WtLinkId
}

/// What happened on a session.
#[derive(Debug)]
pub enum WtLinkEvent {
    /// The client's login (its connect token and proof) arrived on its control stream. The
    /// caller checks it ([`WtLinks::admit`]) and answers with [`WtLinks::accept`] or [`WtLinks::refuse`] within
    /// the handshake timeout (counted from the session's first packet); past it the session
    /// is closed with [`CloseCode::ServerFull`] and reported [`Closed`](Self::Closed).
    Token {
        /// Which session.
        link: WtLinkId,
        /// The login frame's body (unchecked): the token, then the proof.
        token: Bytes,
        /// The client's address.
        peer: SocketAddr,
    },
    /// A message from an accepted client: its channel and payload.
    Message {
        /// Which session.
        link: WtLinkId,
        /// The channel id (checked against the channels).
        channel: u8,
        /// The payload.
        message: Bytes,
    },
    /// A session whose token the caller had ended or started closing, other than by
    /// [`WtLinks::close`] or [`WtLinks::refuse`]; nothing more comes from it and sends to it
    /// are refused. The client's close (its close frame, a page's session close or a QUIC
    /// close with a code in 4000–4999) is [`WsClosed::ByClient`]; a session that broke or
    /// went quiet past the idle timeout is [`WsClosed::Lost`]; one this side closed (a bad
    /// frame, a slow client) is [`WsClosed::ByServer`].
    Closed {
        /// Which session.
        link: WtLinkId,
        /// How.
        closed: WsClosed,
    },
}

/// The WebTransport transport's counters: its own ([`WtCounts`]) and the message layer's
/// ([`WsStats`], kept apart from the WebSocket transport's). Every shard's [`WtLinks`]
/// adds into one set ([`WtLinks::with_meters`]), so a server reads its transport's totals
/// in one place.
#[derive(Debug, Clone, Default)]
pub struct WtMeters {
    counters: Arc<WtCounters>,
    messages: Arc<WsCounters>,
}

impl WtMeters {
    /// The message layer's counters (accepted, refused by reason, messages).
    pub fn stats(&self) -> WsStats {
        self.messages.snapshot()
    }

    /// The transport's own counters (sessions, datagrams, frames, refusals at the door).
    pub fn counts(&self) -> WtCounts {
        self.counters.snapshot()
    }
}

/// Counts kept on the thread and added to the shared counters at each flush.
#[derive(Debug, Default)]
struct LocalCounts {
    messages_sent: u64,
    bytes_sent: u64,
    messages_received: u64,
    bytes_received: u64,
    datagrams_sent: u64,
    datagrams_received: u64,
    frames_sent: u64,
    frames_received: u64,
}

/// Datagrams one [`WtLinks::handle_io`] reads at most before returning, so one turn of a
/// flooded socket still ends.
const READ_BUDGET: usize = 1024;
/// Slots of the send batch: a flush to many sessions goes out in few `sendmmsg` calls.
const SEND_BATCH: usize = 256;
/// Datagrams one `poll_transmit` may build for one session (GSO-style, split into slots).
const MAX_SEGMENTS: usize = 16;
/// The blocks received datagrams are copied into: one allocation for dozens of a
/// client's small packets (inputs, acks), freed when quinn has dropped the last of them.
/// Small, because a packet quinn keeps keeps its block: a stream's out-of-order chunks
/// (at most about a hundred full packets' worth before quinn compacts them) pin that many
/// blocks. The datagrams the sessions send are built in blocks of each session's own
/// (`Conn::send_block`): quinn holds a slow client's queue (64 KiB) for seconds, and a
/// shared block kept per queued datagram would be many times what the queue holds.
const ARENA_BLOCK_BYTES: usize = 4 << 10;

/// Makes room for `len` more bytes in `arena`, taking a fresh block of `block` bytes (at
/// least `len`) when the current one has too little left; the old block is freed once its
/// last datagram is. (`reserve` would allocate just `len` each time, since quinn still
/// holds the block's earlier datagrams: an allocation per datagram, and one more for the
/// shared block's header.) Received datagrams use [`ARENA_BLOCK_BYTES`], a session's own
/// sends `Conn::send_block`'s size.
fn arena_room(arena: &mut BytesMut, len: usize, block: usize) {
    if arena.capacity() < len {
        *arena = BytesMut::with_capacity(block.max(len));
    }
}

/// The WebTransport sessions of one shard on a UDP socket of its own, driven by the shard's
/// thread as [`WsLinks`](crate::ws::WsLinks) drives WebSocket connections: QUIC
/// (`quinn-proto`, sans-IO) and HTTP/3 (`wtransport-proto`) without a task, a lock or a
/// channel per session. A datagram from a client goes from `recvmmsg` to quinn to the
/// shard in one call; what the shard sends to many sessions in one turn leaves in a few
/// `sendmmsg` calls.
///
/// A driver calls, each turn:
///
/// 1. [`handle_io`](Self::handle_io) when the socket ([`AsFd`]) is readable: reads every
///    waiting datagram (up to a budget: it returns `false` if it left some), runs QUIC,
///    HTTP/3 and each touched session, and queues [`WtLinkEvent`]s;
/// 2. [`handle_timeout`](Self::handle_timeout) when [`poll_timeout`](Self::poll_timeout)
///    is due: QUIC's timers (acknowledgements, loss, keepalive, idle), handshake and close
///    deadlines, the certificate's renewal;
/// 3. [`poll_event`](Self::poll_event) until `None`, answering each
///    [`Token`](WtLinkEvent::Token) with [`accept`](Self::accept) or
///    [`refuse`](Self::refuse);
/// 4. [`send`](Self::send) and [`close`](Self::close) as the rooms decide;
/// 5. [`flush`](Self::flush) once at the end: every session touched since the last flush
///    (and only those) builds its packets, which go out batched across sessions. Call it
///    before waiting again: it also files each touched session's next timer.
///
/// [`send`](Self::send), [`accept`](Self::accept) and [`close`](Self::close) take no time
/// argument: they act at the latest `now` the driver gave.
///
/// ```no_run
/// # use std::time::Instant;
/// # use tickwire_net::ws::{CloseCode, WsConfig, accepted_message};
/// # use tickwire_net::wt::{WtCertificate, WtConfig, WtLinkEvent, WtLinks};
/// # fn run(admit: impl Fn(&[u8]) -> bool) -> Result<(), tickwire_net::wt::WtError> {
/// let ws = WsConfig::default();
/// let accepted = accepted_message(&ws.params).unwrap();
/// let socket = std::net::UdpSocket::bind("0.0.0.0:4433")?;
/// let names = vec!["localhost".to_owned()];
/// let mut links = WtLinks::new(socket, WtConfig::default(), WtCertificate::SelfSigned(names), &ws)?;
/// loop {
///     // Wait for the socket (`links` is `AsFd`) or `links.poll_timeout()`, then:
///     let now = Instant::now();
///     while !links.handle_io(now) {}
///     links.handle_timeout(now);
///     while let Some(event) = links.poll_event() {
///         match event {
///             WtLinkEvent::Token { link, token, .. } if admit(&token) => {
///                 let _ = links.accept(link, &accepted);
///             }
///             WtLinkEvent::Token { link, .. } => links.refuse(link, CloseCode::BadToken, "bad token"),
///             WtLinkEvent::Message { link, channel, message } => {
///                 let _ = links.send(link, channel, message); // echo
///             }
///             WtLinkEvent::Closed { .. } => {}
///         }
///     }
///     links.flush(now);
/// }
/// # }
/// ```
///
/// Unreliable messages ride QUIC datagrams, whose send buffer drops its oldest past 64 KiB,
/// so a slow client never holds snapshots back; Reliable ones (and unreliable ones too large
/// for the path's datagrams) are frames on the control stream, bounded per session by the
/// outbox's `max_reliable_bytes` beyond what QUIC's windows hold (past it the session closes
/// with [`CloseCode::SlowClient`]).
pub struct WtLinks {
    socket: UdpSocket,
    socket_is_ipv6: bool,
    endpoint: Endpoint,
    /// What new connections get; replaced (same token key) when the certificate renews.
    server_config: Arc<ServerConfig>,
    config: WtConfig,
    shared: Shared,
    /// By quinn's connection handle, whose slot quinn frees only once the connection has
    /// drained (and this entry is gone).
    conns: Vec<Option<Conn>>,
    generations: Vec<u32>,
    live: usize,
    per_ip: HashMap<IpAddr, usize>,
    touched: Vec<usize>,
    dirty: Vec<usize>,
    /// Each session's next timer (QUIC's or its own deadline), by index. A timer that moves
    /// later keeps its earlier entry: the session is looked at then and filed again.
    timers: DueTimes,
    /// Scratch for the sessions whose time has come.
    expired: Vec<usize>,
    events: VecDeque<WtLinkEvent>,
    recv: Option<RecvBatch>,
    send: SendBatch,
    /// Received datagrams are copied here and split off, so quinn gets owned buffers
    /// without an allocation per datagram ([`ARENA_BLOCK_BYTES`] a block). What the
    /// sessions deliver is copied out ([`Ctx::deliver`]): a message a room keeps must not
    /// keep a block.
    arena: BytesMut,
    /// Where quinn writes a transmit.
    transmit: Vec<u8>,
    chunks: Vec<Bytes>,
    counts: LocalCounts,
    counters: Arc<WtCounters>,
    messages: Arc<WsCounters>,
    /// Datagrams dropped because the socket's send buffer was full.
    dropped_would_block: u64,
    self_signed_names: Option<Vec<String>>,
    cert_sha256: Option<String>,
    next_renewal: Option<Instant>,
    /// The latest `now` the driver gave: the time of `send`, `accept` and `close`, which
    /// take none (as [`WsLinks`](crate::ws::WsLinks)' do not), without a clock read each.
    clock: Instant,
}

impl std::fmt::Debug for WtLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WtLinks")
            .field("sessions", &self.live)
            .field("cert_sha256", &self.cert_sha256)
            .finish_non_exhaustive()
    }
}

impl WtLinks {
    /// Serves WebTransport on `socket` (bound by the caller, so its address can go into the
    /// connect tokens), with the connection parameters, close timeout and outbox bounds of
    /// `ws` (the WebSocket transport's, so both dictate the same; checked as the WebSocket
    /// endpoint checks it). Makes or loads the certificate; the socket is made nonblocking.
    pub fn new(
        socket: UdpSocket,
        config: WtConfig,
        certificate: WtCertificate,
        ws: &WsConfig,
    ) -> Result<Self, WtError> {
        Self::with_meters(socket, config, certificate, ws, WtMeters::default())
    }

    /// As [`new`](Self::new), counting into `meters` (shared with other shards' links).
    pub fn with_meters(
        socket: UdpSocket,
        config: WtConfig,
        certificate: WtCertificate,
        ws: &WsConfig,
        meters: WtMeters,
    ) -> Result<Self, WtError> {
        ws.params
            .validate()
            .map_err(crate::ws::WsConfigError::from)?;
        let (crypto, cert_sha256, self_signed_names) = match certificate {
            WtCertificate::SelfSigned(names) => {
                let (identity, hash) = self_signed(&names)?;
                (quic_crypto_of(&identity)?, Some(hash), Some(names))
            }
            WtCertificate::PemFiles { cert, key } => {
                let identity = TlsIdentity::from_pem_files(&cert, &key)
                    .map_err(|error| WtError::Certificate(error.to_string()))?;
                let (chain, key) = identity.into_parts();
                (quic_crypto(chain, key)?, None, None)
            }
        };
        socket.set_nonblocking(true)?;
        let local = socket.local_addr()?;
        // Path MTU discovery needs datagrams that are never fragmented.
        let allow_mtud = dont_fragment(&socket, local.is_ipv6()).is_ok();
        let mut server_config = ServerConfig::with_crypto(crypto);
        server_config.transport_config(Arc::new(transport_config(&ws.params)));
        let mut endpoint_config = EndpointConfig::default();
        endpoint_config.cid_generator(|| Box::new(RandomConnectionIds));
        let server_config = Arc::new(server_config);
        let endpoint = Endpoint::new(
            Arc::new(endpoint_config),
            Some(server_config.clone()),
            allow_mtud,
            None,
        );
        let shared = Shared {
            channels: ws.params.channels.clone().into(),
            max_frame: max_frame_bytes(ws.params.max_message_size),
            max_payload: ws.params.max_message_size as usize,
            max_reliable_bytes: ws.outbox.max_reliable_bytes,
            handshake_timeout: config.handshake_timeout,
            close_timeout: ws.close_timeout,
            control_opening: super::h3::control_stream_opening(),
        };
        let next_renewal = self_signed_names
            .as_ref()
            .map(|_| Instant::now() + config.renew_self_signed_every.max(MIN_RENEWAL));
        Ok(Self {
            socket,
            socket_is_ipv6: local.is_ipv6(),
            endpoint,
            server_config,
            config,
            shared,
            conns: Vec::new(),
            generations: Vec::new(),
            live: 0,
            per_ip: HashMap::new(),
            touched: Vec::new(),
            dirty: Vec::new(),
            timers: DueTimes::default(),
            expired: Vec::new(),
            events: VecDeque::new(),
            recv: Some(RecvBatch::new()),
            send: SendBatch::with_capacity(SEND_BATCH, SendBatch::DEFAULT_SLOT_SIZE),
            arena: BytesMut::new(),
            transmit: Vec::new(),
            chunks: Vec::new(),
            counts: LocalCounts::default(),
            counters: meters.counters,
            messages: meters.messages,
            dropped_would_block: 0,
            self_signed_names,
            cert_sha256,
            next_renewal,
            clock: Instant::now(),
        })
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Lowercase hex SHA-256 of the self-signed certificate in use (its DER), for a
    /// browser's `serverCertificateHashes`; `None` with an operator certificate.
    pub fn cert_sha256(&self) -> Option<&str> {
        self.cert_sha256.as_deref()
    }

    /// Sessions held: in their handshakes, open, or closing.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether every session has sent its QUIC close (or is gone): what is left is QUIC's
    /// draining period (three probe timeouts, seconds on a new path), which asks nothing
    /// more of the server. A server shutting down stops waiting here.
    pub fn all_closed(&self) -> bool {
        self.conns
            .iter()
            .flatten()
            .all(|conn| conn.phase == Phase::Closed)
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Whether `link` is accepted and open: not closing, not gone.
    pub fn is_open(&self, link: WtLinkId) -> bool {
        self.conn(link)
            .is_some_and(|conn| conn.phase == Phase::Open)
    }

    /// This transport's message-layer counters (accepted, refused by reason, messages).
    pub fn stats(&self) -> WsStats {
        self.messages.snapshot()
    }

    /// This transport's own counters (sessions, datagrams, frames, refusals at the door).
    pub fn counts(&self) -> WtCounts {
        self.counters.snapshot()
    }

    /// The socket's receive counters (`recvmmsg` calls, datagrams, drops).
    pub fn recv_stats(&self) -> RecvStats {
        self.recv
            .as_ref()
            .map(|recv| *recv.stats())
            .unwrap_or_default()
    }

    /// The socket's send counters: `syscalls` is the `sendmmsg` calls, `datagrams` the
    /// UDP datagrams they carried (many sessions' per call).
    pub fn send_stats(&self) -> SendStats {
        let mut stats = *self.send.stats();
        stats.dropped_other += self.dropped_would_block;
        stats
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<WtLinkEvent> {
        self.events.pop_front()
    }

    /// Checks `link`'s login (its connect token and the proof answering the session's
    /// challenge) with `doorman`'s admission: the one check every transport makes (the
    /// token with the used-token set they share, the proof, the server's phase, its
    /// connection cap). On success the session holds a place among the server's open
    /// connections until it ends, and the answer says who the client is: the caller seats
    /// them and calls [`accept`](Self::accept). On refusal (counted here), the code and
    /// reason to [`refuse`](Self::refuse) it with.
    pub fn admit(
        &mut self,
        link: WtLinkId,
        token: &[u8],
        doorman: &WsEndpoint,
    ) -> Result<AdmittedClient, (CloseCode, String)> {
        let Some(conn) = self
            .conns
            .get_mut(link.index())
            .and_then(Option::as_mut)
            .filter(|conn| conn.generation == link.generation())
        else {
            return Err((CloseCode::Requested, "session gone".to_owned()));
        };
        let (admitted, slot) = doorman.admit_login(token, &conn.nonce, &self.messages)?;
        conn.slot = Some(slot);
        Ok(AdmittedClient::new(
            admitted.client_id,
            admitted.user_data,
            Some(conn.peer),
        ))
    }

    /// Accepts the session whose [`Token`](WtLinkEvent::Token) the caller admitted: sends
    /// `accepted` (the connection parameters' message, framed here) first, then whatever the
    /// room sends. Messages the client sent after its token follow as events.
    pub fn accept(&mut self, link: WtLinkId, accepted: &[u8]) -> Result<(), WsSendError> {
        let now = self.clock;
        let Some((conn, mut ctx)) = self.split(link, now) else {
            return Err(WsSendError::Closed);
        };
        conn.accept(accepted, &mut ctx)?;
        self.mark_dirty(link.index());
        Ok(())
    }

    /// Refuses the session whose token the caller did not admit: a close frame with `code`
    /// and `reason`, then the QUIC close with the same code once the client closes (or the
    /// close timeout passes). No [`Closed`](WtLinkEvent::Closed) follows.
    pub fn refuse(&mut self, link: WtLinkId, code: CloseCode, reason: &str) {
        self.close(link, code, reason);
    }

    /// Queues `message` for `link` on `channel`, without waiting: a datagram for an
    /// unreliable channel when it fits the path, a frame on the control stream otherwise.
    /// Sent at the next [`flush`](Self::flush).
    pub fn send(&mut self, link: WtLinkId, channel: u8, message: Bytes) -> Result<(), WsSendError> {
        let now = self.clock;
        let Some((conn, mut ctx)) = self.split(link, now) else {
            return Err(WsSendError::Closed);
        };
        let sent = conn.send(channel, &message, &mut ctx);
        self.mark_dirty(link.index());
        sent
    }

    /// Closes `link` with `code` and `reason` (a kick, a replacement, a refusal, a
    /// shutdown): reliable data already queued, then a close frame, then the QUIC close with
    /// the same code once the client closes or the close timeout passes. No
    /// [`Closed`](WtLinkEvent::Closed) follows: the caller knows.
    pub fn close(&mut self, link: WtLinkId, code: CloseCode, reason: &str) {
        let now = self.clock;
        if let Some((conn, mut ctx)) = self.split(link, now) {
            if code == CloseCode::AlreadyConnected {
                WsCounters::bump(&ctx.messages.connections_replaced);
            }
            conn.close_server(code, reason, false, &mut ctx);
            self.mark_dirty(link.index());
        }
    }

    /// Closes every session as [`close`](Self::close) does, those still in their QUIC or
    /// HTTP/3 handshake or before their token included (the ones without a stream yet get
    /// the QUIC close with `code` at once). A server shutting down calls it with
    /// [`CloseCode::ServerShutdown`], then keeps driving the links until
    /// [`is_empty`](Self::is_empty) or its grace period ends.
    pub fn close_all(&mut self, code: CloseCode, reason: &str) {
        let now = self.clock;
        for index in 0..self.conns.len() {
            let Some(generation) = self.conns[index].as_ref().map(|conn| conn.generation) else {
                continue;
            };
            let link = WtLinkId::new(index, generation);
            if let Some((conn, mut ctx)) = self.split(link, now) {
                if code == CloseCode::ServerShutdown
                    && matches!(conn.phase, Phase::AwaitToken | Phase::AwaitAdmission)
                {
                    WsCounters::bump(&ctx.messages.refused_shutdown);
                }
                conn.close_server(code, reason, false, &mut ctx);
            }
            self.mark_dirty(index);
        }
    }

    /// The earliest deadline: a session's QUIC timer, handshake or close deadline, or the
    /// certificate's renewal.
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest(self.timers.earliest(), self.next_renewal)
    }

    /// Runs what is due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
        let mut expired = std::mem::take(&mut self.expired);
        self.timers.take_expired(now, &mut expired);
        for &index in &expired {
            let link = match self.conns[index].as_mut() {
                Some(conn) => {
                    let next = conn.next_timeout();
                    if next.is_none_or(|at| at > now) {
                        // Filed before its time (its timers moved later since): filed
                        // again, nothing to run.
                        self.timers.set(index, next);
                        continue;
                    }
                    if conn.quic.poll_timeout().is_some_and(|at| at <= now) {
                        conn.quic.handle_timeout(now);
                    }
                    WtLinkId::new(index, conn.generation)
                }
                None => continue,
            };
            if let Some((conn, mut ctx)) = self.split(link, now) {
                conn.handle_deadline(&mut ctx);
            }
            self.touch(index);
        }
        self.expired = expired;
        if self.next_renewal.is_some_and(|at| at <= now) {
            self.renew_self_signed(now);
        }
        self.drive_touched(now);
    }

    /// A fresh self-signed certificate for new connections; open sessions keep theirs. On
    /// failure the old one stays (and is logged).
    fn renew_self_signed(&mut self, now: Instant) {
        let every = self.config.renew_self_signed_every.max(MIN_RENEWAL);
        self.next_renewal = Some(now + every);
        let Some(names) = self.self_signed_names.as_deref() else {
            return;
        };
        let renewed = self_signed(names).and_then(|(identity, hash)| {
            let crypto = quic_crypto_of(&identity)?;
            Ok((crypto, hash))
        });
        match renewed {
            Ok((crypto, hash)) => {
                // The same transport settings and Retry token key: a client between its
                // Retry and its next Initial is not refused.
                let mut config = (*self.server_config).clone();
                config.crypto = crypto;
                self.server_config = Arc::new(config);
                self.endpoint
                    .set_server_config(Some(self.server_config.clone()));
                tracing::info!(cert_sha256 = %hash, "webtransport: self-signed certificate renewed");
                self.cert_sha256 = Some(hash);
            }
            Err(error) => {
                tracing::warn!(%error, "webtransport: could not renew the self-signed certificate; keeping the old one");
            }
        }
    }

    fn conn(&self, link: WtLinkId) -> Option<&Conn> {
        self.conns
            .get(link.index())?
            .as_ref()
            .filter(|conn| conn.generation == link.generation())
    }

    /// The session `link` and what it reaches while it handles something.
    fn split(&mut self, link: WtLinkId, now: Instant) -> Option<(&mut Conn, Ctx<'_>)> {
        let conn = self
            .conns
            .get_mut(link.index())?
            .as_mut()
            .filter(|conn| conn.generation == link.generation())?;
        Some((
            conn,
            Ctx {
                now,
                link,
                shared: &self.shared,
                counters: &self.counters,
                messages: &self.messages,
                counts: &mut self.counts,
                events: &mut self.events,
                chunks: &mut self.chunks,
            },
        ))
    }

    fn touch(&mut self, index: usize) {
        if let Some(conn) = self.conns[index].as_mut()
            && !conn.touched
        {
            conn.touched = true;
            self.touched.push(index);
        }
    }

    fn mark_dirty(&mut self, index: usize) {
        if let Some(conn) = self.conns[index].as_mut()
            && !conn.dirty
        {
            conn.dirty = true;
            self.dirty.push(index);
        }
    }
}

impl AsFd for WtLinks {
    /// The UDP socket, for the driver's readiness (`AsyncFd`, epoll).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

impl AsRawFd for WtLinks {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}
