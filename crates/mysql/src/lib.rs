//! The MySQL/MariaDB engine: handshake v10 and authentication towards
//! clients, authenticated backend connections, and transaction pooling
//! driven by the SERVER_STATUS_IN_TRANS flag of the server's replies. It
//! implements the core's `Engine` and `Serve` (`gatehouse-core`).
//!
//! It builds on the core, the settings and the leaf libraries (the MySQL
//! codec, SQL facts), and must never import the other engine
//! (`gatehouse-pg`), the admin API or the binary.
#![forbid(unsafe_code)]

pub mod backend;
pub mod caps;
mod cmdloop;
mod commands;
mod console;
pub mod engine;
pub mod errors;
mod inspect;
pub mod io;
pub mod kill;
mod lease;
pub mod login;
mod parked;
mod relay;
pub mod session;
mod split;
mod table;
pub mod txn;
pub mod vars;

pub use self::caps::{RELAY_CAPS, SESSION_CAPS, SESSION_EXT_CAPS, session_caps_startup, session_word};
pub use self::engine::{FALLBACK_SERVER_VERSION, MyEngine};
pub use self::session::pool_for_caps;
