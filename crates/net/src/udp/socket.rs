//! The tokio-driven socket that receives and sends whole batches.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;

use tokio::io::Interest;

use super::{RecvBatch, SendBatch, bind};

/// A UDP socket registered with tokio that moves whole batches per syscall.
///
/// Every method takes `&self`: one task can receive while another sends on the same socket
/// (share it with an `Arc`), and nothing is locked because each task owns its own batch and
/// the batch holds the buffers and counters. Run one `BatchSocket`, bound with
/// [`bind`](Self::bind) to a port of its own, per worker thread.
#[derive(Debug)]
pub struct BatchSocket {
    io: tokio::net::UdpSocket,
    is_ipv6: bool,
}

impl BatchSocket {
    /// Binds with [`bind`] (a port of its own) and registers the socket with the current
    /// tokio runtime. Never with `SO_REUSEPORT`: Linux may hand two such sockets bound to
    /// port 0 the same port and split their traffic, so two clients would share an address.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime (as [`tokio::net::UdpSocket::from_std`] does).
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        Self::from_std(bind(addr)?)
    }

    /// Wraps an already bound socket, switching it to nonblocking mode, and registers it with
    /// the current tokio runtime.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<Self> {
        socket.set_nonblocking(true)?;
        let is_ipv6 = socket.local_addr()?.is_ipv6();
        Ok(Self {
            io: tokio::net::UdpSocket::from_std(socket)?,
            is_ipv6,
        })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// The underlying tokio socket, for single-datagram calls and socket options.
    pub fn as_tokio(&self) -> &tokio::net::UdpSocket {
        &self.io
    }

    /// Waits until datagrams arrive and receives as many as fit into `batch` (replacing
    /// what it held) with one `recvmmsg`. Returns how many the batch now holds; this can be
    /// 0 when everything received was dropped, which the batch's stats count.
    ///
    /// Cancel safe: if the future is dropped, no datagram has been taken off the socket.
    pub async fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        self.io
            .async_io(Interest::READABLE, || batch.recv_from_fd(self.io.as_fd()))
            .await
    }

    /// Receives without waiting: `WouldBlock` when nothing has arrived.
    pub fn try_recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        self.io
            .try_io(Interest::READABLE, || batch.recv_from_fd(self.io.as_fd()))
    }

    /// Sends everything queued in `batch`, waiting for the socket to become writable when
    /// its send buffer is full, and leaves the batch empty. Datagrams the kernel refuses are
    /// counted in the batch's stats and skipped; only an error that concerns the socket
    /// itself (a closed descriptor, say) is returned.
    ///
    /// Cancel safe: a dropped future leaves the unsent rest queued in `batch`.
    pub async fn send_batch(&self, batch: &mut SendBatch) -> io::Result<()> {
        self.io
            .async_io(Interest::WRITABLE, || {
                batch.send_to_fd(self.io.as_fd(), self.is_ipv6)
            })
            .await
    }

    /// Sends without waiting: `WouldBlock` when the send buffer filled up before the batch
    /// was through; the unsent rest stays queued for the next call.
    pub fn try_send_batch(&self, batch: &mut SendBatch) -> io::Result<()> {
        self.io.try_io(Interest::WRITABLE, || {
            batch.send_to_fd(self.io.as_fd(), self.is_ipv6)
        })
    }
}
