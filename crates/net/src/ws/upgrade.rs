//! The `/ws` route's HTTP side: the upgrade (RFC 6455 §4.2), then the connect token within
//! the handshake timeout, read with the same frame parser the shard uses. An admitted
//! client's socket leaves this runtime for the shard of its room ([`WsSocket`]);
//! a refused one gets its close frame here.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Extension;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use tickwire_proto::token::CONNECT_TOKEN_BYTES;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::endpoint::WsEndpoint;
use super::framing::CloseCode;
use super::socket::{AdmittedClient, ByteStream, ConnectionSlot, WsSocket};
use super::stats::WsCounters;
use tickwire_proto::admission::Admitted;
use tickwire_proto::login::ServerNonce;
use tickwire_proto::websocket::{self as frame, Inbound, MessageReader};

/// Answers a WebSocket upgrade request, then takes the client's token on a task of its own.
pub(super) async fn upgrade(
    State(endpoint): State<WsEndpoint>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    mut request: Request,
) -> Response {
    let key = match check_upgrade(request.headers()) {
        Ok(key) => key,
        Err(response) => {
            WsCounters::bump(&endpoint.shared().counters.upgrades_failed);
            return *response;
        }
    };
    if !origin_allowed(
        request.headers(),
        endpoint.config().allowed_origins.as_deref(),
    ) {
        WsCounters::bump(&endpoint.shared().counters.refused_origin);
        return (StatusCode::FORBIDDEN, "origin not allowed").into_response();
    }
    let Some(on_upgrade) = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>()
    else {
        WsCounters::bump(&endpoint.shared().counters.upgrades_failed);
        return (
            StatusCode::UPGRADE_REQUIRED,
            "connection cannot be upgraded",
        )
            .into_response();
    };
    let peer = peer.map(|Extension(ConnectInfo(address))| address);
    let deadline = Instant::now() + endpoint.config().handshake_timeout;
    let handshake = endpoint.handshake();
    tokio::spawn(async move {
        let _handshake = handshake;
        match on_upgrade.await {
            Ok(upgraded) => take_token(endpoint, upgraded, peer, deadline).await,
            Err(_) => WsCounters::bump(&endpoint.shared().counters.upgrades_failed),
        }
    });
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// Whether the request passes the endpoint's Origin allow-list: there is none, or the
/// request has no `Origin` (a native client; a browser always sends one), or each `Origin`
/// it has is listed.
fn origin_allowed(headers: &HeaderMap, allowed: Option<&[String]>) -> bool {
    let Some(allowed) = allowed else {
        return true;
    };
    headers.get_all(header::ORIGIN).iter().all(|origin| {
        origin.to_str().is_ok_and(|origin| {
            allowed
                .iter()
                .any(|allowed| allowed.eq_ignore_ascii_case(origin.trim()))
        })
    })
}

/// The request's `Sec-WebSocket-Key` if it is a WebSocket upgrade tickwire speaks; the
/// error response otherwise.
fn check_upgrade(headers: &HeaderMap) -> Result<String, Box<Response>> {
    let has_token = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|value| {
            value.to_str().is_ok_and(|value| {
                value
                    .split(',')
                    .any(|part| part.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    if !has_token(header::CONNECTION, "upgrade") || !has_token(header::UPGRADE, "websocket") {
        return Err(Box::new(
            (
                StatusCode::UPGRADE_REQUIRED,
                "this path takes a WebSocket upgrade",
            )
                .into_response(),
        ));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|version| version != "13")
    {
        let mut response = (
            StatusCode::UPGRADE_REQUIRED,
            "WebSocket version 13 is required",
        )
            .into_response();
        response.headers_mut().insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        return Err(Box::new(response));
    }
    match headers
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|key| key.to_str().ok())
    {
        // A key is 16 random bytes in base64: 24 characters.
        Some(key) if key.trim().len() == 24 => Ok(key.trim().to_owned()),
        _ => Err(Box::new(
            (
                StatusCode::BAD_REQUEST,
                "missing or malformed Sec-WebSocket-Key",
            )
                .into_response(),
        )),
    }
}

/// The upgraded connection's stream, whichever listener it came from.
enum Upgraded {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// Reads the token, admits the client and hands its socket to the application.
async fn take_token(
    endpoint: WsEndpoint,
    upgraded: hyper::upgrade::Upgraded,
    peer: Option<SocketAddr>,
    deadline: Instant,
) {
    // What hyper read past the request (a client that sent its token at once) comes first.
    let (stream, mut buf) = match upgraded.downcast::<TokioIo<TcpStream>>() {
        Ok(parts) => (
            Upgraded::Plain(parts.io.into_inner()),
            parts.read_buf.to_vec(),
        ),
        Err(upgraded) => {
            match upgraded.downcast::<TokioIo<tokio_rustls::server::TlsStream<TcpStream>>>() {
                Ok(parts) => (
                    Upgraded::Tls(Box::new(parts.io.into_inner())),
                    parts.read_buf.to_vec(),
                ),
                Err(_) => {
                    // Served by a listener other than tickwire's: nothing to hand over.
                    WsCounters::bump(&endpoint.shared().counters.upgrades_failed);
                    return;
                }
            }
        }
    };
    // The socket leaves tokio's reactor here for the shard's own epoll set.
    let (stream, admitted) = match stream {
        Upgraded::Plain(mut tcp) => {
            let Some(admitted) = admit_or_refuse(&endpoint, &mut tcp, &mut buf, deadline).await
            else {
                return;
            };
            match tcp.into_std().and_then(ByteStream::plain) {
                Ok(stream) => (stream, admitted),
                Err(_) => return,
            }
        }
        Upgraded::Tls(mut tls) => {
            let Some(admitted) = admit_or_refuse(&endpoint, &mut *tls, &mut buf, deadline).await
            else {
                return;
            };
            let (tcp, session) = (*tls).into_inner();
            match tcp.into_std().and_then(|tcp| ByteStream::tls(session, tcp)) {
                Ok(stream) => (stream, admitted),
                Err(_) => return,
            }
        }
    };
    let (authenticated, slot, token_end) = admitted;
    let socket = WsSocket {
        stream,
        leftover: buf.split_off(token_end),
        client: AdmittedClient::new(authenticated.client_id, authenticated.user_data, peer),
        slot,
        shared: endpoint.shared().clone(),
    };
    let counters = endpoint.shared().counters.clone();
    if let Err((arrival, code, reason)) = endpoint.hand_off(socket, &counters, deadline).await {
        arrival.refuse(code, reason);
    }
}

/// The token phase: the challenge out, the login (token and proof) in; the admitted client
/// (and where the bytes after its login start), or `None` once the client was refused (and
/// told why) or left.
async fn admit_or_refuse<S: AsyncRead + AsyncWrite + Unpin>(
    endpoint: &WsEndpoint,
    stream: &mut S,
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> Option<(Admitted, ConnectionSlot, usize)> {
    let counters = &endpoint.shared().counters;
    let nonce = ServerNonce::random(&mut rand::rng());
    let mut challenge = Vec::new();
    frame::write_frame(&mut challenge, frame::opcode::BINARY, &[], &nonce.0);
    let written = tokio::time::timeout_at(deadline, async {
        stream.write_all(&challenge).await?;
        stream.flush().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return None;
    }
    let refusal = match read_token(endpoint, stream, buf, deadline).await {
        Ok(TokenAt { token, end }) => match endpoint.admit_login(&token, &nonce, counters) {
            Ok((authenticated, slot)) => return Some((authenticated, slot, end)),
            Err((code, reason)) => Refusal::Close {
                code,
                reason,
                parseable: true,
            },
        },
        Err(refusal) => refusal,
    };
    if let Refusal::Close {
        code,
        reason,
        parseable,
    } = refusal
    {
        let close_timeout = endpoint.config().close_timeout;
        refuse(
            endpoint,
            stream,
            buf,
            parseable,
            close_timeout,
            code,
            &reason,
        )
        .await;
    }
    None
}

/// Sends a close frame, then reads (and discards) until the client's close answer, the end
/// of the stream or the close timeout: closing a socket with unread data makes the kernel
/// send a reset, which can destroy the close frame before the client reads it.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(
    endpoint: &WsEndpoint,
    stream: &mut S,
    buf: &mut Vec<u8>,
    mut parseable: bool,
    close_timeout: Duration,
    code: CloseCode,
    reason: &str,
) {
    let deadline = Instant::now() + close_timeout;
    let mut out = Vec::new();
    frame::write_close(&mut out, code.code(), reason);
    let written = tokio::time::timeout_at(deadline, async {
        stream.write_all(&out).await?;
        stream.flush().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return;
    }
    let max = endpoint.shared().max_inbound;
    let mut reader = MessageReader::default();
    buf.clear();
    let _ = tokio::time::timeout_at(deadline, async {
        let mut chunk = [0u8; 1024];
        loop {
            if parseable {
                let mut pos = 0;
                loop {
                    match reader.next(buf, &mut pos, max) {
                        Ok(Some(Inbound::Close(_))) => return,
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(_) => {
                            parseable = false;
                            break;
                        }
                    }
                }
                buf.drain(..pos.min(buf.len()));
            }
            if !parseable {
                buf.clear();
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
}

/// Why the token phase ended without a token.
enum Refusal {
    /// The client left or the socket failed: nothing to say.
    Quietly,
    /// Close with this code and reason; `parseable` is false after a framing error.
    Close {
        code: CloseCode,
        reason: String,
        parseable: bool,
    },
}

/// A token frame: where it sits in the buffer.
struct TokenAt {
    /// The token's bytes (an owned copy: the frame parser unmasked them in place).
    token: bytes::Bytes,
    /// Where the bytes after the token's frame start.
    end: usize,
}

/// Reads frames until the first data message, which must be the binary connect token.
async fn read_token<S: AsyncRead + Unpin>(
    endpoint: &WsEndpoint,
    stream: &mut S,
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<TokenAt, Refusal> {
    let counters = &endpoint.shared().counters;
    let max = endpoint.shared().max_inbound;
    if endpoint.is_shutting_down() {
        WsCounters::bump(&counters.refused_shutdown);
        return Err(Refusal::Close {
            code: CloseCode::ServerShutdown,
            reason: "server shutting down".into(),
            parseable: true,
        });
    }
    let mut reader = MessageReader::default();
    let mut pos = 0;
    loop {
        match reader.next(buf, &mut pos, max) {
            Ok(Some(Inbound::Binary(token))) => return Ok(TokenAt { token, end: pos }),
            // Control frames are the WebSocket layer's, not messages before the token.
            Ok(Some(Inbound::Ping(_) | Inbound::Pong)) => continue,
            Ok(Some(Inbound::Close(_))) => return Err(Refusal::Quietly),
            Ok(Some(Inbound::Text)) => {
                WsCounters::bump(&counters.refused_malformed);
                return Err(Refusal::Close {
                    code: CloseCode::ProtocolViolation,
                    reason: format!(
                        "text message; the first message is the {CONNECT_TOKEN_BYTES}-byte connect token, binary"
                    ),
                    parseable: true,
                });
            }
            Ok(None) => {}
            Err(error) => {
                let code = CloseCode::from(&error);
                WsCounters::bump(if code == CloseCode::WsMessageTooBig {
                    &counters.closed_too_large
                } else {
                    &counters.refused_malformed
                });
                return Err(Refusal::Close {
                    code,
                    reason: error.to_string(),
                    parseable: false,
                });
            }
        }
        let start = buf.len();
        buf.resize(start + 4096, 0);
        let read = tokio::select! {
            read = tokio::time::timeout_at(deadline, stream.read(&mut buf[start..])) => read,
            () = endpoint.stopping() => {
                buf.truncate(start);
                WsCounters::bump(&counters.refused_shutdown);
                return Err(Refusal::Close {
                    code: CloseCode::ServerShutdown,
                    reason: "server shutting down".into(),
                    parseable: true,
                });
            }
        };
        match read {
            Err(_) => {
                buf.truncate(start);
                WsCounters::bump(&counters.handshake_timeouts);
                return Err(Refusal::Close {
                    code: CloseCode::HandshakeTimedOut,
                    reason: format!(
                        "no connect token within {:?}",
                        endpoint.config().handshake_timeout
                    ),
                    parseable: true,
                });
            }
            Ok(Ok(0) | Err(_)) => return Err(Refusal::Quietly),
            Ok(Ok(n)) => buf.truncate(start + n),
        }
    }
}
