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
//! Each shard serves its own sessions on a UDP port of its own ([`WtLinks`]), driven by the
//! shard's thread: QUIC and HTTP/3 run sans-IO there, a session's token is checked by the
//! one check every transport shares ([`WtLinks::admit`], through the
//! [`WsEndpoint`](crate::ws::WsEndpoint)'s admission), and what the shard sends to many
//! sessions in one turn leaves in a few `sendmmsg` calls.
//!
//! | type | role |
//! |---|---|
//! | [`WtLinks`], [`WtLinkEvent`] | one shard's sessions: caps, Retry, the HTTP/3 session, frames and datagrams, packets batched across sessions |
//! | [`WtMeters`], [`WtCounts`] | the transport's counters, shared by every shard's links |
//! | [`WtConfig`], [`WtCertificate`] | how it runs; a self-signed or the operator's certificate |
//! | [`WtClient`] | a player over WebTransport (the Rust client, bots, tests); [`WtRawSession`] before the handshake |
//! | [`framing`] | frames, close frames and datagrams, for servers and clients |
//! | [`h3`], [`quic_client_config`] | HTTP/3's bytes and a sans-IO client's QUIC settings (the load tool's bots drive `quinn-proto` themselves) |

mod client;
#[cfg(feature = "server")]
mod config;
#[cfg(feature = "server")]
pub mod h3;
/// The session's byte layouts, sans-IO in `tickwire-proto`.
pub use tickwire_proto::webtransport as framing;
#[cfg(feature = "server")]
mod links;
#[cfg(feature = "server")]
mod stats;

pub use client::{WtClient, WtClientError, WtRawSession, parse_cert_sha256};
#[cfg(feature = "server")]
pub use config::{WtCertificate, WtConfig, WtError, quic_client_config};
pub use framing::WT_PATH;
#[cfg(feature = "server")]
pub use links::{WtLinkEvent, WtLinkId, WtLinks, WtMeters};
#[cfg(feature = "server")]
pub use stats::WtCounts;
