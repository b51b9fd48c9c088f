//! The MySQL/MariaDB engine: handshake v10 and authentication towards
//! clients, authenticated backend connections, and transaction pooling
//! driven by the SERVER_STATUS_IN_TRANS flag of the server's replies.

pub mod backend;
pub mod io;

use gatehouse_proto_mysql::consts::*;

/// Capabilities used on both sides of a relayed connection: backend
/// connections are opened with exactly these, and clients get at most
/// these, so replies pass through unchanged. Left out on purpose:
/// `CLIENT_DEPRECATE_EOF` (every reply keeps its EOF packets, whichever
/// client reads it), `CLIENT_SESSION_TRACK`, `CLIENT_LOCAL_FILES` (LOAD DATA
/// LOCAL is refused), compression, query attributes and MariaDB's
/// extended capabilities.
pub const RELAY_CAPS: u32 = CLIENT_LONG_PASSWORD
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA;
