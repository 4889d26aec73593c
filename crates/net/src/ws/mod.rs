//! The WebSocket transport: browsers (and any client without UDP) reach the same rooms over
//! `ws://host:port/ws` or native `wss://` on the server's HTTP port, with the same message
//! layer in binary messages. The framing and close codes are specified in
//! `docs/PROTOCOL.md`, "WebSocket transport".
//!
//! ```text
//! client                                        server
//!   | -- HTTP upgrade GET /ws -----------------> |  header-read timeout (and TLS-accept
//!   | <------------------ 101 Switching Protocols |  timeout first, for wss)
//!   | -- connect token (2048 bytes) -----------> |  handshake timeout; the one admission;
//!   |                                            |  the socket moves to the room's shard,
//!   | <------------ accepted (connection params) |  which seats the player first (or closes
//!   | <====== channel id u8 ‖ payload, both ways |  with a 4000-range code instead)
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`WsEndpoint`] | the `/ws` route: upgrade, token check, connection limit, hand-off, counters |
//! | [`WsSocket`] | an admitted client's socket, on its way to its room's shard |
//! | [`WsLinks`] | the WebSocket connections one shard reads and writes itself |
//! | [`WsClosed`], [`WsSendError`], [`OutboxLimits`] | how a connection ended, why a send was refused, and the bounds of what waits for a slow client: the same for WebSocket links and WebTransport sessions |
//! | [`HttpListener`] | plain or TLS listener with TLS-accept and header-read timeouts |
//! | [`TlsIdentity`] | certificate and key from PEM files, or self-signed for development |
//! | [`Admission`](tickwire_proto::admission::Admission) | the connect-token check (tickwire-proto's, the UDP server's too) the endpoint calls |
//! | [`CloseCode`] | why the server closed a connection |

// Without the `server` feature only the framing is here (close codes, the accepted
// message), which the WebTransport client shares.
#[cfg(feature = "server")]
pub(crate) mod connection;
#[cfg(feature = "server")]
mod endpoint;
// Its data-message helpers serve the endpoints alone.
#[cfg_attr(not(feature = "server"), allow(dead_code))]
mod framing;
#[cfg(feature = "server")]
mod links;
#[cfg(feature = "server")]
mod listen;
#[cfg(feature = "server")]
pub(crate) mod outbox;
#[cfg(feature = "server")]
pub(crate) mod socket;
#[cfg(feature = "server")]
mod stats;
#[cfg(feature = "server")]
mod tls;
#[cfg(feature = "server")]
mod upgrade;

#[cfg(feature = "server")]
pub use connection::WsClosed;
#[cfg(feature = "server")]
pub use endpoint::{WS_PATH, WsConfig, WsConfigError, WsEndpoint};
pub use framing::{CloseCode, DataMessageError, MAX_CLOSE_REASON_BYTES, accepted_message};
#[cfg(feature = "server")]
pub use links::{WsLinkDepth, WsLinkEvent, WsLinkId, WsLinks};
#[cfg(feature = "server")]
pub use listen::{HttpListener, ListenConfig, ListenMetrics, ListenStats};
#[cfg(feature = "server")]
pub use outbox::{OutboxLimits, WsSendError};
#[cfg(feature = "server")]
pub use socket::{AdmittedClient, WsSocket};
#[cfg(feature = "server")]
pub use stats::WsStats;
#[cfg(feature = "server")]
pub use tls::{TlsError, TlsIdentity};

#[cfg(feature = "server")]
#[cfg(feature = "server")]
pub(crate) use stats::WsCounters;
