//! What the tests that run the real `gatehouse` binary share: the command,
//! password verifiers made by `gatehouse hash-password`, free ports and a
//! directory removed when the test ends.

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
