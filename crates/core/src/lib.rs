//! Gatehouse's engine-agnostic core: the [`engine::Engine`] trait and what
//! it drives for both engines. Pools and their backend shares, topology
//! and its monitor, the router and split decisions, digests, the cancel
//! registry, meters and stats, abuse limits, tenants, the parking lot, the
//! session inspector, errors, the console's parser and command interface,
//! and TLS toward the databases; [`core::Core`] holds one engine's share of
//! them for a proxy instance.
//!
//! It builds on the settings crate and the leaf libraries (codecs, SQL
//! facts, secrets, tokens), and must never import an engine
//! (`gatehouse-pg`, `gatehouse-mysql`), the admin API or the binary: they
//! sit above it and implement or read what it defines.
#![forbid(unsafe_code)]

pub mod auth;
pub mod backend_tls;
pub mod cancel;
pub mod console;
pub mod core;
pub mod digests;
pub mod drain;
pub mod engine;
pub mod error;
pub mod fasthash;
pub mod inspect;
pub mod limits;
pub mod meter;
pub mod park;
pub mod pool;
pub mod router;
pub mod serve;
pub mod session_log;
pub mod split;
pub mod stats;
pub mod tenants;
pub mod topology;

/// The settings layer, where the core's paths have always named it.
pub use gatehouse_settings::{config, rules, tls, tls_sessions};
