//! The two engines, PostgreSQL ([`pg`], the `gatehouse-pg` crate) and
//! MySQL/MariaDB ([`mysql`], `gatehouse-mysql`), and the core's engine
//! trait with the engine-neutral parts it uses (idle waits, monitors,
//! replication positions, backend streams), re-exported where the proxy
//! has always named them.

pub use gatehouse_core::engine::*;
pub use gatehouse_mysql as mysql;
pub use gatehouse_pg as pg;
