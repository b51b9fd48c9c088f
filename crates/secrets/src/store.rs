//! [`SecretsFile`]: the TOML secrets store on disk and the operations behind
//! `gatehouse secrets set|get|list|rotate`.
//!
//! Layout (format 1):
//!
//! ```toml
//! format = 1
//!
//! [secrets.demo_backend]
//! user = "demo_owner"
//! password = "gh1:..."   # envelope, see `envelope`
//! version = 3            # 1 on first `set`, +1 on every `set`/`rotate`
//! updated = 1795456800   # unix seconds (UTC) of the last change
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::atomic::write_atomic;
use crate::envelope;
use crate::error::{Result, SecretsError, scrub_quoted};
use crate::key::MasterKey;
use crate::name::{validate_name, validate_user};
use crate::value::SecretValue;

/// The `format` number this build reads and writes.
pub const FORMAT_VERSION: i64 = 1;

const HEADER: &str = "# Gatehouse secrets file, managed by `gatehouse secrets`.\n\
                      # Passwords are AES-256-GCM envelopes; edits to them break decryption.\n";

/// Metadata of one stored secret. Holds the envelope privately and never
/// exposes it (nor, of course, the plaintext).
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    user: String,
    envelope: String,
    version: u64,
    updated: u64,
}

impl Entry {
    /// The backend user name.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// 1 after the first `set`, incremented by every `set` or `rotate`.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Unix seconds (UTC) of the last `set` or `rotate`.
    pub fn updated(&self) -> u64 {
        self.updated
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("user", &self.user)
            .field("password", &format_args!("<redacted>"))
            .field("version", &self.version)
            .field("updated", &self.updated)
            .finish()
    }
}

/// One decrypted secret, as returned by [`SecretsFile::decrypt_all`].
/// `Debug` is safe: the password prints as `<redacted>`.
#[derive(Clone, Debug)]
pub struct DecryptedSecret {
    pub name: String,
    pub user: String,
    pub password: SecretValue,
    pub version: u64,
}

/// The whole secrets file, in memory. Secrets are kept sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretsFile {
    secrets: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Header {
    format: i64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRepr {
    format: i64,
    #[serde(default)]
    secrets: BTreeMap<String, EntryRepr>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryRepr {
    user: String,
    password: String,
    version: u64,
    updated: u64,
}

impl SecretsFile {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read and validate the file at `path`. A missing file is an error
    /// ([`SecretsError::FileMissing`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SecretsError::FileMissing {
                    path: path.to_path_buf(),
                });
            }
            Err(source) => {
                return Err(SecretsError::FileRead {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Self::parse(path, &text)
    }

    /// Like [`SecretsFile::load`], but a missing file gives an empty store
    /// (for `set` on a fresh install).
    pub fn load_or_empty(path: impl AsRef<Path>) -> Result<Self> {
        match Self::load(path) {
            Err(SecretsError::FileMissing { .. }) => Ok(Self::new()),
            other => other,
        }
    }

    /// Names of all secrets, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.secrets.keys().map(String::as_str)
    }

    /// Number of secrets.
    pub fn len(&self) -> usize {
        self.secrets.len()
    }

    /// True if there are no secrets.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Metadata (user, version, updated) of one secret.
    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.secrets.get(name)
    }

    /// Decrypt one secret: its backend user and password.
    pub fn decrypt(&self, key: &MasterKey, name: &str) -> Result<(String, SecretValue)> {
        let entry = self.get(name)?;
        let password = envelope::decrypt(key, name, &entry.envelope)?;
        Ok((entry.user.clone(), password))
    }

    /// Decrypt every secret, sorted by name. Fails on the first secret that
    /// does not decrypt, naming it.
    pub fn decrypt_all(&self, key: &MasterKey) -> Result<Vec<DecryptedSecret>> {
        self.secrets
            .iter()
            .map(|(name, entry)| {
                Ok(DecryptedSecret {
                    name: name.clone(),
                    user: entry.user.clone(),
                    password: envelope::decrypt(key, name, &entry.envelope)?,
                    version: entry.version,
                })
            })
            .collect()
    }

    /// Create the secret (version 1) or replace its user and password
    /// (version + 1). Returns the new version.
    pub fn set(&mut self, key: &MasterKey, name: &str, user: &str, password: &str) -> Result<u64> {
        validate_name(name)?;
        validate_user(name, user)?;
        let envelope = envelope::encrypt(key, name, password)?;
        let version = self.secrets.get(name).map_or(1, |e| e.version.saturating_add(1));
        let entry = Entry {
            user: user.to_owned(),
            envelope,
            version,
            updated: now_unix(),
        };
        self.secrets.insert(name.to_owned(), entry);
        Ok(version)
    }

    /// Replace the password of an existing secret, keeping its user.
    /// Returns the new version.
    pub fn rotate(&mut self, key: &MasterKey, name: &str, new_password: &str) -> Result<u64> {
        let entry = self.secrets.get_mut(name).ok_or_else(|| not_found(name))?;
        entry.envelope = envelope::encrypt(key, name, new_password)?;
        entry.version = entry.version.saturating_add(1);
        entry.updated = now_unix();
        Ok(entry.version)
    }

    /// Delete a secret.
    pub fn remove(&mut self, name: &str) -> Result<()> {
        self.secrets.remove(name).map(drop).ok_or_else(|| not_found(name))
    }

    /// Write the store to `path` atomically (temp file in the same directory,
    /// fsync, rename, fsync of the directory); mode 0600 on unix.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let repr = FileRepr {
            format: FORMAT_VERSION,
            secrets: self
                .secrets
                .iter()
                .map(|(name, e)| {
                    let repr = EntryRepr {
                        user: e.user.clone(),
                        password: e.envelope.clone(),
                        version: e.version,
                        updated: e.updated,
                    };
                    (name.clone(), repr)
                })
                .collect(),
        };
        let body = toml::to_string(&repr).map_err(|_| SecretsError::Serialize {
            path: path.to_path_buf(),
        })?;
        let text = format!("{HEADER}{body}");
        write_atomic(path, text.as_bytes()).map_err(|source| SecretsError::FileWrite {
            path: path.to_path_buf(),
            source,
        })
    }

    fn parse(path: &Path, text: &str) -> Result<Self> {
        // Check `format` first, so a newer file is reported as such rather
        // than as a pile of unknown fields.
        let header: Header = toml::from_str(text).map_err(|e| parse_error(path, text, &e))?;
        if header.format != FORMAT_VERSION {
            return Err(SecretsError::UnsupportedFormat {
                path: path.to_path_buf(),
                found: header.format,
                supported: FORMAT_VERSION,
            });
        }
        let repr: FileRepr = toml::from_str(text).map_err(|e| parse_error(path, text, &e))?;
        let mut secrets = BTreeMap::new();
        for (name, e) in repr.secrets {
            validate_name(&name)?;
            validate_user(&name, &e.user)?;
            if e.version == 0 {
                return Err(SecretsError::InvalidVersion {
                    path: path.to_path_buf(),
                    name,
                });
            }
            let entry = Entry {
                user: e.user,
                envelope: e.password,
                version: e.version,
                updated: e.updated,
            };
            secrets.insert(name, entry);
        }
        Ok(Self { secrets })
    }

    fn get(&self, name: &str) -> Result<&Entry> {
        self.secrets.get(name).ok_or_else(|| not_found(name))
    }
}

fn not_found(name: &str) -> SecretsError {
    SecretsError::NotFound { name: name.to_owned() }
}

fn now_unix() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Turn a TOML error into [`SecretsError::FileParse`] with a 1-based line and
/// column and a message scrubbed of quoted values. The parser's own
/// `Display` is not used: it quotes the offending source line.
fn parse_error(path: &Path, text: &str, err: &toml::de::Error) -> SecretsError {
    let offset = err.span().map_or(0, |s| s.start).min(text.len());
    let before = text.get(..offset).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    SecretsError::FileParse {
        path: path.to_path_buf(),
        line,
        column,
        detail: scrub_quoted(err.message().trim()),
    }
}
