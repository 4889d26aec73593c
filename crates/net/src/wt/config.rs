//! What a shard's WebTransport sessions ([`WtLinks`](super::WtLinks)) are configured with:
//! the caps and timeouts, the certificate, QUIC's settings, the server's connection IDs,
//! and how a client's QUIC close is read; and what a sans-IO client's QUIC (the load
//! tool's bots) is configured with to match ([`quic_client_config`]).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use tickwire_proto::ConnectionParams;
use wtransport::Identity;
use wtransport::quinn::{ConnectionId, ConnectionIdGenerator, TransportConfig, VarInt};
use wtransport::tls::Sha256DigestFmt;
use wtransport::tls::self_signed::time::{Duration as CertDuration, OffsetDateTime};

use super::framing::{FRAME_HEADER_BYTES, max_frame_bytes};

/// How the WebTransport endpoint runs. The connection parameters, hand-off and close
/// timeout are the WebSocket endpoint's, whose core it shares.
#[derive(Debug, Clone)]
pub struct WtConfig {
    /// Most sessions open at once (handshakes included); more are refused at the first
    /// packet.
    pub max_sessions: usize,
    /// Most sessions open at once from one IP address.
    pub max_sessions_per_ip: usize,
    /// Addresses the per-address cap does not apply to (the total cap still does): a load
    /// generator on the same machine, a trusted proxy.
    pub exempt: Vec<IpAddr>,
    /// Time from the first packet to the connect token's arrival on the control stream;
    /// past it the session is closed with
    /// [`CloseCode::HandshakeTimedOut`](crate::ws::CloseCode::HandshakeTimedOut).
    pub handshake_timeout: Duration,
    /// Answer each new address with a QUIC Retry first, so a spoofed source address cannot
    /// make the server send its handshake (amplification) or hold a session slot.
    pub retry: bool,
    /// How often a self-signed certificate is replaced by a fresh one (at least 100 ms). It
    /// is valid for 13 days, so a server up longer would otherwise present an expired one;
    /// open sessions keep the certificate they began with, and matchmaking hands out the new
    /// hash from the moment it is in use.
    pub renew_self_signed_every: Duration,
}

impl Default for WtConfig {
    /// 4096 sessions, 16 per address, a 5 s handshake, Retry on, a new self-signed
    /// certificate every 12 days (a day before the last one expires).
    fn default() -> Self {
        Self {
            max_sessions: 4096,
            max_sessions_per_ip: 16,
            exempt: Vec::new(),
            handshake_timeout: Duration::from_secs(5),
            retry: true,
            renew_self_signed_every: Duration::from_secs(12 * 24 * 3600),
        }
    }
}

/// The certificate the endpoint presents.
#[derive(Debug, Clone)]
pub enum WtCertificate {
    /// A self-signed ECDSA P-256 certificate for these names, valid from an hour ago for
    /// 13 days (browsers accept a certificate by its hash only if its validity is at most
    /// 14 days), made at start and renewed every [`WtConfig::renew_self_signed_every`].
    SelfSigned(Vec<String>),
    /// The operator's certificate chain and private key, PEM files.
    PemFiles {
        /// The certificate chain.
        cert: PathBuf,
        /// The private key.
        key: PathBuf,
    },
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum WtError {
    /// The certificate could not be made or loaded.
    #[error("webtransport certificate: {0}")]
    Certificate(String),
    /// The socket could not be bound.
    #[error("webtransport socket: {0}")]
    Bind(#[from] std::io::Error),
    /// The connection parameters or bounds cannot work.
    #[error("webtransport configuration: {0}")]
    Config(#[from] crate::ws::WsConfigError),
}

/// How often a self-signed certificate may be renewed at most: a typo in a configuration
/// must not make the server generate certificates in a loop.
pub(crate) const MIN_RENEWAL: Duration = Duration::from_millis(100);

/// A self-signed certificate for `names`, valid from an hour ago (clocks differ) for 13
/// days, and its hash as matchmaking hands it out.
pub(crate) fn self_signed(names: &[String]) -> Result<(Identity, String), WtError> {
    let now = OffsetDateTime::now_utc();
    let identity = Identity::self_signed_builder()
        .subject_alt_names(names)
        .validity_period(now - CertDuration::hours(1), now + CertDuration::days(13))
        .build()
        .map_err(|error| WtError::Certificate(error.to_string()))?;
    let hash = identity
        .certificate_chain()
        .as_slice()
        .first()
        .map(|cert| {
            cert.hash()
                .fmt(Sha256DigestFmt::DottedHex)
                .replace(':', "")
                .to_ascii_lowercase()
        })
        .ok_or_else(|| WtError::Certificate("self-signed chain is empty".to_owned()))?;
    Ok((identity, hash))
}

/// QUIC's settings for sessions carrying `params`.
pub(crate) fn transport_config(params: &ConnectionParams) -> TransportConfig {
    let max_frame = max_frame_bytes(params.max_message_size);
    let mut transport = TransportConfig::default();
    // The dictated timeout and keepalive: QUIC keeps the session alive, no ping frames.
    transport
        .max_idle_timeout(params.timeout.try_into().ok())
        .keep_alive_interval(Some(params.keepalive_interval))
        // The HTTP/3 CONNECT stream and the control stream, and room to see (and stop)
        // a stray one; HTTP/3's control and QPACK streams one way.
        .max_concurrent_bidi_streams(4u32.into())
        .max_concurrent_uni_streams(8u32.into())
        // One largest frame in flight per stream, a little more per connection.
        .stream_receive_window(window(max_frame))
        .receive_window(window(max_frame * 2))
        .send_window((max_frame as u64 * 2).max(256 << 10))
        // Datagrams waiting to be read or sent: beyond these the oldest are dropped.
        .datagram_receive_buffer_size(Some(64 << 10))
        .datagram_send_buffer_size(64 << 10);
    transport
}

/// QUIC's client side for a sans-IO WebTransport client (the load tool's bots): TLS 1.3 on
/// `ring` with ALPN `h3`, trusting the server's certificate by `cert_sha256` (a self-signed
/// one, as [`WtClient`](super::WtClient) does) or by the system's roots (`None`), and
/// transport settings matched to the server's ([`transport_config`]): the same datagram
/// receive buffer, no bidirectional streams from the server and room for its HTTP/3
/// control and QPACK streams. The idle timeout is [`WtClient`](super::WtClient)'s 30 s;
/// QUIC takes the lower of the two sides', so the server's dictated timeout rules.
/// Path MTU discovery is off: a client's inputs are small, and probes would be packets for
/// nothing (the server still probes its side).
pub fn quic_client_config(
    cert_sha256: Option<[u8; 32]>,
) -> Result<quinn_proto::ClientConfig, WtError> {
    use wtransport::tls::client::{ServerHashVerification, build_default_tls_config};
    use wtransport::tls::{Sha256Digest, build_native_cert_store};
    let tls = match cert_sha256 {
        Some(hash) => build_default_tls_config(
            std::sync::Arc::new(rustls::RootCertStore::empty()),
            Some(std::sync::Arc::new(ServerHashVerification::new([
                Sha256Digest::new(hash),
            ]))),
        ),
        None => build_default_tls_config(std::sync::Arc::new(build_native_cert_store()), None),
    };
    let crypto = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|error| WtError::Certificate(error.to_string()))?;
    let mut transport = TransportConfig::default();
    transport
        .max_idle_timeout(Some(VarInt::from_u32(30_000).into()))
        .max_concurrent_bidi_streams(0u32.into())
        .max_concurrent_uni_streams(8u32.into())
        .datagram_receive_buffer_size(Some(64 << 10))
        .datagram_send_buffer_size(64 << 10)
        .mtu_discovery_config(None);
    let mut config = quinn_proto::ClientConfig::new(std::sync::Arc::new(crypto));
    config.transport_config(std::sync::Arc::new(transport));
    Ok(config)
}

/// A stream window that holds one largest frame, and never less than 64 KiB.
fn window(max_frame: usize) -> VarInt {
    let bytes = (max_frame + FRAME_HEADER_BYTES).max(64 << 10) as u64;
    VarInt::from_u64(bytes).unwrap_or(VarInt::MAX)
}

/// Streams a session may open besides its control stream (each reset at once) before it is
/// closed with [`CloseCode::ProtocolViolation`](crate::ws::CloseCode::ProtocolViolation).
pub(crate) const MAX_EXTRA_STREAMS: u32 = 8;

/// A client's QUIC application close, read as tickwire reads it: a code in 4000–4999 (a
/// client leaving sends 4001) is the client's close, with its reason; anything else
/// (HTTP/3's own codes when a page goes away, a dropped client, the idle timeout) is a lost
/// connection, whose seat is held (`None`).
pub(crate) fn client_close(code: u64, reason: &[u8]) -> Option<(u16, String)> {
    match u16::try_from(code) {
        Ok(code @ 4000..=4999) => Some((code, String::from_utf8_lossy(reason).into_owned())),
        _ => None,
    }
}

/// The server's QUIC connection IDs: 8 random bytes.
///
/// quinn's default generator draws only 3 random bytes (the other 5 are a keyed hash, so junk
/// can be told apart cheaply), and quinn (0.11) puts a fresh ID in each Retry without checking
/// it against the IDs in use. The client's next Initials carry that ID, and quinn routes them
/// to whichever connection (or earlier Retry's client) already has it, where they are dropped:
/// the client hears nothing more until its timeout. With a thousand sessions open and as many
/// arriving at 500/s, about one client in 3,000 drew such an ID; with 64 random bits a repeat
/// is negligible. The cost: a short packet for an unknown ID is no longer recognised as junk
/// and may get a stateless reset (quinn sends at most one every 20 ms, each smaller than the
/// packet that caused it).
pub(crate) struct RandomConnectionIds;

impl ConnectionIdGenerator for RandomConnectionIds {
    fn generate_cid(&mut self) -> ConnectionId {
        ConnectionId::new(&rand::random::<[u8; CONNECTION_ID_BYTES]>())
    }

    fn cid_len(&self) -> usize {
        CONNECTION_ID_BYTES
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// Length of the server's connection IDs (quinn's default length).
const CONNECTION_ID_BYTES: usize = 8;

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// A Retry's connection ID is drawn without looking at the IDs in use, so drawing many
    /// must not repeat one: quinn's default generator (3 random bytes) repeats about 1,200
    /// times in these 200,000 draws, and a repeated Retry ID leaves that client unanswered.
    #[test]
    fn connection_ids_do_not_repeat_among_200_000() {
        let mut ids = RandomConnectionIds;
        let mut seen = HashSet::new();
        let repeats = (0..200_000)
            .filter(|_| !seen.insert(ids.generate_cid()))
            .count();
        assert_eq!(repeats, 0, "{repeats} of 200,000 connection ids repeated");
        assert!(seen.iter().all(|id| id.len() == ids.cid_len()));
    }

    #[test]
    fn only_tickwire_codes_are_a_client_close() {
        assert_eq!(client_close(4001, b"bye"), Some((4001, "bye".to_owned())));
        assert_eq!(client_close(0x100, b""), None, "H3_NO_ERROR is a lost page");
        assert_eq!(client_close(5000, b""), None);
        assert_eq!(client_close(u64::MAX, b""), None);
    }
}
