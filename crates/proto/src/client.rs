//! The client endpoint: connects with a connect token, then runs the connection, without I/O.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::connection::{
    Connection, ConnectionStats, DISCONNECT_REDUNDANCY, Received, Refused, Sender, read_disconnect,
};
use crate::crypto::Cipher;
use crate::packet::{
    CHALLENGE_TOKEN_BYTES, EncryptedHeader, PacketType, RESPONSE_BYTES, Request,
    is_handshake_sequence, write_encrypted,
};
use crate::params::{ConnectionParams, DisconnectReason};
use crate::reliable::{Owned, ReliabilityConfig, SendError};
use crate::server::MAX_DATAGRAM_BYTES;
use crate::token::ConnectToken;
use crate::{Transmit, UnixClock};

/// How often the client repeats a handshake packet until it is answered.
pub const HANDSHAKE_RESEND_INTERVAL: Duration = Duration::from_millis(100);

/// Where the client is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// Handshaking with one of the token's servers.
    Connecting,
    /// Connected; messages flow.
    Connected,
    /// Done, for this reason.
    Disconnected(DisconnectReason),
}

/// Something that happened, for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEvent {
    /// The handshake completed; these are the parameters the server dictated.
    Connected {
        /// Tick rate, keepalive, timeout, MTU and channels, as the server decided.
        params: ConnectionParams,
    },
    /// A message arrived.
    Message {
        /// On which channel.
        channel: u8,
        /// The message.
        message: Bytes,
    },
    /// The connection ended or never started.
    Disconnected {
        /// Why.
        reason: DisconnectReason,
    },
}

/// Why [`Client::send`] did not queue a message.
#[derive(Debug, thiserror::Error)]
pub enum ClientSendError {
    /// The client is not connected.
    #[error("not connected")]
    NotConnected,
    /// The connection refused the message.
    #[error(transparent)]
    Send(#[from] SendError),
}

enum Phase {
    SendingRequest {
        last_sent: Option<Instant>,
    },
    SendingResponse {
        last_sent: Option<Instant>,
        /// The challenge answered: a newer one (the server answered a repeated request
        /// after this one) replaces it, since the server takes only the newest.
        challenge_sequence: u64,
        /// The response, sealed once and sent as is each time.
        response: Box<[u8; RESPONSE_BYTES]>,
    },
    Connected(Box<Connection>),
    Disconnected(DisconnectReason),
}

/// The client endpoint of the tickwire protocol.
///
/// Sans-IO, driven like the server: [`handle_datagram`](Self::handle_datagram) for each
/// datagram from the server, [`handle_timeout`](Self::handle_timeout) when
/// [`poll_timeout`](Self::poll_timeout) comes, [`poll_event`](Self::poll_event) until
/// `None`, then [`poll_transmit`](Self::poll_transmit) until `None`.
pub struct Client {
    token: ConnectToken,
    clock: UnixClock,
    reliability: ReliabilityConfig,
    server_index: usize,
    /// When the handshake with the current server began.
    server_started: Instant,
    server_to_client: Cipher,
    phase: Phase,
    events: VecDeque<ClientEvent>,
    /// Disconnect packets still to send.
    farewells: VecDeque<(SocketAddr, Vec<u8>)>,
    /// What the server's disconnect said after its reason code.
    disconnect_text: String,
}

impl Client {
    /// A client that will connect with `token`; its clock reads `unix_time` at `now`.
    /// `reliability` bounds what this client buffers (channels and MTU come from the server).
    pub fn new(
        token: ConnectToken,
        now: Instant,
        unix_time: u64,
        reliability: ReliabilityConfig,
    ) -> Self {
        Self {
            server_to_client: Cipher::new(&token.server_to_client_key),
            token,
            clock: UnixClock::new(now, unix_time),
            reliability,
            server_index: 0,
            server_started: now,
            phase: Phase::SendingRequest { last_sent: None },
            events: VecDeque::new(),
            farewells: VecDeque::new(),
            disconnect_text: String::new(),
        }
    }

    /// The server's words with its disconnect, once disconnected by the server: a room's
    /// refusal or a kick's reason ("room crashed"), empty when it gave only a reason code.
    pub fn disconnect_text(&self) -> &str {
        &self.disconnect_text
    }

    /// Where the client is.
    pub fn state(&self) -> ClientState {
        match &self.phase {
            Phase::SendingRequest { .. } | Phase::SendingResponse { .. } => ClientState::Connecting,
            Phase::Connected(_) => ClientState::Connected,
            Phase::Disconnected(reason) => ClientState::Disconnected(*reason),
        }
    }

    /// The server being connected to (or connected).
    pub fn server_address(&self) -> SocketAddr {
        self.token.server_addresses[self.server_index]
    }

    /// Figures about the connection, once connected.
    pub fn stats(&self) -> Option<ConnectionStats> {
        match &self.phase {
            Phase::Connected(connection) => Some(connection.stats()),
            _ => None,
        }
    }

    fn end(&mut self, reason: DisconnectReason) {
        if !matches!(self.phase, Phase::Disconnected(_)) {
            self.phase = Phase::Disconnected(reason);
            self.events.push_back(ClientEvent::Disconnected { reason });
        }
    }

    /// Takes in one datagram; anything not from the server, or not authentic, is ignored.
    /// Its messages become [`ClientEvent::Message`]s.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        self.take_in(now, from, datagram, None::<&mut fn(u8, &[u8])>);
    }

    /// [`handle_datagram`](Self::handle_datagram), handing each message to `on_message`
    /// (its channel, its bytes) instead of queueing it as an event. A message that came
    /// whole and in order is lent as a slice of the decrypted packet, so a receiver that
    /// only looks at it neither copies nor allocates: the load bots, a thousand to a core,
    /// read snapshots this way. Connecting and disconnecting are still events.
    pub fn handle_datagram_with(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        mut on_message: impl FnMut(u8, &[u8]),
    ) {
        self.take_in(now, from, datagram, Some(&mut on_message));
    }

    /// Starts loading the connection's state into the processor's cache, without waiting:
    /// a driver with a batch of datagrams for many clients calls this for each of them
    /// first (see [`prefetch`](crate::prefetch)). A hint; it changes nothing.
    #[inline]
    pub fn prefetch(&self) {
        if let Phase::Connected(connection) = &self.phase {
            crate::prefetch::prefetch(&**connection);
        }
    }

    fn take_in<F: FnMut(u8, &[u8])>(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        on_message: Option<&mut F>,
    ) {
        if datagram.len() > MAX_DATAGRAM_BYTES {
            return;
        }
        let Some(header) = EncryptedHeader::read(datagram) else {
            return;
        };
        // The plaintext goes on the stack: a buffer held by each client was 2 KB apiece
        // and, across a core's thousand bots, a cache miss on every packet.
        let mut scratch = [0u8; MAX_DATAGRAM_BYTES];
        match &mut self.phase {
            Phase::Connected(connection) => {
                if from != connection.address {
                    return;
                }
                let received = match on_message {
                    Some(on_message) => connection.handle_datagram(
                        now,
                        header,
                        datagram,
                        &mut scratch,
                        on_message,
                        Sender::Server,
                    ),
                    None => connection.handle_datagram(
                        now,
                        header,
                        datagram,
                        &mut scratch,
                        &mut Owned(|channel, message| {
                            self.events
                                .push_back(ClientEvent::Message { channel, message });
                        }),
                        Sender::Server,
                    ),
                };
                match received {
                    Ok(Received::Disconnect(reason, text)) => {
                        self.disconnect_text = text;
                        self.end(reason);
                    }
                    Ok(Received::Payload | Received::Other)
                    | Err(
                        Refused::Replay
                        | Refused::Unauthenticated
                        | Refused::Malformed
                        | Refused::NotOnConnection,
                    ) => {}
                    Err(Refused::Fatal(reason)) => self.close(now, reason),
                }
            }
            Phase::SendingRequest { .. } | Phase::SendingResponse { .. } => {
                if from == self.server_address() {
                    self.handle_handshake_reply(now, header, datagram, &mut scratch);
                }
            }
            Phase::Disconnected(_) => {}
        }
    }

    fn handle_handshake_reply(
        &mut self,
        now: Instant,
        header: EncryptedHeader,
        datagram: &[u8],
        scratch: &mut [u8],
    ) {
        // Challenges and denials come in the handshake half of the sequence space, the
        // accepted packet and a disconnect in the connection's; anything else is not the
        // server's and is not opened.
        let handshake_packet = matches!(
            header.packet_type,
            PacketType::Challenge | PacketType::Denied
        );
        let connection_packet = matches!(
            header.packet_type,
            PacketType::Accepted | PacketType::Disconnect
        );
        let in_handshake_half = is_handshake_sequence(header.sequence);
        if !(handshake_packet && in_handshake_half || connection_packet && !in_handshake_half) {
            return;
        }
        if let (
            PacketType::Challenge,
            Phase::SendingResponse {
                challenge_sequence, ..
            },
        ) = (header.packet_type, &self.phase)
            && header.sequence <= *challenge_sequence
        {
            return;
        }
        let Some(body) = header.open(
            datagram,
            &self.server_to_client,
            self.token.protocol_id,
            scratch,
        ) else {
            return;
        };
        match (header.packet_type, &self.phase) {
            (PacketType::Denied, _) => {
                let reason = body.first().map_or(DisconnectReason::Other(0), |code| {
                    DisconnectReason::from_code(*code)
                });
                self.end(reason);
            }
            // The server accepted and at once closed the connection (a kick, a shutdown), and
            // the network delivered the close first. It is authentic (it opened with the
            // server's key), so it ends the handshake with its reason rather than a timeout.
            (PacketType::Disconnect, Phase::SendingResponse { .. }) => {
                if let Some((reason, text)) = read_disconnect(body) {
                    self.disconnect_text = text.to_string();
                    self.end(reason);
                }
            }
            (PacketType::Challenge, _) => {
                if body.len() != CHALLENGE_TOKEN_BYTES {
                    return;
                }
                // The response carries the challenge token back, sealed under the
                // client-to-server key with the challenge's own sequence: it proves this
                // client holds that key, and its nonce is in the handshake half, which no
                // connection packet reaches.
                let mut response = Box::new([0u8; RESPONSE_BYTES]);
                let sealed = write_encrypted(
                    &mut response[..],
                    PacketType::Response,
                    header.sequence,
                    &Cipher::new(&self.token.client_to_server_key),
                    self.token.protocol_id,
                    |out| {
                        out.get_mut(..CHALLENGE_TOKEN_BYTES)?.copy_from_slice(body);
                        Some(CHALLENGE_TOKEN_BYTES)
                    },
                );
                if sealed != Some(RESPONSE_BYTES) {
                    return;
                }
                self.phase = Phase::SendingResponse {
                    last_sent: None,
                    challenge_sequence: header.sequence,
                    response,
                };
            }
            (PacketType::Accepted, Phase::SendingResponse { .. }) => {
                let Some(params) = ConnectionParams::read(body) else {
                    return;
                };
                let connection = Connection::new(
                    now,
                    self.server_address(),
                    0,
                    self.token.protocol_id,
                    &self.token.client_to_server_key,
                    &self.token.server_to_client_key,
                    &params,
                    &self.reliability,
                );
                match connection {
                    Ok(mut connection) => {
                        // The accepted packet came through this connection's sequence space.
                        connection.note_received(header.sequence, now);
                        self.phase = Phase::Connected(Box::new(connection));
                        self.events.push_back(ClientEvent::Connected { params });
                    }
                    Err(_) => self.end(DisconnectReason::ProtocolViolation),
                }
            }
            _ => {}
        }
    }

    /// Gives up on handshakes and connections that have gone quiet.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &self.phase {
            Phase::SendingRequest { .. } | Phase::SendingResponse { .. } => {
                if self.clock.unix_seconds(now) >= self.token.expire_timestamp {
                    return self.end(DisconnectReason::HandshakeTimedOut);
                }
                let timeout = Duration::from_secs(self.token.timeout_seconds.into());
                if now.saturating_duration_since(self.server_started) >= timeout {
                    if self.server_index + 1 < self.token.server_addresses.len() {
                        // Try the token's next server from the start.
                        self.server_index += 1;
                        self.server_started = now;
                        self.phase = Phase::SendingRequest { last_sent: None };
                    } else {
                        self.end(DisconnectReason::HandshakeTimedOut);
                    }
                }
            }
            Phase::Connected(connection) => {
                if connection.is_timed_out(now) {
                    self.end(DisconnectReason::TimedOut);
                }
            }
            Phase::Disconnected(_) => {}
        }
    }

    /// When `handle_timeout` or `poll_transmit` next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::SendingRequest { last_sent } | Phase::SendingResponse { last_sent, .. } => {
                let handshake_deadline =
                    self.server_started + Duration::from_secs(self.token.timeout_seconds.into());
                let resend =
                    last_sent.map_or(self.server_started, |sent| sent + HANDSHAKE_RESEND_INTERVAL);
                Some(resend.min(handshake_deadline))
            }
            Phase::Connected(connection) => Some(connection.next_timeout()),
            Phase::Disconnected(_) => None,
        }
    }

    /// The next thing that happened.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Queues a message for the server.
    pub fn send(&mut self, channel: u8, message: Bytes) -> Result<(), ClientSendError> {
        match &mut self.phase {
            Phase::Connected(connection) => Ok(connection.send(channel, message)?),
            _ => Err(ClientSendError::NotConnected),
        }
    }

    /// Ends the connection, telling the server (redundantly).
    pub fn disconnect(&mut self, now: Instant) {
        self.close(now, DisconnectReason::Requested);
    }

    fn close(&mut self, now: Instant, reason: DisconnectReason) {
        if let Phase::Connected(connection) = &mut self.phase {
            for _ in 0..DISCONNECT_REDUNDANCY {
                let mut packet = vec![0u8; 64];
                if let Some(len) = connection.write_control(
                    now,
                    PacketType::Disconnect,
                    &[reason.code()],
                    &mut packet,
                ) {
                    packet.truncate(len);
                    self.farewells.push_back((connection.address, packet));
                }
            }
        }
        self.end(reason);
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) would write something now without a
    /// timer: a farewell, a handshake packet due, messages or an ack owed at once. It may
    /// say true when `poll_transmit` then finds nothing, never false when it would write;
    /// keepalives, resends and delayed acks come due at [`poll_timeout`](Self::poll_timeout).
    /// A driver that has just handed in datagrams can skip `poll_transmit` when it is false
    /// (a stream of snapshots asks for no answer of its own).
    pub fn wants_to_send(&self, now: Instant) -> bool {
        if !self.farewells.is_empty() {
            return true;
        }
        match &self.phase {
            Phase::SendingRequest { last_sent } | Phase::SendingResponse { last_sent, .. } => {
                handshake_resend_due(*last_sent, now)
            }
            Phase::Connected(connection) => connection.wants_to_send(),
            Phase::Disconnected(_) => false,
        }
    }

    /// Writes the next datagram to send into `buf` (at least the MTU) and says where it goes.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if let Some((destination, packet)) = self.farewells.pop_front() {
            let len = packet.len().min(buf.len());
            buf[..len].copy_from_slice(&packet[..len]);
            return Some(Transmit { destination, len });
        }
        let destination = self.server_address();
        let due = |last_sent: &Option<Instant>| handshake_resend_due(*last_sent, now);
        let len = match &mut self.phase {
            Phase::SendingRequest { last_sent } if due(last_sent) => {
                *last_sent = Some(now);
                Request {
                    protocol_id: self.token.protocol_id,
                    expire_timestamp: self.token.expire_timestamp,
                    nonce: self.token.nonce,
                    private_token: &self.token.private_token,
                }
                .write(buf)?
            }
            Phase::SendingResponse {
                last_sent,
                response,
                ..
            } if due(last_sent) => {
                *last_sent = Some(now);
                buf.get_mut(..RESPONSE_BYTES)?
                    .copy_from_slice(&response[..]);
                RESPONSE_BYTES
            }
            Phase::Connected(connection) => connection.write_payload(now, buf)?,
            _ => return None,
        };
        Some(Transmit { destination, len })
    }
}

/// Whether a handshake packet last sent at `last_sent` (never, if `None`) is due again.
fn handshake_resend_due(last_sent: Option<Instant>, now: Instant) -> bool {
    last_sent.is_none_or(|sent| now.saturating_duration_since(sent) >= HANDSHAKE_RESEND_INTERVAL)
}
