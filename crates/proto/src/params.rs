//! What the server dictates to each client in the accepted packet, and why a connection
//! ends. A client never configures these by hand: it adopts what the server sends.

use std::time::Duration;

use crate::bytes_io::{ByteReader, ByteWriter};
use crate::reliable::ChannelKind;

/// Most channels a connection may have.
pub const MAX_CHANNELS: usize = 32;
/// Smallest MTU a server may dictate: leaves room for the envelope and a useful payload.
pub const MIN_MTU: u16 = 576;
/// Largest MTU a server may dictate (a full Ethernet frame's UDP payload).
pub const MAX_MTU: u16 = 1472;
/// The fastest tick rate the parameters can carry, in Hz.
pub const MAX_TICK_RATE_HZ: u8 = 128;
/// Largest encoded [`ConnectionParams`]: 14 bytes of fields and one byte per channel.
pub const MAX_PARAMS_BYTES: usize = 14 + MAX_CHANNELS;

/// Connection parameters the server decides and the client adopts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionParams {
    /// Simulation ticks per second, 1 to 128: a room server tells each client its room's rate.
    pub tick_rate_hz: u8,
    /// Longest silence before a side sends a keepalive.
    pub keepalive_interval: Duration,
    /// Silence after which a side drops the connection.
    pub timeout: Duration,
    /// Largest datagram either side sends, in bytes.
    pub mtu: u16,
    /// The channels, by id; the kinds define delivery guarantees.
    pub channels: Vec<ChannelKind>,
    /// Largest reliable message, in bytes (larger ones are fragmented up to this).
    pub max_message_size: u32,
}

impl ConnectionParams {
    /// The defaults with another timeout, and a keepalive interval to match: a tenth of the
    /// timeout, at most the default second, so ten keepalives in a row must be lost before
    /// a quiet connection is.
    pub fn with_timeout(timeout: Duration) -> Self {
        let defaults = Self::default();
        Self {
            keepalive_interval: defaults.keepalive_interval.min(timeout / 10),
            timeout,
            ..defaults
        }
    }
}

impl Default for ConnectionParams {
    /// 60 Hz, a keepalive every second, a 10 s timeout, a 1200-byte MTU (safe on almost every
    /// path, QUIC's choice too) and channels 0 reliable, 1 unreliable, 2 unreliable-sequenced.
    fn default() -> Self {
        Self {
            tick_rate_hz: 60,
            // An idle player costs one datagram a second each way; ten silent intervals
            // before the timeout ride out a burst of loss.
            keepalive_interval: Duration::from_secs(1),
            timeout: Duration::from_secs(10),
            mtu: 1200,
            channels: vec![
                ChannelKind::Reliable,
                ChannelKind::Unreliable,
                ChannelKind::UnreliableSequenced,
            ],
            max_message_size: 256 * 1024,
        }
    }
}

/// Parameters that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// Tick rate outside 1..=128.
    #[error("tick rate {0} Hz outside 1..=128")]
    TickRate(u8),
    /// MTU outside the supported range.
    #[error("mtu {0} outside {MIN_MTU}..={MAX_MTU}")]
    Mtu(u16),
    /// No channels, or more than [`MAX_CHANNELS`].
    #[error("{0} channels; a connection has 1 to {MAX_CHANNELS}")]
    Channels(usize),
    /// A keepalive interval of zero, or a timeout not longer than it.
    #[error("keepalive {keepalive:?} must be positive and shorter than the timeout {timeout:?}")]
    Timing {
        /// The keepalive interval.
        keepalive: Duration,
        /// The timeout.
        timeout: Duration,
    },
    /// Durations too long for the wire fields (keepalive ≤ 65 s, timeout ≤ 49 days).
    #[error("duration does not fit its wire field")]
    DurationRange,
}

fn channel_code(kind: ChannelKind) -> u8 {
    match kind {
        ChannelKind::Reliable => 0,
        ChannelKind::Unreliable => 1,
        ChannelKind::UnreliableSequenced => 2,
    }
}

fn channel_kind(code: u8) -> Option<ChannelKind> {
    Some(match code {
        0 => ChannelKind::Reliable,
        1 => ChannelKind::Unreliable,
        2 => ChannelKind::UnreliableSequenced,
        _ => return None,
    })
}

impl ConnectionParams {
    /// These parameters with `tick_rate_hz` (clamped to 1..=[`MAX_TICK_RATE_HZ`]) as the
    /// rate: what a room server tells a client seated in a room ticking at that rate.
    pub fn with_tick_rate(&self, tick_rate_hz: u8) -> Self {
        Self {
            tick_rate_hz: tick_rate_hz.clamp(1, MAX_TICK_RATE_HZ),
            ..self.clone()
        }
    }

    /// Checks that the parameters can work.
    pub fn validate(&self) -> Result<(), ParamsError> {
        if !(1..=MAX_TICK_RATE_HZ).contains(&self.tick_rate_hz) {
            return Err(ParamsError::TickRate(self.tick_rate_hz));
        }
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return Err(ParamsError::Mtu(self.mtu));
        }
        if self.channels.is_empty() || self.channels.len() > MAX_CHANNELS {
            return Err(ParamsError::Channels(self.channels.len()));
        }
        if self.keepalive_interval.is_zero() || self.timeout <= self.keepalive_interval {
            return Err(ParamsError::Timing {
                keepalive: self.keepalive_interval,
                timeout: self.timeout,
            });
        }
        if u16::try_from(self.keepalive_interval.as_millis()).is_err()
            || u32::try_from(self.timeout.as_millis()).is_err()
        {
            return Err(ParamsError::DurationRange);
        }
        Ok(())
    }

    /// Writes the accepted packet's body: tick rate u8, keepalive ms u16, timeout ms u32,
    /// mtu u16, max message size u32, channel count u8, one kind byte per channel. `None` if
    /// `buf` is too short (at most [`MAX_PARAMS_BYTES`] are needed) or a duration does not fit
    /// its field. Public because the WebSocket transport sends the same body.
    pub fn write(&self, buf: &mut [u8]) -> Option<usize> {
        let mut writer = ByteWriter::new(buf);
        writer.put_u8(self.tick_rate_hz)?;
        writer.put_u16(u16::try_from(self.keepalive_interval.as_millis()).ok()?)?;
        writer.put_u32(u32::try_from(self.timeout.as_millis()).ok()?)?;
        writer.put_u16(self.mtu)?;
        writer.put_u32(self.max_message_size)?;
        writer.put_u8(u8::try_from(self.channels.len()).ok()?)?;
        for kind in &self.channels {
            writer.put_u8(channel_code(*kind))?;
        }
        Some(writer.position())
    }

    /// Reads and validates an accepted packet's body; `None` unless it is exactly one
    /// encoding of valid parameters.
    pub fn read(body: &[u8]) -> Option<Self> {
        let mut reader = ByteReader::new(body);
        let tick_rate_hz = reader.get_u8()?;
        let keepalive_interval = Duration::from_millis(reader.get_u16()?.into());
        let timeout = Duration::from_millis(reader.get_u32()?.into());
        let mtu = reader.get_u16()?;
        let max_message_size = reader.get_u32()?;
        let count = usize::from(reader.get_u8()?);
        if count > MAX_CHANNELS {
            return None;
        }
        let channels = (0..count)
            .map(|_| channel_kind(reader.get_u8()?))
            .collect::<Option<Vec<_>>>()?;
        let params = Self {
            tick_rate_hz,
            keepalive_interval,
            timeout,
            mtu,
            channels,
            max_message_size,
        };
        (reader.remaining() == 0 && params.validate().is_ok()).then_some(params)
    }
}

/// Why a connection ended; sent in disconnect packets as one byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisconnectReason {
    /// The other side asked to disconnect.
    Requested,
    /// Nothing arrived for the dictated timeout.
    TimedOut,
    /// The server is shutting down.
    ServerShutdown,
    /// The server removed the client.
    Kicked,
    /// Reliable data queued faster than the peer acknowledged it, past the bound.
    ReliableQueueFull,
    /// The peer sent data that breaks the protocol (bad framing, oversize reassembly).
    ProtocolViolation,
    /// The server refused the connection: all slots are taken.
    ServerFull,
    /// The same client id connected again with a fresh token (another address, a new
    /// network); this older connection is replaced.
    AlreadyConnected,
    /// The handshake did not complete before the token's timeout or expiry.
    HandshakeTimedOut,
    /// A reason this version does not know.
    Other(u8),
}

impl DisconnectReason {
    /// The reason's wire code.
    pub fn code(self) -> u8 {
        match self {
            Self::Requested => 1,
            Self::TimedOut => 2,
            Self::ServerShutdown => 3,
            Self::Kicked => 4,
            Self::ReliableQueueFull => 5,
            Self::ProtocolViolation => 6,
            Self::ServerFull => 7,
            Self::AlreadyConnected => 8,
            Self::HandshakeTimedOut => 9,
            Self::Other(code) => code,
        }
    }

    /// The reason a wire code stands for.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => Self::Requested,
            2 => Self::TimedOut,
            3 => Self::ServerShutdown,
            4 => Self::Kicked,
            5 => Self::ReliableQueueFull,
            6 => Self::ProtocolViolation,
            7 => Self::ServerFull,
            8 => Self::AlreadyConnected,
            9 => Self::HandshakeTimedOut,
            other => Self::Other(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_round_trip() {
        let params = ConnectionParams {
            tick_rate_hz: 30,
            keepalive_interval: Duration::from_millis(250),
            timeout: Duration::from_secs(5),
            mtu: 1400,
            channels: vec![ChannelKind::UnreliableSequenced, ChannelKind::Reliable],
            max_message_size: 65_536,
        };
        let mut buf = [0u8; 64];
        let len = params.write(&mut buf).unwrap();
        assert_eq!(len, 1 + 2 + 4 + 2 + 4 + 1 + 2);
        assert_eq!(ConnectionParams::read(&buf[..len]), Some(params));
    }

    #[test]
    fn invalid_params_are_refused_on_both_ends() {
        let bad = ConnectionParams {
            tick_rate_hz: 0,
            ..ConnectionParams::default()
        };
        assert_eq!(bad.validate(), Err(ParamsError::TickRate(0)));
        let mut buf = [0u8; 64];
        let len = bad.write(&mut buf).unwrap();
        assert_eq!(ConnectionParams::read(&buf[..len]), None);

        let timing = ConnectionParams {
            timeout: Duration::from_millis(50),
            ..ConnectionParams::default()
        };
        assert!(matches!(timing.validate(), Err(ParamsError::Timing { .. })));
        assert_eq!(ConnectionParams::read(&[60, 100]), None, "truncated");
    }

    #[test]
    fn reason_codes_round_trip() {
        for code in 0..=u8::MAX {
            assert_eq!(DisconnectReason::from_code(code).code(), code);
        }
    }
}
