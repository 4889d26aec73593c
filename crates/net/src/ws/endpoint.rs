//! The `/ws` route: upgrades the request, takes the connect token within the handshake
//! timeout, answers with the accepted message or a close, and hands the connection to the
//! application.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt, future};
use tickwire_proto::reliable::ChannelKind;
use tickwire_proto::token::CONNECT_TOKEN_BYTES;
use tickwire_proto::{ConnectionParams, ParamsError};
use tokio::sync::mpsc;

use super::auth::{AuthError, TokenAuthenticator};
use super::connection::{
    INBOUND_QUEUE, Inbound, InboundError, InboundStream, Outbound, OutboundSink, Timings,
    TransportError, WsConnection, linger, run_reader, run_writer,
};
use super::framing::{CloseCode, accepted_message, clamp_reason};
use super::outbox::{Closing, Outbox, OutboxLimits, WsSender};
use super::stats::{WsCounters, WsStats};

/// The path the WebSocket transport answers on.
pub const WS_PATH: &str = "/ws";

/// How the WebSocket endpoint runs.
#[derive(Debug, Clone)]
pub struct WsConfig {
    /// What every client is told in the accepted message; the channel kinds decide how
    /// each channel's messages are queued, `max_message_size` bounds messages both ways and
    /// `timeout` is how long a silent client is kept.
    pub params: ConnectionParams,
    /// Most WebSocket connections open at once; more are closed with
    /// [`CloseCode::ServerFull`].
    pub max_connections: usize,
    /// Time from the upgrade to the connect token's arrival, and for handing the connection
    /// to the application; past it the connection is closed with
    /// [`CloseCode::HandshakeTimedOut`].
    pub handshake_timeout: Duration,
    /// Time a close may take to write what is queued and the close frame before the
    /// connection is dropped (a client that stopped reading never takes the frame).
    pub close_timeout: Duration,
    /// Bounds of each connection's outbound queues.
    pub outbox: OutboxLimits,
}

impl Default for WsConfig {
    /// Default [`ConnectionParams`], 4096 connections, a 5 s handshake (a token is one
    /// round trip after the upgrade), a 2 s close, default outbox bounds.
    fn default() -> Self {
        Self {
            params: ConnectionParams::default(),
            max_connections: 4096,
            handshake_timeout: Duration::from_secs(5),
            close_timeout: Duration::from_secs(2),
            outbox: OutboxLimits::default(),
        }
    }
}

impl WsConfig {
    /// The largest WebSocket frame and message accepted: a channel byte and the largest
    /// message, and never less than a connect token. Longer ones close the connection with
    /// [`CloseCode::MessageTooLarge`] before they are buffered.
    pub fn max_message_bytes(&self) -> usize {
        (self.params.max_message_size as usize)
            .saturating_add(1)
            .max(CONNECT_TOKEN_BYTES)
    }
}

/// Why a [`WsConfig`] cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WsConfigError {
    /// The connection parameters are invalid.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// The reliable bound is smaller than one largest message, so any such message would
    /// close the connection.
    #[error("reliable queue bound {bound} bytes is below the max message size {max_message_size}")]
    ReliableBound {
        /// The configured bound.
        bound: usize,
        /// The dictated max message size.
        max_message_size: u32,
    },
    /// A timeout of zero would refuse every client.
    #[error("{name} must be positive")]
    ZeroTimeout {
        /// Which timeout.
        name: &'static str,
    },
}

/// The WebSocket transport of one server: checks tokens, tracks connections, counts.
///
/// ```no_run
/// # use tickwire_net::ws::{TokenAuthenticator, WsConfig, WsEndpoint};
/// # async fn run(auth: TokenAuthenticator, listener: tickwire_net::ws::HttpListener) {
/// let (handoff, mut connections) = tokio::sync::mpsc::channel(64);
/// let endpoint = WsEndpoint::new(WsConfig::default(), auth, handoff).unwrap();
/// tokio::spawn(listener.serve(endpoint.router(), std::future::pending()));
/// while let Some(mut connection) = connections.recv().await {
///     let sender = connection.sender(); // to the shard
///     tokio::spawn(async move {
///         while let Ok((channel, message)) = connection.recv().await {
///             let _ = sender.send(channel, message); // echo
///         }
///     });
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct WsEndpoint {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsEndpoint")
            .field("connections", &self.connection_count())
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: WsConfig,
    auth: TokenAuthenticator,
    handoff: mpsc::Sender<WsConnection>,
    accepted: Bytes,
    channels: Arc<[ChannelKind]>,
    counters: Arc<WsCounters>,
    /// Open connections by client id: refuses a second connection with the same id and
    /// lets `shutdown` close them all. Locked once per connect and per close.
    live: Mutex<Live>,
}

#[derive(Default)]
struct Live {
    connections: HashMap<u64, Arc<Outbox>>,
    shutting_down: bool,
}

impl WsEndpoint {
    /// An endpoint that hands each authenticated connection to `handoff`. If the receiver
    /// is not keeping up for the handshake timeout the client is closed with
    /// [`CloseCode::ServerFull`]; if it is gone, with [`CloseCode::ServerShutdown`].
    pub fn new(
        config: WsConfig,
        auth: TokenAuthenticator,
        handoff: mpsc::Sender<WsConnection>,
    ) -> Result<Self, WsConfigError> {
        config.params.validate()?;
        if config.outbox.max_reliable_bytes < config.params.max_message_size as usize {
            return Err(WsConfigError::ReliableBound {
                bound: config.outbox.max_reliable_bytes,
                max_message_size: config.params.max_message_size,
            });
        }
        for (name, timeout) in [
            ("handshake_timeout", config.handshake_timeout),
            ("close_timeout", config.close_timeout),
        ] {
            if timeout.is_zero() {
                return Err(WsConfigError::ZeroTimeout { name });
            }
        }
        let accepted = accepted_message(&config.params).ok_or(ParamsError::DurationRange)?;
        Ok(Self {
            inner: Arc::new(Inner {
                channels: config.params.channels.clone().into(),
                accepted,
                config,
                auth,
                handoff,
                counters: Arc::new(WsCounters::default()),
                live: Mutex::new(Live::default()),
            }),
        })
    }

    /// A router answering [`WS_PATH`]; merge it into the server's HTTP router. The upgrade
    /// limits frames and messages to [`WsConfig::max_message_bytes`] and negotiates no
    /// extension (so no permessage-deflate: compression costs CPU per client and invites
    /// decompression bombs).
    pub fn router(&self) -> Router {
        Router::new()
            .route(WS_PATH, get(upgrade))
            .with_state(self.clone())
    }

    /// Counters since the endpoint started.
    pub fn stats(&self) -> WsStats {
        self.inner.counters.snapshot()
    }

    /// WebSocket connections open now.
    pub fn connection_count(&self) -> usize {
        self.live().connections.len()
    }

    /// Closes every connection with [`CloseCode::ServerShutdown`] and refuses new ones the
    /// same way.
    pub fn shutdown(&self) {
        let outboxes: Vec<_> = {
            let mut live = self.live();
            live.shutting_down = true;
            live.connections.values().cloned().collect()
        };
        for outbox in outboxes {
            outbox.close(Closing::Server(
                CloseCode::ServerShutdown,
                CloseCode::ServerShutdown.default_reason().into(),
            ));
        }
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.inner
            .live
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Runs one upgraded socket: the handshake, then (if accepted) the writer until close.
    async fn run(self, sink: OutboundSink, stream: InboundStream, peer: Option<SocketAddr>) {
        let Some(accepted) = self.handshake(sink, stream, peer).await else {
            return;
        };
        let timings = self.timings();
        let counters = &self.inner.counters;
        tokio::spawn(run_reader(
            accepted.stream,
            accepted.outbox.clone(),
            accepted.inbound,
            counters.clone(),
            self.inner.channels.len(),
            timings,
        ));
        run_writer(
            accepted.sink,
            accepted.outbox.clone(),
            counters.clone(),
            timings,
        )
        .await;
        WsCounters::bump(&counters.connections_closed);
        // The close frame is out (or the client is gone): the id is free for a reconnect
        // while the reader lingers for the client's close answer.
        self.forget(accepted.client_id, &accepted.outbox);
    }

    /// Frees a client id held by `outbox`'s connection; a newer connection that replaced
    /// it keeps the id.
    pub(crate) fn forget(&self, client_id: u64, outbox: &Arc<Outbox>) {
        let mut live = self.live();
        if live
            .connections
            .get(&client_id)
            .is_some_and(|held| Arc::ptr_eq(held, outbox))
        {
            live.connections.remove(&client_id);
        }
    }

    fn timings(&self) -> Timings {
        let params = &self.inner.config.params;
        Timings {
            idle_timeout: params.timeout,
            // Often enough that a client answering pings never reaches the timeout, rarely
            // enough to cost nothing: a quarter of it (2.5 s by default).
            ping_interval: (params.timeout / 4).max(params.keepalive_interval),
            close_timeout: self.inner.config.close_timeout,
        }
    }

    async fn handshake(
        &self,
        mut sink: OutboundSink,
        mut stream: InboundStream,
        peer: Option<SocketAddr>,
    ) -> Option<Accepted> {
        let inner = &*self.inner;
        let counters = &inner.counters;
        let deadline = tokio::time::Instant::now() + inner.config.handshake_timeout;
        let shutting_down = self.live().shutting_down;
        if shutting_down {
            WsCounters::bump(&counters.refused_shutdown);
            return refuse(
                sink,
                stream,
                true,
                inner.config.close_timeout,
                CloseCode::ServerShutdown,
                "server shutting down".into(),
            )
            .await;
        }
        let token = loop {
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Err(_) => {
                    WsCounters::bump(&counters.handshake_timeouts);
                    let reason = format!(
                        "no connect token within {:?}",
                        inner.config.handshake_timeout
                    );
                    return refuse(
                        sink,
                        stream,
                        true,
                        inner.config.close_timeout,
                        CloseCode::HandshakeTimedOut,
                        reason,
                    )
                    .await;
                }
                Ok(None | Some(Err(InboundError::Failed(_))) | Some(Ok(Inbound::Close(_)))) => {
                    return None;
                }
                Ok(Some(Err(InboundError::TooLarge(what)))) => {
                    WsCounters::bump(&counters.closed_too_large);
                    return refuse(
                        sink,
                        stream,
                        false,
                        inner.config.close_timeout,
                        CloseCode::MessageTooLarge,
                        what,
                    )
                    .await;
                }
                // Control frames are the WebSocket layer's, not messages before the token.
                Ok(Some(Ok(Inbound::Control))) => {}
                Ok(Some(Ok(Inbound::Text))) => {
                    WsCounters::bump(&counters.refused_malformed);
                    let reason = format!(
                        "text message; the first message is the {CONNECT_TOKEN_BYTES}-byte connect token, binary"
                    );
                    return refuse(
                        sink,
                        stream,
                        true,
                        inner.config.close_timeout,
                        CloseCode::ProtocolViolation,
                        reason,
                    )
                    .await;
                }
                Ok(Some(Ok(Inbound::Binary(token)))) => break token,
            }
        };
        let admission = match self.admit(&token, peer, "ws", counters, deadline).await {
            Ok(admission) => admission,
            Err((code, reason)) => {
                return refuse(sink, stream, true, inner.config.close_timeout, code, reason).await;
            }
        };
        let accepted = Outbound::Binary(inner.accepted.clone());
        // The accepted message is tiny; only a client that never reads could stall it.
        if !matches!(
            tokio::time::timeout(inner.config.close_timeout, sink.send(accepted)).await,
            Ok(Ok(()))
        ) {
            self.forget(admission.client_id, &admission.outbox);
            return None;
        }
        WsCounters::bump(&counters.connections_accepted);
        let Admission {
            permit,
            connection,
            outbox,
            inbound,
            client_id,
        } = admission;
        // The application holds the connection now; the socket stays with its tasks.
        permit.send(connection);
        Some(Accepted {
            client_id,
            outbox,
            sink,
            stream,
            inbound,
        })
    }

    /// The checks every transport makes once a client's connect token is in: the token,
    /// the server's phase and capacity, a connection already open for the same client id
    /// (replaced), and room in the hand-off queue by `deadline`. On success the client id is
    /// held (give it back with [`forget`](Self::forget) if the accepted message cannot be
    /// sent) and the connection is ready to hand over; refusals are counted on `counters`
    /// and come back as the close code and reason to send.
    pub(crate) async fn admit(
        &self,
        token: &[u8],
        peer: Option<SocketAddr>,
        transport: &'static str,
        counters: &Arc<WsCounters>,
        deadline: tokio::time::Instant,
    ) -> Result<Admission<'_>, (CloseCode, String)> {
        let inner = &*self.inner;
        let authenticated = match inner.auth.authenticate(token, unix_now()) {
            Ok(authenticated) => authenticated,
            Err(error) => {
                let counter = match error {
                    AuthError::Malformed { .. } => &counters.refused_malformed,
                    AuthError::Expired { .. } => &counters.refused_expired,
                    AuthError::Replayed => &counters.refused_replayed,
                    AuthError::WrongProtocol { .. }
                    | AuthError::Tampered
                    | AuthError::WrongServer { .. } => &counters.refused_bad_token,
                };
                WsCounters::bump(counter);
                return Err((error.close_code(), error.to_string()));
            }
        };
        let client_id = authenticated.client_id;
        let outbox = Arc::new(Outbox::new(
            inner.channels.clone(),
            inner.config.outbox,
            inner.config.params.max_message_size as usize,
            counters.clone(),
        ));
        // A fresh token for a client id already connected is that client again (a new
        // network, a reloaded page): the newer connection replaces the older, which is
        // closed with the reason, rather than making the client wait for the old one to
        // time out. Tokens are single-use, so only their issuer can cause this.
        let mut replaced = None;
        let refusal = {
            let mut live = self.live();
            if live.shutting_down {
                Some((CloseCode::ServerShutdown, "server shutting down".to_owned()))
            } else if live.connections.contains_key(&client_id) {
                replaced = live.connections.insert(client_id, outbox.clone());
                None
            } else if live.connections.len() >= inner.config.max_connections {
                Some((
                    CloseCode::ServerFull,
                    format!("server full: {} connections", inner.config.max_connections),
                ))
            } else {
                live.connections.insert(client_id, outbox.clone());
                None
            }
        };
        if let Some(older) = replaced {
            WsCounters::bump(&counters.connections_replaced);
            older.close(Closing::Server(
                CloseCode::AlreadyConnected,
                "connected again elsewhere".into(),
            ));
        }
        if let Some((code, reason)) = refusal {
            WsCounters::bump(if code == CloseCode::ServerShutdown {
                &counters.refused_shutdown
            } else {
                &counters.refused_full
            });
            return Err((code, reason));
        }
        // From here the client id is held; every early return gives it back.
        let release = || self.forget(client_id, &outbox);
        let permit = match tokio::time::timeout_at(deadline, inner.handoff.reserve()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => {
                release();
                WsCounters::bump(&counters.refused_shutdown);
                return Err((CloseCode::ServerShutdown, "server shutting down".into()));
            }
            Err(_) => {
                release();
                WsCounters::bump(&counters.refused_full);
                return Err((CloseCode::ServerFull, "server busy".into()));
            }
        };
        let sender = WsSender {
            outbox: outbox.clone(),
            client_id,
            transport,
        };
        let (inbound, inbound_queue) = mpsc::channel(INBOUND_QUEUE);
        let connection = WsConnection {
            client_id,
            user_data: authenticated.user_data,
            peer,
            inbound: inbound_queue,
            sender,
        };
        Ok(Admission {
            permit,
            connection,
            outbox,
            inbound,
            client_id,
        })
    }

    /// The connection parameters every client is sent first.
    pub(crate) fn accepted(&self) -> &Bytes {
        &self.inner.accepted
    }

    /// The endpoint's configuration.
    pub(crate) fn config(&self) -> &WsConfig {
        &self.inner.config
    }

    /// Each channel's kind, by channel id.
    pub(crate) fn channels(&self) -> &Arc<[ChannelKind]> {
        &self.inner.channels
    }
}

/// A client admitted by [`WsEndpoint::admit`]: its id is held and the hand-off queue has
/// room for it.
pub(crate) struct Admission<'a> {
    /// Room in the hand-off queue: `send` the connection once the accepted message is out.
    pub(crate) permit: mpsc::Permit<'a, WsConnection>,
    /// What the application gets.
    pub(crate) connection: WsConnection,
    /// The connection's queues, which the transport's writer drains.
    pub(crate) outbox: Arc<Outbox>,
    /// Where the transport's reader puts the client's messages.
    pub(crate) inbound: mpsc::Sender<(u8, Bytes)>,
    /// The client id from the token.
    pub(crate) client_id: u64,
}

/// A connection that passed the handshake: what its reader and writer run on.
struct Accepted {
    client_id: u64,
    outbox: Arc<Outbox>,
    sink: OutboundSink,
    stream: InboundStream,
    inbound: mpsc::Sender<(u8, Bytes)>,
}

/// Closes a connection that is not handed over, with `code` and `reason`.
/// `readable` is false when the stream failed mid-frame and cannot be read any more.
async fn refuse<T>(
    mut sink: OutboundSink,
    mut stream: InboundStream,
    readable: bool,
    close_timeout: Duration,
    code: CloseCode,
    reason: String,
) -> Option<T> {
    let deadline = tokio::time::Instant::now() + close_timeout;
    let close = Outbound::Close(code.code(), clamp_reason(&reason).to_owned());
    // A client that does not read its refusal is dropped at the close timeout.
    let _ = tokio::time::timeout_at(deadline, sink.send(close)).await;
    drop(sink);
    linger(&mut stream, deadline, readable).await;
    None
}

/// Unix seconds now, for token expiry.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// The WebSocket codec's read buffer and write-batching target per connection.
/// tungstenite's defaults (128 KiB each) made a connected player cost about 150 KB of server
/// RSS once traffic had touched them; game messages are small, larger ones still pass (the
/// buffers grow for them), and the writer flushes after each batch anyway.
const CODEC_BUFFER_BYTES: usize = 8 << 10;

async fn upgrade(
    State(endpoint): State<WsEndpoint>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let limit = endpoint.inner.config.max_message_bytes();
    let counters = endpoint.inner.counters.clone();
    upgrade
        .read_buffer_size(CODEC_BUFFER_BYTES)
        .write_buffer_size(CODEC_BUFFER_BYTES)
        .max_frame_size(limit)
        .max_message_size(limit)
        .on_failed_upgrade(move |_| WsCounters::bump(&counters.upgrades_failed))
        .on_upgrade(move |socket| {
            let (sink, stream) = adapt(socket);
            endpoint.run(
                sink,
                stream,
                peer.map(|Extension(ConnectInfo(address))| address),
            )
        })
}

/// Views axum's socket through the transport-neutral types.
fn adapt(socket: WebSocket) -> (OutboundSink, InboundStream) {
    let (sink, stream) = socket.split();
    let sink = sink
        .sink_map_err(|error| -> TransportError { Box::new(error) })
        .with(|outbound: Outbound| {
            future::ready(Ok::<_, TransportError>(match outbound {
                Outbound::Binary(bytes) => Message::Binary(bytes),
                Outbound::Ping => Message::Ping(Bytes::new()),
                Outbound::Close(code, reason) => Message::Close(Some(CloseFrame {
                    code,
                    reason: reason.into(),
                })),
            }))
        });
    let stream = stream.map(|item| match item {
        Ok(Message::Binary(bytes)) => Ok(Inbound::Binary(bytes)),
        Ok(Message::Text(_)) => Ok(Inbound::Text),
        Ok(Message::Ping(_) | Message::Pong(_)) => Ok(Inbound::Control),
        Ok(Message::Close(frame)) => {
            Ok(Inbound::Close(frame.map(|frame| {
                (frame.code, frame.reason.as_str().to_owned())
            })))
        }
        Err(error) => Err(classify(error)),
    });
    (Box::pin(sink), Box::pin(stream))
}

/// Tells a size-limit error (which gets its own close code) from any other failure.
fn classify(error: axum::Error) -> InboundError {
    let inner = error.into_inner();
    match inner.downcast::<tungstenite::Error>() {
        Ok(error) => match *error {
            tungstenite::Error::Capacity(capacity) => InboundError::TooLarge(capacity.to_string()),
            other => InboundError::Failed(Box::new(other)),
        },
        Err(other) => InboundError::Failed(other),
    }
}
