//! Per-channel state: a reliable channel's two halves, or an unreliable channel's queue.

use std::collections::VecDeque;

use bytes::Bytes;

use super::config::ChannelKind;
use super::frame::PacketWriter;
use super::reliable_recv::ReliableReceiver;
use super::reliable_send::ReliableSender;
use super::sequence::sequence_newer;

#[derive(Debug)]
pub(crate) enum Channel {
    Reliable {
        /// Boxed: the largest variant by far, and every channel of a connection (most of
        /// them unreliable) took its size; boxed, an idle connection holds 200 bytes less
        /// (`connection_memory`).
        send: Box<ReliableSender>,
        receive: ReliableReceiver,
    },
    Unreliable {
        queue: VecDeque<Bytes>,
    },
    Sequenced {
        queue: VecDeque<(u16, Bytes)>,
        next_sequence: u16,
        /// Sequence of the newest message delivered so far.
        last_delivered: Option<u16>,
    },
}

impl Channel {
    pub(crate) fn new(kind: ChannelKind) -> Self {
        match kind {
            ChannelKind::Reliable => Channel::Reliable {
                send: Box::default(),
                receive: ReliableReceiver::default(),
            },
            ChannelKind::Unreliable => Channel::Unreliable {
                queue: VecDeque::new(),
            },
            ChannelKind::UnreliableSequenced => Channel::Sequenced {
                queue: VecDeque::new(),
                next_sequence: 0,
                last_delivered: None,
            },
        }
    }

    /// Asks for the first message a packet written now takes from an unreliable queue (see
    /// [`crate::prefetch`]).
    pub(crate) fn prefetch_front(&self) {
        let front = match self {
            Channel::Reliable { .. } => None,
            Channel::Unreliable { queue } => queue.front(),
            Channel::Sequenced { queue, .. } => queue.front().map(|(_, message)| message),
        };
        if let Some(message) = front {
            crate::prefetch::prefetch(message);
        }
    }

    /// Queues an unreliable message, dropping the oldest when `max` are queued; returns true
    /// when one was dropped. Does nothing on a reliable channel.
    pub(crate) fn queue_unreliable(&mut self, message: Bytes, max: usize) -> bool {
        match self {
            Channel::Reliable { .. } => false,
            Channel::Unreliable { queue } => {
                let dropped = queue.len() >= max && queue.pop_front().is_some();
                queue.push_back(message);
                dropped
            }
            Channel::Sequenced {
                queue,
                next_sequence,
                ..
            } => {
                let dropped = queue.len() >= max && queue.pop_front().is_some();
                queue.push_back((*next_sequence, message));
                *next_sequence = next_sequence.wrapping_add(1);
                dropped
            }
        }
    }

    /// Writes queued unreliable messages, oldest first, while they fit.
    pub(crate) fn write_unreliable(&mut self, channel: u8, writer: &mut PacketWriter<'_>) {
        match self {
            Channel::Reliable { .. } => {}
            Channel::Unreliable { queue } => {
                while let Some(message) = queue.front() {
                    if !writer.try_message(channel, None, message) {
                        break;
                    }
                    queue.pop_front();
                }
            }
            Channel::Sequenced { queue, .. } => {
                while let Some((sequence, message)) = queue.front() {
                    if !writer.try_message(channel, Some(*sequence), message) {
                        break;
                    }
                    queue.pop_front();
                }
            }
        }
    }

    /// True when there are unreliable messages waiting.
    pub(crate) fn has_unreliable(&self) -> bool {
        match self {
            Channel::Reliable { .. } => false,
            Channel::Unreliable { queue } => !queue.is_empty(),
            Channel::Sequenced { queue, .. } => !queue.is_empty(),
        }
    }
}

/// Whether a sequenced message is newer than the last delivered; if so it becomes the last.
pub(crate) fn accept_sequenced(last_delivered: &mut Option<u16>, sequence: u16) -> bool {
    let newer = last_delivered.is_none_or(|last| sequence_newer(sequence, last));
    if newer {
        *last_delivered = Some(sequence);
    }
    newer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequenced_accepts_only_newer_across_wrap_around() {
        let mut last = None;
        assert!(
            accept_sequenced(&mut last, 65534),
            "the first message is always newer"
        );
        assert!(accept_sequenced(&mut last, 65535));
        assert!(!accept_sequenced(&mut last, 65535), "a repeat is not newer");
        assert!(!accept_sequenced(&mut last, 65000), "older must be dropped");
        assert!(accept_sequenced(&mut last, 1), "1 follows 65535");
        assert!(
            !accept_sequenced(&mut last, 65535),
            "65535 is now older than 1"
        );
        assert_eq!(last, Some(1));
    }

    #[test]
    fn full_unreliable_queue_drops_the_oldest() {
        let mut channel = Channel::new(ChannelKind::UnreliableSequenced);
        let dropped: Vec<bool> = (0..4u8)
            .map(|i| channel.queue_unreliable(Bytes::from(vec![i]), 2))
            .collect();
        assert_eq!(dropped, [false, false, true, true]);
        let Channel::Sequenced { queue, .. } = &channel else {
            unreachable!()
        };
        assert_eq!(
            queue.iter().cloned().collect::<Vec<_>>(),
            [(2, Bytes::from(vec![2])), (3, Bytes::from(vec![3]))],
            "the newest two keep their sequences"
        );
    }
}
