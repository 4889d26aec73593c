//! The raw limit of this machine's UDP send path, measured without tickwire in the way.
//!
//! [`raw_sendmmsg`] is a bare `sendmmsg` loop (no protocol, no crypto, headers built once)
//! that sends same-sized datagrams round-robin to many loopback sockets, from a thread pinned
//! to one CPU, while a thread pinned to another CPU drains those sockets with `recvmmsg`. It
//! reports datagrams per second of wall clock and per second of the sender's own CPU time;
//! `tickwire bench udp` holds the full protocol path, [`relay::protocol_relay`], against it
//! (`ratio_to_raw`).
//! [`send_batch_loop`] runs the same harness through [`SendBatch`], which shows what the
//! driver itself costs on top of the kernel.
//!
//! On loopback the sender pays the kernel's whole per-datagram cost: delivery into the
//! receiving socket runs as a softirq on the sending CPU, in the sender's syscall, and is
//! charged to its thread CPU time (this kernel has no separate IRQ time accounting).

use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use socket2::SockAddr;
use tickwire_net::udp::{RECV_BUFFER_BYTES, SEND_BUFFER_BYTES, SendBatch};

/// What [`raw_sendmmsg`] and [`send_batch_loop`] send, where, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawConfig {
    /// UDP payload bytes per datagram (default 64, a typical small game packet).
    pub payload_len: usize,
    /// Destination sockets on 127.0.0.1, sent to round-robin (default 256, so that the
    /// kernel's per-destination work, route and socket lookup, is not always cache-hot).
    pub destinations: usize,
    /// Datagrams per `sendmmsg` call (default 64, as [`SendBatch::DEFAULT_CAPACITY`]).
    pub batch: usize,
    /// How long the sender sends (default 2 s).
    pub duration: Duration,
    /// CPU the sending thread is pinned to (default 1, as the project's benchmarks use;
    /// `None` leaves it unpinned).
    pub sender_cpu: Option<usize>,
    /// CPU the draining thread is pinned to (default 0, the other one).
    pub receiver_cpu: Option<usize>,
}

impl Default for RawConfig {
    fn default() -> Self {
        Self {
            payload_len: 64,
            destinations: 256,
            batch: 64,
            duration: Duration::from_secs(2),
            sender_cpu: Some(1),
            receiver_cpu: Some(0),
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RawFigures {
    /// The configuration that produced these figures.
    pub config: RawConfig,
    /// Datagrams the kernel accepted from the sender.
    pub sent: u64,
    /// Datagrams the draining thread received (the rest overflowed a receive buffer).
    pub received: u64,
    /// Times the sender found its send buffer full and waited.
    pub would_block: u64,
    /// Datagrams the kernel refused (expected 0 on loopback).
    pub send_errors: u64,
    /// Wall-clock time the sender spent sending.
    pub wall: Duration,
    /// CPU time of the sending thread over that time (`CLOCK_THREAD_CPUTIME_ID`), including
    /// the loopback delivery the kernel does on its behalf.
    pub sender_cpu_time: Duration,
    /// CPU time of the draining thread, start to finish.
    pub receiver_cpu_time: Duration,
}

impl RawFigures {
    /// Datagrams sent per second of wall clock.
    pub fn sent_pps(&self) -> f64 {
        per_second(self.sent, self.wall)
    }

    /// Datagrams received per second of the sender's wall clock.
    pub fn received_pps(&self) -> f64 {
        per_second(self.received, self.wall)
    }

    /// Datagrams sent per second of the sender's CPU time: the figure to compare across
    /// runs on a shared machine, since it does not count time the sender was preempted.
    pub fn sent_pps_per_core(&self) -> f64 {
        per_second(self.sent, self.sender_cpu_time)
    }

    /// Datagrams received per second of the sender's CPU time.
    pub fn received_pps_per_core(&self) -> f64 {
        per_second(self.received, self.sender_cpu_time)
    }

    /// Sender CPU time per datagram sent, in nanoseconds.
    pub fn ns_per_datagram(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        self.sender_cpu_time.as_nanos() as f64 / self.sent as f64
    }
}

pub(crate) fn per_second(count: u64, time: Duration) -> f64 {
    if time.is_zero() {
        return 0.0;
    }
    count as f64 / time.as_secs_f64()
}

/// Why a raw benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum RawBenchError {
    /// The payload does not fit a UDP datagram.
    #[error("payload length {0} is outside 1..=65507")]
    PayloadLen(usize),
    /// Too few or too many destination sockets.
    #[error("destination count {0} is outside 1..=4096")]
    Destinations(usize),
    /// The batch is empty or larger than the kernel takes per call.
    #[error("batch size {0} is outside 1..=1024")]
    Batch(usize),
    /// Opening or configuring a loopback socket failed (too many open files, say).
    #[error("opening a loopback socket failed: {0}")]
    Socket(#[source] io::Error),
    /// A thread could not be pinned (the CPU does not exist or is not allowed).
    #[error("pinning the {thread} thread to cpu {cpu} failed: {source}")]
    Pin {
        /// `"sender"` or `"receiver"`.
        thread: &'static str,
        /// The CPU asked for.
        cpu: usize,
        /// The error from `sched_setaffinity`.
        source: io::Error,
    },
    /// `sendmmsg` failed with something other than a full buffer.
    #[error("sendmmsg failed: {0}")]
    Send(#[source] io::Error),
    /// A benchmark thread panicked.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

/// Runs the bare `sendmmsg` loop described in the [module docs](self) and returns its figures.
/// Blocks for about `config.duration` plus a short drain.
pub fn raw_sendmmsg(config: &RawConfig) -> Result<RawFigures, RawBenchError> {
    run(config, bare_sender)
}

/// The same harness as [`raw_sendmmsg`], but every datagram goes through a [`SendBatch`]:
/// copied into a slot with [`SendBatch::push`], its address encoded per send, errors
/// classified per call. The gap to [`raw_sendmmsg`] is the driver's own cost.
pub fn send_batch_loop(config: &RawConfig) -> Result<RawFigures, RawBenchError> {
    run(config, batch_sender)
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: an all-zero `cpu_set_t` is the empty set; `cpu` was checked to be in range for
    // `CPU_SET`; `sched_setaffinity` reads `size_of::<cpu_set_t>()` bytes of the set, and pid
    // 0 means the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// What a sender loop reports back to the harness.
struct SenderCounts {
    sent: u64,
    would_block: u64,
    send_errors: u64,
    wall: Duration,
    cpu: Duration,
}

type SenderFn = fn(&UdpSocket, &[SocketAddr], &RawConfig) -> io::Result<SenderCounts>;

fn run(config: &RawConfig, sender: SenderFn) -> Result<RawFigures, RawBenchError> {
    if !(1..=65507).contains(&config.payload_len) {
        return Err(RawBenchError::PayloadLen(config.payload_len));
    }
    if !(1..=4096).contains(&config.destinations) {
        return Err(RawBenchError::Destinations(config.destinations));
    }
    if !(1..=1024).contains(&config.batch) {
        return Err(RawBenchError::Batch(config.batch));
    }
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let sinks = (0..config.destinations)
        .map(|_| loopback_socket(loopback, RECV_BUFFER_BYTES, 0))
        .collect::<io::Result<Vec<_>>>()
        .map_err(RawBenchError::Socket)?;
    let dests = sinks
        .iter()
        .map(UdpSocket::local_addr)
        .collect::<io::Result<Vec<_>>>()
        .map_err(RawBenchError::Socket)?;
    let source = loopback_socket(loopback, 0, SEND_BUFFER_BYTES).map_err(RawBenchError::Socket)?;

    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = {
        let stop = Arc::clone(&stop);
        let cpu = config.receiver_cpu;
        let slot = config.payload_len;
        thread::spawn(move || {
            let pinned = cpu.map_or(Ok(()), pin_current_thread);
            let failed = pinned.is_err();
            let _ = ready_tx.send(pinned);
            if failed {
                return (0, Duration::ZERO);
            }
            drain(&sinks, slot, &stop)
        })
    };
    let receiver_ready = ready_rx.recv().unwrap_or(Ok(()));
    let sent = match receiver_ready {
        Err(source) => Err(RawBenchError::Pin {
            thread: "receiver",
            cpu: config.receiver_cpu.unwrap_or(0),
            source,
        }),
        Ok(()) => {
            let config_for_sender = config.clone();
            thread::spawn(move || -> Result<SenderCounts, RawBenchError> {
                if let Some(cpu) = config_for_sender.sender_cpu {
                    pin_current_thread(cpu).map_err(|source| RawBenchError::Pin {
                        thread: "sender",
                        cpu,
                        source,
                    })?;
                }
                sender(&source, &dests, &config_for_sender).map_err(RawBenchError::Send)
            })
            .join()
            .unwrap_or(Err(RawBenchError::Panicked("sender")))
        }
    };
    // The receiver drains what is still queued and stops; it must stop even if sending failed.
    stop.store(true, Ordering::Release);
    let (received, receiver_cpu_time) = receiver
        .join()
        .map_err(|_| RawBenchError::Panicked("receiver"))?;
    let counts = sent?;
    Ok(RawFigures {
        config: config.clone(),
        sent: counts.sent,
        received,
        would_block: counts.would_block,
        send_errors: counts.send_errors,
        wall: counts.wall,
        sender_cpu_time: counts.cpu,
        receiver_cpu_time,
    })
}

/// A nonblocking UDP socket on `addr` with the given buffer sizes (0 keeps the default).
pub(crate) fn loopback_socket(
    addr: SocketAddr,
    recv_buf: usize,
    send_buf: usize,
) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    if recv_buf > 0 {
        socket.set_recv_buffer_size(recv_buf)?;
    }
    if send_buf > 0 {
        socket.set_send_buffer_size(send_buf)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Waits up to `timeout_ms` for `fd` to become writable, so a full send buffer is waited
/// out rather than spun on.
pub(crate) fn wait_writable(fd: RawFd, timeout_ms: i32) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, and nfds says one.
    unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
}

/// The bare loop: one payload buffer and one header per destination, built once; every call
/// sends the next `batch` destinations round-robin.
fn bare_sender(
    socket: &UdpSocket,
    dests: &[SocketAddr],
    config: &RawConfig,
) -> io::Result<SenderCounts> {
    let fd = socket.as_raw_fd();
    let payload = vec![0xA5u8; config.payload_len];
    let names: Vec<SockAddr> = dests.iter().map(|&dest| SockAddr::from(dest)).collect();
    let mut iov = libc::iovec {
        // sendmmsg only reads through this pointer.
        iov_base: payload.as_ptr().cast_mut().cast(),
        iov_len: payload.len(),
    };
    let iov_ptr = ptr::from_mut(&mut iov);
    // `dests.len() + batch` headers, header i for destination i mod D, so any window of
    // `batch` consecutive headers starting below D is a valid round-robin call.
    let mut hdrs: Vec<libc::mmsghdr> = (0..dests.len() + config.batch)
        .map(|i| {
            let d = i % dests.len();
            libc::mmsghdr {
                msg_hdr: libc::msghdr {
                    // sendmmsg only reads the name.
                    msg_name: names[d].as_ptr().cast_mut().cast(),
                    msg_namelen: names[d].len(),
                    msg_iov: iov_ptr,
                    msg_iovlen: 1,
                    msg_control: ptr::null_mut(),
                    msg_controllen: 0,
                    msg_flags: 0,
                },
                msg_len: 0,
            }
        })
        .collect();

    let mut counts = SenderCounts {
        sent: 0,
        would_block: 0,
        send_errors: 0,
        wall: Duration::ZERO,
        cpu: Duration::ZERO,
    };
    let cpu_start = thread_cpu_time();
    let start = Instant::now();
    let deadline = start + config.duration;
    let mut next = 0;
    while Instant::now() < deadline {
        let window = &mut hdrs[next..next + config.batch];
        // SAFETY: every header in `window` points at a live name in `names` with its true
        // length and at `iov`, which points at `payload`; all outlive the call, and the
        // kernel only reads them apart from `msg_len`, which it writes within `window`.
        let n = unsafe { libc::sendmmsg(fd, window.as_mut_ptr(), window.len() as libc::c_uint, 0) };
        match usize::try_from(n) {
            Ok(accepted) => {
                counts.sent += accepted as u64;
                next = (next + accepted) % dests.len();
            }
            Err(_) => {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => {}
                    Some(libc::EAGAIN) => {
                        counts.would_block += 1;
                        wait_writable(fd, 100);
                    }
                    _ => return Err(err),
                }
            }
        }
    }
    counts.wall = start.elapsed();
    counts.cpu = thread_cpu_time().saturating_sub(cpu_start);
    Ok(counts)
}

/// The driver's loop: refill a [`SendBatch`] and send it, as a server worker would.
fn batch_sender(
    socket: &UdpSocket,
    dests: &[SocketAddr],
    config: &RawConfig,
) -> io::Result<SenderCounts> {
    let payload = vec![0xA5u8; config.payload_len];
    let mut batch = SendBatch::with_capacity(config.batch, config.payload_len);
    let cpu_start = thread_cpu_time();
    let start = Instant::now();
    let deadline = start + config.duration;
    let mut dest = dests.iter().cycle();
    while Instant::now() < deadline {
        while !batch.is_full() {
            // `cycle` over a non-empty slice never ends.
            let Some(&to) = dest.next() else { break };
            batch.push(to, &payload);
        }
        match batch.send_to_fd(socket.as_fd(), false) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_writable(socket.as_raw_fd(), 100);
            }
            Err(e) => return Err(e),
        }
    }
    let stats = batch.stats();
    Ok(SenderCounts {
        sent: stats.datagrams,
        would_block: stats.would_block,
        send_errors: stats.dropped(),
        wall: start.elapsed(),
        cpu: thread_cpu_time().saturating_sub(cpu_start),
    })
}

/// Drains every sink with `recvmmsg`, one sweep over all of them per millisecond, until
/// `stop` is set and nothing more arrives. Returns the datagrams received and this thread's
/// CPU time.
///
/// It sleeps between sweeps instead of waiting in `poll`/`epoll`: a waiter registered on a
/// socket makes every delivery into it wake that waiter, work the kernel would do on the
/// sender's CPU and charge to the sender. Without waiters, the figure is the send path's
/// alone. The buffers have room: at 400K datagrams/s over 256 sockets, a millisecond is a
/// handful of datagrams per socket, and each socket's buffer holds about 10,000.
pub(crate) fn drain(sinks: &[UdpSocket], payload_len: usize, stop: &AtomicBool) -> (u64, Duration) {
    const BATCH: usize = 64;
    let cpu_start = thread_cpu_time();
    // Sources are not needed; a slot one byte larger than the payload is enough to count.
    let slot = payload_len + 1;
    let mut buf = vec![0u8; BATCH * slot];
    let mut iovs: Vec<libc::iovec> = buf
        .chunks_exact_mut(slot)
        .map(|chunk| libc::iovec {
            iov_base: chunk.as_mut_ptr().cast(),
            iov_len: chunk.len(),
        })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = iovs
        .iter_mut()
        .map(|iov| libc::mmsghdr {
            msg_hdr: libc::msghdr {
                msg_name: ptr::null_mut(),
                msg_namelen: 0,
                msg_iov: ptr::from_mut(iov),
                msg_iovlen: 1,
                msg_control: ptr::null_mut(),
                msg_controllen: 0,
                msg_flags: 0,
            },
            msg_len: 0,
        })
        .collect();

    let mut received = 0u64;
    let mut quiet_sweeps = 0;
    loop {
        // Read before sweeping: once the sender has stopped, what it sent is queued (loopback
        // delivers within the send call, or a softirq deferred to ksoftirqd delivers within
        // milliseconds), so 10 empty sweeps after that, 10 ms of silence, mean done.
        let stopping = stop.load(Ordering::Acquire);
        let mut swept = 0u64;
        for sink in sinks {
            loop {
                // SAFETY: every header points at its own `slot`-byte chunk of `buf` through
                // `iovs`, all alive and untouched by Rust for the duration of the call; no
                // names or control buffers; a null timeout is allowed.
                let n = unsafe {
                    libc::recvmmsg(
                        sink.as_raw_fd(),
                        hdrs.as_mut_ptr(),
                        BATCH as libc::c_uint,
                        libc::MSG_DONTWAIT,
                        ptr::null_mut(),
                    )
                };
                let Ok(n) = usize::try_from(n) else { break };
                swept += n as u64;
                if n < BATCH {
                    break;
                }
            }
        }
        received += swept;
        if stopping && swept == 0 {
            quiet_sweeps += 1;
            if quiet_sweeps == 10 {
                break;
            }
        }
        thread::sleep(Duration::from_millis(1));
    }
    // Keep `buf` alive (the headers point into it) until the last call above.
    drop(buf);
    (received, thread_cpu_time().saturating_sub(cpu_start))
}
