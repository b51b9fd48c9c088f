//! The crate's one error type, [`SecretsError`].
//!
//! Rule for every message here: it may name a file path, a secret name, an
//! environment variable name or a field name, but never a plaintext password,
//! key material or an envelope (`gh1:...`) text. Variants therefore carry no
//! field that could hold any of those, and the TOML parser's messages are
//! scrubbed of quoted values before they are stored (see [`scrub_quoted`]).

use std::path::PathBuf;

/// Convenience alias used throughout the crate.
pub type Result<T, E = SecretsError> = std::result::Result<T, E>;

/// Everything that can go wrong while loading keys, encrypting, decrypting
/// or reading and writing the secrets file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretsError {
    /// The master key file could not be read.
    #[error("cannot read master key file {path}: {source}")]
    KeyFileRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The master key environment variable is not set.
    #[error("master key environment variable {var} is not set")]
    KeyEnvMissing { var: String },

    /// The master key text (from a file or the environment) is not one of the
    /// accepted encodings. `origin` says where it came from, never what it is.
    #[error("master key from {origin} is not 32 raw bytes, 64 hex characters, or base64 of 32 bytes")]
    KeyFormat { origin: String },

    /// The operating system's random number generator failed.
    #[error("the system random number generator failed")]
    Random,

    /// The envelope for `name` does not start with a known version prefix.
    #[error("secret {name:?}: encrypted value has an unknown format version")]
    UnknownVersion { name: String },

    /// The envelope for `name` is not valid base64, is too short, or
    /// decrypted to something that is not UTF-8.
    #[error("secret {name:?}: encrypted value is malformed ({reason})")]
    Malformed { name: String, reason: &'static str },

    /// AES-GCM tag verification failed: wrong key, tampered data, or an
    /// envelope that belongs to another secret. Deliberately one variant.
    #[error("secret {name:?}: decryption failed (wrong key, or the value was altered or belongs to another secret)")]
    Authentication { name: String },

    /// AES-GCM refused to encrypt (only possible for absurdly long input).
    #[error("secret {name:?}: encryption failed")]
    Encryption { name: String },

    /// The secrets file does not exist.
    #[error("secrets file {path} does not exist")]
    FileMissing { path: PathBuf },

    /// The secrets file could not be read.
    #[error("cannot read secrets file {path}: {source}")]
    FileRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The secrets file could not be written (temp file, fsync or rename).
    #[error("cannot write secrets file {path}: {source}")]
    FileWrite {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The secrets file is not valid TOML or does not have the expected shape.
    /// `detail` has had every quoted value replaced by `"<redacted>"`.
    #[error("secrets file {path} is invalid at line {line}, column {column}: {detail}")]
    FileParse {
        path: PathBuf,
        line: usize,
        column: usize,
        detail: String,
    },

    /// The secrets file declares a `format` this version does not understand.
    #[error("secrets file {path} has format {found}, this build understands format {supported}")]
    UnsupportedFormat { path: PathBuf, found: i64, supported: i64 },

    /// The in-memory store could not be rendered as TOML.
    #[error("cannot serialize secrets file {path}")]
    Serialize { path: PathBuf },

    /// A secret name outside `[A-Za-z0-9_.-]{1,63}`. Shown escaped and cut to
    /// 64 characters.
    #[error("invalid secret name {name:?}: use 1 to 63 characters of A-Z a-z 0-9 _ . -")]
    InvalidName { name: String },

    /// A backend user name that is empty or contains control characters.
    #[error("secret {name:?}: backend user must be non-empty and free of control characters")]
    InvalidUser { name: String },

    /// No entry with this name in the secrets file.
    #[error("no secret named {name:?}")]
    NotFound { name: String },

    /// An entry in the secrets file has `version = 0`, which `set` never writes.
    #[error("secrets file {path}: secret {name:?} has version 0 (versions start at 1)")]
    InvalidVersion { path: PathBuf, name: String },
}

/// Replace the contents of every `"..."` span in `message` with `<redacted>`.
///
/// serde's "invalid type" messages quote the offending value
/// (`invalid type: string "gh1:...", expected u64`), so a parse error could
/// otherwise carry an envelope into a log. Backquoted field names are kept.
pub(crate) fn scrub_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut in_quote = false;
    let mut escaped = false;
    for c in message.chars() {
        if in_quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_quote = false;
                out.push_str("<redacted>\"");
            }
            continue;
        }
        out.push(c);
        if c == '"' {
            in_quote = true;
        }
    }
    if in_quote {
        out.push_str("<redacted>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_replaces_quoted_values_and_keeps_the_rest() {
        assert_eq!(
            scrub_quoted(r#"invalid type: string "gh1:AAAA", expected u64"#),
            r#"invalid type: string "<redacted>", expected u64"#
        );
        assert_eq!(
            scrub_quoted(r#"x "a\"b" y "c" z"#),
            r#"x "<redacted>" y "<redacted>" z"#
        );
        assert_eq!(scrub_quoted(r#"open "secret"#), r#"open "<redacted>"#);
        assert_eq!(scrub_quoted("missing field `user`"), "missing field `user`");
    }
}
