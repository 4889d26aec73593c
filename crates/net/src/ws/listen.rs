//! The HTTP listener the WebSocket route (and the HTTP API beside it) is served on: plain
//! HTTP, or TLS with rustls, with a timeout on every step a slow client could stretch.
//!
//! axum's own `serve` has no header-read timeout and no TLS, so the listener drives hyper
//! directly: a TLS accept bounded by `tls_accept_timeout`, then HTTP/1.1 whose request
//! headers must arrive within `header_read_timeout` (which also closes idle keep-alive
//! connections), whose body must arrive within `body_read_timeout` and whose answer must be
//! ready within `request_timeout`, with upgrades enabled for `/ws`. One address holds at
//! most `max_connections_per_ip` connections before their upgrade, and a request without
//! exactly one `Host` header is answered 400 before any route sees it (RFC 9112 §3.2).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Method, Response, StatusCode, Version, header};
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;
use tower_service::Service;

use super::stats::WsCounters;

/// Timeouts, limits and socket options of an [`HttpListener`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenConfig {
    /// Time a client has to complete the TLS handshake after connecting.
    pub tls_accept_timeout: Duration,
    /// Time a client has to send a request's headers, counted from when the server starts
    /// reading them (the connection's start, or the end of the previous response).
    pub header_read_timeout: Duration,
    /// Largest request head (request line and headers) buffered.
    pub max_header_bytes: usize,
    /// The kernel send buffer of each accepted socket, or the system default. A smaller
    /// buffer bounds the memory a non-reading client pins in the kernel and lets the
    /// WebSocket outbox see it sooner.
    pub tcp_send_buffer: Option<usize>,
    /// Time a request's body has to arrive in full, counted from the end of its headers;
    /// past it, reading the body fails (the route answers 400) and the connection closes.
    pub body_read_timeout: Duration,
    /// Time a route has to produce its response, counted from the end of the headers and
    /// body reading included; past it the client gets 408 and the connection closes.
    pub request_timeout: Duration,
    /// Connections one address may hold open before their upgrade (0: no cap). More are
    /// closed at accept. Upgraded WebSocket connections no longer count here.
    pub max_connections_per_ip: u32,
    /// Addresses the per-address cap does not apply to (IPv4-mapped IPv6 matches its IPv4
    /// form).
    pub exempt: Vec<IpAddr>,
    /// Hold one file descriptor back for when the process runs out: an `accept` that fails
    /// for want of a descriptor gives it up and takes the waiting connection, and it is
    /// taken back once that connection ends. For a listener whose clients must get through
    /// when the process is out of descriptors (health probes, the operator), not for a
    /// public one (an attacker's connection would take the reserve).
    pub reserve_descriptor: bool,
}

impl Default for ListenConfig {
    /// 5 s for TLS, for headers and for a body (a browser needs about one round trip for
    /// each), 10 s for a whole request, 16 KiB of headers, 64 connections per address, the
    /// kernel's send buffer.
    fn default() -> Self {
        Self {
            tls_accept_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(5),
            max_header_bytes: 16 << 10,
            tcp_send_buffer: None,
            body_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_connections_per_ip: 64,
            exempt: Vec::new(),
            reserve_descriptor: false,
        }
    }
}

macro_rules! listen_counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// A snapshot of an [`HttpListener`]'s counters.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct ListenStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        #[derive(Debug, Default)]
        struct ListenCounters {
            $($name: AtomicU64,)*
        }

        impl ListenCounters {
            fn snapshot(&self) -> ListenStats {
                ListenStats {
                    $($name: self.$name.load(std::sync::atomic::Ordering::Relaxed),)*
                }
            }
        }
    };
}

listen_counters! {
    /// TCP connections accepted.
    connections_accepted,
    /// TLS handshakes not completed within the TLS-accept timeout.
    tls_accept_timeouts,
    /// TLS handshakes that failed.
    tls_failures,
    /// Connections closed because request headers did not arrive in time.
    header_timeouts,
    /// Connections that ended with another HTTP error (malformed request, reset).
    http_errors,
    /// `accept` calls that failed (out of file descriptors, say).
    accept_errors,
    /// Connections closed at accept: their address already held `max_connections_per_ip`.
    refused_per_ip,
    /// Requests whose body did not arrive within the body-read timeout.
    body_timeouts,
    /// Requests not answered within the request timeout (answered 408).
    request_timeouts,
    /// Requests refused 400 for a missing or repeated `Host` header.
    bad_host,
    /// Connections accepted on the reserved descriptor while the process was out of them.
    reserve_used,
}

/// Reads an [`HttpListener`]'s counters while it serves.
#[derive(Debug, Clone)]
pub struct ListenMetrics(Arc<ListenCounters>);

impl ListenMetrics {
    /// Counters now.
    pub fn snapshot(&self) -> ListenStats {
        self.0.snapshot()
    }
}

/// A TCP listener serving an axum router over HTTP/1.1, optionally inside TLS.
///
/// Each request carries the peer's address as axum's [`ConnectInfo<SocketAddr>`].
pub struct HttpListener {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    config: Arc<ListenConfig>,
    counters: Arc<ListenCounters>,
    per_ip: PerIp,
    reserve: Option<Reserve>,
}

/// Connections each address holds before their upgrade.
type PerIp = Arc<Mutex<HashMap<IpAddr, u32>>>;

impl std::fmt::Debug for HttpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpListener")
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .field("config", &self.config)
            .finish()
    }
}

impl HttpListener {
    /// Binds `address`; with `tls`, every connection must complete a TLS handshake first
    /// (wss), otherwise it speaks plain HTTP (ws).
    pub async fn bind(
        address: SocketAddr,
        tls: Option<Arc<rustls::ServerConfig>>,
        config: ListenConfig,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(address).await?;
        Ok(Self::from_listener(listener, tls, config))
    }

    /// Serves on a listener already bound.
    pub fn from_listener(
        listener: TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        config: ListenConfig,
    ) -> Self {
        let reserve = config.reserve_descriptor.then(Reserve::default);
        if let Some(reserve) = &reserve {
            reserve.refill();
        }
        Self {
            listener,
            tls: tls.map(TlsAcceptor::from),
            config: Arc::new(config),
            counters: Arc::default(),
            per_ip: Arc::default(),
            reserve,
        }
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle on the listener's counters.
    pub fn metrics(&self) -> ListenMetrics {
        ListenMetrics(self.counters.clone())
    }

    /// Accepts and serves connections until `shutdown` completes. Connections still before
    /// their upgrade or in an HTTP exchange are then dropped; upgraded WebSocket connections
    /// live on in their own tasks until their endpoint closes them
    /// ([`WsEndpoint::shutdown`](super::WsEndpoint::shutdown)).
    pub async fn serve(
        self,
        router: Router,
        shutdown: impl Future<Output = ()> + Send,
    ) -> io::Result<()> {
        let mut connections = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut accept_failing = AcceptBackoff::default();
        loop {
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        accept_failing.succeeded();
                        WsCounters::bump(&self.counters.connections_accepted);
                        let Some(slot) = self.take_slot(peer.ip()) else {
                            WsCounters::bump(&self.counters.refused_per_ip);
                            continue;
                        };
                        // Whichever connection ends next gives the reserve its descriptor.
                        let refill = self.reserve.clone().filter(Reserve::is_empty);
                        let served = serve_connection(
                            stream,
                            peer,
                            self.tls.clone(),
                            router.clone(),
                            self.config.clone(),
                            self.counters.clone(),
                            slot,
                        );
                        connections.spawn(async move {
                            served.await;
                            if let Some(reserve) = refill {
                                reserve.refill();
                            }
                        });
                    }
                    Err(error) if is_out_of_descriptors(&error)
                        && self.reserve.as_ref().is_some_and(Reserve::release) =>
                    {
                        // The waiting connection takes the freed descriptor on the next
                        // turn.
                        WsCounters::bump(&self.counters.reserve_used);
                        WsCounters::bump(&self.counters.accept_errors);
                    }
                    Err(error) => {
                        // Out of descriptors or a connection reset before accept: keep
                        // serving, but back off while the condition lasts (a connection
                        // that ends frees a descriptor), and say so once per burst.
                        WsCounters::bump(&self.counters.accept_errors);
                        let pause = accept_failing.failed(Instant::now(), &error);
                        tokio::select! {
                            () = &mut shutdown => return Ok(()),
                            () = tokio::time::sleep(pause) => {}
                        }
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }

    /// A place for one more connection from `ip`, or `None` past the per-address cap.
    fn take_slot(&self, ip: IpAddr) -> Option<IpSlot> {
        let ip = ip.to_canonical();
        let cap = self.config.max_connections_per_ip;
        if cap == 0 || self.config.exempt.contains(&ip) {
            return Some(IpSlot(None));
        }
        let mut per_ip = self
            .per_ip
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let held = per_ip.entry(ip).or_default();
        if *held >= cap {
            return None;
        }
        *held += 1;
        Some(IpSlot(Some((self.per_ip.clone(), ip))))
    }
}

/// The descriptor a listener holds back (`/dev/null`, opened read-only).
#[derive(Debug, Clone, Default)]
struct Reserve(Arc<Mutex<Option<std::fs::File>>>);

impl Reserve {
    fn is_empty(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .is_none()
    }

    /// Closes the reserved descriptor; false if there was none.
    fn release(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take()
            .is_some()
    }

    /// Takes a descriptor back if there is none (and one is free).
    fn refill(&self) {
        let mut reserve = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
        if reserve.is_none() {
            *reserve = std::fs::File::open("/dev/null").ok();
        }
    }
}

/// `EMFILE` (the process's limit) or `ENFILE` (the system's).
fn is_out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// One connection's place in the per-address count, given back when it ends or upgrades.
struct IpSlot(Option<(PerIp, IpAddr)>);

impl Drop for IpSlot {
    fn drop(&mut self) {
        if let Some((per_ip, ip)) = self.0.take() {
            let mut per_ip = per_ip.lock().unwrap_or_else(|poison| poison.into_inner());
            if let Some(held) = per_ip.get_mut(&ip) {
                *held -= 1;
                if *held == 0 {
                    per_ip.remove(&ip);
                }
            }
        }
    }
}

/// Failing `accept` calls: a pause that doubles from 10 ms to 1 s while they last, and at
/// most one log line every 10 s, with the failures since the last.
#[derive(Debug, Default)]
struct AcceptBackoff {
    pause: Option<Duration>,
    logged: Option<Instant>,
    unlogged: u64,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);
    const LOG_EVERY: Duration = Duration::from_secs(10);

    fn failed(&mut self, now: Instant, error: &io::Error) -> Duration {
        let pause = self
            .pause
            .map_or(Self::FIRST, |pause| (pause * 2).min(Self::MAX));
        self.pause = Some(pause);
        self.unlogged += 1;
        if self
            .logged
            .is_none_or(|logged| now.duration_since(logged) >= Self::LOG_EVERY)
        {
            tracing::warn!(
                %error,
                failures = self.unlogged,
                "accept failing (out of file descriptors?); backing off up to 1s between tries"
            );
            self.logged = Some(now);
            self.unlogged = 0;
        }
        pause
    }

    /// Ends the pause; the log stays rate-limited across bursts (accept can alternate
    /// between failing and not while descriptors run out).
    fn succeeded(&mut self) {
        self.pause = None;
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    router: Router,
    config: Arc<ListenConfig>,
    counters: Arc<ListenCounters>,
    _slot: IpSlot,
) {
    // Game messages are small and latency-bound: never hold one back to coalesce.
    let _ = stream.set_nodelay(true);
    if let Some(bytes) = config.tcp_send_buffer {
        let _ = socket2::SockRef::from(&stream).set_send_buffer_size(bytes);
    }
    match tls {
        None => serve_http(TokioIo::new(stream), peer, router, config, counters).await,
        Some(acceptor) => {
            match tokio::time::timeout(config.tls_accept_timeout, acceptor.accept(stream)).await {
                Err(_) => WsCounters::bump(&counters.tls_accept_timeouts),
                Ok(Err(_)) => WsCounters::bump(&counters.tls_failures),
                Ok(Ok(stream)) => {
                    serve_http(TokioIo::new(stream), peer, router, config, counters).await;
                }
            }
        }
    }
}

async fn serve_http<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    config: Arc<ListenConfig>,
    counters: Arc<ListenCounters>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (body_timeout, request_timeout) = (config.body_read_timeout, config.request_timeout);
    let request_counters = counters.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let counters = request_counters.clone();
        // A router clone is a reference-count increment. No route sees a request whose
        // Host is missing or repeated.
        let call = has_one_host(&request).then(|| {
            let request = request.map(|body| TimedBody::new(body, body_timeout, counters.clone()));
            router.clone().call(request)
        });
        async move {
            let Some(call) = call else {
                WsCounters::bump(&counters.bad_host);
                return Ok(closing(
                    StatusCode::BAD_REQUEST,
                    "exactly one Host header is required",
                ));
            };
            match tokio::time::timeout(request_timeout, call).await {
                Ok(response) => response,
                Err(_) => {
                    WsCounters::bump(&counters.request_timeouts);
                    Ok(closing(
                        StatusCode::REQUEST_TIMEOUT,
                        "request not complete in time",
                    ))
                }
            }
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .max_buf_size(config.max_header_bytes.max(8192));
    let served = builder.serve_connection(io, service).with_upgrades().await;
    if let Err(error) = served {
        if error.is_timeout() {
            WsCounters::bump(&counters.header_timeouts);
        } else {
            WsCounters::bump(&counters.http_errors);
        }
    }
}

/// RFC 9112 §3.2: an HTTP/1.1 request has one `Host` header, any request at most one.
fn has_one_host<B>(request: &hyper::Request<B>) -> bool {
    match request.headers().get_all(header::HOST).iter().count() {
        0 => request.version() < Version::HTTP_11 && request.method() != Method::CONNECT,
        1 => true,
        _ => false,
    }
}

/// A plain-text error that ends the connection after it is written.
fn closing(status: StatusCode, text: &'static str) -> Response<axum::body::Body> {
    let mut response = Response::new(axum::body::Body::from(text));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A request body that must arrive in full by a deadline: a client that announces a length
/// and then trickles (or stops) cannot hold a route, and its connection, for longer.
struct TimedBody {
    inner: Incoming,
    deadline: tokio::time::Instant,
    /// Armed on the first read that has to wait.
    timer: Option<Pin<Box<Sleep>>>,
    counters: Arc<ListenCounters>,
}

impl TimedBody {
    fn new(inner: Incoming, timeout: Duration, counters: Arc<ListenCounters>) -> Self {
        Self {
            inner,
            deadline: tokio::time::Instant::now() + timeout,
            timer: None,
            counters,
        }
    }
}

/// Why a [`TimedBody`] failed.
#[derive(Debug, thiserror::Error)]
#[error("request body not received in time")]
struct BodyTimedOut;

impl Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let deadline = self.deadline;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                WsCounters::bump(&self.counters.body_timeouts);
                Poll::Ready(Some(Err(BodyTimedOut.into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_back_off_and_log_once_per_burst() {
        let mut backoff = AcceptBackoff::default();
        let start = Instant::now();
        let error = io::Error::from_raw_os_error(24);
        let pauses: Vec<Duration> = (0..10)
            .map(|i| backoff.failed(start + Duration::from_millis(i), &error))
            .collect();
        assert_eq!(pauses[0], AcceptBackoff::FIRST);
        assert_eq!(pauses[1], AcceptBackoff::FIRST * 2);
        assert_eq!(*pauses.last().unwrap(), AcceptBackoff::MAX);
        assert_eq!(backoff.logged, Some(start), "one line for the burst so far");
        assert_eq!(backoff.unlogged, 9);
        backoff.failed(start + AcceptBackoff::LOG_EVERY, &error);
        assert_eq!(
            backoff.unlogged, 0,
            "the next line comes 10 s later, with the count"
        );
        backoff.succeeded();
        assert_eq!(
            backoff.failed(start + AcceptBackoff::LOG_EVERY * 3 / 2, &error),
            AcceptBackoff::FIRST,
            "a new burst backs off from the start"
        );
        assert_eq!(backoff.unlogged, 1, "and is not logged again within 10 s");
    }
}
