//! The PostgreSQL engine: a client session from accept to close (login in
//! [`login`], the data path in [`relay`]), backend connections in
//! [`backend`], and the mapping of proxy errors to SQLSTATEs. It implements
//! the core's `Engine` and `Serve` (`gatehouse-core`).
//!
//! It builds on the core, the settings and the leaf libraries (the
//! PostgreSQL codec, SQL facts), and must never import the other engine
//! (`gatehouse-mysql`), the admin API or the binary.
#![forbid(unsafe_code)]

pub mod backend;
mod console;
pub mod engine;
pub mod errors;
pub mod greeting;
mod handover;
pub mod login;
mod parked;
pub mod pending;
pub mod relay;
pub mod session;
pub mod statements;
pub mod tracked;
pub mod txn;

pub use self::engine::PgEngine;
pub use self::errors::{send_fatal, sqlstate_of};
