//! The two engines, PostgreSQL ([`pg`]) and MySQL/MariaDB ([`mysql`]):
//! each implements the core's `Engine` (the backend side) and `Serve` (its
//! sessions). The traits and the engine-neutral parts they use (idle
//! waits, monitors, replication positions, backend streams) are the
//! core's, re-exported here where the proxy has always named them.

pub use gatehouse_core::engine::*;

pub mod mysql;
pub mod pg;
