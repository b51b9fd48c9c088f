//! What the tests that run the real `gatehouse` binary share: the command,
//! password verifiers made by `gatehouse hash-password`, free ports, a
//! directory removed when the test ends, and the configuration text of a
//! proxy in front of the test kit's PostgreSQL and MariaDB.

use std::io::Write;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, ensure};

/// The binary under test.
pub fn gatehouse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gatehouse"))
}

/// `gatehouse hash-password` of `password` with `extra` flags (`--mysql`).
pub fn hash(password: &str, extra: &[&str]) -> Result<String> {
    let mut child = gatehouse()
        .arg("hash-password")
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    child.stdin.take().context("stdin")?.write_all(password.as_bytes())?;
    let out = child.wait_with_output()?;
    ensure!(out.status.success(), "hash-password failed");
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// A loopback port free now.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Removes the directory when the test ends (declare it before a cluster
/// living in it, so the cluster stops first).
pub struct TempDir(pub std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The configuration text of a proxy in front of a test kit's PostgreSQL
/// and MariaDB: what the test puts first (`[proxy]`, `[admin]`), its
/// clusters and endpoints, tenants of both engines, and the secrets
/// `pg_super` and `my_super` they log in to the backends with (the kit's
/// users), and any other secret the test adds.
pub struct TwoEngines {
    head: String,
    clusters: String,
    endpoints: String,
    tenants: String,
    secrets: String,
}

impl TwoEngines {
    /// `head` comes first: the `[proxy]` section and any other of the test's.
    pub fn new(kit: &gatehouse_testkit::Cluster, head: &str) -> Self {
        Self {
            head: head.to_owned(),
            clusters: String::new(),
            endpoints: String::new(),
            tenants: String::new(),
            secrets: String::new(),
        }
        .secret("pg_super", kit.pg_user(), kit.pg_password())
        .secret("my_super", kit.mysql_user(), kit.mysql_password())
    }

    /// A secret `name`: the backend user and password tenants log in as.
    pub fn secret(mut self, name: &str, user: &str, password: &str) -> Self {
        self.secrets += &format!("\n[[secrets]]\nname = \"{name}\"\nuser = \"{user}\"\npassword = \"{password}\"\n");
        self
    }

    /// A cluster of `engine` (`postgres` or `mysql`) on one backend;
    /// `settings` are lines of its own after `backends`.
    pub fn cluster(mut self, name: &str, engine: &str, backend: &str, settings: &str) -> Self {
        self.clusters += &format!(
            "\n[[clusters]]\nname = \"{name}\"\nengine = \"{engine}\"\nbackends = [\"{backend}\"]\n{settings}"
        );
        self
    }

    /// A read-write endpoint of `cluster` listening on `listen`.
    pub fn endpoint(mut self, name: &str, listen: &str, cluster: &str) -> Self {
        self.endpoints += &format!(
            "\n[[endpoints]]\nname = \"{name}\"\nlisten = \"{listen}\"\ncluster = \"{cluster}\"\nrole = \"read_write\"\n"
        );
        self
    }

    /// A PostgreSQL tenant of the database `postgres`, with its SCRAM
    /// verifier ([`hash`]).
    pub fn pg_tenant(self, name: &str, verifier: &str) -> Self {
        self.pg_tenant_as(name, verifier, "pg_super")
    }

    /// [`Self::pg_tenant`] logging in to the backend with `secret`.
    pub fn pg_tenant_as(self, name: &str, verifier: &str, secret: &str) -> Self {
        self.tenant(name, "postgres", secret, "scram_verifier", verifier)
    }

    /// A MariaDB tenant of the database `mysql`, with its
    /// `mysql_native_password` hash ([`hash`] with `--mysql`).
    pub fn my_tenant(self, name: &str, hash: &str) -> Self {
        self.my_tenant_as(name, hash, "my_super")
    }

    /// [`Self::my_tenant`] logging in to the backend with `secret`.
    pub fn my_tenant_as(self, name: &str, hash: &str, secret: &str) -> Self {
        self.tenant(name, "mysql", secret, "mysql_native_password", hash)
    }

    fn tenant(mut self, name: &str, database: &str, secret: &str, key: &str, value: &str) -> Self {
        self.tenants += &format!(
            "\n[[tenants]]\nname = \"{name}\"\ndatabases = [\"{database}\"]\nsecret = \"{secret}\"\n{key} = \"{value}\"\n"
        );
        self
    }

    /// The whole text.
    pub fn text(&self) -> String {
        [
            &self.head,
            &self.clusters,
            &self.endpoints,
            &self.tenants,
            &self.secrets,
        ]
        .into_iter()
        .map(String::as_str)
        .collect()
    }
}
