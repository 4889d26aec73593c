//! Opening the per-worker UDP sockets.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};

/// Receive buffer asked for on every socket: 8 MiB.
///
/// A 64-byte datagram takes about 830 bytes of receive buffer in the kernel (its `skb`
/// truesize, measured on loopback), so the 16 MiB Linux actually grants for this request (it
/// doubles the value for its bookkeeping) holds about 20,000 small datagrams. Half that was
/// not enough for seed 003's burst on a slow machine: 5,000 warps, then 5,000 acks of their
/// confirmations, arrived with the inputs while the worker ran the warp tick and sent the
/// confirmations, and the socket dropped 5,342 datagrams (`bench teleport`, 2026-12-03). A
/// dropped warp waits for the next input that repeats it, 100 ms later. Memory is taken
/// only by what is queued.
///
/// Linux caps the request at `net.core.rmem_max` (208 KiB by default). [`bind`] then asks
/// past the cap (`SO_RCVBUFFORCE`, allowed with `CAP_NET_ADMIN`) and, if that is refused
/// too, warns: raise `rmem_max` on a production host.
pub const RECV_BUFFER_BYTES: usize = 8 << 20;

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
    size_buffer(&socket, Buffer::Receive, RECV_BUFFER_BYTES)?;
    size_buffer(&socket, Buffer::Send, SEND_BUFFER_BYTES)?;
    if addr.is_ipv4() {
        set_dont_fragment(&socket)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

#[derive(Clone, Copy, Debug)]
enum Buffer {
    Receive,
    Send,
}

impl Buffer {
    fn set(self, socket: &Socket, bytes: usize) -> io::Result<()> {
        match self {
            Buffer::Receive => socket.set_recv_buffer_size(bytes),
            Buffer::Send => socket.set_send_buffer_size(bytes),
        }
    }

    fn granted(self, socket: &Socket) -> io::Result<usize> {
        match self {
            Buffer::Receive => socket.recv_buffer_size(),
            Buffer::Send => socket.send_buffer_size(),
        }
    }

    /// The option that sets the buffer past the host's cap.
    #[cfg(target_os = "linux")]
    fn force_option(self) -> libc::c_int {
        match self {
            Buffer::Receive => libc::SO_RCVBUFFORCE,
            Buffer::Send => libc::SO_SNDBUFFORCE,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Buffer::Receive => "receive",
            Buffer::Send => "send",
        }
    }

    fn sysctl(self) -> &'static str {
        match self {
            Buffer::Receive => "net.core.rmem_max",
            Buffer::Send => "net.core.wmem_max",
        }
    }
}

/// Asks for `bytes` of socket buffer. Where the host's cap grants less, asks again past the
/// cap, which a process with `CAP_NET_ADMIN` may; warns once per process and kind when the
/// buffer stays smaller than asked for.
fn size_buffer(socket: &Socket, buffer: Buffer, bytes: usize) -> io::Result<()> {
    buffer.set(socket, bytes)?;
    // Linux doubles what it grants (the rest is its bookkeeping) and reports that, so a
    // request capped at half its size reads back as large as the request.
    let honoured = if cfg!(target_os = "linux") {
        2 * bytes
    } else {
        bytes
    };
    if buffer.granted(socket)? >= honoured {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // Refused without CAP_NET_ADMIN (EPERM): the capped buffer stays, and is reported.
        if set_int_option(socket, libc::SOL_SOCKET, buffer.force_option(), value).is_ok()
            && buffer.granted(socket)? >= honoured
        {
            return Ok(());
        }
    }
    warn_capped(buffer, buffer.granted(socket)?, bytes);
    Ok(())
}

fn warn_capped(buffer: Buffer, granted: usize, asked: usize) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static WARNED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
    if WARNED[buffer as usize].swap(true, Ordering::Relaxed) {
        return;
    }
    let (name, sysctl) = (buffer.name(), buffer.sysctl());
    tracing::warn!(
        granted,
        asked,
        "UDP {name} buffers are capped by {sysctl}: a burst over {granted} bytes is dropped \
         by the kernel; raise it (`sysctl -w {sysctl}={asked}`) or run with CAP_NET_ADMIN",
    );
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
