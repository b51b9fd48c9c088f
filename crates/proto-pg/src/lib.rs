//! Sans-I/O PostgreSQL frontend/backend protocol v3: framing, the messages the
//! proxy reads or writes, client authentication (SCRAM-SHA-256, md5) and the
//! backend-side startup exchange, all as plain functions and state machines so
//! they can be property-tested and fuzzed without sockets.
//!
//! Reference: PostgreSQL 15 documentation, chapter 55 "Frontend/Backend Protocol".
#![forbid(unsafe_code)]

pub mod auth;
pub mod backend_startup;
pub mod extended;
pub mod frame;
pub mod messages;
pub mod results;
pub mod sqlstate;
pub mod startup;

pub use frame::{FrameError, Step};
