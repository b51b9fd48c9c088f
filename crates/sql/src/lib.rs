//! Cheap, sans-I/O classification of PostgreSQL statement text by what it does
//! to *session state*, for the proxy's hot path.
//!
//! The crate never parses SQL fully. It tokenizes just enough (PostgreSQL docs
//! §4.1 "Lexical Structure": quoted identifiers, `'..'`, `E'..'` and
//! `$tag$..$tag$` strings, `--` and nested `/* */` comments) to
//!
//! * split a simple-Query string into statements ([`split_statements`]), and
//! * say for each statement whether it is transaction control, a trackable
//!   setting (`SET`/`RESET`/`set_config`), SQL-level prepared-statement
//!   management, or state that pins the client to its backend ([`classify`]).
//!
//! A plain `SELECT ... FROM ... WHERE ...` costs one keyword look-up plus one
//! case-insensitive byte scan and does not allocate.
//!
//! The MySQL/MariaDB counterpart lives in [`mysql`].
//!
//! Assumptions and deliberate conservatism:
//! * `standard_conforming_strings` is `on` (the default since 9.1). Turning it
//!   off is reported as [`PinReason::Unrecognized`] because the tokenizer's view
//!   of `'..'` strings would no longer match the server's.
//! * `DO` blocks are only searched (inside their body strings too) for the
//!   advisory-lock functions and `set_config`; other effects of procedural code
//!   (and of `CALL`ed procedures) are invisible.
//! * Any `set_config` call that is not exactly
//!   `SELECT set_config('name', 'value', true|false)` with plain literals is
//!   [`PinReason::Unrecognized`]: it may change a setting we cannot track.
#![forbid(unsafe_code)]

mod classify;
mod cursor;
mod declare;
mod digest;
mod effect;
mod ident;
mod kind;
mod lexer;
pub mod mysql;
mod prepared;
mod reset;
mod route;
mod scan;
mod set;
mod set_config;
mod split;
mod temp;
mod transaction;
mod words;

pub use classify::{classify, classify_all};
pub use digest::{Digest, MAX_DIGEST_TEXT, digest};
pub use effect::{DiscardKind, Effect, PinReason, Scope, TxCommand};
pub use kind::{statement_kind, statement_kind_at};
pub use route::{Route, WriteReason, route, route_with};
pub use split::split_statements;
