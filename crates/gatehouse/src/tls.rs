//! TLS for client connections: builds a rustls server configuration from a
//! PEM certificate chain and private key.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read TLS certificate {path}: {reason}")]
    Cert { path: String, reason: String },
    #[error("cannot read TLS private key {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("TLS certificate and key do not form a valid configuration: {0}")]
    Config(String),
}

/// Loads `cert` (a PEM chain, leaf first) and `key` (PEM, PKCS#8/PKCS#1/SEC1).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let cert_err = |reason: String| TlsError::Cert {
        path: cert.display().to_string(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| cert_err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(e.to_string()))?;
    if chain.is_empty() {
        return Err(cert_err("no certificate found".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.display().to_string(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    Ok(Arc::new(config))
}
