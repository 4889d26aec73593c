//! `POST /api/matchmake`: where a player goes, with the connect token that gets them in.
//! The JSON shapes are the server's HTTP API (docs/OPERATIONS.md), defined once in
//! [`tickwire_proto::matchmake`] for the server and the clients alike; [`MatchAnswer`] is the
//! answer with its token decoded.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, Uri, header};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tickwire_proto::matchmake::MatchmakeAnswer;
use tickwire_proto::token::ConnectToken;
use tokio::net::TcpStream;

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
    /// The server address is not an `http://host:port` URL.
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

/// Asks the server at `server` (`http://host:port`) for a seat, within `timeout`.
///
/// `https://` servers are not supported yet by this SDK's matchmaking: the HTTP API is
/// served on the plain port as well, and the token it returns opens `wss` too.
pub async fn matchmake(
    server: &str,
    request: &MatchmakeRequest,
    timeout: Duration,
) -> Result<MatchAnswer, MatchmakeError> {
    let uri = server_uri(server)?;
    let exchange = post_json(&uri, server, request);
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

fn server_uri(server: &str) -> Result<Uri, MatchmakeError> {
    let bad = |why| MatchmakeError::BadUrl {
        url: server.to_string(),
        why,
    };
    let uri: Uri = server.parse().map_err(|_| bad("not a URL"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => return Err(bad("https matchmaking is not supported; use http")),
        _ => return Err(bad("expected http://host:port")),
    }
    if uri.host().is_none() {
        return Err(bad("no host"));
    }
    Ok(uri)
}

async fn post_json(
    uri: &Uri,
    server: &str,
    request: &MatchmakeRequest,
) -> Result<(u16, Bytes), MatchmakeError> {
    let unreachable =
        |source: Box<dyn std::error::Error + Send + Sync>| MatchmakeError::Unreachable {
            url: server.to_string(),
            source,
        };
    let host = uri.host().unwrap_or_default();
    let port = uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host, port))
        .await
        .map_err(|error| unreachable(error.into()))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| unreachable(error.into()))?;
    // The connection task ends with the exchange (the request asks to close).
    tokio::spawn(connection);
    let body = serde_json::to_vec(request).map_err(|error| unreachable(error.into()))?;
    let authority = uri.authority().map_or(host, |authority| authority.as_str());
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
    fn only_plain_http_urls_with_a_host_are_taken() {
        assert!(server_uri("http://127.0.0.1:8080").is_ok());
        assert!(server_uri("http://game.example").is_ok());
        for bad in [
            "https://game.example",
            "ftp://x",
            "127.0.0.1:8080",
            "http://",
            "",
        ] {
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
