//! The WebSocket side of a [`Link`](crate::Link): the server's challenge, the login (the
//! token and its proof of possession) in the first message, the accepted parameters in the
//! answer, then one binary message per channel message
//! (docs/PROTOCOL.md, "WebSocket transport").

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::{SinkExt, StreamExt};
use rustls::pki_types::ServerName;
use tickwire_proto::ConnectionParams;
use tickwire_proto::login::{SERVER_NONCE_BYTES, ServerNonce, login_message};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::link::{ConnectError, ConnectOptions, Ended, LinkEvent};
use crate::matchmake::MatchAnswer;

/// The largest message read from the server: its largest message (256 KiB by default) plus
/// the channel byte, with room for a server configured larger.
const MAX_INBOUND_BYTES: usize = 4 << 20;

/// The WebSocket codec's read buffer and write-batching target. tungstenite's defaults
/// (128 KiB each) cost a quarter of a megabyte per connection once traffic has touched
/// them; game messages are small, and larger ones still pass (the buffers grow for them).
const CODEC_BUFFER_BYTES: usize = 8 << 10;

/// A TCP or TLS stream, behind one type.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// A connected WebSocket link.
pub(crate) struct WsLink {
    stream: WebSocketStream<Box<dyn Io>>,
    outbox: Vec<Message>,
    ping_interval: Duration,
    next_ping: Instant,
    /// The ping in flight: its payload and when it left.
    ping_in_flight: Option<(u64, Instant)>,
    pings_sent: u64,
    rtt: Option<Duration>,
}

/// The host (without brackets) and port of a `ws://` or `wss://` URL.
fn authority(url: &str) -> Result<(String, u16), ConnectError> {
    let bad = || ConnectError::Unavailable(format!("bad WebSocket URL {url:?}"));
    let (rest, default_port) = if let Some(rest) = url.strip_prefix("ws://") {
        (rest, 80)
    } else if let Some(rest) = url.strip_prefix("wss://") {
        (rest, 443)
    } else {
        return Err(bad());
    };
    let authority = rest
        .split('/')
        .next()
        .filter(|a| !a.is_empty())
        .ok_or_else(bad)?;
    let (host, port) = match authority.strip_prefix('[') {
        // An IPv6 literal: `[::1]` or `[::1]:9000`.
        Some(v6) => {
            let (host, rest) = v6.split_once(']').ok_or_else(bad)?;
            match rest.strip_prefix(':') {
                Some(port) => (host, port.parse().map_err(|_| bad())?),
                None if rest.is_empty() => (host, default_port),
                None => return Err(bad()),
            }
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, port.parse().map_err(|_| bad())?),
            None => (authority, default_port),
        },
    };
    Ok((host.to_string(), port))
}

impl WsLink {
    pub(crate) async fn connect(
        url: &str,
        answer: &MatchAnswer,
        options: &ConnectOptions,
    ) -> Result<(Self, ConnectionParams), ConnectError> {
        let (host, port) = authority(url)?;
        let tls = match (url.starts_with("wss://"), &options.tls) {
            (true, Some(tls)) => Some(tls.clone()),
            (true, None) => {
                return Err(ConnectError::Unavailable(
                    "wss needs ConnectOptions::tls".into(),
                ));
            }
            (false, _) => None,
        };
        let tcp = TcpStream::connect((host.as_str(), port)).await?;
        tcp.set_nodelay(true)?;
        let io: Box<dyn Io> = if let Some(tls) = tls {
            let name = ServerName::try_from(host.clone())
                .map_err(|error| ConnectError::Unavailable(error.to_string()))?;
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await?;
            Box::new(stream)
        } else {
            Box::new(tcp)
        };
        let config = WebSocketConfig::default()
            .read_buffer_size(CODEC_BUFFER_BYTES)
            .write_buffer_size(CODEC_BUFFER_BYTES)
            .max_message_size(Some(MAX_INBOUND_BYTES))
            .max_frame_size(Some(MAX_INBOUND_BYTES));
        let (mut stream, _) = tokio_tungstenite::client_async_with_config(url, io, Some(config))
            .await
            .map_err(|error| ConnectError::Protocol(format!("upgrade: {error}")))?;

        let token = answer
            .token
            .to_bytes()
            .map_err(|error| ConnectError::Protocol(format!("token: {error}")))?;
        let challenge = handshake_message(&mut stream).await?;
        let nonce = ServerNonce::read(&challenge).ok_or_else(|| {
            ConnectError::Protocol(format!(
                "the challenge is {} bytes, not {SERVER_NONCE_BYTES}",
                challenge.len()
            ))
        })?;
        let login = login_message(&token, &answer.token.client_to_server_key, &nonce);
        stream
            .send(Message::Binary(login.into()))
            .await
            .map_err(|error| ConnectError::Protocol(format!("sending the login: {error}")))?;
        let accepted = handshake_message(&mut stream).await?;
        let params = ConnectionParams::read(&accepted).ok_or_else(|| {
            ConnectError::Protocol(format!(
                "the accepted message ({} bytes) does not parse",
                accepted.len()
            ))
        })?;
        let now = Instant::now();
        Ok((
            Self {
                stream,
                outbox: Vec::new(),
                ping_interval: options.ws_ping_interval,
                next_ping: now,
                ping_in_flight: None,
                pings_sent: 0,
                rtt: None,
            },
            params,
        ))
    }

    pub(crate) fn send(&mut self, channel: u8, message: &[u8]) {
        let mut frame = BytesMut::with_capacity(1 + message.len());
        frame.put_u8(channel);
        frame.put_slice(message);
        self.outbox.push(Message::Binary(frame.freeze()));
    }

    pub(crate) async fn flush(&mut self) -> Result<(), Ended> {
        for message in self.outbox.drain(..) {
            self.stream
                .feed(message)
                .await
                .map_err(|error| Ended::Lost(error.to_string()))?;
        }
        self.stream
            .flush()
            .await
            .map_err(|error| Ended::Lost(error.to_string()))
    }

    pub(crate) fn rtt(&self) -> Option<Duration> {
        self.rtt
    }

    pub(crate) async fn next_event(&mut self) -> LinkEvent {
        if let Err(ended) = self.flush().await {
            return LinkEvent::Ended(ended);
        }
        loop {
            let ping_at = tokio::time::Instant::from_std(self.next_ping);
            tokio::select! {
                inbound = self.stream.next() => match inbound {
                    Some(Ok(Message::Binary(body))) => match body.split_first() {
                        Some((&channel, _)) => {
                            return LinkEvent::Message { channel, message: body.slice(1..) };
                        }
                        None => {
                            return LinkEvent::Ended(Ended::Lost("an empty data message".into()));
                        }
                    },
                    Some(Ok(Message::Pong(payload))) => self.pong(&payload),
                    Some(Ok(Message::Close(frame))) => return LinkEvent::Ended(ended_by(frame)),
                    Some(Ok(_)) => {}
                    Some(Err(error)) => return LinkEvent::Ended(Ended::Lost(error.to_string())),
                    None => return LinkEvent::Ended(Ended::Lost("the server closed the stream".into())),
                },
                () = tokio::time::sleep_until(ping_at) => {
                    if let Err(ended) = self.ping().await {
                        return LinkEvent::Ended(ended);
                    }
                }
            }
        }
    }

    /// Sends the next round-trip probe; a probe still unanswered is written off.
    async fn ping(&mut self) -> Result<(), Ended> {
        let now = Instant::now();
        self.pings_sent += 1;
        self.ping_in_flight = Some((self.pings_sent, now));
        self.next_ping = now + self.ping_interval;
        let payload = Bytes::copy_from_slice(&self.pings_sent.to_le_bytes());
        self.stream
            .send(Message::Ping(payload))
            .await
            .map_err(|error| Ended::Lost(error.to_string()))
    }

    fn pong(&mut self, payload: &[u8]) {
        let Some((number, sent)) = self.ping_in_flight else {
            return;
        };
        if payload == number.to_le_bytes() {
            let sample = sent.elapsed();
            // The same smoothing as the UDP side's RTT (RFC 6298's 1/8).
            self.rtt = Some(match self.rtt {
                Some(rtt) => rtt.mul_f64(0.875) + sample.mul_f64(0.125),
                None => sample,
            });
            self.ping_in_flight = None;
        }
    }

    pub(crate) async fn close(&mut self) {
        let _ = self.flush().await;
        let _ = self
            .stream
            .close(Some(tokio_tungstenite::tungstenite::protocol::CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            }))
            .await;
    }
}

/// The server's next binary message in the handshake (its challenge, then the accepted
/// message), or the refusal it closed with instead.
async fn handshake_message(
    stream: &mut WebSocketStream<Box<dyn Io>>,
) -> Result<Bytes, ConnectError> {
    loop {
        match stream.next().await {
            Some(Ok(Message::Binary(body))) => return Ok(body),
            Some(Ok(Message::Close(frame))) => {
                return Err(ConnectError::Refused(ended_by(frame)));
            }
            Some(Ok(_)) => continue,
            Some(Err(error)) => {
                return Err(ConnectError::Refused(Ended::Lost(error.to_string())));
            }
            None => return Err(ConnectError::Refused(Ended::Lost("closed".into()))),
        }
    }
}

/// How a close frame from the server (or its absence: 1005) reads as an ending.
fn ended_by(frame: Option<tokio_tungstenite::tungstenite::protocol::CloseFrame>) -> Ended {
    match frame {
        Some(frame) => Ended::from_close(u16::from(frame.code), &frame.reason),
        None => Ended::from_close(1005, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_their_host_and_port() {
        assert_eq!(
            authority("ws://127.0.0.1:8080/ws").unwrap(),
            ("127.0.0.1".into(), 8080)
        );
        assert_eq!(
            authority("wss://game.example/ws").unwrap(),
            ("game.example".into(), 443)
        );
        assert_eq!(
            authority("ws://[::1]:9000/ws").unwrap(),
            ("::1".into(), 9000)
        );
        assert_eq!(authority("ws://[::1]/ws").unwrap().1, 80);
        assert!(authority("http://x/ws").is_err());
        assert!(authority("ws:///ws").is_err());
    }
}
