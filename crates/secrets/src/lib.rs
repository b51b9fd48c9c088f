//! Gatehouse's encrypted store of backend credentials.
//!
//! * [`MasterKey`] (module `key`): the AES-256 key, from a file or an
//!   environment variable, zeroed on drop.
//! * [`envelope`]: one password sealed as `gh1:<base64(nonce || ciphertext || tag)>`,
//!   AES-256-GCM with the secret's name as associated data.
//! * [`SecretsFile`] (module `store`): the TOML file of named entries
//!   (user, envelope, version, updated) with `set`/`rotate`/`remove` and an
//!   atomic, mode-0600 `save`.
//! * [`SecretValue`]: a decrypted password; prints as `<redacted>`, zeroed on drop.
//! * [`SecretsError`]: the one error type; its messages never contain a
//!   plaintext, key material or an envelope.
//!
//! The crate does blocking std file I/O only; call it from a blocking context.

#![forbid(unsafe_code)]

mod atomic;
pub mod envelope;
mod error;
mod key;
mod name;
mod store;
mod value;

#[cfg(test)]
mod redaction_tests;

pub use error::{Result, SecretsError};
pub use key::{KEY_LEN, MasterKey};
pub use name::{MAX_NAME_LEN, validate_name};
pub use store::{DecryptedSecret, Entry, FORMAT_VERSION, SecretsFile};
pub use value::SecretValue;
