//! Batched UDP: one socket per worker on a port of its own, `recvmmsg` in, `sendmmsg` out to many
//! destinations per call, buffers allocated once.
//!
//! | type | role |
//! |---|---|
//! | [`bind`], [`bind_reuseport`] | a nonblocking socket with large buffers, on a port of its own or (`SO_REUSEPORT`, never for port 0) shared with other sockets |
//! | [`BatchSocket`] | that socket under tokio: `recv_batch` / `send_batch` and `try_*` forms |
//! | [`RecvBatch`] | slots for the datagrams of one receive; iterate `(source, bytes)` |
//! | [`SendBatch`] | slots filled in place, each to its own destination |
//! | [`RecvStats`], [`SendStats`] | per-batch counters, drops by reason |
//! | [`enable_local_addresses`] | per-datagram local IPv4 address (`IP_PKTINFO`): one socket on `0.0.0.0` acting as many addresses |
//! | [`enable_arrival_times`] | per-datagram arrival time (`SO_TIMESTAMPNS`): when it reached the host, not when it was read |

mod arrival;
mod bind;
mod mmsg;
mod pktinfo;
mod recv;
mod send;
pub(crate) mod sockaddr;
mod socket;

pub use arrival::enable_arrival_times;
#[cfg(feature = "server")]
pub(crate) use bind::set_int_option;
pub use bind::{RECV_BUFFER_BYTES, SEND_BUFFER_BYTES, bind, bind_reuseport, set_dont_fragment};
pub use pktinfo::enable_local_addresses;
pub use recv::{Received, RecvBatch, RecvIter, RecvStats};
pub use send::{SendBatch, SendStats};
pub use socket::BatchSocket;
