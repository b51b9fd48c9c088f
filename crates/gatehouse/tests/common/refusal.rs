//! What a client hears when the proxy may not reach its database server,
//! for the `backend_tls` cases of both engines' binaries against a server
//! without TLS: that the server could not be reached, and nothing of why.

use anyhow::{Result, bail, ensure};

/// The verdict on a client of a proxy whose `backend_tls` is `mode`, in
/// front of a server without TLS, that was `told` an error: only `require`
/// may fail, and its client hears only that the server could not be
/// reached, not that TLS was the reason.
pub fn require_refused_quietly(mode: &str, told: &str) -> Result<()> {
    if mode != "require" {
        bail!("{mode}: {told}");
    }
    ensure!(
        told.contains("could not connect to the database server") || told.contains("no writable backend"),
        "require: the client was told {told:?}"
    );
    ensure!(
        !told.to_lowercase().contains("tls"),
        "require: the client was told why: {told:?}"
    );
    Ok(())
}
