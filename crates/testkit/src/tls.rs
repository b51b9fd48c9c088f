//! TLS material for a cluster started with [`crate::Options::tls`]: a CA,
//! a server certificate signed by it (SANs `127.0.0.1` and `localhost`)
//! and a client certificate signed by it (CN [`CLIENT_CN`], for mutual
//! TLS), generated once per cluster with rcgen under `DIR/tls/` and
//! shared by every server of both engines (which also trust the CA for
//! client certificates).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

use crate::sys::Tools;

/// The common name of the client certificate: the PostgreSQL role that
/// `cert` authentication logs in as.
pub const CLIENT_CN: &str = "gatehouse_client";

/// Where a cluster's TLS files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Files {
    /// The CA certificate clients verify the servers with.
    pub ca: PathBuf,
    /// The servers' certificate (PEM).
    pub cert: PathBuf,
    /// The servers' private key (PEM, mode 0600).
    pub key: PathBuf,
    /// A client certificate (PEM) and its key, CN [`CLIENT_CN`].
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl Files {
    /// The files next to the CA certificate `ca` (as `cluster.env` records it).
    pub(crate) fn beside(ca: PathBuf) -> Files {
        Files {
            cert: ca.with_file_name("server.pem"),
            key: ca.with_file_name("server.key"),
            client_cert: ca.with_file_name("client.pem"),
            client_key: ca.with_file_name("client.key"),
            ca,
        }
    }

    /// The files of the cluster in `cluster_dir`: `cluster_dir/tls/*`.
    pub(crate) fn under(cluster_dir: &Path) -> Files {
        Files::beside(cluster_dir.join("tls").join("ca.pem"))
    }
}

/// Generate a fresh CA and server certificate into `DIR/tls/`. The key is
/// mode 0600 and, when we are root, owned by the PostgreSQL server user
/// (PostgreSQL refuses a key others can read; mariadbd runs as root then).
pub(crate) fn generate(t: &Tools, cluster_dir: &Path) -> Result<Files> {
    let files = Files::under(cluster_dir);
    let dir = cluster_dir.join("tls");
    std::fs::create_dir_all(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;

    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "gatehouse-testkit CA");
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let ca = ca_params.self_signed(&ca_key).context("signing the CA certificate")?;

    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    params.distinguished_name.push(DnType::CommonName, "localhost");
    let key = KeyPair::generate().context("generating the server key")?;
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .context("signing the server certificate")?;

    let mut client_params = CertificateParams::new(Vec::<String>::new())?;
    client_params.distinguished_name.push(DnType::CommonName, CLIENT_CN);
    client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().context("generating the client key")?;
    let client = client_params
        .signed_by(&client_key, &ca, &ca_key)
        .context("signing the client certificate")?;

    write(&files.ca, &ca.pem(), 0o644)?;
    write(&files.client_cert, &client.pem(), 0o644)?;
    write(&files.client_key, &client_key.serialize_pem(), 0o600)?;
    write(&files.cert, &cert.pem(), 0o644)?;
    write(&files.key, &key.serialize_pem(), 0o600)?;
    t.give_to_pg(&files.key)?;
    Ok(files)
}

/// Write `contents` to a fresh file with `mode` (no moment with a wider one).
fn write(path: &Path, contents: &str, mode: u32) -> Result<()> {
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .with_context(|| format!("write {}", path.display()))
}
