//! Payload packets the server writes ahead of [`Server::poll_transmit`] so that it can seal
//! them together: one [`SealBatch`] call seals dozens of connections' packets at the full
//! width of the processor's vectors, where sealing them one by one paid the cipher's fixed
//! cost and its shortest path (four ChaCha20 blocks for a packet that needs two) each time.
//! `poll_transmit` then hands them out one by one, in the order they were written.
//!
//! [`Server::poll_transmit`]: crate::Server::poll_transmit

use std::collections::VecDeque;
use std::net::SocketAddr;

use tickwire_aead::SealBatch;

use crate::Transmit;

/// Bytes the packets written ahead may take: a turn of small packets, or a dozen of a full
/// MTU, within a core's first-level cache.
const STAGED_BYTES: usize = 16 * 1024;
/// Most packets written ahead, however small: a snapshot or an input is 60 to 150 bytes.
const STAGED_PACKETS: usize = 64;

/// A sealed packet waiting for `poll_transmit`.
#[derive(Debug, Clone, Copy)]
struct Staged {
    to: SocketAddr,
    offset: usize,
    len: usize,
}

/// Packets written, then sealed together, then handed out in order.
pub(crate) struct StagedPackets {
    bytes: Box<[u8; STAGED_BYTES]>,
    /// Sealed, oldest first; all of them once [`seal`](Self::seal) has run.
    queue: VecDeque<Staged>,
    /// Bytes of `bytes` taken by the packets in `queue`.
    used: usize,
    batch: SealBatch,
}

impl StagedPackets {
    pub(crate) fn new() -> Self {
        Self {
            bytes: Box::new([0; STAGED_BYTES]),
            queue: VecDeque::with_capacity(STAGED_PACKETS),
            used: 0,
            batch: SealBatch::new(),
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether one more packet of up to `mtu` bytes fits.
    pub(crate) fn has_room(&self, mtu: usize) -> bool {
        self.queue.len() < STAGED_PACKETS && self.used + mtu <= STAGED_BYTES
    }

    /// Lets `write` write one packet for `to` of at most `mtu` bytes, into the buffer it is
    /// given between the offset and the end it is given, queueing its sealing in the batch
    /// it is given; `write` returns the packet's length, or `None` for no packet. Call only
    /// while [`has_room`](Self::has_room) says so.
    pub(crate) fn stage(
        &mut self,
        to: SocketAddr,
        mtu: usize,
        write: impl FnOnce(&mut [u8], usize, usize, &mut SealBatch) -> Option<usize>,
    ) -> Option<usize> {
        let offset = self.used;
        let len = write(&mut self.bytes[..], offset, offset + mtu, &mut self.batch)?;
        self.queue.push_back(Staged { to, offset, len });
        self.used += len;
        Some(len)
    }

    /// Seals every packet staged since the last call.
    pub(crate) fn seal(&mut self) {
        self.batch.seal(&mut self.bytes[..]);
    }

    /// Copies the oldest sealed packet into `buf` (cut to `buf`'s length, if that is
    /// shorter than the buffer it was staged for) and returns where it goes and its length.
    #[inline]
    pub(crate) fn pop_into(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        debug_assert!(
            self.batch.is_empty(),
            "a packet is handed out before it is sealed"
        );
        let packet = self.queue.front()?;
        let len = packet.len.min(buf.len());
        buf[..len].copy_from_slice(&self.bytes[packet.offset..packet.offset + len]);
        let transmit = Transmit {
            destination: packet.to,
            len,
        };
        self.queue.pop_front();
        if self.queue.is_empty() {
            self.used = 0;
        }
        Some(transmit)
    }
}
