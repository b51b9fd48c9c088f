//! Gatehouse's settings, the bottom layer of the proxy: the configuration
//! model ([`config`]: the TOML reading and its validation with line
//! numbers, the reference that generates `docs/CONFIG.md`, what a reload
//! changes) and the types that describe what the layers above act on:
//! query rules compiled and matched ([`rules`]), client-facing TLS
//! ([`tls`], [`tls_sessions`]), TLS toward the databases ([`backend_tls`]:
//! modes and the rustls configuration; the handshake is the core's), the
//! console's roles, the abuse limits' defaults and the log filter.
//!
//! It must never import the proxy's other layers (core, engines, admin,
//! the binary): they compile from it, never the other way round. Below it
//! are only the leaf libraries (the protocol codecs, the SQL classifier,
//! the secrets store and the token verifier).
#![forbid(unsafe_code)]

pub mod backend_tls;
pub mod config;
pub mod console;
pub mod kind;
pub mod limits;
pub mod logging;
pub mod rules;
pub mod text;
pub mod tls;
pub mod tls_sessions;
