//! The `gatehouse secrets ...` and `gatehouse token ...` subcommands: thin
//! command-line front ends over the `gatehouse-secrets` and `gatehouse-token`
//! crates. Binary-only; the library in `lib.rs` does not use them.

pub mod secrets;
pub mod token;
