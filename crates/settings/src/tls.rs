//! TLS for client connections: builds a rustls server configuration from a
//! PEM certificate chain and private key, with a digest of what it was
//! built from, so a reload can tell a rotated certificate (the same paths,
//! new content) from the one in use.
//!
//! Session resumption: a client that offers back a session it was given
//! (rustls-based drivers, JDBC, .NET; libpq never does, it starts each
//! connection with a new TLS context) skips the certificate and its
//! signature. rustls keeps sessions in a cache of 256 by default, stateful
//! (so TLS 1.3 tickets are single-use), and a TLS 1.3 handshake puts two in
//! it (two tickets), overwriting the oldest. In the multi-tenant storm
//! (bench/storm.sh: 1,000 users, each connecting for every request, about
//! 1,400 handshakes a second in the demo's run) 256 are overwritten within
//! a tenth of a second, long before most clients connect again, so their
//! resumptions fall back to full handshakes. The cache holds
//! [`SESSION_CACHE_SIZE`] sessions instead, in a store whose every
//! operation takes constant time ([`crate::tls_sessions`]; rustls's own
//! scans a list to forget a session). A stateless ticketer
//! (`rustls::crypto::ring::Ticketer`) would hold any number in no memory,
//! at the price of sending each session's secret to its client, encrypted
//! under a ticket key that lives for hours: whoever gets that key can
//! decrypt, from a recording, every TLS 1.2 session resumed meanwhile,
//! where a cache's secrets never leave the process.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

/// TLS sessions an endpoint keeps for resumption: a client's newest
/// session lasts until 2,048 others have connected (two tickets each),
/// twice the storm's 1,000 users. An entry (the session's secret, version,
/// cipher suite and server name under a 32-byte id) took about 300 bytes of
/// RSS here: about 1.2 MiB full.
pub const SESSION_CACHE_SIZE: usize = 4_096;

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
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| config_err(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| config_err(e.to_string()))?;
    config.session_storage = Arc::new(crate::tls_sessions::SessionStore::new(SESSION_CACHE_SIZE));
    Ok(ServerTls {
        config: Arc::new(config),
        identity: identity.finalize().into(),
        leaf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate and key for localhost, written under a scratch
    /// directory removed when the test ends.
    fn files() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
        let (cert_path, key_path) = (dir.path().join("server.pem"), dir.path().join("server.key"));
        std::fs::write(&cert_path, cert.cert.pem()).expect("writing the certificate");
        std::fs::write(&key_path, cert.key_pair.serialize_pem()).expect("writing the key");
        (dir, cert_path, key_path)
    }

    #[test]
    fn sessions_outlast_many_more_handshakes_than_rustls_default_cache() {
        let (_dir, cert, key) = files();
        let tls = server_config(&cert, &key).expect("a configuration");
        let store = &tls.config.session_storage;
        // Two sessions per handshake, for more clients than the default 256
        // entries hold: the first one's is still there.
        let sessions = SESSION_CACHE_SIZE / 2;
        for i in 0..sessions {
            assert!(store.put(i.to_be_bytes().to_vec(), vec![1; 64]));
        }
        assert!(store.get(&0usize.to_be_bytes()).is_some());
        assert!(store.get(&(sessions - 1).to_be_bytes()).is_some());
    }
}
