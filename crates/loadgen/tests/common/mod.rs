//! What the load engine's integration tests share: a scratch directory
//! removed at the end, a server's pid from its pid file, and a `load` run
//! of the binary with its JSON report.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use serde_json::Value;

/// Removes the directory when the test ends (declared before the cluster,
/// so it is dropped after the servers have stopped).
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The pid in the first line of a server's pid file.
pub fn pid_in(file: &Path) -> Result<u32> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    text.lines()
        .next()
        .context("empty pid file")?
        .trim()
        .parse()
        .context("pid")
}

/// Runs `gatehouse-loadgen load` with `args`; its exit success and the JSON
/// report.
pub fn load(dir: &Path, name: &str, args: &[&str]) -> Result<(bool, Value)> {
    let json = dir.join(format!("{name}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse-loadgen"))
        .arg("load")
        .args(["--name", name, "--quiet", "--json"])
        .arg(&json)
        .args(args)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).with_context(|| format!("{text}"))?)?;
    Ok((out.status.success(), report))
}
