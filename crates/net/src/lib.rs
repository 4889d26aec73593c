//! tokio drivers that move datagrams between sockets and the sans-IO protocol.
//!
//! Batched UDP ([`udp`]) and the driver that runs the sans-IO protocol over it ([`driver`]),
//! and the WebSocket transport for browsers ([`ws`]: ws and native wss on the HTTP port).
//! For UDP, each worker thread (a shard) binds a socket to a port of its own,
//! receives up to 64 datagrams per `recvmmsg` into buffers it
//! allocated once, and sends a batch to many destinations per `sendmmsg`. Nothing is shared
//! between workers, so no lock sits on the packet path, and nothing is allocated per packet.
//! Linux only: it calls `recvmmsg`, `sendmmsg` and `sched_setaffinity` directly.
//!
//! The feature `server` (off by default; `tickwire-server` turns it on) adds the WebSocket
//! and WebTransport server side: endpoints, the HTTP listener, TLS and development
//! certificates. Without it a client gets the UDP driver, the WebTransport client and the
//! framing both share, and compiles no axum and no rcgen.
//!
//! ```no_run
//! use tickwire_net::udp::{BatchSocket, RecvBatch, SendBatch};
//!
//! # async fn worker() -> std::io::Result<()> {
//! let socket = BatchSocket::bind("0.0.0.0:7777".parse().unwrap())?;
//! let mut inbox = RecvBatch::new();
//! let mut outbox = SendBatch::new();
//! loop {
//!     socket.recv_batch(&mut inbox).await?;
//!     for (from, datagram) in &inbox {
//!         // The protocol answers in place, straight into the next send slot.
//!         outbox.push_with(from, |slot| {
//!             slot[..datagram.len()].copy_from_slice(datagram);
//!             datagram.len()
//!         });
//!     }
//!     socket.send_batch(&mut outbox).await?;
//! }
//! # }
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`driver::Driver`] | runs a protocol [`Server`](tickwire_proto::Server) or [`Client`](tickwire_proto::Client) over a `BatchSocket` |
//! | [`udp::BatchSocket`] | a worker's socket under tokio: `recv_batch`, `send_batch`, `try_*` |
//! | [`udp::RecvBatch`], [`udp::SendBatch`] | preallocated datagram slots, one `*mmsg` call each |
//! | [`udp::RecvStats`], [`udp::SendStats`] | per-batch counters, drops by reason |
//! | [`udp::bind_reuseport`] | the socket setup: `SO_REUSEPORT`, buffer sizes, dual stack |
//! | [`due::DueTimes`] | when each of many connections next needs looking at (a heap that lets a time move later for free) |
//! | `ws::WsEndpoint`, `ws::WsLinks`, `ws::HttpListener` | (`server`) the WebSocket transport: `/ws`, the one token check, the connections a shard drives, TLS |
//! | `wt::WtLinks` | (`server`) the WebTransport transport, one per shard on its own port: `/wt` over HTTP/3 (quinn-proto and HTTP/3 sans-IO), datagrams for unreliable channels, packets batched across sessions |
//! | [`wt::WtClient`] | a player over WebTransport |

/// A connection's handle in a shard-driven table (`WsLinks`, `WtLinks`): its slot's index
/// in the low 32 bits and the slot's generation in the high 32, so a handle kept past its
/// connection's end never reaches the slot's next occupant.
#[cfg(feature = "server")]
macro_rules! slot_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name(u64);

        impl $name {
            fn new(index: usize, generation: u32) -> Self {
                Self(index as u64 | (u64::from(generation) << 32))
            }

            fn index(self) -> usize {
                (self.0 & 0xFFFF_FFFF) as usize
            }

            fn generation(self) -> u32 {
                (self.0 >> 32) as u32
            }
        }
    };
}

pub mod driver;
pub mod due;
pub mod udp;
#[cfg(feature = "server")]
mod worklist;
pub mod ws;
pub mod wt;
