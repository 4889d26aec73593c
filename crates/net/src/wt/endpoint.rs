//! The WebTransport endpoint: accepts QUIC connections within per-address and total caps,
//! takes the session's one control stream and the connect token in it within the handshake
//! timeout, admits the client through the WebSocket endpoint's core (the same token checks,
//! client-id table and hand-off), then moves messages: Reliable channels as frames on the
//! control stream, unreliable ones as datagrams.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tickwire_proto::reliable::ChannelKind;
use tokio::sync::mpsc;
use tokio::time::Instant;
use wtransport::endpoint::IncomingSession;
use wtransport::endpoint::endpoint_side::Server;
use wtransport::error::{ConnectionError, SendDatagramError, StreamReadExactError};
use wtransport::{Connection, Endpoint, Identity, RecvStream, SendStream, ServerConfig, VarInt};

use super::config::{
    MAX_EXTRA_STREAMS, MIN_RENEWAL, RandomConnectionIds, WtCertificate, WtConfig, WtError,
    client_close, self_signed, transport_config,
};
use super::framing::{
    DatagramReceiver, FRAME_HEADER_BYTES, Frame, FrameLengthError, WT_PATH, check_frame_length,
    close_frame, datagram_header_bytes, max_frame_bytes, parse_frame, put_data_frame, put_frame,
    write_datagram,
};
use super::stats::{WtCounters, WtCounts};
use crate::ws::{CloseCode, WsEndpoint, WsStats};
use crate::ws::{Closing, Outbox, Take, WsCounters};

/// The WebTransport transport of one server. Authenticated sessions are handed over as
/// [`WtSession`](super::WtSession)s through the [`WsEndpoint`] given at bind:
/// the application serves both transports the same way.
///
/// ```no_run
/// # use tickwire_net::ws::WsEndpoint;
/// # use tickwire_net::wt::{WtCertificate, WtConfig, WtEndpoint};
/// # async fn run(ws: WsEndpoint) -> Result<(), tickwire_net::wt::WtError> {
/// let socket = std::net::UdpSocket::bind("0.0.0.0:4433")?;
/// let wt = WtEndpoint::bind(
///     socket,
///     WtConfig::default(),
///     WtCertificate::SelfSigned(vec!["localhost".into()]),
///     ws,
/// )
/// .await?;
/// println!("https://localhost:{}/wt, hash {:?}", wt.local_addr()?.port(), wt.cert_sha256());
/// tokio::spawn(wt.clone().serve(std::future::pending()));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct WtEndpoint {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WtEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WtEndpoint")
            .field("cert_sha256", &self.inner.cert_sha256)
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: WtConfig,
    ws: WsEndpoint,
    endpoint: Endpoint<Server>,
    /// The names of the self-signed certificate, which is renewed; `None` with an
    /// operator's certificate.
    self_signed_names: Option<Vec<String>>,
    /// The self-signed certificate's hash, replaced at each renewal.
    cert_sha256: Mutex<Option<String>>,
    counters: Arc<WtCounters>,
    /// The message layer's counters for this transport (the WebSocket endpoint keeps its own).
    messages: Arc<WsCounters>,
    slots: Mutex<Slots>,
    /// Woken whenever the last open session ends.
    idle: tokio::sync::Notify,
}

#[derive(Default)]
struct Slots {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// A session's place under the caps, given back on drop.
struct Slot {
    inner: Arc<Inner>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut slots = lock(&self.inner.slots);
        slots.total = slots.total.saturating_sub(1);
        if slots.total == 0 {
            self.inner.idle.notify_waiters();
        }
        if let Some(count) = slots.per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                slots.per_ip.remove(&self.ip);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl WtEndpoint {
    /// Makes or loads the certificate and serves on `socket` (bound by the caller, so its
    /// address can go into the connect tokens `ws` checks first). Sessions are admitted by
    /// `ws`'s core and handed to its hand-off queue.
    pub async fn bind(
        socket: std::net::UdpSocket,
        config: WtConfig,
        certificate: WtCertificate,
        ws: WsEndpoint,
    ) -> Result<Self, WtError> {
        let (identity, cert_sha256, self_signed_names) = match certificate {
            WtCertificate::SelfSigned(names) => {
                let (identity, hash) = self_signed(&names)?;
                (identity, Some(hash), Some(names))
            }
            WtCertificate::PemFiles { cert, key } => {
                let identity = Identity::load_pemfiles(&cert, &key)
                    .await
                    .map_err(|error| {
                        WtError::Certificate(format!(
                            "{} / {}: {error}",
                            cert.display(),
                            key.display()
                        ))
                    })?;
                (identity, None, None)
            }
        };
        socket.set_nonblocking(true)?;
        let mut server = ServerConfig::builder()
            .with_bind_socket(socket)
            .with_custom_transport(identity, transport_config(&ws.config().params))
            .build();
        server
            .quic_endpoint_config_mut()
            .cid_generator(|| Box::new(RandomConnectionIds));
        let endpoint = Endpoint::server(server)?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                ws,
                endpoint,
                self_signed_names,
                cert_sha256: Mutex::new(cert_sha256),
                counters: Arc::new(WtCounters::default()),
                messages: Arc::new(WsCounters::default()),
                slots: Mutex::new(Slots::default()),
                idle: tokio::sync::Notify::new(),
            }),
        })
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.endpoint.local_addr()
    }

    /// Lowercase hex SHA-256 of the self-signed certificate in use (its DER), for a
    /// browser's `serverCertificateHashes`; `None` with an operator certificate.
    pub fn cert_sha256(&self) -> Option<String> {
        lock(&self.inner.cert_sha256).clone()
    }

    /// Replaces the self-signed certificate with a fresh one for new connections; open
    /// sessions keep theirs. On failure the old one stays (and is logged).
    fn renew_self_signed(&self, names: &[String]) {
        let renewed = self_signed(names).and_then(|(identity, hash)| {
            let address = self.inner.endpoint.local_addr()?;
            // The address is ignored: the endpoint keeps its socket (no rebind).
            let config = ServerConfig::builder()
                .with_bind_address(address)
                .with_custom_transport(identity, transport_config(&self.inner.ws.config().params))
                .build();
            self.inner.endpoint.reload_config(config, false)?;
            Ok(hash)
        });
        match renewed {
            Ok(hash) => {
                tracing::info!(cert_sha256 = %hash, "webtransport: self-signed certificate renewed");
                *lock(&self.inner.cert_sha256) = Some(hash);
            }
            Err(error) => {
                tracing::warn!(%error, "webtransport: could not renew the self-signed certificate; keeping the old one");
            }
        }
    }

    /// This transport's message-layer counters (accepted, refused by reason, messages).
    pub fn stats(&self) -> WsStats {
        self.inner.messages.snapshot()
    }

    /// This transport's own counters (sessions, datagrams, frames, refusals at the door).
    pub fn counts(&self) -> WtCounts {
        self.inner.counters.snapshot()
    }

    /// Sessions open now, handshakes included.
    pub fn session_count(&self) -> usize {
        lock(&self.inner.slots).total
    }

    /// Waits until no session is open, for at most the close timeout (and a little more:
    /// a session may have begun its close wait just now). A server shutting down calls it
    /// after telling every player, so that each session's CLOSE frame (and its code, which
    /// a browser cannot read from a QUIC close) gets out before the endpoint closes.
    pub async fn sessions_closed(&self) {
        let limit = self.inner.ws.config().close_timeout + Duration::from_millis(250);
        let _ = tokio::time::timeout(limit, async {
            loop {
                // Created before the check: `notify_waiters` reaches it from here on.
                let idle = self.inner.idle.notified();
                if self.session_count() == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await;
    }

    /// Accepts sessions until `stop` completes, then closes the endpoint (every session
    /// still open ends with [`CloseCode::ServerShutdown`]).
    pub async fn serve(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let every = self.inner.config.renew_self_signed_every.max(MIN_RENEWAL);
        let mut renew = tokio::time::interval_at(Instant::now() + every, every);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let names = self.inner.self_signed_names.clone();
        loop {
            tokio::select! {
                biased;
                () = &mut stop => break,
                _ = renew.tick(), if names.is_some() => {
                    self.renew_self_signed(names.as_deref().unwrap_or_default());
                }
                incoming = self.inner.endpoint.accept() => self.take(incoming),
            }
        }
        let code = CloseCode::ServerShutdown;
        self.inner.endpoint.close(
            VarInt::from_u32(code.code().into()),
            code.default_reason().as_bytes(),
        );
    }

    /// Sorts one connection attempt: Retry, refusal at a cap, or a session task.
    fn take(&self, incoming: IncomingSession) {
        let inner = &self.inner;
        WtCounters::bump(&inner.counters.incoming);
        if inner.config.retry && !incoming.remote_address_validated() {
            WtCounters::bump(&inner.counters.retries_sent);
            incoming.retry();
            return;
        }
        let ip = incoming.remote_address().ip().to_canonical();
        {
            let mut slots = lock(&inner.slots);
            let at_ip = slots.per_ip.get(&ip).copied().unwrap_or(0);
            if slots.total >= inner.config.max_sessions {
                drop(slots);
                WtCounters::bump(&inner.counters.refused_total);
                incoming.refuse();
                return;
            }
            if at_ip >= inner.config.max_sessions_per_ip && !inner.config.exempt.contains(&ip) {
                drop(slots);
                WtCounters::bump(&inner.counters.refused_per_ip);
                incoming.refuse();
                return;
            }
            slots.total += 1;
            *slots.per_ip.entry(ip).or_default() += 1;
        }
        let slot = Slot {
            inner: inner.clone(),
            ip,
        };
        tokio::spawn(self.clone().session(incoming, slot));
    }

    async fn session(self, incoming: IncomingSession, slot: Slot) {
        let inner = &*self.inner;
        let counters = &inner.counters;
        let deadline = Instant::now() + inner.config.handshake_timeout;
        let peer = incoming.remote_address();
        let mut incoming = std::pin::pin!(tokio::time::timeout_at(deadline, incoming));
        let request = tokio::select! {
            request = &mut incoming => request,
            () = inner.ws.stopping() => {
                // No session to send a close frame on yet: the endpoint's close (4003)
                // ends this connection. It no longer holds up `sessions_closed`.
                drop(slot);
                let _ = incoming.await;
                return;
            }
        };
        let request = match request {
            Ok(Ok(request)) => request,
            Ok(Err(_)) => {
                WtCounters::bump(&counters.handshakes_failed);
                return;
            }
            Err(_) => {
                WtCounters::bump(&counters.handshake_timeouts);
                return;
            }
        };
        if request.path() != WT_PATH {
            WtCounters::bump(&counters.refused_path);
            let _ = tokio::time::timeout_at(deadline, request.not_found()).await;
            return;
        }
        let connection = match tokio::time::timeout_at(deadline, request.accept()).await {
            Ok(Ok(connection)) => connection,
            Ok(Err(_)) => {
                WtCounters::bump(&counters.handshakes_failed);
                return;
            }
            Err(_) => {
                WtCounters::bump(&counters.handshake_timeouts);
                return;
            }
        };
        WtCounters::bump(&counters.sessions_opened);
        self.run_session(connection, peer, deadline).await;
        WtCounters::bump(&counters.sessions_closed);
    }

    async fn run_session(&self, connection: Connection, peer: SocketAddr, deadline: Instant) {
        let inner = &*self.inner;
        let counters = &inner.counters;
        let close_timeout = inner.ws.config().close_timeout;
        let timed_out = || {
            WtCounters::bump(&counters.handshake_timeouts);
            WsCounters::bump(&inner.messages.handshake_timeouts);
            format!(
                "no connect token within {:?}",
                inner.config.handshake_timeout
            )
        };
        let accepted = tokio::select! {
            accepted = tokio::time::timeout_at(deadline, connection.accept_bi()) => accepted,
            () = inner.ws.stopping() => {
                WsCounters::bump(&inner.messages.refused_shutdown);
                let code = CloseCode::ServerShutdown;
                close_connection(&connection, code, code.default_reason());
                return;
            }
        };
        let (mut send, mut recv) = match accepted {
            Ok(Ok(streams)) => streams,
            Ok(Err(_)) => return,
            Err(_) => {
                let reason = timed_out();
                close_connection(&connection, CloseCode::HandshakeTimedOut, &reason);
                return;
            }
        };
        let max_frame = max_frame_bytes(inner.ws.config().params.max_message_size);
        let read = tokio::select! {
            read = tokio::time::timeout_at(deadline, read_frame(&mut recv, max_frame)) => read,
            () = inner.ws.stopping() => {
                WsCounters::bump(&inner.messages.refused_shutdown);
                let code = CloseCode::ServerShutdown;
                refuse(&connection, &mut send, code, code.default_reason(), close_timeout).await;
                return;
            }
        };
        let token = match read {
            Ok(Ok(Some(token))) => token,
            Ok(Ok(None) | Err(ReadError::Lost)) => return,
            Ok(Err(ReadError::Length(error))) => {
                let code = match error {
                    FrameLengthError::Empty => {
                        WsCounters::bump(&inner.messages.refused_malformed);
                        CloseCode::ProtocolViolation
                    }
                    FrameLengthError::TooLarge { .. } => {
                        WsCounters::bump(&inner.messages.closed_too_large);
                        CloseCode::MessageTooLarge
                    }
                };
                refuse(
                    &connection,
                    &mut send,
                    code,
                    &error.to_string(),
                    close_timeout,
                )
                .await;
                return;
            }
            Err(_) => {
                let reason = timed_out();
                refuse(
                    &connection,
                    &mut send,
                    CloseCode::HandshakeTimedOut,
                    &reason,
                    close_timeout,
                )
                .await;
                return;
            }
        };
        WtCounters::bump(&counters.stream_frames_received);
        let admission = match inner
            .ws
            .admit(&token, Some(peer), "wt", &inner.messages, deadline)
            .await
        {
            Ok(admission) => admission,
            Err((code, reason)) => {
                refuse(&connection, &mut send, code, &reason, close_timeout).await;
                return;
            }
        };
        let mut accepted = BytesMut::new();
        put_frame(&mut accepted, inner.ws.accepted());
        if !matches!(
            tokio::time::timeout(close_timeout, send.write_all(&accepted)).await,
            Ok(Ok(()))
        ) {
            inner.ws.forget(admission.serial, &admission.outbox);
            return;
        }
        WtCounters::bump(&counters.stream_frames_sent);
        WsCounters::bump(&inner.messages.connections_accepted);
        let outbox = admission.outbox;
        let serial = admission.serial;
        admission
            .permit
            .send(crate::ws::Arrival::WebTransport(admission.connection));

        let channels = inner.ws.channels().clone();
        let reader = tokio::spawn(read_stream(
            recv,
            outbox.clone(),
            admission.inbound.clone(),
            counters.clone(),
            inner.messages.clone(),
            channels.len(),
            max_frame,
        ));
        let side = tokio::spawn(read_datagrams(
            connection.clone(),
            outbox.clone(),
            admission.inbound,
            counters.clone(),
            inner.messages.clone(),
            channels.clone(),
        ));
        write(
            &connection,
            &mut send,
            &outbox,
            &channels,
            counters,
            &inner.messages,
            close_timeout,
        )
        .await;
        WsCounters::bump(&inner.messages.connections_closed);
        inner.ws.forget(serial, &outbox);
        // The session is closed: both readers end on their own; this only makes sure.
        reader.abort();
        side.abort();
    }
}

/// Closes the QUIC connection with a tickwire close code as the application error code.
fn close_connection(connection: &Connection, code: CloseCode, reason: &str) {
    connection.close(
        VarInt::from_u32(code.code().into()),
        tickwire_proto::websocket::clamp_close_reason(reason).as_bytes(),
    );
}

/// Sends a close frame, finishes the stream and waits (within `close_timeout`) for the
/// client to acknowledge it, then closes the connection with the same code.
async fn refuse(
    connection: &Connection,
    send: &mut SendStream,
    code: CloseCode,
    reason: &str,
    close_timeout: Duration,
) {
    let frame = close_frame(code.code(), reason);
    let _ = tokio::time::timeout(close_timeout, async {
        if send.write_all(&frame).await.is_ok() && send.finish().await.is_ok() {
            // Resolves once everything written is acknowledged (or the peer stops reading).
            send.stopped().await;
        }
    })
    .await;
    close_connection(connection, code, reason);
}

/// Why reading a frame failed.
#[derive(Debug)]
enum ReadError {
    /// The length prefix is refused.
    Length(FrameLengthError),
    /// The stream or connection failed, or ended mid-frame.
    Lost,
}

/// The next frame's body: `None` when the stream ended cleanly between frames. The length
/// prefix is checked before the body is buffered.
async fn read_frame(recv: &mut RecvStream, max: usize) -> Result<Option<Bytes>, ReadError> {
    let mut prefix = [0u8; FRAME_HEADER_BYTES];
    match recv.read_exact(&mut prefix).await {
        Ok(()) => {}
        Err(StreamReadExactError::FinishedEarly(0)) => return Ok(None),
        Err(_) => return Err(ReadError::Lost),
    }
    let len = check_frame_length(prefix, max).map_err(ReadError::Length)?;
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body)
        .await
        .map_err(|_| ReadError::Lost)?;
    Ok(Some(Bytes::from(body)))
}

/// Reads the control stream's frames into `inbound` until the session closes.
async fn read_stream(
    mut recv: RecvStream,
    outbox: Arc<Outbox>,
    inbound: mpsc::Sender<(u8, Bytes)>,
    counters: Arc<WtCounters>,
    messages: Arc<WsCounters>,
    channel_count: usize,
    max_frame: usize,
) {
    let mut closing = outbox.subscribe_closing();
    let close = |code: CloseCode, reason: String| {
        outbox.close(Closing::Server(
            code,
            tickwire_proto::websocket::clamp_close_reason(&reason).into(),
        ));
    };
    while !*closing.borrow_and_update() {
        let next = tokio::select! {
            biased;
            _ = closing.changed() => continue,
            next = read_frame(&mut recv, max_frame) => next,
        };
        let body = match next {
            Ok(Some(body)) => body,
            Ok(None) | Err(ReadError::Lost) => {
                outbox.close(Closing::Lost);
                break;
            }
            Err(ReadError::Length(error @ FrameLengthError::TooLarge { .. })) => {
                WsCounters::bump(&messages.closed_too_large);
                close(CloseCode::MessageTooLarge, error.to_string());
                break;
            }
            Err(ReadError::Length(error)) => {
                WsCounters::bump(&messages.closed_protocol_violation);
                close(CloseCode::ProtocolViolation, error.to_string());
                break;
            }
        };
        WtCounters::bump(&counters.stream_frames_received);
        match parse_frame(body, channel_count) {
            Ok(Frame::Data(channel, message)) => {
                WsCounters::bump(&messages.messages_received);
                WsCounters::add(&messages.bytes_received, message.len() as u64);
                // A full queue stops reading: QUIC's flow control holds the client back.
                tokio::select! {
                    biased;
                    _ = closing.changed() => {}
                    sent = inbound.send((channel, message)) => {
                        if sent.is_err() {
                            close(CloseCode::Kicked, "released by the server".into());
                        }
                    }
                }
            }
            Ok(Frame::Close(code, reason)) => {
                outbox.close(Closing::Peer(Some(code), reason));
                break;
            }
            Err(error) => {
                WsCounters::bump(&messages.closed_protocol_violation);
                close(CloseCode::ProtocolViolation, error.to_string());
                break;
            }
        }
    }
}

/// Reads datagrams into `inbound` (dropping them when it is full: they are unreliable),
/// stops any stream past the control stream, and notices the connection's end.
async fn read_datagrams(
    connection: Connection,
    outbox: Arc<Outbox>,
    inbound: mpsc::Sender<(u8, Bytes)>,
    counters: Arc<WtCounters>,
    messages: Arc<WsCounters>,
    channels: Arc<[ChannelKind]>,
) {
    let mut receiver = DatagramReceiver::new(channels.len());
    let mut closing = outbox.subscribe_closing();
    let refused = VarInt::from_u32(CloseCode::ProtocolViolation.code().into());
    let mut extra_streams = 0u32;
    let mut stray = |outbox: &Outbox| {
        extra_streams += 1;
        WtCounters::bump(&counters.extra_streams);
        // A client that keeps opening streams is not a confused one.
        if extra_streams > MAX_EXTRA_STREAMS {
            outbox.close(Closing::Server(
                CloseCode::ProtocolViolation,
                format!("more than {MAX_EXTRA_STREAMS} streams besides the control stream").into(),
            ));
        }
    };
    loop {
        tokio::select! {
            biased;
            _ = closing.changed() => break,
            error = connection.closed() => {
                outbox.close(closed_by(error));
                break;
            }
            datagram = connection.receive_datagram() => {
                let Ok(datagram) = datagram else {
                    outbox.close(Closing::Lost);
                    break;
                };
                let delivered = match receiver.accept(datagram.payload(), &channels) {
                    Ok(message) => {
                        let len = message.1.len() as u64;
                        inbound.try_send(message).is_ok().then_some(len)
                    }
                    Err(_) => None,
                };
                match delivered {
                    Some(len) => {
                        WtCounters::bump(&counters.datagrams_received);
                        WsCounters::bump(&messages.messages_received);
                        WsCounters::add(&messages.bytes_received, len);
                    }
                    None => WtCounters::bump(&counters.datagrams_dropped),
                }
            }
            stream = connection.accept_bi() => {
                if let Ok((mut send, recv)) = stream {
                    let _ = send.reset(refused);
                    recv.stop(refused);
                    stray(&outbox);
                }
            }
            stream = connection.accept_uni() => {
                if let Ok(recv) = stream {
                    recv.stop(refused);
                    stray(&outbox);
                }
            }
        }
    }
}

/// How a connection that closed under us ended: a client's application close with a
/// tickwire code (4000–4999; a client leaving sends 4001) is the client's close; anything
/// else (HTTP/3's own codes when a page goes away, a dropped client, the idle timeout) is a
/// lost connection, whose seat is held.
fn closed_by(error: ConnectionError) -> Closing {
    match error {
        ConnectionError::ApplicationClosed(close) => {
            match client_close(close.code().into_inner(), close.reason()) {
                Some((code, reason)) => Closing::Peer(Some(code), reason),
                None => Closing::Lost,
            }
        }
        _ => Closing::Lost,
    }
}

/// Drains `outbox` onto the session until it closes: Reliable messages (and unreliable ones
/// too large for a datagram) as frames on the control stream, the rest as datagrams.
async fn write(
    connection: &Connection,
    send: &mut SendStream,
    outbox: &Outbox,
    channels: &[ChannelKind],
    counters: &WtCounters,
    messages: &WsCounters,
    close_timeout: Duration,
) {
    let mut batch = VecDeque::new();
    let mut frames = BytesMut::new();
    let mut datagram = Vec::new();
    let mut sequences = vec![0u16; channels.len()];
    let mut closing = outbox.subscribe_closing();
    // Set when closing starts: everything after must finish by then.
    let mut deadline: Option<Instant> = None;
    loop {
        if deadline.is_none() && outbox.is_closing() {
            deadline = Some(Instant::now() + close_timeout);
        }
        match outbox.take(&mut batch) {
            Take::Messages => {}
            Take::Empty => {
                outbox.notified().await;
                continue;
            }
            Take::Close(how) => {
                let deadline = deadline.unwrap_or_else(|| Instant::now() + close_timeout);
                finish(connection, send, how, deadline, counters).await;
                return;
            }
        }
        frames.clear();
        let (mut frame_count, mut sent, mut bytes) = (0u64, 0u64, 0u64);
        let max_datagram = connection.max_datagram_size();
        for (channel, message) in batch.drain(..) {
            sent += 1;
            bytes += message.len() as u64;
            let kind = channels
                .get(usize::from(channel))
                .copied()
                .unwrap_or(ChannelKind::Reliable);
            if kind != ChannelKind::Reliable {
                let header = datagram_header_bytes(kind);
                if max_datagram.is_some_and(|max| header + message.len() <= max) {
                    let sequence = &mut sequences[usize::from(channel)];
                    *sequence = sequence.wrapping_add(1);
                    write_datagram(&mut datagram, channel, kind, *sequence, &message);
                    match connection.send_datagram(&datagram) {
                        Ok(()) => {
                            WtCounters::bump(&counters.datagrams_sent);
                            continue;
                        }
                        // The path's datagram size shrank: the frame below carries it.
                        Err(SendDatagramError::TooLarge) => {}
                        Err(_) => continue,
                    }
                }
                WtCounters::bump(&counters.datagrams_too_large);
            }
            put_data_frame(&mut frames, channel, &message);
            frame_count += 1;
        }
        WsCounters::add(&messages.messages_sent, sent);
        WsCounters::add(&messages.bytes_sent, bytes);
        if frames.is_empty() {
            continue;
        }
        WtCounters::add(&counters.stream_frames_sent, frame_count);
        let written = send.write_all(&frames);
        tokio::pin!(written);
        let result = loop {
            match deadline {
                Some(deadline) => {
                    break tokio::time::timeout_at(deadline, &mut written)
                        .await
                        .map_err(|_| ())
                        .and_then(|result| result.map_err(|_| ()));
                }
                None => tokio::select! {
                    result = &mut written => break result.map_err(|_| ()),
                    // Closing started while the client is slow to read: the rest of this
                    // write now has the close timeout.
                    _ = closing.changed() => {
                        deadline = Some(Instant::now() + close_timeout);
                    }
                },
            }
        };
        if result.is_err() {
            if outbox.is_closing() {
                // The close frame cannot follow a half-written frame: the QUIC close carries
                // the code instead.
                WsCounters::bump(&messages.close_timeouts);
                if let Some(Closing::Server(code, reason)) = outbox.closing_reason() {
                    close_connection(connection, code, &reason);
                }
            } else {
                outbox.close(Closing::Lost);
            }
            return;
        }
    }
}

/// Ends the session as `how` says, by `deadline`.
async fn finish(
    connection: &Connection,
    send: &mut SendStream,
    how: Closing,
    deadline: Instant,
    counters: &WtCounters,
) {
    match how {
        Closing::Server(code, reason) => {
            let frame = close_frame(code.code(), &reason);
            let _ = tokio::time::timeout_at(deadline, async {
                if send.write_all(&frame).await.is_ok() {
                    WtCounters::bump(&counters.stream_frames_sent);
                    if send.finish().await.is_ok() {
                        // The client closes the session once it has read the frame. Its QUIC
                        // stack acknowledging the frame is not enough: a browser whose session
                        // closes before its script has read the frame reports a lost session,
                        // without the code.
                        connection.closed().await;
                    }
                }
            })
            .await;
            close_connection(connection, code, &reason);
        }
        Closing::Peer(code, _) => {
            let _ = send.finish().await;
            let code = code.unwrap_or(CloseCode::Requested.code());
            connection.close(VarInt::from_u32(code.into()), b"");
        }
        Closing::Lost => {
            let code = CloseCode::TimedOut;
            close_connection(connection, code, code.default_reason());
        }
    }
}
