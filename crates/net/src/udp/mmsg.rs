//! The `mmsghdr`/`iovec` arrays handed to `recvmmsg` and `sendmmsg`, and the errno
//! classification both directions share.

use std::io;
use std::ptr;

use super::pktinfo::ControlBuf;
use super::sockaddr::RawAddr;

/// The most messages one `recvmmsg`/`sendmmsg` call takes (the kernel's `UIO_MAXIOV`; it
/// silently truncates a larger `vlen`).
pub(crate) const MAX_BATCH: usize = 1024;

/// Per-message headers, preallocated once per batch.
///
/// They are rewritten from the batch's own buffers right before every call (the kernel
/// overwrites `msg_namelen`, `msg_flags` and `msg_len` anyway), so the raw pointers inside are
/// only ever read by the kernel during a call made while the batch is mutably borrowed.
pub(crate) struct MsgHeaders {
    pub(crate) hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
}

// SAFETY: the raw pointers in `hdrs`/`iovs` are scratch values, written immediately before
// each syscall from `&mut` borrows of buffers owned by the same batch and never dereferenced
// by Rust code. They carry no ownership or aliasing between calls, so moving or sharing the
// arrays across threads is as safe as moving or sharing the buffers themselves.
unsafe impl Send for MsgHeaders {}
// SAFETY: see `Send`; nothing reachable through `&MsgHeaders` dereferences the pointers.
unsafe impl Sync for MsgHeaders {}

impl MsgHeaders {
    pub(crate) fn new(capacity: usize) -> Self {
        let hdr = libc::mmsghdr {
            msg_hdr: libc::msghdr {
                msg_name: ptr::null_mut(),
                msg_namelen: 0,
                msg_iov: ptr::null_mut(),
                msg_iovlen: 0,
                msg_control: ptr::null_mut(),
                msg_controllen: 0,
                msg_flags: 0,
            },
            msg_len: 0,
        };
        let iov = libc::iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0,
        };
        Self {
            hdrs: vec![hdr; capacity].into_boxed_slice(),
            iovs: vec![iov; capacity].into_boxed_slice(),
        }
    }

    /// Points the first headers at `messages` (buffer, address, address length, and
    /// control space with its length when the message has any), one each, and returns how
    /// many it set. All pointers come from a single pass of mutable iterators, so none is
    /// invalidated before the syscall that reads them.
    pub(crate) fn prepare<'a>(
        &mut self,
        messages: impl Iterator<Item = (&'a mut [u8], &'a mut RawAddr, libc::socklen_t, Control<'a>)>,
    ) -> usize {
        let mut count = 0;
        for ((hdr, iov), (data, name, namelen, control)) in
            self.hdrs.iter_mut().zip(self.iovs.iter_mut()).zip(messages)
        {
            *iov = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            let (msg_control, msg_controllen) = match control {
                Some((buf, len)) => (buf.as_mut_ptr(), len),
                None => (ptr::null_mut(), 0),
            };
            *hdr = libc::mmsghdr {
                msg_hdr: libc::msghdr {
                    msg_name: ptr::from_mut(name).cast(),
                    msg_namelen: namelen,
                    msg_iov: ptr::from_mut(iov),
                    msg_iovlen: 1,
                    msg_control,
                    msg_controllen: msg_controllen as _,
                    msg_flags: 0,
                },
                msg_len: 0,
            };
            count += 1;
        }
        count
    }
}

/// A message's control space and the bytes of it in use (all of it before a receive),
/// or none.
pub(crate) type Control<'a> = Option<(&'a mut ControlBuf, usize)>;

/// What an error from `recvmmsg`/`sendmmsg` means for the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// `EINTR`: call again.
    Interrupted,
    /// `EAGAIN`: the socket buffer is empty (receive) or full (send); wait for readiness.
    WouldBlock,
    /// An ICMP error for an *earlier* datagram (port unreachable and friends), stored on the
    /// socket and reported, then cleared, by whichever call came next. Linux only reports
    /// these on connected sockets or with `IP_RECVERR`, but a driver must survive either.
    Asynchronous,
    /// The socket itself is unusable (closed fd, not a socket, bad pointer): stop and report.
    Fatal,
    /// Anything else refers to the message the call stopped at.
    Message,
}

pub(crate) fn classify(err: &io::Error) -> ErrorClass {
    match err.raw_os_error() {
        Some(libc::EINTR) => ErrorClass::Interrupted,
        Some(libc::EAGAIN) => ErrorClass::WouldBlock,
        // The errno values Linux maps ICMP errors to (icmp_err_convert, icmpv6_err_convert).
        Some(
            libc::ECONNREFUSED
            | libc::EHOSTUNREACH
            | libc::ENETUNREACH
            | libc::EHOSTDOWN
            | libc::ENONET
            | libc::ENOPROTOOPT
            | libc::EPROTO,
        ) => ErrorClass::Asynchronous,
        Some(libc::EBADF | libc::ENOTSOCK | libc::EFAULT) => ErrorClass::Fatal,
        _ => ErrorClass::Message,
    }
}

/// The data of `cmsg` as a `T`, if it is the control message `level`/`kind` and long enough
/// to hold one.
///
/// # Safety
///
/// `cmsg` points at a control message the kernel wrote, `cmsg_len` bytes of it readable,
/// and `T` is the type the kernel writes for `level`/`kind` (plain data, any bit pattern
/// valid).
pub(crate) unsafe fn control_data<T: Copy>(
    cmsg: *const libc::cmsghdr,
    level: libc::c_int,
    kind: libc::c_int,
) -> Option<T> {
    // SAFETY: the caller's promise; reads are unaligned and check the length first.
    unsafe {
        let header = ptr::read_unaligned(cmsg);
        let wanted = libc::CMSG_LEN(std::mem::size_of::<T>() as u32) as usize;
        if header.cmsg_level != level || header.cmsg_type != kind || header.cmsg_len < wanted {
            return None;
        }
        Some(ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<T>()))
    }
}
