//! TLS toward the database servers, for both engines: a cluster's
//! `backend_tls` mode (libpq's `sslmode` names and meanings), the rustls
//! client configuration built from its CA file, optional client
//! certificate (mutual TLS) and server name. The handshake on a backend
//! socket is the core's (`gatehouse::backend_tls::stream`): each engine
//! asks for TLS in its own way first (PostgreSQL's SSLRequest, MySQL's SSL
//! request after the greeting) and then hands the socket to it.
//!
//! The modes:
//! * `disable`: never;
//! * `prefer` (the default): TLS when the server offers it, plain when it
//!   does not; the certificate is not verified (it protects against
//!   listening, not against an impostor);
//! * `require`: TLS or no connection; the certificate is not verified;
//! * `verify-ca`: TLS, and the server's chain must lead to the CA file;
//! * `verify-full`: `verify-ca`, and the certificate must name the host
//!   (the backend's host, or `backend_tls_server_name`).
//!
//! PostgreSQL 17 also takes a TLS handshake straight after the TCP
//! connection, without the SSLRequest round trip (`backend_tls_negotiation
//! = "direct"`, libpq's `sslnegotiation=direct`); the ALPN protocol
//! `postgresql` is then mandatory, and, as in libpq, only the modes that
//! never fall back to plain text may use it.

mod fallback;

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientConfig, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256};

/// A cluster's `backend_tls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    Disable,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl TlsMode {
    /// Every mode, as configured.
    pub const NAMES: [&'static str; 5] = ["disable", "prefer", "require", "verify-ca", "verify-full"];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// Whether TLS is asked for at all.
    pub fn asks(self) -> bool {
        self != Self::Disable
    }

    /// Whether a server without TLS is refused.
    pub fn requires(self) -> bool {
        matches!(self, Self::Require | Self::VerifyCa | Self::VerifyFull)
    }

    /// Whether the server's certificate is checked against the CA.
    pub fn verifies(self) -> bool {
        matches!(self, Self::VerifyCa | Self::VerifyFull)
    }
}

/// How a PostgreSQL connection asks for TLS (`backend_tls_negotiation`,
/// libpq's `sslnegotiation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Negotiation {
    /// An SSLRequest first, and the handshake once the server says `S`.
    #[default]
    Postgres,
    /// The handshake straight away (PostgreSQL 17 and later).
    Direct,
}

impl Negotiation {
    pub const NAMES: [&'static str; 2] = ["postgres", "direct"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "postgres" => Some(Self::Postgres),
            "direct" => Some(Self::Direct),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Direct => "direct",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackendTlsError {
    #[error("backend_tls = \"{0}\" needs backend_tls_ca (the CA that signed the servers' certificates)")]
    NeedsCa(&'static str),
    #[error("cannot read {what} {path}: {reason}")]
    Read {
        what: &'static str,
        path: String,
        reason: String,
    },
    #[error("{path} holds no certificate")]
    Empty { path: String },
    #[error("backend_tls_cert and backend_tls_key go together (mutual TLS needs both)")]
    HalfPair,
    #[error("backend_tls_server_name \"{0}\" is neither a DNS name nor an IP address")]
    ServerName(String),
    #[error(
        "backend_tls_negotiation = \"direct\" needs backend_tls = \"require\", \"verify-ca\" or \"verify-full\" \
         (with \"{0}\" a server without direct TLS would be asked again in plain text)"
    )]
    DirectNeedsRequire(&'static str),
    #[error("backend_tls_negotiation = \"direct\" is PostgreSQL's (17 and later); this engine has no such handshake")]
    DirectUnsupported,
    #[error("the backend TLS configuration is not valid: {0}")]
    Config(String),
}

/// What a cluster's backend TLS is built from (paths already resolved).
#[derive(Debug, Default, Clone, Copy)]
pub struct Source<'a> {
    pub mode: TlsMode,
    pub ca: Option<&'a Path>,
    /// The client certificate chain and its key, for mutual TLS.
    pub client: Option<(&'a Path, &'a Path)>,
    /// The name the certificate is checked against and sent as SNI,
    /// instead of the backend's host.
    pub server_name: Option<&'a str>,
    /// ALPN protocol offered (PostgreSQL 17+ checks `postgresql` when
    /// one is offered; earlier servers ignore it). An engine without one
    /// cannot negotiate directly.
    pub alpn: Option<&'a [u8]>,
    pub negotiation: Negotiation,
}

/// A cluster's backend TLS, ready for handshakes. Two are equal when they
/// were built from the same mode, server name and file contents, so a
/// reload tells a rotated CA or client certificate from an unchanged one.
#[derive(Clone)]
pub struct BackendTls {
    pub mode: TlsMode,
    pub negotiation: Negotiation,
    /// The rustls client configuration; `None` for `disable`.
    client: Option<Arc<ClientConfig>>,
    server_name: Option<ServerName<'static>>,
    /// SHA-256 over the mode, the server name and every file's bytes.
    identity: [u8; 32],
    /// `prefer`'s fallback lines, shared by the clones of this setting.
    fallback_log: Arc<fallback::FallbackLog>,
}

impl PartialEq for BackendTls {
    fn eq(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl std::fmt::Debug for BackendTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendTls")
            .field("mode", &self.mode.as_str())
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Default for BackendTls {
    /// `prefer`, with nothing to verify against.
    fn default() -> Self {
        build(&Source::default()).unwrap_or_else(|_| Self::disabled())
    }
}

impl BackendTls {
    /// `disable`: plain connections.
    pub fn disabled() -> Self {
        Self {
            mode: TlsMode::Disable,
            negotiation: Negotiation::Postgres,
            client: None,
            server_name: None,
            identity: [0; 32],
            fallback_log: Arc::default(),
        }
    }

    /// The name a handshake with `host` verifies and sends: the configured
    /// server name, or the host itself (an IP address is sent as no SNI).
    pub fn name_for(&self, host: &str) -> Result<ServerName<'static>, HandshakeError> {
        if let Some(n) = &self.server_name {
            return Ok(n.clone());
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        ServerName::try_from(host.to_owned()).map_err(|_| HandshakeError::Name(host.to_owned()))
    }
}

/// Why a TLS handshake with a server failed. Its text is for the log (a
/// client is told only that the server could not be reached).
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("backend_tls = \"disable\" has no TLS to start")]
    Disabled,
    #[error("\"{0}\" cannot be checked against a certificate (not a DNS name or IP address)")]
    Name(String),
    #[error("TLS handshake with the server failed: {0}")]
    Tls(std::io::Error),
}

impl BackendTls {
    /// The rustls client configuration handshakes use; `None` for
    /// `disable`.
    pub fn client_config(&self) -> Option<&Arc<ClientConfig>> {
        self.client.as_ref()
    }
}

impl BackendTls {
    /// `prefer` after a handshake with a server that offered TLS failed
    /// (a protocol version or cipher they do not share, say): as libpq
    /// does, the connection is opened again in plain text, with the
    /// settings this returns; logged at WARN with the reason (once a
    /// minute per server, see [`fallback`]). `None` from `require`
    /// up, where the failure stands.
    pub fn plain_after_failed_handshake(&self, addr: &str, e: &HandshakeError) -> Option<BackendTls> {
        if self.mode != TlsMode::Prefer {
            return None;
        }
        if let Some(held_back) = self.fallback_log.admit(addr, std::time::Instant::now()) {
            tracing::warn!(
                backend = addr,
                unlogged_since_last_line = held_back,
                "backend_tls = \"prefer\": TLS handshake failed ({e}); connecting again without TLS"
            );
        }
        Some(BackendTls::disabled())
    }

    /// The settings of a connection opened for another one's sake (a
    /// PostgreSQL cancel request, a MySQL `KILL`): as the cluster's, but a
    /// `prefer` connection that went plain (the server refused TLS, or the
    /// handshake failed) has its companions go plain at once, without
    /// asking for TLS again.
    pub fn for_companion_of(&self, encrypted: bool) -> BackendTls {
        if self.mode == TlsMode::Prefer && !encrypted {
            BackendTls::disabled()
        } else {
            self.clone()
        }
    }
}

/// Reads a PEM file whole (its bytes go into the identity too).
fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, BackendTlsError> {
    std::fs::read(path).map_err(|e| BackendTlsError::Read {
        what,
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn certificates(what: &'static str, path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, BackendTlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| BackendTlsError::Read {
            what,
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(BackendTlsError::Empty {
            path: path.display().to_string(),
        });
    }
    Ok(certs)
}

/// Builds a cluster's backend TLS from `source`, reading its files.
pub fn build(source: &Source<'_>) -> Result<BackendTls, BackendTlsError> {
    let mut identity = Sha256::new();
    let mut put = |bytes: &[u8]| {
        identity.update((bytes.len() as u64).to_be_bytes());
        identity.update(bytes);
    };
    put(source.mode.as_str().as_bytes());
    put(source.server_name.unwrap_or_default().as_bytes());
    put(source.alpn.unwrap_or_default());
    put(source.negotiation.as_str().as_bytes());
    if source.negotiation == Negotiation::Direct {
        if source.alpn.is_none() {
            return Err(BackendTlsError::DirectUnsupported);
        }
        if !source.mode.requires() {
            return Err(BackendTlsError::DirectNeedsRequire(source.mode.as_str()));
        }
    }
    let server_name = source
        .server_name
        .map(|n| ServerName::try_from(n.to_owned()).map_err(|_| BackendTlsError::ServerName(n.to_owned())))
        .transpose()?;
    let ca = match source.ca {
        Some(path) => {
            let pem = read("backend_tls_ca", path)?;
            put(&pem);
            Some(certificates("backend_tls_ca", path, &pem)?)
        }
        None if source.mode.verifies() => return Err(BackendTlsError::NeedsCa(source.mode.as_str())),
        None => None,
    };
    let client = match source.client {
        Some((cert, key)) => {
            let cert_pem = read("backend_tls_cert", cert)?;
            let key_pem = read("backend_tls_key", key)?;
            put(&cert_pem);
            put(&key_pem);
            let chain = certificates("backend_tls_cert", cert, &cert_pem)?;
            let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| BackendTlsError::Read {
                what: "backend_tls_key",
                path: key.display().to_string(),
                reason: e.to_string(),
            })?;
            Some((chain, key))
        }
        None => None,
    };
    let identity = identity.finalize().into();
    if !source.mode.asks() {
        return Ok(BackendTls {
            mode: source.mode,
            negotiation: source.negotiation,
            client: None,
            server_name,
            identity,
            fallback_log: Arc::default(),
        });
    }
    let config = client_config(source.mode, ca, client)?;
    let mut config = config;
    if let Some(alpn) = source.alpn {
        config.alpn_protocols = vec![alpn.to_vec()];
    }
    Ok(BackendTls {
        mode: source.mode,
        negotiation: source.negotiation,
        client: Some(Arc::new(config)),
        server_name,
        identity,
        fallback_log: Arc::default(),
    })
}

type ClientPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn client_config(
    mode: TlsMode,
    ca: Option<Vec<CertificateDer<'static>>>,
    client: Option<ClientPair>,
) -> Result<ClientConfig, BackendTlsError> {
    let config_err = |e: rustls::Error| BackendTlsError::Config(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(config_err)?;
    let chain = if mode.verifies() {
        let mut roots = RootCertStore::empty();
        for cert in ca.into_iter().flatten() {
            roots.add(cert).map_err(config_err)?;
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| BackendTlsError::Config(e.to_string()))?;
        Some(webpki)
    } else {
        None
    };
    let verifier: Arc<dyn ServerCertVerifier> = match chain {
        Some(webpki) if mode == TlsMode::VerifyFull => webpki,
        chain => Arc::new(Relaxed { provider, chain }),
    };
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    match client {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(config_err),
        None => Ok(builder.with_no_client_auth()),
    }
}

/// The verifier of the modes below `verify-full`. Without a chain to
/// check (`prefer`, `require`) any certificate is taken, as libpq takes it
/// in these modes; with one (`verify-ca`) the chain must lead to the CA
/// (the web PKI verifier's checks, in its order: chain, validity, then
/// name) and only a certificate that names another host is taken. Either
/// way the handshake's signatures are checked, so the session is with
/// whoever holds that certificate's key.
#[derive(Debug)]
struct Relaxed {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
