//! What travels in each WebSocket message, and the close codes (`docs/PROTOCOL.md`,
//! "WebSocket transport"). Pure functions: no socket, no clock.

use bytes::Bytes;
use tickwire_proto::admission::Refusal;
use tickwire_proto::login::LoginRefusal;
use tickwire_proto::websocket::FrameError;
use tickwire_proto::{ConnectionParams, DisconnectReason, MAX_PARAMS_BYTES};

/// Why the server closed a WebSocket connection, sent as the close frame's code (with a
/// human-readable reason string beside it).
///
/// Codes 4001–4009 are `4000 +` the UDP protocol's [`DisconnectReason`] code, so a client SDK
/// reports the same reason whichever transport it uses; 4010 and up are WebSocket-only
/// refusals of the connect token or of a message. A client's frames that break RFC 6455
/// itself get the RFC's own codes, 1002, 1007 and 1009 ([`From<&FrameError>`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseCode {
    /// 4001: the client asked to disconnect (the server echoes it).
    Requested,
    /// 4002: nothing arrived from the client for the dictated timeout.
    TimedOut,
    /// 4003: the server is shutting down.
    ServerShutdown,
    /// 4004: the server (a room, an operator) removed the client.
    Kicked,
    /// 4005: the client read too slowly; reliable data queued for it passed its bound.
    SlowClient,
    /// 4006: the client broke the framing: a text message, an empty message, an unknown
    /// channel, or a first message that is not a connect token.
    ProtocolViolation,
    /// 4007: the server has no room for another connection.
    ServerFull,
    /// 4008: the same client id connected again with a fresh token; this older connection
    /// is replaced.
    AlreadyConnected,
    /// 4009: no connect token arrived within the handshake timeout.
    HandshakeTimedOut,
    /// 4010: the connect token is for another protocol id, tampered with, sealed under
    /// another key, or does not name this server (a first message that is not a token at
    /// all is a protocol violation, 4006).
    BadToken,
    /// 4011: the connect token's expiry has passed.
    TokenExpired,
    /// 4012: the connect token was already used.
    TokenReplayed,
    /// 4013: a WebTransport frame or message exceeded the size limit (WebSocket says 1009).
    MessageTooLarge,
    /// 4014: the login carries no proof of possession, or one that does not verify under
    /// the token's client-to-server key for this connection's challenge.
    BadProof,
    /// 1002 (RFC 6455): the client's frames broke the WebSocket protocol: unmasked, reserved
    /// bits or opcodes, a bad control or close frame, a stray continuation.
    WsProtocolError,
    /// 1007 (RFC 6455): a text message or close reason that is not UTF-8.
    WsInvalidPayload,
    /// 1009 (RFC 6455): a WebSocket frame or message exceeded the size limit.
    WsMessageTooBig,
}

impl CloseCode {
    /// Every code, for tables and tests.
    pub const ALL: [CloseCode; 17] = [
        Self::Requested,
        Self::TimedOut,
        Self::ServerShutdown,
        Self::Kicked,
        Self::SlowClient,
        Self::ProtocolViolation,
        Self::ServerFull,
        Self::AlreadyConnected,
        Self::HandshakeTimedOut,
        Self::BadToken,
        Self::TokenExpired,
        Self::TokenReplayed,
        Self::MessageTooLarge,
        Self::BadProof,
        Self::WsProtocolError,
        Self::WsInvalidPayload,
        Self::WsMessageTooBig,
    ];

    /// The close frame's code.
    pub fn code(self) -> u16 {
        match self {
            Self::Requested => 4001,
            Self::TimedOut => 4002,
            Self::ServerShutdown => 4003,
            Self::Kicked => 4004,
            Self::SlowClient => 4005,
            Self::ProtocolViolation => 4006,
            Self::ServerFull => 4007,
            Self::AlreadyConnected => 4008,
            Self::HandshakeTimedOut => 4009,
            Self::BadToken => 4010,
            Self::TokenExpired => 4011,
            Self::TokenReplayed => 4012,
            Self::MessageTooLarge => 4013,
            Self::BadProof => 4014,
            Self::WsProtocolError => 1002,
            Self::WsInvalidPayload => 1007,
            Self::WsMessageTooBig => 1009,
        }
    }

    /// The code a close frame's number stands for, if tickwire defines it.
    pub fn from_code(code: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|close| close.code() == code)
    }

    /// A short default reason, used when the caller gives none.
    pub fn default_reason(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::TimedOut => "timed out",
            Self::ServerShutdown => "server shutting down",
            Self::Kicked => "kicked",
            Self::SlowClient => "slow client: reliable send queue full",
            Self::ProtocolViolation => "protocol violation",
            Self::ServerFull => "server full",
            Self::AlreadyConnected => "connected again elsewhere",
            Self::HandshakeTimedOut => "no connect token before the handshake timeout",
            Self::BadToken => "bad connect token",
            Self::TokenExpired => "connect token expired",
            Self::TokenReplayed => "connect token already used",
            Self::MessageTooLarge => "message too large",
            Self::BadProof => "no valid proof of possession of the connect token",
            Self::WsProtocolError => "websocket protocol error",
            Self::WsInvalidPayload => "invalid utf-8",
            Self::WsMessageTooBig => "message too big",
        }
    }

    /// The UDP protocol's reason for the same event, where there is one.
    pub fn disconnect_reason(self) -> Option<DisconnectReason> {
        let code = self.code().checked_sub(4000)?;
        (1..=9)
            .contains(&code)
            .then(|| DisconnectReason::from_code(code as u8))
    }

    /// The close code for a reason the server side decided (a room's kick, a shutdown).
    /// Reasons the UDP protocol alone produces map to the nearest code.
    pub fn from_disconnect_reason(reason: DisconnectReason) -> Self {
        match reason {
            DisconnectReason::Requested => Self::Requested,
            DisconnectReason::TimedOut => Self::TimedOut,
            DisconnectReason::ServerShutdown => Self::ServerShutdown,
            DisconnectReason::Kicked | DisconnectReason::Other(_) => Self::Kicked,
            DisconnectReason::ReliableQueueFull => Self::SlowClient,
            DisconnectReason::ProtocolViolation => Self::ProtocolViolation,
            DisconnectReason::ServerFull => Self::ServerFull,
            DisconnectReason::AlreadyConnected => Self::AlreadyConnected,
            DisconnectReason::HandshakeTimedOut => Self::HandshakeTimedOut,
        }
    }
}

impl From<&Refusal> for CloseCode {
    /// The close code a refused connect token is reported with: the one mapping from
    /// admission to WebSocket and WebTransport.
    fn from(refusal: &Refusal) -> Self {
        match refusal {
            // Not a token at all: the client broke the handshake's framing.
            Refusal::Malformed { .. } | Refusal::PrivateMalformed => Self::ProtocolViolation,
            Refusal::Expired { .. } => Self::TokenExpired,
            Refusal::Replayed { .. } => Self::TokenReplayed,
            Refusal::WrongProtocol { .. } | Refusal::Tampered | Refusal::WrongServer { .. } => {
                Self::BadToken
            }
        }
    }
}

impl From<&LoginRefusal> for CloseCode {
    /// The close code a refused stream login is reported with.
    fn from(refusal: &LoginRefusal) -> Self {
        match refusal {
            LoginRefusal::Token(refusal) => Self::from(refusal),
            LoginRefusal::NoProof | LoginRefusal::WrongProof => Self::BadProof,
        }
    }
}

impl From<&FrameError> for CloseCode {
    /// The close code a client's broken WebSocket framing is answered with (RFC 6455 §7.4.1):
    /// the one mapping from the frame parser to close codes, before and after the token.
    fn from(error: &FrameError) -> Self {
        match error {
            FrameError::TooLarge { .. } => Self::WsMessageTooBig,
            FrameError::TextNotUtf8 => Self::WsInvalidPayload,
            FrameError::Unmasked
            | FrameError::MaskedServerFrame
            | FrameError::ReservedBits(_)
            | FrameError::ReservedOpcode(_)
            | FrameError::BadControlFrame
            | FrameError::StrayContinuation
            | FrameError::InterleavedMessage
            | FrameError::BadClosePayload
            | FrameError::BadCloseCode(_)
            | FrameError::CloseReasonNotUtf8 => Self::WsProtocolError,
        }
    }
}

pub use tickwire_proto::websocket::MAX_CLOSE_REASON_BYTES;

/// The server's first message: the same bytes as the UDP accepted packet's body.
pub fn accepted_message(params: &ConnectionParams) -> Option<Bytes> {
    let mut body = [0u8; MAX_PARAMS_BYTES];
    let len = params.write(&mut body)?;
    Some(Bytes::copy_from_slice(&body[..len]))
}

/// Why an inbound data message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DataMessageError {
    /// A message needs at least its channel byte.
    #[error("empty message; a message is a channel id and a payload")]
    Empty,
    /// The channel id is not one of the connection's channels.
    #[error("channel {channel} does not exist; the connection has {count} channels")]
    UnknownChannel {
        /// The channel id received.
        channel: u8,
        /// Channels the connection has.
        count: usize,
    },
}

/// Splits a binary message into its channel id and payload (sharing the buffer).
pub(crate) fn parse_data_message(
    message: Bytes,
    channel_count: usize,
) -> Result<(u8, Bytes), DataMessageError> {
    let &channel = message.first().ok_or(DataMessageError::Empty)?;
    if usize::from(channel) >= channel_count {
        return Err(DataMessageError::UnknownChannel {
            channel,
            count: channel_count,
        });
    }
    Ok((channel, message.slice(1..)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_are_distinct_and_round_trip() {
        for close in CloseCode::ALL {
            assert_eq!(CloseCode::from_code(close.code()), Some(close));
            assert!(
                (4000..5000).contains(&close.code()) || [1002, 1007, 1009].contains(&close.code()),
                "{close:?} neither private-use nor one of RFC 6455's failure codes"
            );
            assert!(close.default_reason().len() <= MAX_CLOSE_REASON_BYTES);
        }
        assert_eq!(CloseCode::from_code(1000), None);
        assert_eq!(CloseCode::from_code(4000), None);
    }

    #[test]
    fn refusals_map_to_their_close_codes() {
        let cases = [
            (Refusal::Malformed { len: 3 }, CloseCode::ProtocolViolation),
            (Refusal::PrivateMalformed, CloseCode::ProtocolViolation),
            (
                Refusal::WrongProtocol {
                    found: 1,
                    expected: 2,
                },
                CloseCode::BadToken,
            ),
            (Refusal::Tampered, CloseCode::BadToken),
            (Refusal::WrongServer { count: 1 }, CloseCode::BadToken),
            (
                Refusal::Expired {
                    expire_timestamp: 1,
                    now: 2,
                },
                CloseCode::TokenExpired,
            ),
            (
                Refusal::Replayed { remembered: 8 },
                CloseCode::TokenReplayed,
            ),
        ];
        for (refusal, close) in cases {
            assert_eq!(CloseCode::from(&refusal), close, "{refusal:?}");
        }
        for (refusal, close) in [
            (LoginRefusal::NoProof, CloseCode::BadProof),
            (LoginRefusal::WrongProof, CloseCode::BadProof),
            (LoginRefusal::Token(Refusal::Tampered), CloseCode::BadToken),
        ] {
            assert_eq!(CloseCode::from(&refusal), close, "{refusal:?}");
        }
        assert_eq!(CloseCode::BadProof.code(), 4014);
    }

    #[test]
    fn codes_4001_to_4009_mirror_the_udp_reasons() {
        for code in 1..=9u8 {
            let reason = DisconnectReason::from_code(code);
            let close = CloseCode::from_disconnect_reason(reason);
            assert_eq!(close.code(), 4000 + u16::from(code), "{reason:?}");
            assert_eq!(close.disconnect_reason(), Some(reason));
        }
        assert_eq!(CloseCode::BadToken.disconnect_reason(), None);
    }

    #[test]
    fn accepted_message_is_the_udp_accepted_body() {
        let params = ConnectionParams::default();
        let message = accepted_message(&params).unwrap();
        assert_eq!(
            &message[..],
            &[
                60, 0xe8, 0x03, 0x10, 0x27, 0, 0, 0xb0, 0x04, 0, 0, 4, 0, 3, 0, 1, 2
            ],
            "60 Hz, 1000 ms, 10000 ms, mtu 1200, 256 KiB, 3 channels"
        );
        assert_eq!(ConnectionParams::read(&message), Some(params));
    }

    #[test]
    fn data_messages_carry_their_channel_first() {
        assert_eq!(
            parse_data_message(Bytes::from_static(b"\x02snapshot"), 3),
            Ok((2, Bytes::from_static(b"snapshot")))
        );
        assert_eq!(
            parse_data_message(Bytes::from_static(b"\x00"), 3),
            Ok((0, Bytes::new())),
            "an empty payload is a valid message"
        );
        assert_eq!(
            parse_data_message(Bytes::new(), 3),
            Err(DataMessageError::Empty)
        );
        assert_eq!(
            parse_data_message(Bytes::from_static(b"\x03x"), 3),
            Err(DataMessageError::UnknownChannel {
                channel: 3,
                count: 3
            })
        );
    }
}
