//! tickwire's Rust client SDK: what a native game (or a bot) needs to play on a tickwire
//! server.
//!
//! - [`matchmake`]: `POST /api/matchmake`, the seat and the connect token, over `http` or
//!   `https` ([`TlsTrust`]: the web's authorities, a private CA, or a pinned certificate);
//! - [`Link`]: one connection over the UDP protocol, WebSocket (`ws`/`wss`) or
//!   WebTransport (`wt`: datagrams for unreliable channels), the same
//!   calls and events whichever transport: send on a channel, receive, stats (RTT, loss,
//!   messages and bytes);
//! - [`Session`]: matchmaking plus a link, reconnecting with capped exponential backoff and
//!   jitter when the connection is lost, back to the same seat.
//!
//! - [`Replica`]: a room's replicated state (`#[derive(Replicate)]` types, the room's
//!   roster), its snapshots applied and acknowledged; the types are the game's Rust types,
//!   decoded by their derive.
//!
//! ```no_run
//! # async fn play() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use bytes::Bytes;
//! use tickwire_client::{ConnectOptions, Link, LinkEvent, MatchmakeRequest, Transport, matchmake};
//!
//! let answer = matchmake("http://127.0.0.1:8080", &MatchmakeRequest::kind("relay"), Duration::from_secs(5)).await?;
//! let mut link = Link::connect(&answer, Transport::Ws, &ConnectOptions::default()).await?;
//! link.send(1, Bytes::from_static(b"hello"))?;
//! while let LinkEvent::Message { channel, message } = link.next_event().await {
//!     println!("{channel}: {} bytes, rtt {:?}", message.len(), link.stats().rtt);
//! }
//! # Ok(())
//! # }
//! ```

#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod link;
mod matchmake;
mod replica;
mod session;
mod tls;
mod ws;
mod wt;

use std::sync::Arc;

pub use link::{
    ConnectError, ConnectOptions, Ended, Link, LinkEvent, LinkStats, SendError, Transport,
};
pub use matchmake::{
    Endpoints, MatchAnswer, MatchmakeError, MatchmakeRequest, SignedIdentity, WtEndpointInfo,
    matchmake, matchmake_with,
};
pub use replica::{Handled, Replica};
pub use session::{Backoff, Session, SessionError, SessionEvent};
pub use tickwire_proto::DisconnectReason;
pub use tickwire_replicate::{Change, Member, Mirror, MirrorError};
pub use tls::TlsTrust;

/// A TLS configuration for `wss` that trusts exactly `certificate` (DER): a development
/// server's self-signed certificate (`tls.self_signed`), or a private CA.
pub fn tls_trusting(certificate: &[u8]) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from(
        certificate.to_vec(),
    ))?;
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}
