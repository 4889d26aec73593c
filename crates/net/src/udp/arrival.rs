//! When a received datagram reached the host (`SO_TIMESTAMPNS`): the kernel stamps it as it
//! comes in, before it waits in the socket's queue.
//!
//! A load tool that drives thousands of bots from one core takes a burst in over
//! milliseconds; stamped at the socket, a reply's latency is the server's and the network's,
//! not the time the tool took to get to it. The wait itself is then a figure of its own:
//! how far behind its receive pace the tool fell.

use std::io;
use std::os::fd::BorrowedFd;

use super::bind::set_int_option;
use super::mmsg::control_data;

/// Asks the kernel to stamp each datagram received on `socket` with its arrival time
/// (`CLOCK_REALTIME`), read with a batch made
/// [`with_controls`](super::RecvBatch::with_controls).
pub fn enable_arrival_times(socket: BorrowedFd<'_>) -> io::Result<()> {
    set_int_option(&socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// The arrival time in `cmsg`, nanoseconds since the Unix epoch, if it is a timestamp.
///
/// # Safety
///
/// `cmsg` points at a control message the kernel wrote, `cmsg_len` bytes of it readable.
pub(crate) unsafe fn read(cmsg: *const libc::cmsghdr) -> Option<u64> {
    // SAFETY: the caller's promise; the kernel writes a `timespec` for this message.
    let at: libc::timespec =
        unsafe { control_data(cmsg, libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS)? };
    let seconds = u64::try_from(at.tv_sec).ok()?;
    let nanos = u64::try_from(at.tv_nsec).ok()?;
    Some(seconds * 1_000_000_000 + nanos)
}
