//! Channel kinds and the layer's configuration, validated once by [`Reliability::new`].
//!
//! [`Reliability::new`]: super::Reliability::new

use thiserror::Error;

use super::frame::{FRAGMENT_HEADER_LEN, varint_len};
use super::header::HEADER_LEN;

/// Most channels a connection may have: the frame tag holds the channel id in 5 bits.
pub const MAX_CHANNELS: usize = 32;

/// Smallest `max_packet_payload` accepted: room for the header, a fragment frame's header and
/// a fragment of at least [`MIN_FRAGMENT_SIZE`] bytes, with margin.
pub const MIN_PACKET_PAYLOAD: usize = 128;

/// Largest `max_packet_payload` accepted: far above any datagram MTU, and it keeps every
/// size derived from it small.
pub const MAX_PACKET_PAYLOAD: usize = 1 << 16;

/// Smallest fragment size a receiver accepts in a fragment frame. It keeps a peer from
/// splitting a message into absurdly many pieces (each costs a bitmap bit and a frame).
pub const MIN_FRAGMENT_SIZE: usize = 64;

/// Most fragments one message may have: fragment indices are u16.
pub const MAX_FRAGMENTS: usize = 1 << 16;

/// What a channel promises about delivery. Both ends of a connection must configure the same
/// kinds in the same order (the server dictates them in the handshake).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    /// Every message arrives exactly once and in the order sent; resent until acked and split
    /// into fragments when larger than a packet.
    Reliable,
    /// Each message arrives at most once, in any order, or not at all; must fit one packet.
    Unreliable,
    /// Like [`ChannelKind::Unreliable`], but a message older than one already delivered on the
    /// channel is dropped: latest wins.
    UnreliableSequenced,
}

/// Tunables of one connection's reliability layer. Both ends must agree on `channels`; the
/// other fields bound memory and may differ, though a sender uses its own
/// `max_reassembly_bytes` as the budget for what the receiver must hold (see
/// `docs/PROTOCOL.md` ("Reliability and channels")), so a receiver configured lower than its peer may see a
/// [`ReadError::ReassemblyLimit`](super::ReadError::ReassemblyLimit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReliabilityConfig {
    /// Channel kinds; the index is the channel id. 1..=32 channels. Default
    /// `[Reliable, Unreliable, UnreliableSequenced]`.
    pub channels: Vec<ChannelKind>,
    /// Bytes this layer may put in one packet: the caller's MTU minus its own header and AEAD
    /// tag. [`MIN_PACKET_PAYLOAD`]..=[`MAX_PACKET_PAYLOAD`]. Default 1150 (a 1200-byte datagram with room for
    /// the connection header and tag).
    pub max_packet_payload: usize,
    /// Largest reliable message; larger ones are refused by `send` and, from a peer, are
    /// fatal. Default 256 KiB.
    pub max_message_size: usize,
    /// Bytes of reliable messages the receiver may hold per connection (partly reassembled,
    /// or complete but waiting for an earlier one), and the sender's budget for messages it
    /// has put in flight. Must be at least `max_message_size`. Default 1 MiB.
    pub max_reassembly_bytes: usize,
    /// Reliable bytes queued per connection, unsent plus unacked, each message counted with
    /// [`RELIABLE_MESSAGE_OVERHEAD`](super::RELIABLE_MESSAGE_OVERHEAD) beside its payload;
    /// `send` beyond it returns [`SendError::QueueFull`](super::SendError::QueueFull) (an
    /// empty queue takes any message up to `max_message_size`). Must be at least
    /// `max_message_size`. Default 4 MiB.
    pub max_reliable_queue_bytes: usize,
    /// Unreliable messages queued per channel; when full, `send` drops the oldest and counts
    /// it in [`ReliabilityStats::messages_dropped`](super::ReliabilityStats). At least 1.
    /// Default 256.
    pub max_unreliable_queue: usize,
}

impl Default for ReliabilityConfig {
    fn default() -> Self {
        Self {
            channels: vec![
                ChannelKind::Reliable,
                ChannelKind::Unreliable,
                ChannelKind::UnreliableSequenced,
            ],
            max_packet_payload: 1150,
            max_message_size: 256 * 1024,
            max_reassembly_bytes: 1024 * 1024,
            max_reliable_queue_bytes: 4 * 1024 * 1024,
            max_unreliable_queue: 256,
        }
    }
}

/// Why a [`ReliabilityConfig`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// No channels, or more than [`MAX_CHANNELS`].
    #[error("channel count {count} outside 1..={max}")]
    ChannelCount {
        /// Channels configured.
        count: usize,
        /// Most allowed.
        max: usize,
    },
    /// `max_packet_payload` below [`MIN_PACKET_PAYLOAD`].
    #[error("max_packet_payload {len} below the minimum {min}")]
    PacketPayloadTooSmall {
        /// Configured payload.
        len: usize,
        /// Smallest allowed.
        min: usize,
    },
    /// `max_packet_payload` above [`MAX_PACKET_PAYLOAD`].
    #[error("max_packet_payload {len} exceeds max {max}")]
    PacketPayloadTooLarge {
        /// Configured payload.
        len: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A message of `max_message_size` could never be sent: the receiver could not hold it.
    #[error(
        "max_message_size {max_message_size} exceeds max_reassembly_bytes {max_reassembly_bytes}"
    )]
    MessageExceedsReassembly {
        /// Configured message bound.
        max_message_size: usize,
        /// Configured reassembly bound.
        max_reassembly_bytes: usize,
    },
    /// A message of `max_message_size` could never be queued.
    #[error(
        "max_message_size {max_message_size} exceeds max_reliable_queue_bytes {max_reliable_queue_bytes}"
    )]
    MessageExceedsQueue {
        /// Configured message bound.
        max_message_size: usize,
        /// Configured queue bound.
        max_reliable_queue_bytes: usize,
    },
    /// `max_message_size` needs more than [`MAX_FRAGMENTS`] fragments of this packet size.
    #[error(
        "max_message_size {max_message_size} exceeds {max}, what {MAX_FRAGMENTS} fragments of {fragment_size} bytes hold"
    )]
    MessageNeedsTooManyFragments {
        /// Configured message bound.
        max_message_size: usize,
        /// Fragment size this packet payload gives.
        fragment_size: usize,
        /// Largest message that many fragments hold.
        max: usize,
    },
    /// `max_unreliable_queue` is 0.
    #[error("max_unreliable_queue 0 below the minimum 1")]
    EmptyUnreliableQueue,
}

/// Sizes derived from a validated config, computed once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    /// Payload bytes in each fragment but the last.
    pub(crate) fragment_size: usize,
    /// Largest reliable message sent whole; larger ones are fragmented.
    pub(crate) max_whole_reliable: usize,
    /// Largest message an `Unreliable` channel accepts (it must fit one packet alone).
    pub(crate) max_unreliable: usize,
    /// Largest message an `UnreliableSequenced` channel accepts.
    pub(crate) max_sequenced: usize,
}

impl ReliabilityConfig {
    pub(crate) fn validate(&self) -> Result<Layout, ConfigError> {
        if self.channels.is_empty() || self.channels.len() > MAX_CHANNELS {
            return Err(ConfigError::ChannelCount {
                count: self.channels.len(),
                max: MAX_CHANNELS,
            });
        }
        if self.max_packet_payload < MIN_PACKET_PAYLOAD {
            return Err(ConfigError::PacketPayloadTooSmall {
                len: self.max_packet_payload,
                min: MIN_PACKET_PAYLOAD,
            });
        }
        if self.max_packet_payload > MAX_PACKET_PAYLOAD {
            return Err(ConfigError::PacketPayloadTooLarge {
                len: self.max_packet_payload,
                max: MAX_PACKET_PAYLOAD,
            });
        }
        if self.max_message_size > self.max_reassembly_bytes {
            return Err(ConfigError::MessageExceedsReassembly {
                max_message_size: self.max_message_size,
                max_reassembly_bytes: self.max_reassembly_bytes,
            });
        }
        if self.max_message_size > self.max_reliable_queue_bytes {
            return Err(ConfigError::MessageExceedsQueue {
                max_message_size: self.max_message_size,
                max_reliable_queue_bytes: self.max_reliable_queue_bytes,
            });
        }
        if self.max_unreliable_queue == 0 {
            return Err(ConfigError::EmptyUnreliableQueue);
        }
        let frame_space = self.max_packet_payload - HEADER_LEN;
        // The fragment size travels as a u16.
        let fragment_size = (frame_space - FRAGMENT_HEADER_LEN).min(usize::from(u16::MAX));
        let max = fragment_size * MAX_FRAGMENTS;
        if self.max_message_size > max {
            return Err(ConfigError::MessageNeedsTooManyFragments {
                max_message_size: self.max_message_size,
                fragment_size,
                max,
            });
        }
        Ok(Layout {
            fragment_size,
            // Reliable and sequenced frames both carry tag + u16 + varint length.
            max_whole_reliable: largest_body(frame_space, 3),
            max_unreliable: largest_body(frame_space, 1),
            max_sequenced: largest_body(frame_space, 3),
        })
    }
}

/// Largest `n` with `fixed + varint_len(n) + n <= space`.
fn largest_body(space: usize, fixed: usize) -> usize {
    let mut n = space.saturating_sub(fixed + 1);
    // At most a few steps: each step down can shorten the varint by one byte.
    while n > 0 && fixed + varint_len(n) + n > space {
        n -= 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/PROTOCOL.md quotes the layout a connection with the default MTU gets; a client
    /// written from it must size packets and messages as the server does.
    #[test]
    fn documented_figures_match_the_code() {
        let doc = include_str!("../../../../docs/PROTOCOL.md");
        let mtu = usize::from(crate::ConnectionParams::default().mtu);
        let max_packet_payload = mtu - crate::ENCRYPTED_OVERHEAD_MAX;
        let layout = ReliabilityConfig {
            max_packet_payload,
            ..ReliabilityConfig::default()
        }
        .validate()
        .expect("a connection's config is valid");
        for quoted in [
            format!(
                "| `max_packet_payload` | MTU − `ENCRYPTED_OVERHEAD_MAX`: {max_packet_payload} with the default MTU |"
            ),
            format!(
                "`max_packet_payload = MTU − ENCRYPTED_OVERHEAD_MAX` ({} bytes",
                crate::ENCRYPTED_OVERHEAD_MAX
            ),
            format!(
                "bytes ({} with the defaults): one unit per fragment",
                layout.fragment_size
            ),
            format!(
                "({} for Unreliable, {} for UnreliableSequenced by default)",
                layout.max_unreliable, layout.max_sequenced
            ),
            "1200-byte MTU".to_owned(),
        ] {
            assert!(
                doc.contains(&quoted),
                "docs/PROTOCOL.md does not say {quoted:?}"
            );
        }
        assert_eq!(mtu, 1200, "the doc's \"1200-byte MTU\" is the default");
    }

    #[test]
    fn default_is_valid_and_documented_values_hold() {
        let config = ReliabilityConfig::default();
        assert_eq!(config.max_packet_payload, 1150);
        assert_eq!(config.max_message_size, 256 * 1024);
        assert_eq!(config.max_reassembly_bytes, 1024 * 1024);
        assert_eq!(config.max_reliable_queue_bytes, 4 * 1024 * 1024);
        assert_eq!(config.max_unreliable_queue, 256);
        let layout = config.validate().expect("the default config must be valid");
        assert_eq!(
            layout.fragment_size,
            1150 - HEADER_LEN - FRAGMENT_HEADER_LEN
        );
        // 1141 bytes of frames: tag + u16 + 2-byte varint + 1136.
        assert_eq!(layout.max_whole_reliable, 1136);
        assert_eq!(layout.max_unreliable, 1138);
    }

    #[test]
    fn largest_body_fills_the_space_exactly_or_by_varint_slack() {
        for space in [119usize, 130, 131, 132, 16386, 16387, 70000] {
            let n = largest_body(space, 3);
            assert!(3 + varint_len(n) + n <= space, "{n} overflows {space}");
            assert!(
                3 + varint_len(n + 1) + n + 1 > space,
                "{} would still fit {space}",
                n + 1
            );
        }
    }

    #[test]
    fn invalid_configs_are_refused_with_the_broken_bound() {
        let base = ReliabilityConfig::default();
        let cases = [
            (
                ReliabilityConfig {
                    channels: vec![],
                    ..base.clone()
                },
                ConfigError::ChannelCount { count: 0, max: 32 },
            ),
            (
                ReliabilityConfig {
                    channels: vec![ChannelKind::Reliable; 33],
                    ..base.clone()
                },
                ConfigError::ChannelCount { count: 33, max: 32 },
            ),
            (
                ReliabilityConfig {
                    max_packet_payload: 127,
                    ..base.clone()
                },
                ConfigError::PacketPayloadTooSmall { len: 127, min: 128 },
            ),
            (
                ReliabilityConfig {
                    max_packet_payload: 65537,
                    ..base.clone()
                },
                ConfigError::PacketPayloadTooLarge {
                    len: 65537,
                    max: 65536,
                },
            ),
            (
                ReliabilityConfig {
                    max_reassembly_bytes: 1000,
                    ..base.clone()
                },
                ConfigError::MessageExceedsReassembly {
                    max_message_size: 256 * 1024,
                    max_reassembly_bytes: 1000,
                },
            ),
            (
                ReliabilityConfig {
                    max_reliable_queue_bytes: 1000,
                    ..base.clone()
                },
                ConfigError::MessageExceedsQueue {
                    max_message_size: 256 * 1024,
                    max_reliable_queue_bytes: 1000,
                },
            ),
            (
                ReliabilityConfig {
                    max_unreliable_queue: 0,
                    ..base.clone()
                },
                ConfigError::EmptyUnreliableQueue,
            ),
            (
                ReliabilityConfig {
                    max_packet_payload: 128,
                    max_message_size: 64 << 20,
                    max_reassembly_bytes: 64 << 20,
                    max_reliable_queue_bytes: 64 << 20,
                    ..base.clone()
                },
                ConfigError::MessageNeedsTooManyFragments {
                    max_message_size: 64 << 20,
                    fragment_size: 108,
                    max: 108 << 16,
                },
            ),
        ];
        for (config, expected) in cases {
            assert_eq!(
                config.validate().err(),
                Some(expected.clone()),
                "{expected}"
            );
        }
    }
}
