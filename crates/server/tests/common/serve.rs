//! Helpers for tests of a whole running server: a raw HTTP/1.1 client, matchmaking, and
//! WebSocket players.

use std::net::SocketAddr;

use base64::Engine as _;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tickwire_proto::login::{ServerNonce, login_message};
use tickwire_proto::token::ConnectToken;
use tickwire_server::config::ServeConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::WAIT;

/// The admin token every test server uses.
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// A configuration on loopback ports of the system's choosing, two shards, a 500 ms
/// connection timeout (so lost connections are noticed quickly) and no limits on loopback.
pub fn test_config() -> ServeConfig {
    let mut config = ServeConfig {
        shards: 2,
        ..ServeConfig::default()
    };
    config.http.listen = "127.0.0.1:0".parse().unwrap();
    config.udp.listen = "127.0.0.1:0".parse().unwrap();
    config.webtransport.listen = "127.0.0.1:0".parse().unwrap();
    config.console.listen = "127.0.0.1:0".parse().unwrap();
    config.admin.listen = "127.0.0.1:0".parse().unwrap();
    config.admin.token = ADMIN_TOKEN.into();
    config.connection.timeout_ms = 500;
    config
}

/// A response: status and body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| {
            panic!(
                "status {}: body is not JSON ({error}): {}",
                self.status, self.body
            )
        })
    }
}

/// One HTTP/1.1 request on a fresh connection.
pub async fn http(
    address: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&str>,
) -> Reply {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await.unwrap();
        let body = body.unwrap_or("");
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !body.is_empty() {
            request.push_str("Content-Type: application/json\r\n");
        }
        if let Some(token) = bearer {
            request.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.unwrap();
        raw
    };
    let raw = timeout(WAIT, exchange)
        .await
        .expect("an HTTP answer in time");
    let text = String::from_utf8(raw).expect("a UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("headers end");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Reply {
        status,
        body: if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

/// Polls `GET /metrics` on the operator listener `admin_address` until it has `line` as a
/// whole line (gauges come from the workers' views, published a few times a second).
pub async fn metrics_until(admin_address: SocketAddr, line: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let body = http(admin_address, "GET", "/metrics", None, None)
            .await
            .body;
        if body.lines().any(|have| have == line) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never saw {line:?} in:\n{body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `POST /api/matchmake` that must succeed; the answer.
pub async fn matchmake(http_address: SocketAddr, request: Value) -> Value {
    let reply = http(
        http_address,
        "POST",
        "/api/matchmake",
        None,
        Some(&request.to_string()),
    )
    .await;
    assert_eq!(reply.status, 200, "matchmake {request}: {}", reply.body);
    reply.json()
}

/// The connect token in a matchmaking answer.
pub fn answer_token(answer: &Value) -> ConnectToken {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(answer["token"].as_str().expect("a token"))
        .expect("base64");
    ConnectToken::from_bytes(&bytes).expect("a connect token")
}

pub type WsClient = WebSocketStream<TcpStream>;

/// A WebSocket client that presented `token` and got the accepted message.
pub async fn ws_connect(http_address: SocketAddr, token: &ConnectToken) -> WsClient {
    let mut client = ws_present(http_address, token).await;
    assert!(
        !ws_next(&mut client).await.is_empty(),
        "the accepted message"
    );
    client
}

/// A WebSocket client that answered the challenge with its login for `token`; what the server answers is the caller's to
/// read (the accepted message, or a close when the player cannot be seated).
pub async fn ws_present(http_address: SocketAddr, token: &ConnectToken) -> WsClient {
    let stream = TcpStream::connect(http_address).await.unwrap();
    let (mut client, _) = timeout(
        WAIT,
        tokio_tungstenite::client_async(format!("ws://{http_address}/ws"), stream),
    )
    .await
    .expect("upgrade in time")
    .expect("upgrade");
    let challenge = ws_next(&mut client).await;
    let nonce = ServerNonce::read(&challenge).expect("the challenge comes first");
    let login = login_message(
        &token.to_bytes().unwrap(),
        &token.client_to_server_key,
        &nonce,
    );
    client.send(Message::Binary(login.into())).await.unwrap();
    client
}

/// The next binary message; the whole wait is bounded, pings included.
pub async fn ws_next(client: &mut WsClient) -> Bytes {
    let next = async {
        loop {
            match client.next().await {
                Some(Ok(Message::Binary(bytes))) => return bytes,
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    };
    timeout(WAIT, next).await.expect("a ws message in time")
}

/// Reads until the server closes; the close code.
pub async fn ws_close_code(client: &mut WsClient) -> u16 {
    let closed = async {
        loop {
            match client.next().await {
                Some(Ok(Message::Close(Some(frame)))) => return u16::from(frame.code),
                Some(Ok(_)) => continue,
                other => panic!("expected a close frame, got {other:?}"),
            }
        }
    };
    timeout(WAIT, closed).await.expect("a close in time")
}

/// What a [`WsPlayer`]'s reader saw.
#[derive(Debug)]
pub enum WsInbound {
    Binary(Bytes),
    Closed(Option<u16>),
}

/// A WebSocket player whose socket is read all the time by a task of its own, so pings are
/// answered (and the server does not close it as idle) while the test waits elsewhere.
pub struct WsPlayer {
    sink: futures_util::stream::SplitSink<WsClient, Message>,
    inbox: tokio::sync::mpsc::UnboundedReceiver<WsInbound>,
}

impl WsPlayer {
    pub fn new(client: WsClient) -> Self {
        let (sink, mut stream) = client.split();
        let (sender, inbox) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let inbound = match stream.next().await {
                    Some(Ok(Message::Binary(bytes))) => WsInbound::Binary(bytes),
                    Some(Ok(Message::Close(frame))) => {
                        WsInbound::Closed(frame.map(|frame| u16::from(frame.code)))
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(_)) | None => WsInbound::Closed(None),
                };
                let closed = matches!(inbound, WsInbound::Closed(_));
                if sender.send(inbound).is_err() || closed {
                    return;
                }
            }
        });
        Self { sink, inbox }
    }

    /// The next binary message, bounded by [`WAIT`].
    pub async fn next(&mut self) -> Bytes {
        match timeout(WAIT, self.inbox.recv())
            .await
            .expect("a ws message in time")
        {
            Some(WsInbound::Binary(bytes)) => bytes,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    /// Skips messages until the connection closes; the close code.
    pub async fn close_code(&mut self) -> Option<u16> {
        loop {
            match timeout(WAIT, self.inbox.recv())
                .await
                .expect("a close in time")
            {
                Some(WsInbound::Binary(_)) => continue,
                Some(WsInbound::Closed(code)) => return code,
                None => return None,
            }
        }
    }

    pub async fn send(&mut self, message: Message) {
        self.sink.send(message).await.unwrap();
    }
}
