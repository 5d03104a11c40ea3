//! TLS termination in the server itself (rustls): a certificate chain and
//! its private key in PEM, HTTP/2 and HTTP/1.1 offered by ALPN.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate and key ready to serve (`--tls-cert`, `--tls-key`).
#[derive(Clone)]
pub struct TlsConfig(pub(crate) Arc<ServerConfig>);

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        f.debug_struct("TlsConfig").finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// From a PEM certificate chain (leaf first) and a PEM private key
    /// (PKCS#8, PKCS#1 or SEC1).
    pub fn from_pem(cert_chain: &[u8], private_key: &[u8]) -> Result<TlsConfig, String> {
        let certs = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("the certificate is not valid PEM: {e}"))?;
        if certs.is_empty() {
            return Err("the certificate file holds no certificate".into());
        }
        let key = PrivateKeyDer::from_pem_slice(private_key)
            .map_err(|e| format!("the private key is not valid PEM: {e}"))?;
        let mut config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS setup: {e}"))?
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .map_err(|e| format!("the certificate and key do not fit: {e}"))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsConfig(Arc::new(config)))
    }

    /// [`TlsConfig::from_pem`] from two files.
    pub fn from_pem_files(cert_chain: &Path, private_key: &Path) -> Result<TlsConfig, String> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        TlsConfig::from_pem(&read(cert_chain)?, &read(private_key)?)
    }
}
