//! A WebTransport client of the tickwire wire format: what the Rust client SDK, the bots
//! and the tests use to play over WebTransport.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tickwire_proto::ConnectionParams;
use tickwire_proto::login::{SERVER_NONCE_BYTES, ServerNonce, login_for_token};
use tickwire_proto::reliable::ChannelKind;
use tokio::sync::mpsc;
use wtransport::error::{ConnectionError, SendDatagramError, StreamReadExactError};
use wtransport::tls::Sha256Digest;
use wtransport::{ClientConfig, Connection, Endpoint, RecvStream, SendStream, VarInt};

use super::framing::{
    DatagramReceiver, FRAME_HEADER_BYTES, Frame, check_frame_length, close_frame,
    datagram_header_bytes, max_frame_bytes, parse_frame, put_data_frame, put_frame, write_datagram,
};
use crate::ws::CloseCode;

/// Events waiting for [`WtClient::recv`]; past this, datagrams are dropped and the stream
/// is read no further until the application catches up.
const EVENT_QUEUE: usize = 256;

/// How a WebTransport client's session failed or ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WtClientError {
    /// The session could not be opened (address, certificate, handshake).
    #[error("webtransport connect failed: {0}")]
    Connect(String),
    /// The server closed the session with this close code and reason.
    #[error("closed by the server with code {code} ({reason})")]
    Closed {
        /// The close code (4001–4013 are tickwire's, see [`CloseCode`]).
        code: u16,
        /// The reason.
        reason: String,
    },
    /// The server broke the framing.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The session ended without a close.
    #[error("connection lost")]
    Lost,
    /// No answer within the time allowed.
    #[error("timed out: {0}")]
    TimedOut(&'static str),
}

/// The certificate's SHA-256 from its lowercase (or uppercase) hex form.
pub fn parse_cert_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[index * 2..index * 2 + 2], 16).ok()?;
    }
    Some(out)
}

/// An open WebTransport session with its control stream, before the handshake: for tests
/// that need to send what a well-behaved client would not.
pub struct WtRawSession {
    /// The client's endpoint (its UDP socket).
    pub endpoint: Endpoint<wtransport::endpoint::endpoint_side::Client>,
    /// The session.
    pub connection: Connection,
    /// The control stream, client to server.
    pub send: SendStream,
    /// The control stream, server to client.
    pub recv: RecvStream,
}

impl std::fmt::Debug for WtRawSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WtRawSession").finish_non_exhaustive()
    }
}

impl WtRawSession {
    /// Opens the session at `url` (`https://host:port/wt`), trusting the server's
    /// certificate by `cert_sha256` (a self-signed one) or by the system's roots (`None`),
    /// and opens the control stream.
    pub async fn open(url: &str, cert_sha256: Option<[u8; 32]>) -> Result<Self, WtClientError> {
        let connect = |error: &dyn std::fmt::Display| WtClientError::Connect(error.to_string());
        let builder = ClientConfig::builder().with_bind_default();
        let config = match cert_sha256 {
            Some(hash) => builder.with_server_certificate_hashes([Sha256Digest::new(hash)]),
            None => builder.with_native_certs(),
        };
        let config = config
            .max_idle_timeout(Some(Duration::from_secs(30)))
            .map_err(|error| connect(&error))?
            .build();
        let endpoint = Endpoint::client(config).map_err(|error| connect(&error))?;
        let connection = endpoint
            .connect(url)
            .await
            .map_err(|error| connect(&error))?;
        let opening = connection
            .open_bi()
            .await
            .map_err(|error| connect(&error))?;
        let (send, recv) = opening.await.map_err(|error| connect(&error))?;
        Ok(Self {
            endpoint,
            connection,
            send,
            recv,
        })
    }

    /// Writes one frame holding `body` on the control stream.
    pub async fn send_frame(&mut self, body: &[u8]) -> Result<(), WtClientError> {
        let mut frame = BytesMut::new();
        put_frame(&mut frame, body);
        self.send
            .write_all(&frame)
            .await
            .map_err(|_| WtClientError::Lost)
    }

    /// Reads the next frame's body (at most `max` bytes); a close frame or a closed
    /// session is the error it stands for.
    pub async fn recv_frame(&mut self, max: usize) -> Result<Bytes, WtClientError> {
        match read_frame(&mut self.recv, max).await? {
            Some(body) if body.first() == Some(&super::framing::CLOSE_FRAME_TAG) => {
                match parse_frame(body, 0) {
                    Ok(Frame::Close(code, reason)) => Err(WtClientError::Closed { code, reason }),
                    _ => Err(WtClientError::Protocol("short close frame".into())),
                }
            }
            Some(body) => Ok(body),
            None => Err(self.ended().await),
        }
    }

    /// Why the session ended, once the stream has.
    async fn ended(&self) -> WtClientError {
        let closed = tokio::time::timeout(Duration::from_secs(2), self.connection.closed()).await;
        match closed {
            Ok(ConnectionError::ApplicationClosed(close)) => WtClientError::Closed {
                code: u16::try_from(close.code().into_inner()).unwrap_or(0),
                reason: String::from_utf8_lossy(close.reason()).into_owned(),
            },
            _ => WtClientError::Lost,
        }
    }

    /// Reads the server's challenge: the first frame, its [`ServerNonce`].
    pub async fn challenge(&mut self) -> Result<ServerNonce, WtClientError> {
        // Always the server's first frame, read as the challenge whatever its first byte (one
        // nonce in 256 starts with the close frame's tag); a refusal before it closes the
        // session, which `ended` reports.
        let body = match read_frame(&mut self.recv, max_frame_bytes(0)).await? {
            Some(body) => body,
            None => return Err(self.ended().await),
        };
        ServerNonce::read(&body).ok_or_else(|| {
            WtClientError::Protocol(format!(
                "the challenge is {} bytes, not {SERVER_NONCE_BYTES}",
                body.len()
            ))
        })
    }

    /// Answers the server's challenge with the login for the public connect `token` (its
    /// own client-to-server key makes the proof), then reads the server's answer: the
    /// connection parameters, or the close the server answered with.
    pub async fn handshake(self, token: &[u8]) -> Result<WtClient, WtClientError> {
        self.handshake_with(|nonce| {
            login_for_token(token, nonce)
                .map_err(|error| WtClientError::Protocol(format!("connect token: {error}")))
        })
        .await
    }

    /// [`handshake`](Self::handshake) with the login frame `login` makes from the server's
    /// challenge: for tests that send what a well-behaved client would not.
    pub async fn handshake_with(
        mut self,
        login: impl FnOnce(&ServerNonce) -> Result<Vec<u8>, WtClientError>,
    ) -> Result<WtClient, WtClientError> {
        let nonce = self.challenge().await?;
        self.send_frame(&login(&nonce)?).await?;
        let body = self.recv_frame(super::framing::max_frame_bytes(0)).await?;
        let params = ConnectionParams::read(&body)
            .ok_or_else(|| WtClientError::Protocol("malformed connection parameters".into()))?;
        let channels: Arc<[ChannelKind]> = params.channels.clone().into();
        let (events_in, events) = mpsc::channel(EVENT_QUEUE);
        let max_frame = max_frame_bytes(params.max_message_size);
        let reader = tokio::spawn(read_events(
            self.recv,
            self.connection.clone(),
            channels.clone(),
            max_frame,
            events_in,
        ));
        Ok(WtClient {
            _endpoint: self.endpoint,
            connection: self.connection,
            send: self.send,
            events,
            reader,
            sequences: vec![0; channels.len()],
            channels,
            params,
            datagram: Vec::new(),
            frames: BytesMut::new(),
        })
    }
}

/// A WebTransport player: connected, authenticated, with the server's connection
/// parameters.
///
/// ```no_run
/// # async fn play(token: &[u8]) -> Result<(), tickwire_net::wt::WtClientError> {
/// use tickwire_net::wt::WtClient;
/// let mut client = WtClient::connect("https://127.0.0.1:4433/wt", None, token).await?;
/// client.send(0, bytes::Bytes::from_static(b"hello")).await?;
/// let (channel, message) = client.recv().await?;
/// # Ok(())
/// # }
/// ```
pub struct WtClient {
    _endpoint: Endpoint<wtransport::endpoint::endpoint_side::Client>,
    connection: Connection,
    send: SendStream,
    events: mpsc::Receiver<Result<(u8, Bytes), WtClientError>>,
    reader: tokio::task::JoinHandle<()>,
    channels: Arc<[ChannelKind]>,
    sequences: Vec<u16>,
    params: ConnectionParams,
    datagram: Vec<u8>,
    frames: BytesMut,
}

impl std::fmt::Debug for WtClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WtClient")
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Drop for WtClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl WtClient {
    /// Opens a session at `url`, logs in with the public connect `token` (answering the
    /// server's challenge with its proof of possession) and waits for the connection
    /// parameters.
    /// `cert_sha256` is the matchmaking answer's hex hash for a self-signed certificate.
    pub async fn connect(
        url: &str,
        cert_sha256: Option<&str>,
        token: &[u8],
    ) -> Result<Self, WtClientError> {
        let hash = match cert_sha256 {
            Some(hex) => Some(parse_cert_sha256(hex).ok_or_else(|| {
                WtClientError::Connect(format!("cert_sha256 {hex:?} is not 64 hex digits"))
            })?),
            None => None,
        };
        WtRawSession::open(url, hash).await?.handshake(token).await
    }

    /// What the server dictated.
    pub fn params(&self) -> &ConnectionParams {
        &self.params
    }

    /// The session's round-trip time estimate.
    pub fn rtt(&self) -> Duration {
        self.connection.rtt()
    }

    /// Sends `message` on `channel`: a frame for Reliable channels (and for messages too
    /// large for a datagram), a datagram otherwise. Waits only while the control stream's
    /// flow control is full.
    pub async fn send(&mut self, channel: u8, message: Bytes) -> Result<(), WtClientError> {
        self.queue(channel, &message)?;
        self.flush().await
    }

    /// Queues `message` without writing the stream ([`flush`](Self::flush) does); datagrams
    /// go at once.
    pub fn queue(&mut self, channel: u8, message: &[u8]) -> Result<(), WtClientError> {
        let kind = *self
            .channels
            .get(usize::from(channel))
            .ok_or_else(|| WtClientError::Protocol(format!("no channel {channel}")))?;
        if kind != ChannelKind::Reliable {
            let fits = self
                .connection
                .max_datagram_size()
                .is_some_and(|max| datagram_header_bytes(kind) + message.len() <= max);
            if fits {
                let sequence = &mut self.sequences[usize::from(channel)];
                *sequence = sequence.wrapping_add(1);
                write_datagram(&mut self.datagram, channel, kind, *sequence, message);
                match self.connection.send_datagram(&self.datagram) {
                    Ok(()) => return Ok(()),
                    Err(SendDatagramError::TooLarge) => {}
                    Err(_) => return Err(WtClientError::Lost),
                }
            }
        }
        put_data_frame(&mut self.frames, channel, message);
        Ok(())
    }

    /// Writes the queued frames.
    pub async fn flush(&mut self) -> Result<(), WtClientError> {
        if self.frames.is_empty() {
            return Ok(());
        }
        let frames = self.frames.split();
        self.send
            .write_all(&frames)
            .await
            .map_err(|_| WtClientError::Lost)
    }

    /// The next message from the server, or how the session ended.
    pub async fn recv(&mut self) -> Result<(u8, Bytes), WtClientError> {
        match self.events.recv().await {
            Some(event) => event,
            None => Err(WtClientError::Lost),
        }
    }

    /// A message already received, if any, without waiting.
    pub fn try_recv(&mut self) -> Option<Result<(u8, Bytes), WtClientError>> {
        self.events.try_recv().ok()
    }

    /// Leaves: a close frame with `code` (4001 for a player leaving), the stream finished,
    /// then the session closed with the same code.
    pub async fn close(&mut self, code: CloseCode, reason: &str) {
        let frame = close_frame(code.code(), reason);
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            if self.send.write_all(&frame).await.is_ok() && self.send.finish().await.is_ok() {
                self.send.stopped().await;
            }
        })
        .await;
        self.connection
            .close(VarInt::from_u32(code.code().into()), reason.as_bytes());
    }
}

async fn read_frame(recv: &mut RecvStream, max: usize) -> Result<Option<Bytes>, WtClientError> {
    let mut prefix = [0u8; FRAME_HEADER_BYTES];
    match recv.read_exact(&mut prefix).await {
        Ok(()) => {}
        Err(StreamReadExactError::FinishedEarly(0)) => return Ok(None),
        Err(_) => return Err(WtClientError::Lost),
    }
    let len = check_frame_length(prefix, max)
        .map_err(|error| WtClientError::Protocol(error.to_string()))?;
    let mut body = vec![0u8; len];
    recv.read_exact(&mut body)
        .await
        .map_err(|_| WtClientError::Lost)?;
    Ok(Some(Bytes::from(body)))
}

/// Frames and datagrams into one queue, until the session ends (its end last).
async fn read_events(
    mut recv: RecvStream,
    connection: Connection,
    channels: Arc<[ChannelKind]>,
    max_frame: usize,
    events: mpsc::Sender<Result<(u8, Bytes), WtClientError>>,
) {
    let mut receiver = DatagramReceiver::new(channels.len());
    let frames = async {
        loop {
            let end = match read_frame(&mut recv, max_frame).await {
                Ok(Some(body)) => match parse_frame(body, channels.len()) {
                    Ok(Frame::Data(channel, message)) => {
                        if events.send(Ok((channel, message))).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Ok(Frame::Close(code, reason)) => WtClientError::Closed { code, reason },
                    Err(error) => WtClientError::Protocol(error.to_string()),
                },
                Ok(None) | Err(WtClientError::Lost) => {
                    let closed =
                        tokio::time::timeout(Duration::from_secs(2), connection.closed()).await;
                    match closed {
                        Ok(ConnectionError::ApplicationClosed(close)) => WtClientError::Closed {
                            code: u16::try_from(close.code().into_inner()).unwrap_or(0),
                            reason: String::from_utf8_lossy(close.reason()).into_owned(),
                        },
                        _ => WtClientError::Lost,
                    }
                }
                Err(error) => error,
            };
            let _ = events.send(Err(end)).await;
            return;
        }
    };
    let datagrams = async {
        while let Ok(datagram) = connection.receive_datagram().await {
            if let Ok(message) = receiver.accept(datagram.payload(), &channels) {
                // Full: the application is behind; an unreliable message is dropped.
                let _ = events.try_send(Ok(message));
            }
        }
        // The stream side reports how the session ended.
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = frames => {}
        () = datagrams => {}
    }
}
