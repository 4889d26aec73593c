//! The certificate and key native wss serves with: from PEM files in production, or a
//! self-signed certificate generated at start-up for development. rustls on `ring`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why a TLS identity could not be loaded or built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("reading {path}: {source}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{path} holds no certificate")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// rustls refused the certificate or key (a key that does not match, say).
    #[error("tls configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The self-signed certificate could not be generated.
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
}

/// A certificate chain and its private key.
#[derive(Debug)]
pub struct TlsIdentity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl TlsIdentity {
    /// Reads a certificate chain (leaf first) and a private key (PKCS#8, PKCS#1 or SEC1)
    /// from PEM files, as a certificate authority or ACME client writes them.
    pub fn from_pem_files(certificate: &Path, key: &Path) -> Result<Self, TlsError> {
        let pem_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TlsError::Pem { path, source }
        };
        let chain = CertificateDer::pem_file_iter(certificate)
            .map_err(pem_error(certificate))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(pem_error(certificate))?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: certificate.to_path_buf(),
            });
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(pem_error(key))?;
        Ok(Self { chain, key })
    }

    /// A fresh self-signed certificate (ECDSA P-256) for `names` (DNS names or IP
    /// addresses, such as `localhost` and `127.0.0.1`), for development only: browsers
    /// accept it only after the user trusts it by hand.
    pub fn self_signed(names: &[&str]) -> Result<Self, TlsError> {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let certified = rcgen::generate_simple_self_signed(names)?;
        let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
        Ok(Self {
            chain: vec![certified.cert.der().clone()],
            key: key.into(),
        })
    }

    /// The leaf certificate, DER-encoded: what a test or a development client pins.
    pub fn certificate(&self) -> &CertificateDer<'static> {
        &self.chain[0]
    }

    /// The chain and the key, for a TLS configuration built elsewhere (WebTransport's QUIC).
    pub(crate) fn into_parts(self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (self.chain, self.key)
    }

    /// A rustls server configuration serving this identity over TLS 1.2 and 1.3 with the
    /// `ring` provider, offering only HTTP/1.1 by ALPN (WebSocket upgrades are HTTP/1.1).
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key.clone_key())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_identity_makes_a_server_config() {
        let identity = TlsIdentity::self_signed(&["localhost", "127.0.0.1"]).unwrap();
        let config = identity.server_config().unwrap();
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    }

    #[test]
    fn pem_files_load_and_bad_ones_name_the_file() {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let dir = std::env::temp_dir().join(format!("tickwire-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();

        let identity = TlsIdentity::from_pem_files(&cert, &key).unwrap();
        assert_eq!(identity.certificate(), certified.cert.der());
        identity.server_config().unwrap();

        let missing = dir.join("missing.pem");
        let error = TlsIdentity::from_pem_files(&missing, &key).unwrap_err();
        assert!(error.to_string().contains("missing.pem"), "{error}");
        let error = TlsIdentity::from_pem_files(&key, &key).unwrap_err();
        assert!(
            matches!(error, TlsError::NoCertificate { .. }),
            "a key file is not a certificate: {error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
