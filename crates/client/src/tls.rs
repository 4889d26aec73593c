//! Which servers a client believes over TLS (`https://` matchmaking, `wss`): the web's
//! certificate authorities by default, plus certificates of your own (a private CA, a
//! development server's self-signed certificate), or exactly the certificates you pin.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};

/// What a client trusts a server's certificate by, built into a rustls configuration with
/// [`client_config`](Self::client_config) for [`matchmake_with`](crate::matchmake_with)
/// and [`ConnectOptions::tls`](crate::ConnectOptions::tls).
///
/// The default is the web's certificate authorities (Mozilla's roots, from `webpki-roots`):
/// a server with a certificate from a public CA for the name in the URL verifies, as it
/// does in a browser.
///
/// ```
/// # fn build(ca_der: &[u8], leaf_sha256: [u8; 32]) -> Result<(), rustls::Error> {
/// use tickwire_client::TlsTrust;
/// // A public CA's certificate: nothing to add.
/// let public = TlsTrust::default().client_config()?;
/// // A private CA (or a self-signed certificate, which is its own CA) as well.
/// let private = TlsTrust::default().certificate(ca_der).client_config()?;
/// // Exactly one certificate, by the SHA-256 of its DER (`openssl x509 -outform der |
/// // sha256sum`): no authority, name or date is consulted.
/// let pinned = TlsTrust::default().pin_sha256(leaf_sha256).client_config()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct TlsTrust {
    certificates: Vec<CertificateDer<'static>>,
    pins: Vec<[u8; 32]>,
}

impl TlsTrust {
    /// Trusts `der` (a DER certificate) as an authority too, beside the web's: a private
    /// CA, or a self-signed certificate. The server's certificate must still name the host
    /// the URL names and be within its dates.
    pub fn certificate(mut self, der: impl Into<Vec<u8>>) -> Self {
        self.certificates.push(CertificateDer::from(der.into()));
        self
    }

    /// Accepts a server whose certificate (the leaf, DER) has this SHA-256, and, once any
    /// pin is given, only such a server: authorities, names and dates are not consulted,
    /// since the hash names the one certificate, and the handshake proves the server holds
    /// its key. Pin several to roll a certificate over.
    pub fn pin_sha256(mut self, sha256: [u8; 32]) -> Self {
        self.pins.push(sha256);
        self
    }

    /// A rustls configuration (TLS 1.2 and 1.3, on `ring`) that verifies servers this way.
    /// Fails on a [`certificate`](Self::certificate) that is not a CA certificate rustls
    /// can use.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let config = if self.pins.is_empty() {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for certificate in &self.certificates {
                roots.add(certificate.clone())?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinnedLeaf::new(
                    self.pins.clone(),
                    &provider,
                )))
                .with_no_client_auth()
        };
        Ok(Arc::new(config))
    }
}

/// Accepts exactly the leaf certificates whose SHA-256 is pinned, and checks the handshake's
/// signatures against them as any verifier does.
#[derive(Debug)]
struct PinnedLeaf {
    pins: Vec<[u8; 32]>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl PinnedLeaf {
    fn new(pins: Vec<[u8; 32]>, provider: &CryptoProvider) -> Self {
        Self {
            pins,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

/// A certificate whose hash is not among the pins.
#[derive(Debug, thiserror::Error)]
#[error("its SHA-256 {0} is not pinned")]
struct NotPinned(String);

impl ServerCertVerifier for PinnedLeaf {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let sha256 = ring::digest::digest(&ring::digest::SHA256, end_entity);
        if self.pins.iter().any(|pin| pin[..] == *sha256.as_ref()) {
            return Ok(ServerCertVerified::assertion());
        }
        let hex: String = sha256.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(
            OtherError(Arc::new(NotPinned(hex))),
        )))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
