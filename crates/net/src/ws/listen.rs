//! The HTTP listener the WebSocket route (and the HTTP API beside it) is served on: plain
//! HTTP, or TLS with rustls, with a timeout on every step a slow client could stretch.
//!
//! axum's own `serve` has no header-read timeout and no TLS, so the listener drives hyper
//! directly: a TLS accept bounded by `tls_accept_timeout`, then HTTP/1.1 whose request
//! headers must arrive within `header_read_timeout` (which also closes idle keep-alive
//! connections), with upgrades enabled for `/ws`.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower_service::Service;

use super::stats::WsCounters;

/// Timeouts and socket options of an [`HttpListener`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

impl Default for ListenConfig {
    /// 5 s for TLS and for headers (a browser needs one round trip for each), 16 KiB of
    /// headers, the kernel's send buffer.
    fn default() -> Self {
        Self {
            tls_accept_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(5),
            max_header_bytes: 16 << 10,
            tcp_send_buffer: None,
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
    config: ListenConfig,
    counters: Arc<ListenCounters>,
}

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
        Self {
            listener,
            tls: tls.map(TlsAcceptor::from),
            config,
            counters: Arc::default(),
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
        loop {
            tokio::select! {
                () = &mut shutdown => return Ok(()),
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        WsCounters::bump(&self.counters.connections_accepted);
                        connections.spawn(serve_connection(
                            stream,
                            peer,
                            self.tls.clone(),
                            router.clone(),
                            self.config,
                            self.counters.clone(),
                        ));
                    }
                    Err(error) => {
                        // Out of descriptors or a connection reset before accept: keep
                        // serving, but do not spin while the condition lasts.
                        WsCounters::bump(&self.counters.accept_errors);
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    router: Router,
    config: ListenConfig,
    counters: Arc<ListenCounters>,
) {
    // Game messages are small and latency-bound: never hold one back to coalesce.
    let _ = stream.set_nodelay(true);
    if let Some(bytes) = config.tcp_send_buffer {
        let _ = socket2::SockRef::from(&stream).set_send_buffer_size(bytes);
    }
    match tls {
        None => serve_http(TokioIo::new(stream), peer, router, config, &counters).await,
        Some(acceptor) => {
            match tokio::time::timeout(config.tls_accept_timeout, acceptor.accept(stream)).await {
                Err(_) => WsCounters::bump(&counters.tls_accept_timeouts),
                Ok(Err(_)) => WsCounters::bump(&counters.tls_failures),
                Ok(Ok(stream)) => {
                    serve_http(TokioIo::new(stream), peer, router, config, &counters).await;
                }
            }
        }
    }
}

async fn serve_http<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    config: ListenConfig,
    counters: &ListenCounters,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        // A router clone is a reference-count increment.
        router.clone().call(request)
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
