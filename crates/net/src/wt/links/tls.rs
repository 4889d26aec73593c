//! QUIC's TLS, built as wtransport builds it, from a self-signed identity or the
//! operator's PEM files.

use std::sync::Arc;

use quinn_proto::crypto::rustls::QuicServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::wt::WtError;

/// QUIC's TLS for a wtransport identity (a self-signed one).
pub(super) fn quic_crypto_of(
    identity: &wtransport::Identity,
) -> Result<Arc<QuicServerConfig>, WtError> {
    let chain = identity
        .certificate_chain()
        .as_slice()
        .iter()
        .map(|cert| CertificateDer::from(cert.der().to_vec()))
        .collect();
    let key = PrivatePkcs8KeyDer::from(identity.private_key().secret_der().to_vec());
    quic_crypto(chain, key.into())
}

/// QUIC's TLS as wtransport builds it: TLS 1.3 on `ring`, ALPN `h3`.
pub(super) fn quic_crypto(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<QuicServerConfig>, WtError> {
    let certificate = |error: &dyn std::fmt::Display| WtError::Certificate(error.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|error| certificate(&error))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|error| certificate(&error))?;
    tls.alpn_protocols = vec![wtransport_proto::WEBTRANSPORT_ALPN.to_vec()];
    let quic = QuicServerConfig::try_from(tls).map_err(|error| certificate(&error))?;
    Ok(Arc::new(quic))
}
