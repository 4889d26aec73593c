//! The WebTransport transport: browsers (and the Rust client) reach the same rooms over
//! HTTP/3 at `https://host:port/wt` on the server's own UDP port, with the message layer of
//! the WebSocket transport plus QUIC datagrams for unreliable channels, so a lost packet
//! costs one snapshot rather than stalling every later one. Specified in `docs/PROTOCOL.md`,
//! "WebTransport transport".
//!
//! ```text
//! client                                        server
//!   | -- QUIC (Retry first), HTTP/3 CONNECT /wt > |  caps per address and in total
//!   | -- opens the control stream -------------> |  one bidirectional stream per session
//!   | -- [len u32][connect token] -------------> |  handshake timeout; same checks as ws
//!   | <------------ [len u32][connection params] |  or a close frame and the QUIC close
//!   | <====== [len][channel ‖ message] frames == |  Reliable channels (and oversize ones)
//!   | <~~~~~~ datagrams [channel (‖ seq)] msg ~~ |  Unreliable and UnreliableSequenced
//! ```
//!
//! Sessions are admitted through the [`WsEndpoint`](crate::ws::WsEndpoint)'s core (token
//! checks, one connection per client id, the hand-off queue) and handed over as
//! [`WtSession`]s, so the application attaches them exactly as
//! WebSocket ones.
//!
//! | type | role |
//! |---|---|
//! | [`WtEndpoint`] | the UDP endpoint: caps, Retry, sessions, counters (a task per session) |
//! | [`WtLinks`], [`WtLinkEvent`] | the sessions one shard drives itself: the same wire, QUIC and HTTP/3 sans-IO, packets batched across sessions |
//! | [`WtConfig`], [`WtCertificate`] | how it runs; a self-signed or the operator's certificate |
//! | [`WtClient`] | a player over WebTransport (the Rust client, bots, tests); [`WtRawSession`] before the handshake |
//! | [`framing`] | frames, close frames and datagrams, for servers and clients |

mod client;
#[cfg(feature = "server")]
mod config;
#[cfg(feature = "server")]
mod endpoint;
/// The session's byte layouts, sans-IO in `tickwire-proto`.
pub use tickwire_proto::webtransport as framing;
#[cfg(feature = "server")]
mod links;
#[cfg(feature = "server")]
mod stats;

/// A WebTransport session as the shard sees it ([`WtSession`]: its messages, its identity)
/// and the outbox its writer task drains ([`WtSender`]: send without waiting). They live
/// beside the WebSocket code they once shared.
#[cfg(feature = "server")]
pub use crate::ws::{connection::WtSession, outbox::WtSender};
pub use client::{WtClient, WtClientError, WtRawSession, parse_cert_sha256};
#[cfg(feature = "server")]
pub use config::{WtCertificate, WtConfig, WtError};
#[cfg(feature = "server")]
pub use endpoint::WtEndpoint;
pub use framing::WT_PATH;
#[cfg(feature = "server")]
pub use links::{WtLinkEvent, WtLinkId, WtLinks};
#[cfg(feature = "server")]
pub use stats::WtCounts;
