//! Sans-I/O MySQL / MariaDB client/server protocol: packet framing, length-encoded
//! values, the connection-phase handshake (both as server and as client), the
//! `mysql_native_password` / `caching_sha2_password` / `mysql_clear_password`
//! computations, OK/ERR/EOF packets, client commands, prepared-statement replies and
//! a tracker that follows the server's reply to one command until it is complete.
//!
//! Nothing here does I/O: every function works on `&[u8]` / [`bytes`] buffers so the
//! crate can be property-tested and fuzzed.
//!
//! References: MySQL Source Code Documentation, "Client/Server Protocol"
//! (<https://dev.mysql.com/doc/dev/mysql-server/latest/PAGE_PROTOCOL.html>) and
//! MariaDB Knowledge Base, "Clients & Communication Protocol".
//!
//! # Capabilities the tracker assumes are *not* negotiated
//! The proxy controls the capability flags on both sides and must clear these,
//! because they change reply shapes this crate does not follow:
//! `CLIENT_COMPRESS` / `CLIENT_ZSTD_COMPRESSION_ALGORITHM` (compressed framing),
//! `CLIENT_OPTIONAL_RESULTSET_METADATA`, `MARIADB_CLIENT_CACHE_METADATA`
//! (column definitions may be omitted), `CLIENT_QUERY_ATTRIBUTES` (changes the
//! COM_QUERY / COM_STMT_EXECUTE layouts) and `MARIADB_CLIENT_COM_MULTI`.
#![forbid(unsafe_code)]

pub mod auth;
pub mod command;
pub mod consts;
pub mod error;
pub mod errors;
pub mod frame;
pub mod handshake;
pub mod lenenc;
pub mod packets;
pub mod prepare;
pub mod response;
pub mod results;
pub mod session_track;
pub mod stmt_execute;

pub use error::DecodeError;
pub use frame::{FrameError, Packet};
