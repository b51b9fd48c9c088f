//! Protocol constants: capability flags (MySQL and the MariaDB extended set),
//! server status flags, command bytes, cursor and option values, charsets and the
//! auth plugin names. Error numbers live in [`crate::errors`].
//!
//! References: MySQL "Capabilities Flags" (`include/mysql_com.h`), "SERVER_STATUS_*",
//! "Text Protocol" command list; MariaDB "Connection" (extended capabilities).

// ---- Capability flags (lower and upper 16 bits of the 32-bit word) ----

/// MySQL: new, more secure passwords. MariaDB reads the same bit as `CLIENT_MYSQL`:
/// when a *server* clears it, the handshake filler carries the MariaDB extended
/// capabilities (see [`MARIADB_CLIENT_PROGRESS`] and friends).
pub const CLIENT_LONG_PASSWORD: u32 = 1;
/// MariaDB name of [`CLIENT_LONG_PASSWORD`].
pub const CLIENT_MYSQL: u32 = CLIENT_LONG_PASSWORD;
/// Return the number of found (matched) rows instead of changed rows.
pub const CLIENT_FOUND_ROWS: u32 = 1 << 1;
/// Get all column flags.
pub const CLIENT_LONG_FLAG: u32 = 1 << 2;
/// A database name may be given in the handshake response.
pub const CLIENT_CONNECT_WITH_DB: u32 = 1 << 3;
/// Don't allow `database.table.column` (deprecated).
pub const CLIENT_NO_SCHEMA: u32 = 1 << 4;
/// zlib compressed protocol.
pub const CLIENT_COMPRESS: u32 = 1 << 5;
/// ODBC client (no effect).
pub const CLIENT_ODBC: u32 = 1 << 6;
/// `LOAD DATA LOCAL INFILE` may be used.
pub const CLIENT_LOCAL_FILES: u32 = 1 << 7;
/// Ignore spaces before `(`.
pub const CLIENT_IGNORE_SPACE: u32 = 1 << 8;
/// The 4.1 protocol (required by this crate).
pub const CLIENT_PROTOCOL_41: u32 = 1 << 9;
/// `wait_timeout` is `interactive_timeout` for this session.
pub const CLIENT_INTERACTIVE: u32 = 1 << 10;
/// Switch to TLS after the SSLRequest.
pub const CLIENT_SSL: u32 = 1 << 11;
/// Do not issue SIGPIPE (client-side only).
pub const CLIENT_IGNORE_SIGPIPE: u32 = 1 << 12;
/// Status flags in EOF/OK packets.
pub const CLIENT_TRANSACTIONS: u32 = 1 << 13;
/// Unused (was the 4.1 protocol flag).
pub const CLIENT_RESERVED: u32 = 1 << 14;
/// 4.1 authentication (1-byte length-prefixed auth response).
pub const CLIENT_SECURE_CONNECTION: u32 = 1 << 15;
/// Several statements per COM_QUERY.
pub const CLIENT_MULTI_STATEMENTS: u32 = 1 << 16;
/// Multiple result sets (needed for CALL).
pub const CLIENT_MULTI_RESULTS: u32 = 1 << 17;
/// Multiple result sets for COM_STMT_EXECUTE.
pub const CLIENT_PS_MULTI_RESULTS: u32 = 1 << 18;
/// Pluggable authentication (plugin names in the handshake).
pub const CLIENT_PLUGIN_AUTH: u32 = 1 << 19;
/// Connection attributes in the handshake response.
pub const CLIENT_CONNECT_ATTRS: u32 = 1 << 20;
/// Length-encoded auth response in the handshake response.
pub const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
/// The client can handle expired passwords.
pub const CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS: u32 = 1 << 22;
/// Session state changes in OK packets.
pub const CLIENT_SESSION_TRACK: u32 = 1 << 23;
/// OK packets (0xFE header) replace EOF packets.
pub const CLIENT_DEPRECATE_EOF: u32 = 1 << 24;
/// MySQL 8: result set metadata may be omitted.
pub const CLIENT_OPTIONAL_RESULTSET_METADATA: u32 = 1 << 25;
/// MySQL 8: zstd compressed protocol.
pub const CLIENT_ZSTD_COMPRESSION_ALGORITHM: u32 = 1 << 26;
/// MySQL 8: query attributes in COM_QUERY / COM_STMT_EXECUTE.
pub const CLIENT_QUERY_ATTRIBUTES: u32 = 1 << 27;
/// MySQL 8: multi-factor authentication.
pub const CLIENT_MULTI_FACTOR_AUTHENTICATION: u32 = 1 << 28;
/// Reserved for extending the capability word.
pub const CLIENT_CAPABILITY_EXTENSION: u32 = 1 << 29;
/// Verify the server certificate (client-side only).
pub const CLIENT_SSL_VERIFY_SERVER_CERT: u32 = 1 << 30;
/// Don't reset options after a failed connect (client-side only).
pub const CLIENT_REMEMBER_OPTIONS: u32 = 1 << 31;

// ---- MariaDB extended capabilities ----
// Bits of the 32-bit extended word carried in the last 4 bytes of the handshake
// fillers when `CLIENT_MYSQL` is clear. MariaDB's own headers define them as the
// same bits shifted left by 32 in a 64-bit capability word.

/// Progress reports (ERR packets with code 0xFFFF) during long statements.
pub const MARIADB_CLIENT_PROGRESS: u32 = 1 << 0;
/// COM_MULTI (obsolete).
pub const MARIADB_CLIENT_COM_MULTI: u32 = 1 << 1;
/// COM_STMT_BULK_EXECUTE.
pub const MARIADB_CLIENT_STMT_BULK_OPERATIONS: u32 = 1 << 2;
/// Extended type information in column definitions.
pub const MARIADB_CLIENT_EXTENDED_TYPE_INFO: u32 = 1 << 3;
/// Result set metadata may be skipped when unchanged.
pub const MARIADB_CLIENT_CACHE_METADATA: u32 = 1 << 4;
/// MariaDB 11.5: unit results for bulk operations.
pub const MARIADB_CLIENT_BULK_UNIT_RESULTS: u32 = 1 << 5;

// ---- Server status flags (OK / EOF packets) ----

/// A transaction is active.
pub const SERVER_STATUS_IN_TRANS: u16 = 0x0001;
/// Autocommit mode is on.
pub const SERVER_STATUS_AUTOCOMMIT: u16 = 0x0002;
/// Another result set follows.
pub const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
pub const SERVER_QUERY_NO_GOOD_INDEX_USED: u16 = 0x0010;
pub const SERVER_QUERY_NO_INDEX_USED: u16 = 0x0020;
/// COM_STMT_EXECUTE opened a read-only cursor; rows come with COM_STMT_FETCH.
pub const SERVER_STATUS_CURSOR_EXISTS: u16 = 0x0040;
/// The last row of the cursor was sent.
pub const SERVER_STATUS_LAST_ROW_SENT: u16 = 0x0080;
/// The current database was dropped.
pub const SERVER_STATUS_DB_DROPPED: u16 = 0x0100;
/// `NO_BACKSLASH_ESCAPES` SQL mode is on.
pub const SERVER_STATUS_NO_BACKSLASH_ESCAPES: u16 = 0x0200;
/// A prepared statement's metadata changed (re-prepare).
pub const SERVER_STATUS_METADATA_CHANGED: u16 = 0x0400;
pub const SERVER_QUERY_WAS_SLOW: u16 = 0x0800;
/// The result set holds OUT parameters of a procedure.
pub const SERVER_PS_OUT_PARAMS: u16 = 0x1000;
/// The active transaction is read-only.
pub const SERVER_STATUS_IN_TRANS_READONLY: u16 = 0x2000;
/// The OK packet carries session state changes.
pub const SERVER_SESSION_STATE_CHANGED: u16 = 0x4000;

// ---- Command bytes (first byte of a client packet in the command phase) ----

pub const COM_SLEEP: u8 = 0x00;
pub const COM_QUIT: u8 = 0x01;
pub const COM_INIT_DB: u8 = 0x02;
pub const COM_QUERY: u8 = 0x03;
pub const COM_FIELD_LIST: u8 = 0x04;
pub const COM_CREATE_DB: u8 = 0x05;
pub const COM_DROP_DB: u8 = 0x06;
pub const COM_REFRESH: u8 = 0x07;
pub const COM_SHUTDOWN: u8 = 0x08;
pub const COM_STATISTICS: u8 = 0x09;
pub const COM_PROCESS_INFO: u8 = 0x0a;
pub const COM_CONNECT: u8 = 0x0b;
pub const COM_PROCESS_KILL: u8 = 0x0c;
pub const COM_DEBUG: u8 = 0x0d;
pub const COM_PING: u8 = 0x0e;
pub const COM_TIME: u8 = 0x0f;
pub const COM_DELAYED_INSERT: u8 = 0x10;
pub const COM_CHANGE_USER: u8 = 0x11;
pub const COM_BINLOG_DUMP: u8 = 0x12;
pub const COM_TABLE_DUMP: u8 = 0x13;
pub const COM_CONNECT_OUT: u8 = 0x14;
pub const COM_REGISTER_SLAVE: u8 = 0x15;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
pub const COM_STMT_CLOSE: u8 = 0x19;
pub const COM_STMT_RESET: u8 = 0x1a;
pub const COM_SET_OPTION: u8 = 0x1b;
pub const COM_STMT_FETCH: u8 = 0x1c;
pub const COM_DAEMON: u8 = 0x1d;
pub const COM_BINLOG_DUMP_GTID: u8 = 0x1e;
pub const COM_RESET_CONNECTION: u8 = 0x1f;
/// MySQL 8 clone plugin.
pub const COM_CLONE: u8 = 0x20;
/// MariaDB: array binding (needs `MARIADB_CLIENT_STMT_BULK_OPERATIONS`).
pub const COM_STMT_BULK_EXECUTE: u8 = 0xfa;
/// MariaDB: several commands in one packet (obsolete).
pub const COM_MULTI: u8 = 0xfe;

// ---- COM_STMT_EXECUTE flags and COM_SET_OPTION values ----

pub const CURSOR_TYPE_NO_CURSOR: u8 = 0x00;
pub const CURSOR_TYPE_READ_ONLY: u8 = 0x01;
pub const CURSOR_TYPE_FOR_UPDATE: u8 = 0x02;
pub const CURSOR_TYPE_SCROLLABLE: u8 = 0x04;
/// MySQL 8 (with `CLIENT_QUERY_ATTRIBUTES`): a parameter count precedes the block.
pub const PARAMETER_COUNT_AVAILABLE: u8 = 0x08;
pub const MYSQL_OPTION_MULTI_STATEMENTS_ON: u16 = 0;
pub const MYSQL_OPTION_MULTI_STATEMENTS_OFF: u16 = 1;

// ---- Character sets (collation ids) ----

pub const CHARSET_LATIN1_SWEDISH_CI: u8 = 8;
pub const CHARSET_UTF8MB3_GENERAL_CI: u8 = 33;
pub const CHARSET_UTF8MB4_GENERAL_CI: u8 = 45;
pub const CHARSET_BINARY: u8 = 63;
/// MySQL 8 default (`utf8mb4_0900_ai_ci`); only the low byte fits the handshake.
pub const CHARSET_UTF8MB4_0900_AI_CI: u8 = 255;

// ---- Auth plugin names ----

pub const MYSQL_NATIVE_PASSWORD: &str = "mysql_native_password";
pub const CACHING_SHA2_PASSWORD: &str = "caching_sha2_password";
pub const MYSQL_CLEAR_PASSWORD: &str = "mysql_clear_password";
pub const SHA256_PASSWORD: &str = "sha256_password";
/// MariaDB ed25519 plugin (not implemented here; listed to recognise it).
pub const CLIENT_ED25519: &str = "client_ed25519";

/// Server version prefix MariaDB 10+ sends so that old clients still parse a
/// 5.x version; the real version follows it.
pub const MARIADB_VERSION_PREFIX: &str = "5.5.5-";

/// Default `max_packet_size` a client announces (16 MiB, as libmysqlclient does).
pub const DEFAULT_MAX_PACKET_SIZE: u32 = 16 * 1024 * 1024;
