//! Gatehouse: a database proxy for PostgreSQL (and, through the same core,
//! MySQL/MariaDB). The library exposes [`App`] and [`run`] so a binary, a
//! test or a benchmark can start any number of proxies in one process.
#![forbid(unsafe_code)]

pub mod admin;
pub mod app;
pub mod auth;
pub mod backend_tls;
pub mod cancel;
pub mod console;
pub mod core;
pub mod digests;
pub mod endpoints;
pub mod engine;
pub mod error;
pub mod inspect;
pub mod limits;
pub mod logging;
pub mod meter;
pub mod park;
pub mod pool;
pub mod reload;
pub mod router;
pub mod session_log;
pub mod split;
pub mod stats;
pub mod tenants;
pub mod topology;
pub mod upgrade;

pub use app::{App, AppError, run};
/// The settings layer, where the proxy's paths have always named it.
pub use gatehouse_settings::{config, rules, tls, tls_sessions};
