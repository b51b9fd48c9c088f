//! Gatehouse: a database proxy for PostgreSQL (and, through the same core,
//! MySQL/MariaDB). The library exposes [`App`] and [`run`] so a binary, a
//! test or a benchmark can start any number of proxies in one process.
#![forbid(unsafe_code)]

pub mod app;
pub mod endpoints;
pub mod engine;
pub mod logging;
pub mod reload;
pub mod upgrade;

pub use app::{App, AppError, run};
/// The admin API, where the proxy's paths have always named it.
pub use gatehouse_admin as admin;
/// The core's layers, where the proxy's paths have always named them.
pub use gatehouse_core::{
    auth, backend_tls, cancel, console, core, digests, drain, error, inspect, limits, meter, park, pool, router, serve,
    session_log, split, stats, tenants, topology,
};
/// The settings layer, where the proxy's paths have always named it.
pub use gatehouse_settings::{config, rules, tls, tls_sessions};
