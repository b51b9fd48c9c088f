//! TLS for client connections: builds a rustls server configuration from a
//! PEM certificate chain and private key, with a digest of what it was
//! built from, so a reload can tell a rotated certificate (the same paths,
//! new content) from the one in use.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read TLS certificate {path}: {reason}")]
    Cert { path: String, reason: String },
    #[error("cannot read TLS private key {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("TLS certificate {cert} and key {key} do not form a valid configuration: {reason}")]
    Config { cert: String, key: String, reason: String },
}

/// An endpoint's TLS: the configuration its handshakes use, and digests
/// of the certificate and key it was built from. Two are equal when they
/// were built from the same certificate chain and key, wherever the files
/// were.
#[derive(Clone)]
pub struct ServerTls {
    pub config: Arc<rustls::ServerConfig>,
    /// SHA-256 over the chain's and the key's DER (each length-prefixed).
    identity: [u8; 32],
    /// SHA-256 of the leaf certificate's DER: its usual fingerprint.
    leaf: [u8; 32],
}

impl ServerTls {
    /// The leaf certificate's SHA-256 fingerprint, its first 8 bytes in
    /// hex (`3f2a…`): enough to tell certificates apart in an answer or a log.
    pub fn fingerprint(&self) -> String {
        self.leaf[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl PartialEq for ServerTls {
    fn eq(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("certificate_sha256", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

/// Loads `cert` (a PEM chain, leaf first) and `key` (PEM, PKCS#8/PKCS#1/SEC1).
pub fn server_config(cert: &Path, key: &Path) -> Result<ServerTls, TlsError> {
    let cert_err = |reason: String| TlsError::Cert {
        path: cert.display().to_string(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| cert_err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(e.to_string()))?;
    let Some(first) = chain.first() else {
        return Err(cert_err("no certificate found".into()));
    };
    let leaf = Sha256::digest(first.as_ref()).into();
    let config_err = |reason: String| TlsError::Config {
        cert: cert.display().to_string(),
        key: key.display().to_string(),
        reason,
    };
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut identity = Sha256::new();
    for der in chain.iter().map(AsRef::as_ref).chain([key.secret_der()]) {
        identity.update((der.len() as u64).to_be_bytes());
        identity.update(der);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| config_err(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| config_err(e.to_string()))?;
    Ok(ServerTls {
        config: Arc::new(config),
        identity: identity.finalize().into(),
        leaf,
    })
}
