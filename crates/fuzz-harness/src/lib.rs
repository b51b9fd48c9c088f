//! The bodies of the cargo-fuzz targets under `fuzz/` (one per decoder
//! family of the codec crates), as plain functions of the input bytes.
//!
//! Each fuzz target (`fuzz/fuzz_targets/<name>.rs`, nightly) only calls
//! its function here; the stable test suite replays the committed corpus
//! (`fuzz/corpus/<name>/`) and the regression inputs of past findings
//! (`fuzz/regressions/<name>/`) through the same functions
//! (`tests/fuzz_corpus.rs`), so CI checks them without nightly.
//!
//! A harness panics (an `assert!`) when an invariant breaks, not only when
//! the decoder itself panics: encode∘decode round trips, lengths within the
//! input and the documented limits, determinism, and for the MySQL reply
//! tracker, a protocol model whose well-formed replies must end exactly on
//! their last packet. Every input is valid for every harness: fields past
//! the end read as zeros ([`input::Input`]).
#![forbid(unsafe_code)]

pub mod input;
pub mod mysql;
pub mod pg;
pub mod seeds;
pub mod sql;
pub mod token;
pub mod tracker;

/// A harness: panics when the input breaks an invariant.
pub type Harness = fn(&[u8]);

/// Every fuzz target by name, as `fuzz/fuzz_targets/<name>.rs` calls it.
pub const TARGETS: &[(&str, Harness)] = &[
    ("pg_frame", pg::pg_frame),
    ("pg_startup", pg::pg_startup),
    ("pg_messages", pg::pg_messages),
    ("pg_scram_server", pg::pg_scram_server),
    ("pg_backend_startup", pg::pg_backend_startup),
    ("my_packet", mysql::my_packet),
    ("my_handshake", mysql::my_handshake),
    ("my_handshake_response", mysql::my_handshake_response),
    ("my_ok_err_eof", mysql::my_ok_err_eof),
    ("my_command", mysql::my_command),
    ("my_stmt_execute", mysql::my_stmt_execute),
    ("my_session_track", mysql::my_session_track),
    ("my_response_tracker", tracker::my_response_tracker),
    ("my_auth", mysql::my_auth),
    ("my_auth_rsa", mysql::my_auth_rsa),
    ("sql_pg_classify", sql::sql_pg_classify),
    ("sql_pg_digest", sql::sql_pg_digest),
    ("sql_mysql_classify", sql::sql_mysql_classify),
    ("sql_mysql_digest_route", sql::sql_mysql_digest_route),
    ("token_verify", token::token_verify),
];

/// The harness of the target `name`.
pub fn harness(name: &str) -> Option<Harness> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|&(_, h)| h)
}
