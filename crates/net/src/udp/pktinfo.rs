//! A datagram's local IPv4 address (`IP_PKTINFO`): the address a received datagram was sent
//! to, and the address a sent one leaves from.
//!
//! One socket bound to `0.0.0.0` then serves many local addresses as if each had a socket
//! of its own: a load tool gives each of thousands of bots its own loopback address
//! (`127.x.y.z`, all local on Linux) on one socket, so their datagrams are received and sent
//! in shared batches instead of a syscall per bot; a server on a host with several
//! addresses can answer from the one the client wrote to. IPv4 only.

use std::io;
use std::mem;
use std::net::Ipv4Addr;
use std::os::fd::BorrowedFd;

use super::bind::set_int_option;
use super::mmsg::control_data;

/// Room for a datagram's control messages (an `IP_PKTINFO`, an arrival time), aligned as
/// `cmsghdr` requires.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(crate) struct ControlBuf([u8; CONTROL_LEN]);

/// `CMSG_SPACE(sizeof(struct in_pktinfo))` and `CMSG_SPACE(sizeof(struct timespec))` are
/// 32 each on 64-bit Linux.
pub(crate) const CONTROL_LEN: usize = 64;

impl ControlBuf {
    pub(crate) const ZEROED: ControlBuf = ControlBuf([0; CONTROL_LEN]);

    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::c_void {
        self.0.as_mut_ptr().cast()
    }
}

/// Asks the kernel to report each received datagram's local address on `socket`.
pub fn enable_local_addresses(socket: BorrowedFd<'_>) -> io::Result<()> {
    set_int_option(&socket, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)
}

/// Writes an `IP_PKTINFO` control message that sends from `source`; returns its length.
pub(crate) fn encode(buf: &mut ControlBuf, source: Ipv4Addr) -> usize {
    let info = libc::in_pktinfo {
        ipi_ifindex: 0,
        ipi_spec_dst: libc::in_addr {
            s_addr: u32::from(source).to_be(),
        },
        ipi_addr: libc::in_addr { s_addr: 0 },
    };
    let data_len = mem::size_of::<libc::in_pktinfo>() as u32;
    // SAFETY: CMSG_SPACE and CMSG_LEN are pure arithmetic.
    let (space, len) = unsafe { (libc::CMSG_SPACE(data_len), libc::CMSG_LEN(data_len)) };
    debug_assert!(space as usize <= CONTROL_LEN);
    let header = libc::cmsghdr {
        cmsg_len: len as _,
        cmsg_level: libc::IPPROTO_IP,
        cmsg_type: libc::IP_PKTINFO,
    };
    // SAFETY: the buffer is 8-aligned and CONTROL_LEN ≥ CMSG_SPACE(in_pktinfo) bytes long,
    // so the header and the data after it (at CMSG_LEN's offset) fit; unaligned writes
    // would be fine too.
    unsafe {
        let base = buf.0.as_mut_ptr();
        std::ptr::write_unaligned(base.cast::<libc::cmsghdr>(), header);
        let data_offset = (len - data_len) as usize;
        std::ptr::write_unaligned(base.add(data_offset).cast::<libc::in_pktinfo>(), info);
    }
    space as usize
}

/// The local address in `cmsg`, if it is an `IP_PKTINFO` message.
///
/// # Safety
///
/// `cmsg` points at a control message the kernel wrote, `cmsg_len` bytes of it readable.
pub(crate) unsafe fn read(cmsg: *const libc::cmsghdr) -> Option<Ipv4Addr> {
    // SAFETY: the caller's promise; the kernel writes an `in_pktinfo` for this message.
    let info: libc::in_pktinfo = unsafe { control_data(cmsg, libc::IPPROTO_IP, libc::IP_PKTINFO)? };
    Some(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr)))
}
