//! The receiving half of a reliable channel: puts messages back in order, drops repeats,
//! reassembles fragments, and holds what arrived early within the connection's bound.
//!
//! Messages are numbered with u16 ids. `next_id` is the first id not yet delivered; an id
//! 1..=32767 behind it (wrap-around) was delivered already and is ignored; an id up to
//! [`MESSAGE_WINDOW`]` - 1` ahead is held in `slots` until everything before it arrives;
//! anything further ahead breaks the sender's window and makes the packet malformed.

use std::collections::VecDeque;
use std::mem;

use bytes::Bytes;

use super::error::{MalformedError, ReadError};
use super::fragment::Reassembly;
use super::sequence::HALF;
use super::{MESSAGE_WINDOW, give_back_if_empty};

/// Bytes held for reliable messages across the connection's channels, and their bound.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) bytes: usize,
    pub(crate) max: usize,
}

impl Held {
    fn reserve(&mut self, len: usize) -> Result<(), ReadError> {
        let needed = self.bytes.saturating_add(len);
        if needed > self.max {
            return Err(ReadError::ReassemblyLimit {
                needed,
                max: self.max,
            });
        }
        self.bytes = needed;
        Ok(())
    }

    fn release(&mut self, len: usize) {
        self.bytes = self.bytes.saturating_sub(len);
    }
}

#[derive(Debug, Default)]
enum Slot {
    #[default]
    Empty,
    Complete(Bytes),
    Partial(Box<Reassembly>),
}

/// Where the messages read from packets go, in delivery order.
///
/// A message read whole and in order is handed over as a slice of the packet, so a
/// receiver that only looks at it (a load bot reading a snapshot's header) never copies
/// or allocates; one that was held (it arrived early, or was reassembled from fragments)
/// is handed over as the `Bytes` it was held in. A closure `FnMut(u8, &[u8])` is a
/// `Deliver`; so is [`Owned`], for a receiver that keeps every message.
pub trait Deliver {
    /// A message on `channel`, borrowed from the packet being read.
    fn message(&mut self, channel: u8, message: &[u8]);

    /// A message on `channel` that was held until its turn came.
    fn held(&mut self, channel: u8, message: Bytes) {
        self.message(channel, &message);
    }
}

impl<F: FnMut(u8, &[u8])> Deliver for F {
    fn message(&mut self, channel: u8, message: &[u8]) {
        self(channel, message);
    }
}

/// Hands every message to `F` as a `Bytes` of its own: a lent one copied, a held one as it
/// was held. For a receiver that keeps messages (a queue, an endpoint's events).
pub struct Owned<F>(pub F);

impl<F: FnMut(u8, Bytes)> Deliver for Owned<F> {
    fn message(&mut self, channel: u8, message: &[u8]) {
        (self.0)(channel, Bytes::copy_from_slice(message));
    }

    fn held(&mut self, channel: u8, message: Bytes) {
        (self.0)(channel, message);
    }
}

/// A queue of delivered messages: `(channel, message)` in delivery order.
pub(crate) type Delivered = VecDeque<(u8, Bytes)>;

#[derive(Debug, Default)]
pub(crate) struct ReliableReceiver {
    next_id: u16,
    /// `slots[i]` holds id `next_id + i`. At most [`MESSAGE_WINDOW`] long.
    slots: VecDeque<Slot>,
}

impl ReliableReceiver {
    /// Offset of `id` from `next_id`, or `None` when it was delivered already.
    fn offset(&self, channel: u8, id: u16) -> Result<Option<usize>, MalformedError> {
        let ahead = id.wrapping_sub(self.next_id);
        if ahead >= HALF {
            return Ok(None);
        }
        if usize::from(ahead) >= MESSAGE_WINDOW {
            return Err(MalformedError::OutOfWindow {
                channel,
                id,
                ahead,
                window: MESSAGE_WINDOW,
            });
        }
        Ok(Some(usize::from(ahead)))
    }

    /// The checks a whole message frame must pass before the packet has any effect.
    pub(crate) fn check_message(&self, channel: u8, id: u16) -> Result<(), MalformedError> {
        self.offset(channel, id).map(drop)
    }

    /// The checks a fragment frame must pass before the packet has any effect.
    pub(crate) fn check_fragment(
        &self,
        channel: u8,
        id: u16,
        total_len: u32,
        fragment_size: u16,
    ) -> Result<(), MalformedError> {
        if let Some(offset) = self.offset(channel, id)?
            && let Some(Slot::Partial(reassembly)) = self.slots.get(offset)
            && !reassembly.matches(total_len, fragment_size)
        {
            return Err(MalformedError::FragmentMismatch {
                channel,
                id,
                total_len,
                fragment_size,
            });
        }
        Ok(())
    }

    pub(crate) fn on_message(
        &mut self,
        channel: u8,
        id: u16,
        data: &[u8],
        held: &mut Held,
        deliver: &mut impl Deliver,
    ) -> Result<(), ReadError> {
        let Some(offset) = self.offset(channel, id)? else {
            return Ok(());
        };
        match self.slots.get(offset) {
            None | Some(Slot::Empty) => {}
            // A repeat, or (from a broken peer) a whole frame for a fragmented id: ignore.
            Some(_) => return Ok(()),
        }
        if offset == 0 {
            // In order: deliver without holding it.
            self.slots.pop_front();
            self.next_id = self.next_id.wrapping_add(1);
            deliver.message(channel, data);
        } else {
            held.reserve(data.len())?;
            *self.slot_mut(offset) = Slot::Complete(Bytes::copy_from_slice(data));
        }
        self.deliver_ready(channel, held, deliver);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)] // one fragment frame's fields, plus the two outputs
    pub(crate) fn on_fragment(
        &mut self,
        channel: u8,
        id: u16,
        total_len: u32,
        fragment_size: u16,
        index: u16,
        data: &[u8],
        held: &mut Held,
        deliver: &mut impl Deliver,
    ) -> Result<(), ReadError> {
        let Some(offset) = self.offset(channel, id)? else {
            return Ok(());
        };
        let slot = self.slot_mut(offset);
        match slot {
            Slot::Complete(_) => return Ok(()),
            Slot::Empty => {
                // Reserve before allocating: the frame reader bounded the fragment layout
                // and the caller bounded total_len by max_message_size.
                held.reserve(total_len as usize)?;
                *slot = Slot::Partial(Box::new(Reassembly::new(total_len, fragment_size)));
            }
            Slot::Partial(reassembly) => {
                if !reassembly.matches(total_len, fragment_size) {
                    // Only reachable when one packet starts a message twice, inconsistently;
                    // a mismatch with earlier packets was refused by `check_fragment`.
                    return Err(MalformedError::FragmentMismatch {
                        channel,
                        id,
                        total_len,
                        fragment_size,
                    }
                    .into());
                }
            }
        }
        if let Slot::Partial(reassembly) = slot
            && reassembly.insert(index, data)
            && let Slot::Partial(done) = mem::take(slot)
        {
            *slot = Slot::Complete(done.into_bytes());
            self.deliver_ready(channel, held, deliver);
        }
        Ok(())
    }

    /// The slot for `offset` (which `offset` has bounded by the window), growing the buffer.
    fn slot_mut(&mut self, offset: usize) -> &mut Slot {
        if self.slots.len() <= offset {
            self.slots.resize_with(offset + 1, Slot::default);
        }
        &mut self.slots[offset]
    }

    /// Delivers complete messages from the front, in order.
    fn deliver_ready(&mut self, channel: u8, held: &mut Held, deliver: &mut impl Deliver) {
        while let Some(Slot::Complete(_)) = self.slots.front() {
            if let Some(Slot::Complete(message)) = self.slots.pop_front() {
                held.release(message.len());
                deliver.held(channel, message);
            }
            self.next_id = self.next_id.wrapping_add(1);
        }
        give_back_if_empty(&mut self.slots);
    }
}
