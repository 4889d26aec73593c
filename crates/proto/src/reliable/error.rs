//! Errors of [`Reliability::send`](super::Reliability::send) and
//! [`Reliability::read_packet`](super::Reliability::read_packet).

use thiserror::Error;

/// Why a message was not queued. Nothing was queued or dropped when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SendError {
    /// The channel id is not configured.
    #[error("channel {channel} does not exist; the connection has {channels} channels")]
    UnknownChannel {
        /// Channel asked for.
        channel: u8,
        /// Channels configured.
        channels: usize,
    },
    /// The message is larger than the channel accepts: an unreliable message must fit one
    /// packet alone; a reliable one must be at most `max_message_size`.
    #[error("message of {len} bytes exceeds max {max} for this channel")]
    TooLarge {
        /// Message length.
        len: usize,
        /// Largest accepted on this channel.
        max: usize,
    },
    /// The connection's reliable queue (unsent plus unacked bytes, each message with its
    /// [`RELIABLE_MESSAGE_OVERHEAD`](super::RELIABLE_MESSAGE_OVERHEAD)) would pass
    /// `max_reliable_queue_bytes`: the peer is not keeping up. Callers disconnect with a
    /// reason rather than buffer without bound.
    #[error("reliable queue holds {queued} bytes; {len} more would exceed max {max}")]
    QueueFull {
        /// Bytes already queued.
        queued: usize,
        /// Message length.
        len: usize,
        /// Configured bound.
        max: usize,
    },
}

/// Why a packet was refused. [`ReadError::is_fatal`] tells the caller whether to count and
/// drop it or to close the connection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReadError {
    /// The packet breaks the format. It had no effect (it is not acked either); count and
    /// drop it.
    #[error("malformed packet: {0}")]
    Malformed(#[from] MalformedError),
    /// The peer sent a reliable message larger than `max_message_size`. Fatal.
    #[error("peer sent a message of {len} bytes; max is {max}")]
    MessageTooLarge {
        /// Length the peer claimed.
        len: usize,
        /// Configured bound.
        max: usize,
    },
    /// Holding the peer's partly reassembled or out-of-order reliable messages would pass
    /// `max_reassembly_bytes`, which a conforming sender never causes. Fatal.
    #[error("peer's messages need {needed} reassembly bytes; max is {max}")]
    ReassemblyLimit {
        /// Bytes that would be held.
        needed: usize,
        /// Configured bound.
        max: usize,
    },
}

impl ReadError {
    /// True when the peer broke a bound a conforming peer keeps: close the connection with
    /// this error as the reason. False for [`ReadError::Malformed`]: count and drop.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ReadError::Malformed(_))
    }
}

/// How a packet breaks the format. Offsets count from the start of the payload given to
/// `read_packet`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MalformedError {
    /// Shorter than the fixed header.
    #[error("packet of {len} bytes is shorter than the {min}-byte header")]
    ShortHeader {
        /// Payload length.
        len: usize,
        /// Header length.
        min: usize,
    },
    /// The header's flags byte sets bits that have no meaning.
    #[error("header flags {flags:#04x} set reserved bits")]
    ReservedFlags {
        /// The flags byte.
        flags: u8,
    },
    /// The header says it carries no ack but its ack fields are not zero.
    #[error("header without an ack has ack {ack} and ack bits {bits:#010x}; both must be 0")]
    StrayAck {
        /// Ack field.
        ack: u16,
        /// Ack bitfield.
        bits: u32,
    },
    /// A frame field runs past the end of the packet.
    #[error("frame field at offset {offset} needs {needed} bytes; {remaining} remain")]
    Truncated {
        /// Where the field starts.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the packet.
        remaining: usize,
    },
    /// A frame tag sets reserved bits.
    #[error("frame tag {tag:#04x} at offset {offset} sets reserved bits")]
    ReservedTagBits {
        /// The tag byte.
        tag: u8,
        /// Where it is.
        offset: usize,
    },
    /// A frame names a channel that is not configured.
    #[error("frame names channel {channel}; the connection has {channels} channels")]
    UnknownChannel {
        /// Channel in the tag.
        channel: u8,
        /// Channels configured.
        channels: usize,
    },
    /// A fragment frame on a channel that is not reliable.
    #[error("fragment frame on channel {channel}, which is not reliable")]
    FragmentOnUnreliable {
        /// Channel in the tag.
        channel: u8,
    },
    /// A length varint is overlong, or does not fit 32 bits.
    #[error("invalid varint at offset {offset}")]
    InvalidVarint {
        /// Where the varint starts.
        offset: usize,
    },
    /// A fragment frame's fragment size is below [`MIN_FRAGMENT_SIZE`](super::MIN_FRAGMENT_SIZE).
    #[error("fragment size {size} below the minimum {min}")]
    FragmentSizeTooSmall {
        /// Size in the frame.
        size: u16,
        /// Smallest accepted.
        min: usize,
    },
    /// A fragmented message needs more than [`MAX_FRAGMENTS`](super::MAX_FRAGMENTS) fragments.
    #[error(
        "message of {total_len} bytes in fragments of {fragment_size} needs {count} fragments; max is {max}"
    )]
    TooManyFragments {
        /// Total length in the frame.
        total_len: u32,
        /// Fragment size in the frame.
        fragment_size: u16,
        /// Fragments that implies.
        count: u64,
        /// Most allowed.
        max: usize,
    },
    /// A fragment index at or past the fragment count (also any index of an empty message).
    #[error("fragment index {index} out of range for {count} fragments")]
    FragmentIndex {
        /// Index in the frame.
        index: u16,
        /// Fragments the message has.
        count: u64,
    },
    /// A fragment's total length or fragment size differs from earlier fragments of the
    /// same message.
    #[error(
        "fragment of message {id} on channel {channel} says {total_len} bytes in fragments of {fragment_size}; earlier fragments disagree"
    )]
    FragmentMismatch {
        /// Channel.
        channel: u8,
        /// Message id.
        id: u16,
        /// Total length in this frame.
        total_len: u32,
        /// Fragment size in this frame.
        fragment_size: u16,
    },
    /// A reliable message id too far ahead of the next one expected: a conforming sender
    /// keeps fewer than [`MESSAGE_WINDOW`](super::MESSAGE_WINDOW) messages in flight.
    #[error(
        "reliable message id {id} on channel {channel} is {ahead} ahead of the next expected; the window is {window}"
    )]
    OutOfWindow {
        /// Channel.
        channel: u8,
        /// Message id.
        id: u16,
        /// Distance ahead of the next expected id.
        ahead: u16,
        /// The window.
        window: usize,
    },
}
