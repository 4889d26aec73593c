//! One connection to a room, over the UDP protocol or WebSocket: the same calls and events
//! whichever transport carries it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tickwire_net::driver::ClientDriver;
use tickwire_net::udp::BatchSocket;
use tickwire_proto::reliable::ReliabilityConfig;
use tickwire_proto::{Client, ClientEvent, ConnectionParams, DisconnectReason, unix_now};

use crate::matchmake::MatchAnswer;
use crate::ws::WsLink;
use crate::wt::WtLink;

/// Which transport carries a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// tickwire's UDP protocol: encrypted, reliable and unreliable channels.
    Udp,
    /// WebSocket, plain.
    Ws,
    /// WebSocket over TLS (the server's `tls.listen`).
    Wss,
    /// WebTransport (HTTP/3): reliable channels on a stream, unreliable ones as datagrams.
    Wt,
}

impl Transport {
    /// The name used on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Ws => "ws",
            Self::Wss => "wss",
            Self::Wt => "wt",
        }
    }
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "udp" => Ok(Self::Udp),
            "ws" => Ok(Self::Ws),
            "wss" => Ok(Self::Wss),
            "wt" => Ok(Self::Wt),
            other => Err(format!("unknown transport {other:?} (udp, ws, wss or wt)")),
        }
    }
}

/// How to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// The whole handshake's bound.
    pub timeout: Duration,
    /// Trust for `wss`, required for [`Transport::Wss`], and for a [`Session`]'s `https`
    /// matchmaking, which without it trusts the web's authorities (see [`crate::TlsTrust`],
    /// or [`crate::tls_trusting`] for a development server's self-signed certificate).
    ///
    /// [`Session`]: crate::Session
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// How often a WebSocket link measures its round trip with a ping.
    pub ws_ping_interval: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            tls: None,
            ws_ping_interval: Duration::from_secs(1),
        }
    }
}

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// A reason both transports share (a UDP disconnect code, or WebSocket close `4000 +`
    /// that code), other than a kick.
    Reason(DisconnectReason),
    /// The server removed the player (UDP reason 4, close code 4004): the room refused
    /// their join or kicked them, an operator kicked them, the room closed or crashed. The
    /// server's reason verbatim ("cheaters may not play", "room crashed"), up to 123 bytes,
    /// over every transport.
    Kicked(String),
    /// The server refused the connect token (WebSocket 4010 bad, 4011 expired, 4012 used, 4014
    /// a login without proof that the client holds the token's key).
    TokenRefused(u16),
    /// A WebSocket close with any other code (1000 when the server just closed).
    Closed(u16),
    /// The transport failed without a word from the server (socket error, TCP reset).
    Lost(String),
}

impl Ended {
    /// Whether trying again with a fresh token can bring the player back: the connection was
    /// lost or timed out, not ended on purpose by the server or this client.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Reason(reason) => matches!(
                reason,
                DisconnectReason::TimedOut
                    | DisconnectReason::ReliableQueueFull
                    | DisconnectReason::HandshakeTimedOut
            ),
            Self::TokenRefused(_) => true,
            Self::Kicked(_) | Self::Closed(_) => false,
            Self::Lost(_) => true,
        }
    }

    /// The ending a WebSocket or WebTransport close code and reason mean.
    pub fn from_close(code: u16, reason: &str) -> Self {
        match code {
            4001..=4009 => {
                Self::from_reason(DisconnectReason::from_code((code - 4000) as u8), reason)
            }
            4010..=4012 | 4014 => Self::TokenRefused(code),
            other => Self::Closed(other),
        }
    }

    /// The ending a shared reason means, with the server's text for a kick.
    pub fn from_reason(reason: DisconnectReason, text: &str) -> Self {
        match reason {
            DisconnectReason::Kicked => Self::Kicked(text.to_string()),
            other => Self::Reason(other),
        }
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Reason(reason) => write!(f, "{reason:?}"),
            Self::Kicked(reason) if reason.is_empty() => write!(f, "kicked"),
            Self::Kicked(reason) => write!(f, "kicked: {reason}"),
            Self::TokenRefused(code) => write!(f, "token refused ({code})"),
            Self::Closed(code) => write!(f, "closed ({code})"),
            Self::Lost(why) => write!(f, "connection lost: {why}"),
        }
    }
}

impl std::error::Error for Ended {}

/// What a connection delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// A message from the room, on the channel it was sent on.
    Message {
        /// Channel id.
        channel: u8,
        /// The bytes.
        message: Bytes,
    },
    /// The connection is over; later calls return this again.
    Ended(Ended),
}

/// Why connecting failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The server did not offer the transport (no `wss` endpoint), or it needs options not
    /// given.
    #[error("{0}")]
    Unavailable(String),
    /// A socket or TLS error.
    #[error("connection failed: {0}")]
    Io(#[from] std::io::Error),
    /// The server ended the handshake.
    #[error("the server refused the connection: {0}")]
    Refused(Ended),
    /// The handshake did not finish in time.
    #[error("no connection within {0:?}")]
    TimedOut(Duration),
    /// The server answered something the protocol does not allow.
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// Why a message was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// No such channel on this connection.
    #[error("no channel {0}")]
    NoChannel(u8),
    /// Larger than the connection's largest message.
    #[error("message of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// The message's size.
        len: usize,
        /// The limit the server dictated.
        max: usize,
    },
    /// The connection has ended.
    #[error("the connection has ended")]
    Ended,
    /// The protocol refused it (a reliable queue over its bound).
    #[error("{0}")]
    Refused(String),
}

/// Counters of a connection, whatever its transport.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkStats {
    /// Messages queued to the server.
    pub messages_sent: u64,
    /// Messages received from the server.
    pub messages_received: u64,
    /// Message bytes queued to the server (payload only).
    pub bytes_sent: u64,
    /// Message bytes received (payload only).
    pub bytes_received: u64,
    /// Smoothed round-trip time, once measured (UDP: packet acks; WebSocket: pings).
    pub rtt: Option<Duration>,
    /// Fraction of packets lost (UDP only).
    pub packet_loss: Option<f32>,
}

enum Inner {
    Udp(Box<ClientDriver>),
    Ws(Box<WsLink>),
    Wt(Box<WtLink>),
}

/// A connection to a room.
pub struct Link {
    inner: Inner,
    transport: Transport,
    params: ConnectionParams,
    stats: LinkStats,
    ended: Option<Ended>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("transport", &self.transport)
            .field("stats", &self.stats)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Link {
    /// Connects with `answer`'s token over `transport`; returns once the server accepted.
    pub async fn connect(
        answer: &MatchAnswer,
        transport: Transport,
        options: &ConnectOptions,
    ) -> Result<Self, ConnectError> {
        let connecting = async {
            match transport {
                Transport::Udp => connect_udp(answer).await,
                Transport::Ws => {
                    let (link, params) =
                        WsLink::connect(&answer.endpoints.ws, answer, options).await?;
                    Ok((Inner::Ws(Box::new(link)), params))
                }
                Transport::Wss => {
                    let url = answer.endpoints.wss.as_deref().ok_or_else(|| {
                        ConnectError::Unavailable("the server offers no wss endpoint".into())
                    })?;
                    let (link, params) = WsLink::connect(url, answer, options).await?;
                    Ok((Inner::Ws(Box::new(link)), params))
                }
                Transport::Wt => {
                    let endpoint = answer.endpoints.wt.as_ref().ok_or_else(|| {
                        ConnectError::Unavailable("the server offers no WebTransport".into())
                    })?;
                    let (link, params) = WtLink::connect(endpoint, answer).await?;
                    Ok((Inner::Wt(Box::new(link)), params))
                }
            }
        };
        let (inner, params) = tokio::time::timeout(options.timeout, connecting)
            .await
            .map_err(|_| ConnectError::TimedOut(options.timeout))??;
        Ok(Self {
            inner,
            transport,
            params,
            stats: LinkStats::default(),
            ended: None,
        })
    }

    /// The transport carrying this connection.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// What the server dictated: tick rate, timeout, channels, largest message.
    pub fn params(&self) -> &ConnectionParams {
        &self.params
    }

    /// Queues `message` on `channel`; [`Link::flush`] or [`Link::next_event`] sends it.
    pub fn send(&mut self, channel: u8, message: Bytes) -> Result<(), SendError> {
        if self.ended.is_some() {
            return Err(SendError::Ended);
        }
        if usize::from(channel) >= self.params.channels.len() {
            return Err(SendError::NoChannel(channel));
        }
        let max = self.params.max_message_size as usize;
        if message.len() > max {
            return Err(SendError::TooLarge {
                len: message.len(),
                max,
            });
        }
        let len = message.len() as u64;
        match &mut self.inner {
            Inner::Udp(driver) => driver
                .endpoint_mut()
                .send(channel, message)
                .map_err(|error| SendError::Refused(error.to_string()))?,
            Inner::Ws(link) => link.send(channel, &message),
            Inner::Wt(link) => link.send(channel, &message)?,
        }
        self.stats.messages_sent += 1;
        self.stats.bytes_sent += len;
        Ok(())
    }

    /// Sends everything queued.
    pub async fn flush(&mut self) -> Result<(), Ended> {
        if let Some(ended) = &self.ended {
            return Err(ended.clone());
        }
        let flushed = match &mut self.inner {
            Inner::Udp(driver) => driver
                .flush()
                .await
                .map_err(|error| Ended::Lost(error.to_string())),
            Inner::Ws(link) => link.flush().await,
            Inner::Wt(link) => link.flush().await,
        };
        if let Err(ended) = &flushed {
            self.ended = Some(ended.clone());
        }
        flushed
    }

    /// The next message, or how the connection ended. Sends what is queued and keeps the
    /// connection alive while it waits. Cancel-safe: dropping the future loses nothing.
    pub async fn next_event(&mut self) -> LinkEvent {
        if let Some(ended) = &self.ended {
            return LinkEvent::Ended(ended.clone());
        }
        let event = match &mut self.inner {
            Inner::Udp(driver) => loop {
                match driver.next_event().await {
                    Ok(ClientEvent::Message { channel, message }) => {
                        break LinkEvent::Message { channel, message };
                    }
                    Ok(ClientEvent::Disconnected { reason }) => {
                        let text = driver.endpoint().disconnect_text();
                        break LinkEvent::Ended(Ended::from_reason(reason, text));
                    }
                    Ok(ClientEvent::Connected { .. }) => continue,
                    Err(error) => break LinkEvent::Ended(Ended::Lost(error.to_string())),
                }
            },
            Inner::Ws(link) => link.next_event().await,
            Inner::Wt(link) => link.next_event().await,
        };
        match &event {
            LinkEvent::Message { message, .. } => {
                self.stats.messages_received += 1;
                self.stats.bytes_received += message.len() as u64;
            }
            LinkEvent::Ended(ended) => self.ended = Some(ended.clone()),
        }
        event
    }

    /// How it ended, once it has.
    pub fn ended(&self) -> Option<&Ended> {
        self.ended.as_ref()
    }

    /// Counters and the measured round trip.
    pub fn stats(&self) -> LinkStats {
        let mut stats = self.stats;
        match &self.inner {
            Inner::Udp(driver) => {
                if let Some(connection) = driver.endpoint().stats() {
                    let reliability = connection.reliability;
                    if reliability.packets_acked > 0 {
                        stats.rtt = Some(reliability.rtt);
                    }
                    stats.packet_loss = Some(reliability.packet_loss);
                }
            }
            Inner::Ws(link) => stats.rtt = link.rtt(),
            Inner::Wt(link) => stats.rtt = Some(link.rtt()),
        }
        stats
    }

    /// Leaves: tells the server (a UDP disconnect, a WebSocket close 1000) and ends.
    pub async fn close(&mut self) {
        if self.ended.is_some() {
            return;
        }
        match &mut self.inner {
            Inner::Udp(driver) => {
                driver.endpoint_mut().disconnect(Instant::now());
                let _ = driver.flush().await;
            }
            Inner::Ws(link) => link.close().await,
            Inner::Wt(link) => link.close().await,
        }
        self.ended = Some(Ended::Reason(DisconnectReason::Requested));
    }
}

async fn connect_udp(answer: &MatchAnswer) -> Result<(Inner, ConnectionParams), ConnectError> {
    let local = if answer.endpoints.udp.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let socket = BatchSocket::bind(
        local
            .parse()
            .map_err(|_| ConnectError::Protocol("cannot form a local address".into()))?,
    )?;
    let client = Client::new(
        answer.token.clone(),
        Instant::now(),
        unix_now(),
        ReliabilityConfig::default(),
    );
    let mut driver = ClientDriver::new(socket, client);
    loop {
        match driver.next_event().await? {
            ClientEvent::Connected { params } => return Ok((Inner::Udp(Box::new(driver)), params)),
            ClientEvent::Disconnected { reason } => {
                let text = driver.endpoint().disconnect_text();
                return Err(ConnectError::Refused(Ended::from_reason(reason, text)));
            }
            // Nothing arrives before the connection is made.
            ClientEvent::Message { .. } => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_close_codes_map_onto_the_shared_reasons() {
        assert_eq!(
            Ended::from_close(4003, "server shutting down"),
            Ended::Reason(DisconnectReason::ServerShutdown)
        );
        assert_eq!(
            Ended::from_close(4008, ""),
            Ended::Reason(DisconnectReason::AlreadyConnected)
        );
        assert_eq!(
            Ended::from_close(4004, "room crashed"),
            Ended::Kicked("room crashed".into())
        );
        assert_eq!(Ended::from_close(4011, ""), Ended::TokenRefused(4011));
        assert_eq!(Ended::from_close(1000, ""), Ended::Closed(1000));
        let error: Box<dyn std::error::Error> = Box::new(Ended::Kicked("full".into()));
        assert_eq!(error.to_string(), "kicked: full");
    }

    #[test]
    fn only_losses_are_retried_never_a_deliberate_end() {
        for retryable in [
            Ended::Reason(DisconnectReason::TimedOut),
            Ended::Lost("reset".into()),
            Ended::TokenRefused(4011),
        ] {
            assert!(retryable.is_retryable(), "{retryable:?}");
        }
        for last in [
            Ended::Kicked("no cheating".into()),
            Ended::Reason(DisconnectReason::ServerShutdown),
            Ended::Reason(DisconnectReason::AlreadyConnected),
            Ended::Reason(DisconnectReason::Requested),
            Ended::Closed(1000),
        ] {
            assert!(!last.is_retryable(), "{last:?}");
        }
    }

    #[test]
    fn transports_parse_by_name() {
        for transport in [Transport::Udp, Transport::Ws, Transport::Wss, Transport::Wt] {
            assert_eq!(transport.name().parse::<Transport>(), Ok(transport));
        }
        assert!("tcp".parse::<Transport>().is_err());
    }
}
