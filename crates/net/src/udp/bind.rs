//! Opening the per-worker UDP sockets.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

/// Receive buffer asked for on every socket: 4 MiB.
///
/// A 64-byte datagram takes about 830 bytes of receive buffer in the kernel (its `skb`
/// truesize, measured on loopback), so the 8 MiB Linux actually grants for this request (it
/// doubles the value for its bookkeeping) holds about 10,000 small datagrams: 25 ms of
/// traffic at 400K datagrams/s, enough to ride out a worker busy with a whole 60 Hz tick.
/// Linux caps the request at `net.core.rmem_max` (4 MiB on the project machine, but only
/// 208 KiB by default: raise it on a production host, or the cap silently applies).
pub const RECV_BUFFER_BYTES: usize = 4 << 20;

/// Send buffer asked for on every socket: 4 MiB, capped by `net.core.wmem_max`.
///
/// It bounds the bytes queued in the kernel and NIC not yet on the wire. A full default batch
/// is 64 × 2 KiB = 128 KiB, so this keeps dozens of batches in flight before `sendmmsg`
/// reports `EAGAIN` and the worker has to wait.
pub const SEND_BUFFER_BYTES: usize = 4 << 20;

/// Opens a nonblocking UDP socket bound to `addr` with [`RECV_BUFFER_BYTES`] and
/// [`SEND_BUFFER_BYTES`] of socket buffers. A port already in use is an error, as it should
/// be for a server's own port: a second process must not silently share its traffic.
///
/// An IPv6 address gets a dual-stack socket (`IPV6_V6ONLY` off, whatever the
/// `net.ipv6.bindv6only` sysctl says), so `[::]:port` serves IPv4 clients as well.
pub fn bind(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    open(addr, false)
}

/// [`bind`] with `SO_REUSEPORT`, so that every worker thread can bind its own socket to the
/// same port and the kernel spreads incoming datagrams across them by source address (one
/// peer always reaches the same worker).
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    open(addr, true)
}

fn open(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::UdpSocket> {
    // socket2 opens it close-on-exec.
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_recv_buffer_size(RECV_BUFFER_BYTES)?;
    socket.set_send_buffer_size(SEND_BUFFER_BYTES)?;
    if addr.is_ipv4() {
        set_dont_fragment(&socket)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Sets the IPv4 don't-fragment bit on every datagram, without path-MTU bookkeeping
/// (`IP_PMTUDISC_PROBE`, QUIC's choice too): tickwire sizes its datagrams to the dictated
/// MTU and never wants the network to fragment them. It also saves a cost per datagram: an
/// unconnected socket's datagrams without DF each take an IP ID from the kernel's shared
/// generator (`__ip_select_ident`, 3.5 % of the bots' CPU at 2,500 players), with DF the ID
/// is simply 0.
pub fn set_dont_fragment(socket: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    set_int_option(
        socket,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_PROBE,
    )
}

/// Sets a socket option whose value is a C `int`.
pub(crate) fn set_int_option(
    socket: &impl std::os::fd::AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a valid descriptor and a c_int option value of its true size.
    let result = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
