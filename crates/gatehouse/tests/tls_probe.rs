//! Which certificate a proxy endpoint serves, for the tests of certificate
//! reloads of both engines: a test CA that signs certificates for
//! localhost, and a real TLS handshake after each engine's upgrade request
//! (PostgreSQL's SSLRequest; MySQL's SSL request after the greeting) that
//! answers the leaf certificate the endpoint presented, checked against
//! the CA.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A certificate authority of a test's own.
pub struct TestCa {
    key: rcgen::KeyPair,
    cert: rcgen::Certificate,
}

/// A certificate for localhost and its key.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    /// The certificate, DER: what a handshake presents.
    pub der: Vec<u8>,
}

impl Leaf {
    /// Writes the certificate and the key to their files, as an operator
    /// rotating them in place would.
    pub fn write(&self, cert: &Path, key: &Path) -> Result<()> {
        std::fs::write(cert, &self.cert_pem)?;
        std::fs::write(key, &self.key_pem)?;
        Ok(())
    }
}

impl TestCa {
    pub fn new() -> Result<Self> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "Gatehouse Reload Test CA");
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Self { key, cert })
    }

    /// A new certificate for localhost, with a key of its own.
    pub fn leaf(&self) -> Result<Leaf> {
        use rcgen::{CertificateParams, DnType, KeyPair};
        let mut params = CertificateParams::new(vec!["localhost".to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, "localhost");
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().to_vec(),
        })
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A client configuration that trusts this CA only.
    pub fn client_config(&self) -> Result<Arc<rustls::ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert.der().clone())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()?
                .with_root_certificates(roots)
                .with_no_client_auth(),
        ))
    }
}

/// How a client asks an endpoint for TLS.
#[derive(Clone, Copy)]
pub enum Upgrade {
    /// SSLRequest; the server answers `S`.
    Postgres,
    /// The server's greeting first; then a 32-byte SSL request packet.
    Mysql,
}

/// Connects to `addr`, asks for TLS as `upgrade` does, completes the
/// handshake for "localhost" (verified against `ca`), and answers the leaf
/// certificate the endpoint presented (DER).
pub async fn served_certificate(addr: SocketAddr, upgrade: Upgrade, ca: &TestCa) -> Result<Vec<u8>> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await?;
    match upgrade {
        Upgrade::Postgres => {
            tcp.write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]).await?;
            let answer = tcp.read_u8().await?;
            ensure!(answer == b'S', "the endpoint refused TLS: {answer:#x}");
        }
        Upgrade::Mysql => {
            let mut header = [0u8; 4];
            tcp.read_exact(&mut header).await?;
            let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
            let mut greeting = vec![0u8; len];
            tcp.read_exact(&mut greeting).await?;
            // CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL |
            // CLIENT_SECURE_CONNECTION; 16 MiB packets; utf8mb4; filler.
            let caps: u32 = 0x1 | 0x200 | 0x800 | 0x8000;
            let mut packet = vec![32, 0, 0, 1];
            packet.extend_from_slice(&caps.to_le_bytes());
            packet.extend_from_slice(&(16u32 << 20).to_le_bytes());
            packet.push(45);
            packet.extend_from_slice(&[0u8; 23]);
            tcp.write_all(&packet).await?;
        }
    }
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    let tls = tokio_rustls::TlsConnector::from(ca.client_config()?)
        .connect(name, tcp)
        .await
        .context("TLS handshake")?;
    let leaf = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .context("no certificate presented")?;
    Ok(leaf.to_vec())
}
