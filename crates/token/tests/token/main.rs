//! Integration tests of `gatehouse-token` with real keys: RSA from committed
//! test-only fixtures, ECDSA P-256 and Ed25519 generated per run with rcgen,
//! HS256 with a fixed test secret. One test binary, split by subject.

mod algorithms;
mod cache;
mod claims;
mod errors;
mod keys;
mod support;
