//! The sending half of a reliable channel: a queue of messages not yet admitted, and the
//! window of admitted messages, each split into units (the whole message, or its fragments)
//! that are sent, resent on timeout, and freed once every unit is acked.
//!
//! A message is admitted (given the next u16 id) only while fewer than [`MESSAGE_WINDOW`]
//! messages are in the window and the connection's admitted bytes stay within
//! `max_reassembly_bytes`. Everything the receiver may have to hold is in some sender's
//! window, so honouring both bounds here is what keeps a conforming receiver within its own.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::acks::{SentEntry, SentPackets};
use super::config::Layout;
use super::fragment::{fragment_count, fragment_range};
use super::frame::{MIN_FRAME_LEN, PacketWriter};
use super::{MESSAGE_WINDOW, give_back_if_empty};

#[derive(Clone, Copy, Debug, Default)]
struct UnitState {
    /// Last time this unit went out; `None` until the first time.
    sent_at: Option<Instant>,
    acked: bool,
}

#[derive(Debug)]
enum Units {
    /// A message small enough to send whole: no allocation beyond the message itself.
    Whole(UnitState),
    Fragments(Box<[UnitState]>),
}

impl Units {
    fn as_slice(&self) -> &[UnitState] {
        match self {
            Units::Whole(unit) => std::slice::from_ref(unit),
            Units::Fragments(units) => units,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [UnitState] {
        match self {
            Units::Whole(unit) => std::slice::from_mut(unit),
            Units::Fragments(units) => units,
        }
    }
}

#[derive(Debug)]
struct SendMessage {
    data: Bytes,
    /// Bytes per fragment, or 0 when the message goes whole.
    fragment_size: usize,
    units: Units,
    unacked: usize,
}

impl SendMessage {
    fn new(data: Bytes, layout: &Layout) -> Self {
        if data.len() <= layout.max_whole_reliable {
            return Self {
                data,
                fragment_size: 0,
                units: Units::Whole(UnitState::default()),
                unacked: 1,
            };
        }
        let count = fragment_count(data.len(), layout.fragment_size);
        Self {
            data,
            fragment_size: layout.fragment_size,
            units: Units::Fragments(vec![UnitState::default(); count].into_boxed_slice()),
            unacked: count,
        }
    }

    fn unit_len(&self, unit: u16) -> usize {
        if self.fragment_size == 0 {
            self.data.len()
        } else {
            fragment_range(self.data.len(), self.fragment_size, unit).len()
        }
    }
}

/// Where the last scan for due units stopped, valid only for the same `now` and while the
/// window's front has not moved: every unit before it was then either sent or not due, so
/// draining a tick's packets does not rescan the window from the start for each packet.
#[derive(Clone, Copy, Debug, Default)]
struct ScanCursor {
    now: Option<Instant>,
    message: usize,
    unit: usize,
}

/// What writing units into a packet needs from the connection.
pub(crate) struct WriteContext<'a, 'b> {
    pub(crate) now: Instant,
    pub(crate) resend_timeout: Duration,
    pub(crate) writer: &'a mut PacketWriter<'b>,
    pub(crate) sent: &'a mut SentPackets,
    pub(crate) bytes_in_flight: &'a mut usize,
    pub(crate) units_resent: &'a mut u64,
}

#[derive(Debug, Default)]
pub(crate) struct ReliableSender {
    pending: VecDeque<Bytes>,
    window: VecDeque<SendMessage>,
    /// Absolute number of `window[0]`; a message's id is its number's low 16 bits.
    oldest: u64,
    cursor: ScanCursor,
    /// The last `write_due` left due units unwritten for want of room in its packet.
    stalled: bool,
}

impl ReliableSender {
    pub(crate) fn push(&mut self, data: Bytes) {
        self.pending.push_back(data);
    }

    /// Moves queued messages into the window while both bounds allow; `span_bytes` is the
    /// connection's admitted bytes across channels.
    pub(crate) fn admit(&mut self, span_bytes: &mut usize, max_span: usize, layout: &Layout) {
        while let Some(len) = self.pending.front().map(Bytes::len) {
            if self.window.len() >= MESSAGE_WINDOW || *span_bytes + len > max_span {
                break;
            }
            let Some(data) = self.pending.pop_front() else {
                break;
            };
            *span_bytes += len;
            self.window.push_back(SendMessage::new(data, layout));
        }
        give_back_if_empty(&mut self.pending);
    }

    /// Writes due units (never sent, or unacked for a resend timeout), oldest first, while
    /// they fit. A unit that does not fit is skipped, so smaller ones behind it fill the
    /// packet; it is first in line for the next packet.
    pub(crate) fn write_due(&mut self, channel: u8, ctx: &mut WriteContext<'_, '_>) {
        let (mut m, mut u) = if self.cursor.now == Some(ctx.now) {
            (self.cursor.message, self.cursor.unit)
        } else {
            (0, 0)
        };
        let mut resume = None;
        'messages: while let Some(message) = self.window.get_mut(m) {
            if message.unacked > 0 {
                let number = self.oldest + m as u64;
                let id = number as u16;
                let SendMessage {
                    data,
                    fragment_size,
                    units,
                    ..
                } = message;
                let units = units.as_mut_slice();
                while let Some(unit) = units.get_mut(u) {
                    let due = !unit.acked
                        && unit
                            .sent_at
                            .is_none_or(|at| ctx.now >= at + ctx.resend_timeout);
                    if due {
                        if ctx.writer.remaining() < MIN_FRAME_LEN {
                            resume.get_or_insert((m, u));
                            break 'messages;
                        }
                        let index = u as u16;
                        let (written, len) = if *fragment_size == 0 {
                            (ctx.writer.try_message(channel, Some(id), data), data.len())
                        } else {
                            let range = fragment_range(data.len(), *fragment_size, index);
                            let len = range.len();
                            let written = ctx.writer.try_fragment(
                                channel,
                                id,
                                data.len() as u32,
                                *fragment_size as u16,
                                index,
                                &data[range],
                            );
                            (written, len)
                        };
                        if written {
                            if unit.sent_at.is_none() {
                                *ctx.bytes_in_flight += len;
                            } else {
                                *ctx.units_resent += 1;
                            }
                            unit.sent_at = Some(ctx.now);
                            ctx.sent.push_entry(SentEntry {
                                channel,
                                unit: index,
                                message: number,
                            });
                        } else {
                            resume.get_or_insert((m, u));
                        }
                    }
                    u += 1;
                }
            }
            m += 1;
            u = 0;
        }
        self.stalled = resume.is_some();
        let (message, unit) = resume.unwrap_or((self.window.len(), 0));
        self.cursor = ScanCursor {
            now: Some(ctx.now),
            message,
            unit,
        };
    }

    /// Whether a packet written now would carry something of this channel's without waiting
    /// for a resend timer: a queued message the window admits, or due units the last packet
    /// had no room for. `span_bytes` and `max_span` are as in [`admit`](Self::admit).
    pub(crate) fn has_sendable(&self, span_bytes: usize, max_span: usize) -> bool {
        self.stalled
            || self.pending.front().is_some_and(|next| {
                self.window.len() < MESSAGE_WINDOW && span_bytes + next.len() <= max_span
            })
    }

    /// Marks a unit acked; returns its length if this is news (to leave bytes in flight).
    pub(crate) fn ack(&mut self, message: u64, unit: u16) -> Option<usize> {
        let index = usize::try_from(message.checked_sub(self.oldest)?).ok()?;
        let entry = self.window.get_mut(index)?;
        let state = entry.units.as_mut_slice().get_mut(usize::from(unit))?;
        if state.acked {
            return None;
        }
        state.acked = true;
        entry.unacked -= 1;
        Some(entry.unit_len(unit))
    }

    /// Frees fully acked messages from the window's front; returns their bytes and count.
    pub(crate) fn pop_acked(&mut self) -> (usize, usize) {
        let (mut freed, mut messages) = (0, 0);
        while let Some(front) = self.window.front() {
            if front.unacked > 0 {
                break;
            }
            freed += front.data.len();
            messages += 1;
            self.window.pop_front();
            self.oldest += 1;
            self.cursor.now = None;
        }
        if self.window.is_empty() {
            // Nothing left to write: a stall the last packet noted is over. The channel may
            // not be written again until a message is sent, so this is the place to say so.
            self.stalled = false;
        }
        give_back_if_empty(&mut self.window);
        (freed, messages)
    }

    /// Forgets the scan position (the resend timeout or the window changed).
    pub(crate) fn invalidate_cursor(&mut self) {
        self.cursor.now = None;
    }

    /// True when no message is admitted and unacked (queued ones may wait).
    pub(crate) fn window_is_empty(&self) -> bool {
        self.window.is_empty()
    }

    /// When the earliest unacked unit becomes due again.
    pub(crate) fn next_timeout(&self, resend_timeout: Duration) -> Option<Instant> {
        self.window
            .iter()
            .filter(|message| message.unacked > 0)
            .flat_map(|message| message.units.as_slice())
            .filter(|unit| !unit.acked)
            .filter_map(|unit| unit.sent_at)
            .min()
            .map(|at| at + resend_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reliable::RELIABLE_MESSAGE_OVERHEAD;

    /// What the queue bound counts per message covers what a message takes beside its
    /// payload: its `Bytes` in the send queue, then its window entry, and an allocation's
    /// header (16 bytes with glibc).
    #[test]
    fn the_overhead_counted_covers_a_messages_bookkeeping() {
        let bookkeeping = size_of::<Bytes>() + size_of::<SendMessage>() + 16;
        eprintln!("bookkeeping {bookkeeping} B");
        assert!(
            bookkeeping <= RELIABLE_MESSAGE_OVERHEAD,
            "a message takes {bookkeeping} bytes beside its payload, more than the \
             {RELIABLE_MESSAGE_OVERHEAD} counted"
        );
    }
}
