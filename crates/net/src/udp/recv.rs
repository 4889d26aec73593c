//! Receiving many datagrams per syscall into preallocated buffers.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr;

use std::net::Ipv4Addr;

use super::arrival;
use super::mmsg::{ErrorClass, MAX_BATCH, MsgHeaders, classify};
use super::pktinfo::{self, CONTROL_LEN, ControlBuf};
use super::sockaddr::{RAW_ADDR_LEN, RawAddr};

/// Counters of one [`RecvBatch`], accumulated over its lifetime. Plain fields: a batch is
/// owned by one task, so counting needs no atomics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvStats {
    /// Datagrams handed on (truncated and unaddressed ones excluded).
    pub datagrams: u64,
    /// Payload bytes of those datagrams.
    pub bytes: u64,
    /// `recvmmsg` calls that returned at least one datagram.
    pub syscalls: u64,
    /// Datagrams larger than a slot, which the kernel cut short: dropped, never passed on.
    pub dropped_truncated: u64,
    /// Datagrams whose source was not an IPv4/IPv6 address: dropped.
    pub dropped_bad_address: u64,
    /// Asynchronous socket errors (ICMP unreachable for an earlier send) reported by a
    /// receive call and skipped.
    pub socket_errors: u64,
}

/// Where one received datagram sits in the batch.
#[derive(Debug, Clone, Copy)]
struct Entry {
    from: SocketAddr,
    /// The local address it was sent to, when the batch asks for local addresses.
    local: Option<Ipv4Addr>,
    /// When it reached the host, when the batch asks for arrival times.
    arrived_ns: Option<u64>,
    slot: usize,
    len: usize,
}

/// One datagram of a batch made [`with_controls`](RecvBatch::with_controls).
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The local address it was sent to (`None` without
    /// [`enable_local_addresses`](super::enable_local_addresses) on the socket).
    pub local: Option<Ipv4Addr>,
    /// Its source.
    pub from: SocketAddr,
    /// When it reached the host, nanoseconds since the Unix epoch (`None` without
    /// [`enable_arrival_times`](super::enable_arrival_times) on the socket).
    pub arrived_ns: Option<u64>,
    /// Its bytes.
    pub payload: &'a [u8],
}

/// Preallocated buffers for receiving up to `capacity` datagrams with one `recvmmsg` call.
///
/// After a receive, [`iter`](Self::iter) yields each datagram's source and bytes; they stay
/// valid until the next receive into this batch. Nothing is allocated after construction.
///
/// Receiving uses `libc::recvmmsg` directly rather than quinn-udp's `UdpSocketState::recv`:
/// quinn-udp does not expose `MSG_TRUNC`, so an oversized datagram would be passed on cut
/// short instead of dropped; it caps a call at 32 messages; it parses control messages (ECN,
/// packet info) per datagram that tickwire does not use; and its GRO support, which merges
/// same-flow datagrams into one buffer, would need 64 KiB slots to be safe while game traffic
/// is small datagrams from many peers, which GRO does not merge anyway.
pub struct RecvBatch {
    /// `capacity` slots of `slot_size` bytes, back to back.
    buf: Box<[u8]>,
    slot_size: usize,
    names: Box<[RawAddr]>,
    /// Control space per slot when local addresses or arrival times are wanted, else empty.
    controls: Box<[ControlBuf]>,
    headers: MsgHeaders,
    /// The datagrams of the last receive, in arrival order; capacity reserved up front.
    entries: Vec<Entry>,
    stats: RecvStats,
}

impl RecvBatch {
    /// Datagrams per call by default. Past a few dozen, the syscall's fixed cost (~0.1 µs)
    /// is already under 1 % of the per-datagram cost (~2.5 µs on loopback); 64 keeps the
    /// default batch's buffers at 128 KiB, small enough to stay in L2.
    pub const DEFAULT_CAPACITY: usize = 64;
    /// Bytes per datagram slot by default: above any datagram tickwire sends (its MTU is at
    /// most an Ethernet frame's 1500 bytes), so anything larger is not ours and is dropped.
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
            "receive batch capacity {capacity} is outside 1..={MAX_BATCH}"
        );
        assert!(
            (1..=65536).contains(&slot_size),
            "receive slot size {slot_size} is outside 1..=65536"
        );
        Self {
            buf: vec![0; capacity * slot_size].into_boxed_slice(),
            slot_size,
            names: vec![RawAddr::ZEROED; capacity].into_boxed_slice(),
            controls: Box::new([]),
            headers: MsgHeaders::new(capacity),
            entries: Vec::with_capacity(capacity),
            stats: RecvStats::default(),
        }
    }

    /// A default-sized batch that also records each datagram's local address and arrival
    /// time, for a socket with [`enable_local_addresses`](super::enable_local_addresses) or
    /// [`enable_arrival_times`](super::enable_arrival_times) set; read them with
    /// [`iter_received`](Self::iter_received).
    pub fn with_controls() -> Self {
        let mut batch = Self::new();
        batch.controls = vec![ControlBuf::ZEROED; batch.capacity()].into_boxed_slice();
        batch
    }

    /// How many datagrams one receive can take.
    pub fn capacity(&self) -> usize {
        self.names.len()
    }

    /// The largest datagram a slot holds; larger ones are dropped and counted.
    pub fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Datagrams from the last receive.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the last receive left no datagram.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The datagrams from the last receive: source address and payload, in arrival order.
    pub fn iter(&self) -> RecvIter<'_> {
        RecvIter {
            batch: self,
            entries: self.entries.iter(),
        }
    }

    /// The datagrams from the last receive with what the kernel said of each: the local
    /// address it was sent to and when it arrived (`None` unless the batch was made
    /// [`with_controls`](Self::with_controls) and the socket asked for them).
    pub fn iter_received(&self) -> impl ExactSizeIterator<Item = Received<'_>> {
        self.entries.iter().map(|entry| {
            let start = entry.slot * self.slot_size;
            Received {
                local: entry.local,
                from: entry.from,
                arrived_ns: entry.arrived_ns,
                payload: &self.buf[start..start + entry.len],
            }
        })
    }

    /// Counters since this batch was created.
    pub fn stats(&self) -> &RecvStats {
        &self.stats
    }

    /// One nonblocking `recvmmsg` into this batch, replacing its contents. Returns how many
    /// datagrams it now holds, which is 0 when everything received was dropped (see
    /// [`stats`](Self::stats)); `WouldBlock` when nothing was waiting.
    pub fn recv_from_fd(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        self.entries.clear();
        // Each asynchronous error is cleared by the call that reports it, so retrying makes
        // progress; the bound only stops a flood of them from keeping this call busy.
        let mut async_errors = 0;
        let received = loop {
            let mut controls = self.controls.iter_mut();
            let prepared = self.headers.prepare(
                self.buf
                    .chunks_exact_mut(self.slot_size)
                    .zip(self.names.iter_mut())
                    .map(|(data, name)| {
                        let control = controls.next().map(|buf| (buf, CONTROL_LEN));
                        (data, name, RAW_ADDR_LEN, control)
                    }),
            );
            // SAFETY: `hdrs[..prepared]` were just pointed at this batch's own slots and
            // names, each with its true length, and all of them stay mutably borrowed (and so
            // alive and unaliased) until the call returns. A null timeout is allowed.
            let n = unsafe {
                libc::recvmmsg(
                    fd.as_raw_fd(),
                    self.headers.hdrs.as_mut_ptr(),
                    prepared as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                )
            };
            if let Ok(n) = usize::try_from(n) {
                break n;
            }
            let err = io::Error::last_os_error();
            match classify(&err) {
                ErrorClass::Interrupted => continue,
                ErrorClass::Asynchronous if async_errors < 8 => {
                    async_errors += 1;
                    self.stats.socket_errors += 1;
                }
                ErrorClass::Asynchronous => {
                    self.stats.socket_errors += 1;
                    return Ok(0);
                }
                _ => return Err(err),
            }
        };
        self.stats.syscalls += 1;
        for (slot, (hdr, name)) in self.headers.hdrs[..received]
            .iter()
            .zip(self.names.iter())
            .enumerate()
        {
            if hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                self.stats.dropped_truncated += 1;
                continue;
            }
            let Some(from) = name.decode(hdr.msg_hdr.msg_namelen) else {
                self.stats.dropped_bad_address += 1;
                continue;
            };
            let len = hdr.msg_len as usize;
            self.stats.datagrams += 1;
            self.stats.bytes += len as u64;
            let (local, arrived_ns) = read_controls(&hdr.msg_hdr);
            self.entries.push(Entry {
                from,
                local,
                arrived_ns,
                slot,
                len,
            });
        }
        Ok(self.entries.len())
    }
}

/// The local address and the arrival time in a received datagram's control messages, those
/// it has.
fn read_controls(header: &libc::msghdr) -> (Option<Ipv4Addr>, Option<u64>) {
    let (mut local, mut arrived_ns) = (None, None);
    if header.msg_control.is_null() {
        return (local, arrived_ns);
    }
    // SAFETY: the kernel filled `msg_control` up to `msg_controllen` with well-formed
    // control messages, and CMSG_FIRSTHDR/NXTHDR stay within that length; each reader
    // checks its message's own length before its data.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            local = local.or_else(|| pktinfo::read(cmsg));
            arrived_ns = arrived_ns.or_else(|| arrival::read(cmsg));
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
    }
    (local, arrived_ns)
}

impl Default for RecvBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("capacity", &self.capacity())
            .field("slot_size", &self.slot_size)
            .field("len", &self.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl<'a> IntoIterator for &'a RecvBatch {
    type Item = (SocketAddr, &'a [u8]);
    type IntoIter = RecvIter<'a>;

    fn into_iter(self) -> RecvIter<'a> {
        self.iter()
    }
}

/// Iterator over a [`RecvBatch`]'s datagrams: `(source, payload)`.
#[derive(Debug, Clone)]
pub struct RecvIter<'a> {
    batch: &'a RecvBatch,
    entries: std::slice::Iter<'a, Entry>,
}

impl<'a> Iterator for RecvIter<'a> {
    type Item = (SocketAddr, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let entry = self.entries.next()?;
        let start = entry.slot * self.batch.slot_size;
        Some((entry.from, &self.batch.buf[start..start + entry.len]))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.entries.size_hint()
    }
}

impl ExactSizeIterator for RecvIter<'_> {}
