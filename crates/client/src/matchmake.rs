//! `POST /api/matchmake`: where a player goes, with the connect token that gets them in,
//! over `http://` or `https://` (the answer carries the session keys: use `https` beyond a
//! machine you trust the network of). The JSON shapes are the server's HTTP API (docs/OPERATIONS.md), defined once in
//! [`tickwire_proto::matchmake`] for the server and the clients alike; [`MatchAnswer`] is the
//! answer with its token decoded.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, Uri, header};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde::Deserialize;
use tickwire_proto::matchmake::MatchmakeAnswer;
use tickwire_proto::token::ConnectToken;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::TlsTrust;

/// The largest matchmaking answer read; a real one is under 4 KiB.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

pub use tickwire_proto::matchmake::{Endpoints, MatchmakeRequest, SignedIdentity, WtEndpointInfo};

/// The server's answer ([`MatchmakeAnswer`] on the wire) with its token decoded: who the
/// player is, where they sit, and the token that lets them in.
#[derive(Debug, Clone)]
pub struct MatchAnswer {
    /// The player's id on this server.
    pub player_id: u64,
    /// Display name.
    pub name: String,
    /// The room.
    pub room: u64,
    /// The room's kind.
    pub kind: String,
    /// True when this is the player's held seat coming back.
    pub reconnect: bool,
    /// Give this back in the next request to be the same player (and get the seat back).
    pub session: String,
    /// The connect token: good for one UDP connection and one WebSocket connection.
    pub token: ConnectToken,
    /// Unix seconds after which the token is refused.
    pub expires_at: u64,
    /// Where to connect.
    pub endpoints: Endpoints,
}

#[derive(Deserialize)]
struct ErrorJson {
    error: String,
}

/// Why matchmaking failed.
#[derive(Debug, thiserror::Error)]
pub enum MatchmakeError {
    /// The server address is not an `http://` or `https://` URL with a host.
    #[error("bad server URL {url:?}: {why}")]
    BadUrl {
        /// What was given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The server could not be reached or the exchange broke off.
    #[error("cannot reach {url}: {source}")]
    Unreachable {
        /// The server.
        url: String,
        /// The transport error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The server's certificate did not verify (`https`): not from a trusted authority,
    /// for another name, out of its dates, or not the pinned one. A private or self-signed
    /// server needs [`TlsTrust::certificate`] or [`TlsTrust::pin_sha256`].
    #[error("the certificate of {url} is not trusted: {}", describe(reason))]
    Untrusted {
        /// The server.
        url: String,
        /// What rustls found wrong with it.
        reason: rustls::CertificateError,
    },
    /// No answer within the timeout.
    #[error("no answer from {url} within {timeout:?}")]
    TimedOut {
        /// The server.
        url: String,
        /// The bound.
        timeout: Duration,
    },
    /// The server refused (full, draining, bad request, rate limited …).
    #[error("the server refused ({status}): {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The server's `error` text.
        message: String,
    },
    /// The answer was not what the API promises.
    #[error("malformed answer: {0}")]
    Malformed(String),
}

/// Asks the server at `server` (`http://host:port` or `https://host:port`) for a seat,
/// within `timeout`. An `https` server's certificate must come from one of the web's
/// authorities ([`TlsTrust::default`]); for any other, see [`matchmake_with`].
pub async fn matchmake(
    server: &str,
    request: &MatchmakeRequest,
    timeout: Duration,
) -> Result<MatchAnswer, MatchmakeError> {
    exchange(server, request, timeout, None).await
}

/// [`matchmake`], verifying an `https` server's certificate with `tls` (made by
/// [`TlsTrust::client_config`], say: a private CA, or a pinned certificate).
pub async fn matchmake_with(
    server: &str,
    request: &MatchmakeRequest,
    timeout: Duration,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<MatchAnswer, MatchmakeError> {
    exchange(server, request, timeout, Some(tls)).await
}

async fn exchange(
    server: &str,
    request: &MatchmakeRequest,
    timeout: Duration,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<MatchAnswer, MatchmakeError> {
    let uri = server_uri(server)?;
    let exchange = post_json(&uri, server, request, tls);
    let (status, body) = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| MatchmakeError::TimedOut {
            url: server.to_string(),
            timeout,
        })??;
    if status != 200 {
        let message = serde_json::from_slice::<ErrorJson>(&body)
            .map(|error| error.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned());
        return Err(MatchmakeError::Refused { status, message });
    }
    parse_answer(&body)
}

/// What rustls found wrong with a certificate, in words (its `Display` shows several
/// causes, and a verifier's own errors such as a pin that does not match, as `Debug`).
fn describe(reason: &rustls::CertificateError) -> String {
    use rustls::CertificateError;
    match reason {
        CertificateError::UnknownIssuer => "no authority this client trusts signed it (a \
            private or self-signed server needs TlsTrust::certificate or TlsTrust::pin_sha256)"
            .into(),
        CertificateError::NotValidForName => "it is not for the host the URL names".into(),
        CertificateError::Expired => "it has expired".into(),
        CertificateError::NotValidYet => "it is not valid yet".into(),
        CertificateError::Other(other) => other.0.to_string(),
        reason => reason.to_string(),
    }
}

fn server_uri(server: &str) -> Result<Uri, MatchmakeError> {
    let bad = |why| MatchmakeError::BadUrl {
        url: server.to_string(),
        why,
    };
    let uri: Uri = server.parse().map_err(|_| bad("not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(bad("expected http://host:port or https://host:port"));
    }
    if uri.host().is_none() {
        return Err(bad("no host"));
    }
    Ok(uri)
}

/// A TCP or TLS stream, behind one type.
trait Io: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Io for T {}

/// A connection to `uri`'s host: TCP for `http`, TLS over it for `https`, verified with
/// `tls` or the web's authorities.
async fn connect(
    uri: &Uri,
    server: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Box<dyn Io>, MatchmakeError> {
    let unreachable = |source: std::io::Error| MatchmakeError::Unreachable {
        url: server.to_string(),
        source: source.into(),
    };
    // `Uri::host` keeps an IPv6 literal's brackets.
    let host = uri
        .host()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let secure = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(unreachable)?;
    if !secure {
        return Ok(Box::new(tcp));
    }
    let config = match tls {
        Some(config) => config.clone(),
        None => TlsTrust::default()
            .client_config()
            .map_err(|error| unreachable(std::io::Error::other(error)))?,
    };
    let name = ServerName::try_from(host.to_string()).map_err(|_| MatchmakeError::BadUrl {
        url: server.to_string(),
        why: "the host is not a DNS name or an IP address",
    })?;
    match tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
    {
        Ok(stream) => Ok(Box::new(stream)),
        Err(error) => {
            let refused = error
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>());
            match refused {
                Some(rustls::Error::InvalidCertificate(reason)) => Err(MatchmakeError::Untrusted {
                    url: server.to_string(),
                    reason: reason.clone(),
                }),
                _ => Err(unreachable(error)),
            }
        }
    }
}

async fn post_json(
    uri: &Uri,
    server: &str,
    request: &MatchmakeRequest,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<(u16, Bytes), MatchmakeError> {
    let unreachable =
        |source: Box<dyn std::error::Error + Send + Sync>| MatchmakeError::Unreachable {
            url: server.to_string(),
            source,
        };
    let stream = connect(uri, server, tls).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| unreachable(error.into()))?;
    // The connection task ends with the exchange (the request asks to close).
    tokio::spawn(connection);
    let body = serde_json::to_vec(request).map_err(|error| unreachable(error.into()))?;
    let authority = uri.authority().map_or("", |authority| authority.as_str());
    let http_request = Request::builder()
        .method(Method::POST)
        .uri("/api/matchmake")
        .header(header::HOST, authority)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONNECTION, "close")
        .body(Full::new(Bytes::from(body)))
        .map_err(|error| unreachable(error.into()))?;
    let response = sender
        .send_request(http_request)
        .await
        .map_err(|error| unreachable(error.into()))?;
    let status = response.status().as_u16();
    let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(unreachable)?
        .to_bytes();
    Ok((status, body))
}

fn parse_answer(body: &[u8]) -> Result<MatchAnswer, MatchmakeError> {
    let json: MatchmakeAnswer = serde_json::from_slice(body)
        .map_err(|error| MatchmakeError::Malformed(error.to_string()))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&json.token)
        .map_err(|error| MatchmakeError::Malformed(format!("token is not base64: {error}")))?;
    let token = ConnectToken::from_bytes(&bytes)
        .map_err(|error| MatchmakeError::Malformed(format!("token: {error}")))?;
    Ok(MatchAnswer {
        player_id: json.player_id,
        name: json.name,
        room: json.room,
        kind: json.kind,
        reconnect: json.reconnect,
        session: json.session,
        token,
        expires_at: json.expires_at,
        endpoints: json.endpoints,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_with_a_host_are_taken() {
        assert!(server_uri("http://127.0.0.1:8080").is_ok());
        assert!(server_uri("http://game.example").is_ok());
        assert!(server_uri("https://game.example").is_ok());
        assert!(server_uri("https://[::1]:8443").is_ok());
        for bad in ["ftp://x", "127.0.0.1:8080", "http://", ""] {
            assert!(
                matches!(server_uri(bad), Err(MatchmakeError::BadUrl { .. })),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn an_answer_with_a_broken_token_is_malformed_not_a_panic() {
        let body = br#"{"player_id":1,"name":"a","room":1,"kind":"relay","reconnect":false,
            "session":"s","token":"AAAA","expires_at":0,
            "endpoints":{"udp":"127.0.0.1:7777","ws":"ws://x/ws","wss":null}}"#;
        assert!(matches!(
            parse_answer(body),
            Err(MatchmakeError::Malformed(_))
        ));
        assert!(matches!(
            parse_answer(b"not json"),
            Err(MatchmakeError::Malformed(_))
        ));
    }
}
