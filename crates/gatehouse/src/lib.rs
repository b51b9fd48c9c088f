//! Gatehouse: a database proxy for PostgreSQL (and, through the same core,
//! MySQL/MariaDB). The library exposes [`App`] and [`run`] so a binary, a
//! test or a benchmark can start any number of proxies in one process.
//!
//! This is the top layer, the binary's: the app that builds one core per
//! engine and the admin API over them, the endpoints' listeners, reload,
//! the restart hand-over (`upgrade`), logging and the CLI. It may use
//! every layer below (settings, core, the engines, admin), and re-exports
//! them where the proxy's paths have always named them; no crate of the
//! workspace but the tools and tests may import it.
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
