//! The `/ws` route: upgrades the request, takes the connect token within the handshake
//! timeout, answers with the accepted message or a close, and hands the connection to the
//! application.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use tickwire_proto::admission::{Admission, Admitted, Refusal};
use tickwire_proto::login::{LOGIN_BYTES, LoginRefusal, ServerNonce};
use tickwire_proto::reliable::ChannelKind;
use tickwire_proto::{ConnectionParams, ParamsError};
use tokio::sync::{Notify, mpsc, watch};

use super::connection::Timings;
use super::framing::{CloseCode, accepted_message};
use super::outbox::OutboxLimits;
use super::socket::{ConnectionSlot, WsSocket};
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
    /// Origins allowed to open a WebSocket, as a browser sends them in the upgrade's
    /// `Origin` header (`scheme://host[:port]`, compared ignoring ASCII case). An upgrade
    /// with an `Origin` not on the list is refused with 403, so another site's page cannot
    /// open a connection from its visitors' browsers; one without `Origin` (a native
    /// client: browsers always send it) is allowed. `None`, the default, allows every
    /// origin; an empty list refuses every browser.
    pub allowed_origins: Option<Vec<String>>,
}

impl Default for WsConfig {
    /// Default [`ConnectionParams`], 4096 connections, a 5 s handshake (a token is one
    /// round trip after the upgrade), a 2 s close, default outbox bounds, every origin
    /// allowed.
    fn default() -> Self {
        Self {
            params: ConnectionParams::default(),
            max_connections: 4096,
            handshake_timeout: Duration::from_secs(5),
            close_timeout: Duration::from_secs(2),
            outbox: OutboxLimits::default(),
            allowed_origins: None,
        }
    }
}

impl WsConfig {
    /// The largest WebSocket frame and message accepted: a channel byte and the largest
    /// message, and never less than a login (token and proof). Longer ones close the connection with
    /// [`CloseCode::MessageTooLarge`] before they are buffered.
    pub fn max_message_bytes(&self) -> usize {
        (self.params.max_message_size as usize)
            .saturating_add(1)
            .max(LOGIN_BYTES)
    }
}

impl WsConfig {
    /// Whether this configuration can work: valid parameters, a reliable bound that holds
    /// one largest message, timeouts above zero, allowed origins a browser could send.
    /// Both transports' endpoints check it.
    pub(crate) fn validate(&self) -> Result<(), WsConfigError> {
        self.params.validate()?;
        if self.outbox.max_reliable_bytes < self.params.max_message_size as usize {
            return Err(WsConfigError::ReliableBound {
                bound: self.outbox.max_reliable_bytes,
                max_message_size: self.params.max_message_size,
            });
        }
        for (name, timeout) in [
            ("handshake_timeout", self.handshake_timeout),
            ("close_timeout", self.close_timeout),
        ] {
            if timeout.is_zero() {
                return Err(WsConfigError::ZeroTimeout { name });
            }
        }
        if let Some(origin) = self
            .allowed_origins
            .iter()
            .flatten()
            .find(|origin| !is_serialized_origin(origin))
        {
            return Err(WsConfigError::Origin {
                origin: origin.clone(),
            });
        }
        Ok(())
    }
}

/// Whether `origin` has the shape of an `Origin` header a browser sends for a page:
/// `scheme://host[:port]`, no path (not even `/`), query, fragment or user. An entry that
/// could never match is a mistake to report, not a silent refusal of every browser.
fn is_serialized_origin(origin: &str) -> bool {
    let Some((scheme, host)) = origin.split_once("://") else {
        return false;
    };
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    scheme_ok
        && !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_graphic() && !matches!(c, '/' | '?' | '#' | '@' | '\\'))
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
    /// An allowed origin no browser sends, so it would match nothing.
    #[error(
        "allowed origin {origin:?} is not scheme://host[:port] as browsers send it (no path, not even a trailing slash)"
    )]
    Origin {
        /// The entry.
        origin: String,
    },
}

/// The WebSocket transport of one server: checks tokens, counts connections, hands admitted
/// clients over. Which player a connection is, and whether a newer one replaces it, is the
/// shard's to decide (its session table); the endpoint only admits.
///
/// ```no_run
/// # use tickwire_net::ws::{WsConfig, WsEndpoint, WsLinks, WsLinkEvent};
/// # use tickwire_proto::admission::Admission;
/// # async fn run(admission: Admission, listener: tickwire_net::ws::HttpListener) {
/// let (handoff, mut arrivals) = tokio::sync::mpsc::channel(64);
/// let endpoint = WsEndpoint::new(WsConfig::default(), admission, handoff).unwrap();
/// tokio::spawn(listener.serve(endpoint.router(), std::future::pending()));
/// // The thread that owns the players (a shard) drives their sockets:
/// let mut links = WsLinks::new().unwrap();
/// loop {
///     tokio::select! {
///         Some(socket) = arrivals.recv() => {
///             links.attach(std::time::Instant::now(), socket, 60).unwrap(); // the room's tick rate
///         }
///         Ok(()) = links.readable() => links.handle_io(std::time::Instant::now()),
///     }
///     while let Some(event) = links.poll_event() {
///         if let WsLinkEvent::Message { link, channel, message } = event {
///             let _ = links.send(link, channel, message); // echo
///         }
///     }
///     links.flush();
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

/// What every connection of an endpoint shares, wherever it is driven.
pub(crate) struct Shared {
    /// Each channel's kind, by channel id.
    pub(crate) channels: Arc<[ChannelKind]>,
    /// Longest frame or message a client may send ([`WsConfig::max_message_bytes`]).
    pub(crate) max_inbound: usize,
    /// Longest payload the server sends (the dictated `max_message_size`).
    pub(crate) max_payload: usize,
    pub(crate) outbox: OutboxLimits,
    pub(crate) timings: Timings,
    /// The accepted message.
    pub(crate) accepted: Bytes,
    /// What it says: the parameters every client is told, but for the tick rate, which is
    /// the room's ([`accepted_at`](Self::accepted_at)).
    pub(crate) params: ConnectionParams,
    pub(crate) counters: Arc<WsCounters>,
}

impl Shared {
    /// The accepted message for a client whose room ticks at `tick_rate_hz`
    /// ([`ConnectionParams::with_tick_rate`]).
    pub(crate) fn accepted_at(&self, tick_rate_hz: u8) -> Bytes {
        // The endpoint's parameters validated when it was made; only the rate differs.
        accepted_message(&self.params.with_tick_rate(tick_rate_hz))
            .unwrap_or_else(|| self.accepted.clone())
    }
}

struct Inner {
    config: WsConfig,
    admission: Admission,
    handoff: mpsc::Sender<WsSocket>,
    shared: Arc<Shared>,
    /// Connections open, WebSocket and WebTransport: the `max_connections` bound.
    open: Arc<AtomicUsize>,
    /// True once [`WsEndpoint::shutdown`] was called: clients still in their handshake
    /// (either transport) wait on it beside their token.
    stopping: watch::Sender<bool>,
    /// WebSocket clients between their upgrade and their hand-off (or refusal).
    handshakes: AtomicUsize,
    /// Told when `handshakes` comes back to 0.
    handshakes_done: Notify,
}

/// A WebSocket client in its handshake, counted until this is dropped.
pub(crate) struct Handshake(Arc<Inner>);

impl Drop for Handshake {
    fn drop(&mut self) {
        if self.0.handshakes.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.handshakes_done.notify_waiters();
        }
    }
}

impl WsEndpoint {
    /// An endpoint that checks connect tokens with `admission` (built on the used-token set
    /// the server's UDP shards share, so a token opens one connection on one transport) and
    /// hands each admitted client to `handoff`. If the receiver is not
    /// keeping up for the handshake timeout the client is closed with
    /// [`CloseCode::ServerFull`]; if it is gone, with [`CloseCode::ServerShutdown`].
    pub fn new(
        config: WsConfig,
        admission: Admission,
        handoff: mpsc::Sender<WsSocket>,
    ) -> Result<Self, WsConfigError> {
        config.validate()?;
        let accepted = accepted_message(&config.params).ok_or(ParamsError::DurationRange)?;
        let params = &config.params;
        let shared = Arc::new(Shared {
            channels: params.channels.clone().into(),
            max_inbound: config.max_message_bytes(),
            max_payload: params.max_message_size as usize,
            outbox: config.outbox,
            timings: Timings {
                idle_timeout: params.timeout,
                // Often enough that a client answering pings never reaches the timeout,
                // rarely enough to cost nothing: a quarter of it (2.5 s by default).
                ping_interval: (params.timeout / 4).max(params.keepalive_interval),
                close_timeout: config.close_timeout,
            },
            accepted,
            params: config.params.clone(),
            counters: Arc::new(WsCounters::default()),
        });
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                admission,
                handoff,
                shared,
                open: Arc::new(AtomicUsize::new(0)),
                stopping: watch::Sender::new(false),
                handshakes: AtomicUsize::new(0),
                handshakes_done: Notify::new(),
            }),
        })
    }

    /// A router answering [`WS_PATH`]; merge it into the server's HTTP router. It upgrades
    /// with no extension (so no permessage-deflate: compression costs CPU per client and
    /// invites decompression bombs) and limits frames and messages to
    /// [`WsConfig::max_message_bytes`].
    pub fn router(&self) -> Router {
        Router::new()
            .route(WS_PATH, axum::routing::get(super::upgrade::upgrade))
            .with_state(self.clone())
    }

    /// Counters since the endpoint started.
    pub fn stats(&self) -> WsStats {
        self.inner.shared.counters.snapshot()
    }

    /// WebSocket and WebTransport connections admitted and not yet closed.
    pub fn connection_count(&self) -> usize {
        self.inner.open.load(Ordering::Acquire)
    }

    /// Refuses new clients with [`CloseCode::ServerShutdown`] (a WebTransport session's
    /// token too: [`WtLinks::admit`](crate::wt::WtLinks::admit) asks this endpoint) and
    /// closes every WebSocket client still in its handshake the same way. Attached
    /// connections and WebTransport sessions belong to the shards driving them, which close
    /// them as they stop.
    pub fn shutdown(&self) {
        self.inner.stopping.send_replace(true);
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        *self.inner.stopping.borrow()
    }

    /// Resolves once [`shutdown`](Self::shutdown) has been called.
    pub(crate) async fn stopping(&self) {
        let mut stopping = self.inner.stopping.subscribe();
        // The sender lives as long as `self`.
        let _ = stopping.wait_for(|stopping| *stopping).await;
    }

    /// Counts a WebSocket client in its handshake until the guard is dropped.
    pub(crate) fn handshake(&self) -> Handshake {
        self.inner.handshakes.fetch_add(1, Ordering::AcqRel);
        Handshake(self.inner.clone())
    }

    /// Waits until no WebSocket client is in its handshake, for at most the close timeout
    /// (and a little more). A server shutting down calls it after
    /// [`shutdown`](Self::shutdown), so each of them gets its close frame (4003) before the
    /// process exits.
    pub async fn handshakes_closed(&self) {
        let limit = self.inner.config.close_timeout + Duration::from_millis(250);
        let _ = tokio::time::timeout(limit, async {
            loop {
                // Created before the check: `notify_waiters` reaches it from here on.
                let done = self.inner.handshakes_done.notified();
                if self.inner.handshakes.load(Ordering::Acquire) == 0 {
                    return;
                }
                done.await;
            }
        })
        .await;
    }

    /// The checks every transport makes once a client's login is in: the token (the one
    /// check, with the used-token set every transport shares) and its proof of possession
    /// for `nonce`, the server's phase and capacity, and only then the token is used up. On
    /// success the client holds a place among the open connections until the returned
    /// slot is dropped; refusals are counted on `counters` and come back as the close code
    /// and reason to send.
    pub(crate) fn admit_login(
        &self,
        login: &[u8],
        nonce: &ServerNonce,
        counters: &WsCounters,
    ) -> Result<(Admitted, ConnectionSlot), (CloseCode, String)> {
        let inner = &*self.inner;
        let refused = |refusal: LoginRefusal| {
            let counter = match &refusal {
                LoginRefusal::Token(Refusal::Malformed { .. } | Refusal::PrivateMalformed) => {
                    &counters.refused_malformed
                }
                LoginRefusal::Token(Refusal::Expired { .. }) => &counters.refused_expired,
                LoginRefusal::Token(Refusal::Replayed { .. }) => &counters.refused_replayed,
                LoginRefusal::Token(
                    Refusal::WrongProtocol { .. } | Refusal::Tampered | Refusal::WrongServer { .. },
                )
                | LoginRefusal::NoProof
                | LoginRefusal::WrongProof => &counters.refused_bad_token,
            };
            WsCounters::bump(counter);
            (CloseCode::from(&refusal), refusal.to_string())
        };
        let unix_now = tickwire_proto::unix_now();
        let checked = inner
            .admission
            .check_login(login, nonce, unix_now)
            .map_err(refused)?;
        if self.is_shutting_down() {
            WsCounters::bump(&counters.refused_shutdown);
            return Err((CloseCode::ServerShutdown, "server shutting down".to_owned()));
        }
        let Some(slot) = ConnectionSlot::take(&inner.open, inner.config.max_connections) else {
            WsCounters::bump(&counters.refused_full);
            return Err((
                CloseCode::ServerFull,
                format!("server full: {} connections", inner.config.max_connections),
            ));
        };
        inner
            .admission
            .claim_login(&checked, unix_now)
            .map_err(|refusal| refused(refusal.into()))?;
        Ok((checked.admitted, slot))
    }

    /// Hands an admitted client to the application by `deadline`; the refusal to send if
    /// the hand-off queue stays full or is gone.
    pub(crate) async fn hand_off(
        &self,
        socket: WsSocket,
        counters: &WsCounters,
        deadline: tokio::time::Instant,
    ) -> Result<(), (WsSocket, CloseCode, &'static str)> {
        match self.reserve(counters, deadline).await {
            Ok(permit) => {
                WsCounters::bump(&counters.connections_accepted);
                permit.send(socket);
                Ok(())
            }
            Err((code, reason)) => Err((socket, code, reason)),
        }
    }

    /// Room in the hand-off queue by `deadline`; a refusal (counted) if it stays full or
    /// the application is gone.
    async fn reserve(
        &self,
        counters: &WsCounters,
        deadline: tokio::time::Instant,
    ) -> Result<mpsc::Permit<'_, WsSocket>, (CloseCode, &'static str)> {
        match tokio::time::timeout_at(deadline, self.inner.handoff.reserve()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => {
                WsCounters::bump(&counters.refused_shutdown);
                Err((CloseCode::ServerShutdown, "server shutting down"))
            }
            Err(_) => {
                WsCounters::bump(&counters.refused_full);
                Err((CloseCode::ServerFull, "server busy"))
            }
        }
    }

    /// The connection parameters every client is sent first (the accepted message's body).
    pub fn accepted(&self) -> &Bytes {
        &self.inner.shared.accepted
    }

    /// The accepted message for a client seated in a room ticking at `tick_rate_hz`: the
    /// endpoint's parameters with the room's rate ([`ConnectionParams::with_tick_rate`]).
    pub fn accepted_at(&self, tick_rate_hz: u8) -> Bytes {
        self.inner.shared.accepted_at(tick_rate_hz)
    }

    /// The endpoint's configuration.
    pub(crate) fn config(&self) -> &WsConfig {
        &self.inner.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_origins(origins: &[&str]) -> Result<(), WsConfigError> {
        WsConfig {
            allowed_origins: Some(origins.iter().map(|origin| (*origin).to_owned()).collect()),
            ..WsConfig::default()
        }
        .validate()
    }

    #[test]
    fn allowed_origins_must_be_what_a_browser_sends() {
        assert_eq!(
            with_origins(&[]),
            Ok(()),
            "an empty list refuses browsers only"
        );
        assert_eq!(
            with_origins(&[
                "https://game.example",
                "http://localhost:8080",
                "http://[::1]:3000"
            ]),
            Ok(())
        );
        for origin in [
            "https://game.example/",
            "https://game.example/play",
            "game.example",
            "https://",
            "https://user@game.example",
            "https://game.example?x",
            "://game.example",
            "https://game example",
            "",
        ] {
            assert_eq!(
                with_origins(&["https://game.example", origin]),
                Err(WsConfigError::Origin {
                    origin: origin.to_owned()
                }),
                "{origin:?} was accepted as an allowed origin"
            );
        }
    }
}
