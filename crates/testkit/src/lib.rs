//! Gatehouse testkit: starts real PostgreSQL (primary + streaming replicas)
//! and MariaDB (primary + GTID binlog replicas) servers on free loopback
//! ports under a directory, for integration tests and shell scripts.
//!
//! The public value types are `model.rs`'s; [`Cluster`] lives in
//! `cluster.rs`, engine specifics in `pg.rs` / `mysql.rs`, the
//! shell-sourceable `cluster.env` format in `env_file.rs`, the certificates
//! of a TLS-enabled cluster in `tls.rs`; `trials` runs a test binary's cases
//! against one such cluster set up once; `faults` is a TCP relay that
//! breaks the network between a proxy and a server on command; `testbed`
//! gives servers (and the proxy, the load generator) CPU budgets and a
//! latency of their own.

#![forbid(unsafe_code)]

mod cluster;
mod env_file;
pub mod faults;
pub mod http;
mod model;
mod mysql;
mod ops;
mod pg;
pub mod ports;
mod sys;
pub mod testbed;
mod tls;
pub mod trials;

pub use cluster::Cluster;
pub use model::{Engine, Options, Role, Server};
pub use tls::CLIENT_CN as TLS_CLIENT_CN;
