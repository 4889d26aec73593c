//! Sending many datagrams, each to its own destination, per syscall.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd};

use super::mmsg::{ErrorClass, MAX_BATCH, MsgHeaders, classify};
use super::pktinfo::{self, ControlBuf};
use super::sockaddr::RawAddr;

/// Counters of one [`SendBatch`], accumulated over its lifetime. Plain fields: a batch is
/// owned by one task, so counting needs no atomics and senders share nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendStats {
    /// Datagrams the kernel accepted.
    pub datagrams: u64,
    /// Payload bytes of those datagrams.
    pub bytes: u64,
    /// `sendmmsg` calls that accepted at least one datagram.
    pub syscalls: u64,
    /// Times the socket's send buffer was full (`EAGAIN`); the rest of the batch waited.
    pub would_block: u64,
    /// Asynchronous socket errors (an ICMP error for an earlier datagram) that a send
    /// reported; the datagram it stopped at was retried, not dropped.
    pub socket_errors: u64,
    /// Dropped: destination unreachable (`ECONNREFUSED`, `EHOSTUNREACH`, `ENETUNREACH`, …)
    /// on every retry.
    pub dropped_unreachable: u64,
    /// Dropped: the destination is not valid for this socket (`EINVAL`, `EAFNOSUPPORT`,
    /// `EADDRNOTAVAIL`: port 0, an address family the socket cannot send to, …).
    pub dropped_invalid: u64,
    /// Dropped: larger than the socket or path allows (`EMSGSIZE`).
    pub dropped_too_big: u64,
    /// Dropped for any other per-datagram error (`ENOBUFS`, `EPERM` from a firewall, …).
    pub dropped_other: u64,
}

impl SendStats {
    /// All datagrams dropped, whatever the reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_unreachable + self.dropped_invalid + self.dropped_too_big + self.dropped_other
    }
}

/// Preallocated buffers for up to `capacity` outgoing datagrams, each to its own destination,
/// sent with as few `sendmmsg` calls as the kernel allows.
///
/// Fill slots in place with [`push_with`](Self::push_with) (the protocol encrypts straight into
/// the slot), then send with [`BatchSocket::send_batch`](super::BatchSocket::send_batch) or
/// [`try_send_batch`](super::BatchSocket::try_send_batch). A send that hits a full socket
/// buffer keeps the unsent rest, so the next send continues where it stopped; a datagram the
/// kernel refuses is counted and skipped, never retried forever. Nothing is allocated after
/// construction.
///
/// Each datagram is packed after the one before (at the next multiple of
/// [`PACKING`] bytes), not at a fixed slot: a batch of small game packets takes a few pages
/// and lines of memory instead of one page per two packets, for the protocol writing them
/// and for the kernel copying them out. Fixed slots of 2048 bytes also put every packet
/// in the same two sets of the first-level cache, which holds 24 of such lines.
pub struct SendBatch {
    /// Room for `capacity` datagrams of `slot_size` bytes (each rounded up to [`PACKING`]).
    buf: Box<[u8]>,
    slot_size: usize,
    /// Bytes of `buf` taken by the queued datagrams, rounded up to [`PACKING`]: where the
    /// next one is written.
    used: usize,
    /// The queued datagrams, in order; capacity reserved up front.
    queued: Vec<Queued>,
    /// Control space per slot, made at the first datagram with a chosen source.
    controls: Box<[ControlBuf]>,
    /// The first queued datagram not yet accepted or dropped.
    next: usize,
    /// Asynchronous errors already seen at `next`.
    retries: u8,
    names: Box<[RawAddr]>,
    headers: MsgHeaders,
    stats: SendStats,
}

/// What each datagram in the batch is aligned to.
const PACKING: usize = 16;

/// A datagram written into the batch.
#[derive(Debug, Clone, Copy)]
struct Queued {
    dest: SocketAddr,
    /// Where it starts in the batch's buffer.
    offset: usize,
    len: usize,
    /// The local address to send from, if chosen.
    source: Option<Ipv4Addr>,
}

/// Asynchronous errors tolerated at one datagram before it is dropped: each error is cleared
/// by the call that reports it, so a second or third one there means the destination itself
/// is unreachable (or ICMP errors are arriving faster than we send).
const MAX_RETRIES: u8 = 2;

impl SendBatch {
    /// Datagrams per batch by default; see [`RecvBatch::DEFAULT_CAPACITY`] for why 64.
    ///
    /// [`RecvBatch::DEFAULT_CAPACITY`]: super::RecvBatch::DEFAULT_CAPACITY
    pub const DEFAULT_CAPACITY: usize = 64;
    /// Bytes per slot by default: room for any datagram tickwire sends (MTU ≤ 1500).
    pub const DEFAULT_SLOT_SIZE: usize = 2048;

    /// A batch of [`DEFAULT_CAPACITY`](Self::DEFAULT_CAPACITY) ×
    /// [`DEFAULT_SLOT_SIZE`](Self::DEFAULT_SLOT_SIZE) bytes.
    pub fn new() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY, Self::DEFAULT_SLOT_SIZE)
    }

    /// A batch of `capacity` datagrams of at most `slot_size` bytes each.
    ///
    /// # Panics
    ///
    /// If `capacity` is not in `1..=1024` (the kernel's limit per call) or `slot_size` is not
    /// in `1..=65536`.
    pub fn with_capacity(capacity: usize, slot_size: usize) -> Self {
        assert!(
            (1..=MAX_BATCH).contains(&capacity),
            "send batch capacity {capacity} is outside 1..={MAX_BATCH}"
        );
        assert!(
            (1..=65536).contains(&slot_size),
            "send slot size {slot_size} is outside 1..=65536"
        );
        Self {
            buf: vec![0; capacity * slot_size.next_multiple_of(PACKING)].into_boxed_slice(),
            slot_size,
            used: 0,
            queued: Vec::with_capacity(capacity),
            next: 0,
            retries: 0,
            names: vec![RawAddr::ZEROED; capacity].into_boxed_slice(),
            controls: Box::new([]),
            headers: MsgHeaders::new(capacity),
            stats: SendStats::default(),
        }
    }

    /// How many datagrams the batch holds when full.
    pub fn capacity(&self) -> usize {
        self.names.len()
    }

    /// The largest datagram a slot holds.
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Datagrams queued and not yet sent (or dropped).
    pub fn len(&self) -> usize {
        self.queued.len() - self.next
    }

    /// Whether nothing is waiting to be sent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every slot is taken, so [`push_with`](Self::push_with) would return `false`.
    /// Slots free up only when the whole batch has been sent.
    pub fn is_full(&self) -> bool {
        self.queued.len() == self.capacity()
    }

    /// Counters since this batch was created.
    pub fn stats(&self) -> &SendStats {
        &self.stats
    }

    /// Queues a datagram to `dest`, written in place: `fill` gets the next slot
    /// ([`slot_size`](Self::slot_size) bytes, holding stale data) and returns how many bytes
    /// it wrote. Returns `false`, without calling `fill`, when the batch is full. A length of
    /// 0 queues nothing (tickwire never sends empty datagrams), which lets `fill` decline.
    ///
    /// # Panics
    ///
    /// If `fill` returns more than the slot's length.
    pub fn push_with(&mut self, dest: SocketAddr, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        self.push_from_with(None, dest, fill)
    }

    /// [`push_with`](Self::push_with) from a chosen local address (`IP_PKTINFO`): the
    /// socket must be bound to `0.0.0.0` (or that address), and `source` must be one of the
    /// host's addresses (on Linux any of `127.0.0.0/8`).
    ///
    /// # Panics
    ///
    /// If `fill` returns more than the slot's length.
    pub fn push_from_with(
        &mut self,
        source: Option<Ipv4Addr>,
        dest: SocketAddr,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> bool {
        if self.is_full() {
            return false;
        }
        let len = fill(self.next_slot());
        self.queue_filled(source, dest, len);
        true
    }

    /// Queues a datagram written in place and addressed by `fill`: it gets the next slot
    /// ([`slot_size`](Self::slot_size) bytes, holding stale data) and returns where the
    /// datagram goes and its length, or `None` to queue nothing. Made for a sans-IO
    /// endpoint's `poll_transmit`, which writes straight into the slot: each datagram is
    /// copied once less than when written elsewhere and [`push`](Self::push)ed. Returns
    /// whether a datagram was queued; a full batch returns `false` without calling `fill`,
    /// so a loop checks [`is_full`](Self::is_full) first.
    ///
    /// # Panics
    ///
    /// If `fill` returns more than the slot's length.
    pub fn push_addressed(
        &mut self,
        fill: impl FnOnce(&mut [u8]) -> Option<(SocketAddr, usize)>,
    ) -> bool {
        if self.is_full() {
            return false;
        }
        let Some((dest, len)) = fill(self.next_slot()) else {
            return false;
        };
        self.queue_filled(None, dest, len);
        len > 0
    }

    /// The slot the next datagram is written into; the batch must not be full.
    fn next_slot(&mut self) -> &mut [u8] {
        &mut self.buf[self.used..self.used + self.slot_size]
    }

    /// Queues the `len` bytes just written into the next slot (nothing if `len` is 0).
    fn queue_filled(&mut self, source: Option<Ipv4Addr>, dest: SocketAddr, len: usize) {
        assert!(
            len <= self.slot_size,
            "fill returned {len} bytes but the slot holds {}",
            self.slot_size
        );
        if len > 0 {
            if source.is_some() && self.controls.is_empty() {
                self.controls = vec![ControlBuf::ZEROED; self.capacity()].into_boxed_slice();
            }
            self.queued.push(Queued {
                dest,
                offset: self.used,
                len,
                source,
            });
            self.used += len.next_multiple_of(PACKING);
        }
    }

    /// Queues a copy of `payload` to `dest`. Returns `false` when the batch is full.
    ///
    /// # Panics
    ///
    /// If `payload` is longer than [`slot_size`](Self::slot_size).
    pub fn push(&mut self, dest: SocketAddr, payload: &[u8]) -> bool {
        self.push_with(dest, |slot| {
            slot[..payload.len()].copy_from_slice(payload);
            payload.len()
        })
    }

    /// Forgets every queued datagram, sent or not.
    pub fn clear(&mut self) {
        self.queued.clear();
        self.used = 0;
        self.next = 0;
        self.retries = 0;
    }

    /// Sends what is queued with nonblocking `sendmmsg` calls until everything was accepted or
    /// dropped (then the batch is cleared) or the send buffer is full (`WouldBlock`; the rest
    /// stays queued). `socket_is_ipv6` says how to write IPv4 destinations. For a loop of its
    /// own on a plain socket (the benchmarks); [`BatchSocket`](super::BatchSocket) calls it.
    pub fn send_to_fd(&mut self, fd: BorrowedFd<'_>, socket_is_ipv6: bool) -> io::Result<()> {
        while self.next < self.queued.len() {
            let pending = &self.queued[self.next..];
            let mut controls = self.controls.iter_mut().skip(self.next);
            // Each pending datagram's bytes, cut from the buffer in order (they are
            // disjoint and ascending).
            let mut rest = &mut self.buf[pending[0].offset..];
            let mut at = pending[0].offset;
            let datagrams = pending.iter().map(move |queued| {
                let (data, after) =
                    std::mem::take(&mut rest)[queued.offset - at..].split_at_mut(queued.len);
                rest = after;
                at = queued.offset + queued.len;
                data
            });
            let prepared =
                self.headers
                    .prepare(datagrams.zip(self.names.iter_mut()).zip(pending).map(
                        |((data, name), queued)| {
                            let namelen = name.encode(queued.dest, socket_is_ipv6);
                            let control = controls.next();
                            let control = queued.source.zip(control).map(|(source, buf)| {
                                let used = pktinfo::encode(buf, source);
                                (buf, used)
                            });
                            (data, name, namelen, control)
                        },
                    ));
            // SAFETY: `hdrs[..prepared]` were just pointed at this batch's own slots (cut to
            // each datagram's length) and encoded names with their true lengths, all of which
            // stay borrowed, alive and unmodified until the call returns.
            let n = unsafe {
                libc::sendmmsg(
                    fd.as_raw_fd(),
                    self.headers.hdrs.as_mut_ptr(),
                    prepared as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if let Ok(accepted) = usize::try_from(n) {
                // sendmmsg returns at least 1 or an error, never 0 for a non-empty batch;
                // were it to, returning beats looping on it.
                if accepted == 0 {
                    return Err(io::Error::other("sendmmsg accepted no datagram"));
                }
                self.stats.syscalls += 1;
                self.stats.datagrams += accepted as u64;
                self.stats.bytes += pending[..accepted]
                    .iter()
                    .map(|queued| queued.len as u64)
                    .sum::<u64>();
                self.next += accepted;
                self.retries = 0;
                continue;
            }
            // The call stopped at `queued[next]`: the error is about that datagram, or about
            // the socket as a whole.
            let err = io::Error::last_os_error();
            match classify(&err) {
                ErrorClass::Interrupted => {}
                ErrorClass::WouldBlock => {
                    self.stats.would_block += 1;
                    return Err(err);
                }
                ErrorClass::Fatal => return Err(err),
                ErrorClass::Asynchronous if self.retries < MAX_RETRIES => {
                    self.retries += 1;
                    self.stats.socket_errors += 1;
                }
                ErrorClass::Asynchronous => self.drop_next(|s| &mut s.dropped_unreachable),
                ErrorClass::Message => match err.raw_os_error() {
                    Some(libc::EINVAL | libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL) => {
                        self.drop_next(|s| &mut s.dropped_invalid);
                    }
                    Some(libc::EMSGSIZE) => self.drop_next(|s| &mut s.dropped_too_big),
                    _ => self.drop_next(|s| &mut s.dropped_other),
                },
            }
        }
        self.clear();
        Ok(())
    }

    fn drop_next(&mut self, counter: impl FnOnce(&mut SendStats) -> &mut u64) {
        let Queued { dest, len, .. } = self.queued[self.next];
        tracing::trace!(%dest, len, "dropped a datagram the kernel refused");
        *counter(&mut self.stats) += 1;
        self.next += 1;
        self.retries = 0;
    }
}

impl Default for SendBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for SendBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendBatch")
            .field("capacity", &self.capacity())
            .field("slot_size", &self.slot_size)
            .field("len", &self.len())
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    fn dest() -> SocketAddr {
        "127.0.0.1:9".parse().unwrap()
    }

    #[test]
    fn push_fills_slots_in_place_until_full() {
        let mut batch = SendBatch::with_capacity(3, 16);
        for i in 0..3u8 {
            assert!(batch.push_with(dest(), |slot| {
                assert_eq!(slot.len(), 16, "fill sees the whole slot");
                slot[0] = i;
                1
            }));
        }
        assert!(batch.is_full());
        assert_eq!(batch.len(), 3);
        let refused = batch.push_with(dest(), |_| unreachable!("fill called on a full batch"));
        assert!(!refused, "a full batch refuses a push");
        batch.clear();
        assert!(batch.is_empty() && !batch.is_full());
    }

    #[test]
    fn a_zero_length_fill_queues_nothing() {
        let mut batch = SendBatch::with_capacity(2, 16);
        assert!(batch.push_with(dest(), |_| 0));
        assert!(batch.is_empty(), "a declined slot is not queued");
    }

    /// What `poll_transmit` does through `push_addressed`: writes each datagram into its
    /// slot and names its destination; each reaches its own socket with its own bytes.
    #[test]
    fn addressed_pushes_reach_the_destinations_their_fills_name() {
        let receivers: Vec<std::net::UdpSocket> = (0..2)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.set_nonblocking(true).unwrap();
        let mut batch = SendBatch::with_capacity(2, 16);
        for (i, receiver) in receivers.iter().enumerate() {
            let to = receiver.local_addr().unwrap();
            assert!(batch.push_addressed(|slot| {
                slot[..3].copy_from_slice(&[i as u8; 3]);
                Some((to, 3))
            }));
        }
        assert!(batch.is_full());
        let refused = batch.push_addressed(|_| unreachable!("fill called on a full batch"));
        assert!(!refused, "a full batch queues nothing");
        batch.send_to_fd(sender.as_fd(), false).unwrap();
        for (i, receiver) in receivers.iter().enumerate() {
            receiver
                .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let mut buf = [0u8; 16];
            let (len, from) = receiver.recv_from(&mut buf).unwrap();
            assert_eq!(
                &buf[..len],
                &[i as u8; 3],
                "receiver {i} got another's bytes"
            );
            assert_eq!(from, sender.local_addr().unwrap());
        }
        let mut batch = SendBatch::with_capacity(2, 16);
        assert!(
            !batch.push_addressed(|_| None),
            "a declined fill queues nothing"
        );
        assert!(batch.is_empty());
    }

    #[test]
    #[should_panic(expected = "fill returned 17 bytes but the slot holds 16")]
    fn a_fill_longer_than_the_slot_panics() {
        SendBatch::with_capacity(1, 16).push_with(dest(), |_| 17);
    }
}
