//! Server error numbers the proxy sends or reacts to, each with its SQLSTATE, as
//! named [`MyError`] constants. Build the ERR packet with
//! [`crate::packets::ErrPacket::from_error`].
//!
//! Reference: MySQL "Server Error Message Reference" and MariaDB "MariaDB Error
//! Codes" (numbers below 1900 are shared; numbers were checked with MariaDB
//! 10.11's `perror`). [`ER_SECURE_TRANSPORT_REQUIRED`] is a MySQL-only number.

/// A server error number with its SQLSTATE and symbolic name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MyError {
    pub code: u16,
    /// Five ASCII characters.
    pub sqlstate: &'static str,
    /// The `ER_*` symbol, for logs and metrics labels.
    pub name: &'static str,
}

impl MyError {
    /// The SQLSTATE as the 5 bytes an ERR packet carries.
    pub fn sqlstate_bytes(&self) -> [u8; 5] {
        let mut out = *b"HY000";
        if self.sqlstate.len() == 5 {
            out.copy_from_slice(self.sqlstate.as_bytes());
        }
        out
    }
}

macro_rules! errors {
    ($($(#[$m:meta])* $name:ident = $code:literal, $state:literal;)*) => {
        $($(#[$m])* pub const $name: MyError =
            MyError { code: $code, sqlstate: $state, name: stringify!($name) };)*
        /// Every constant of this module, for lookups by code.
        pub const ALL: &[MyError] = &[$($name),*];
    };
}

errors! {
    /// Too many connections.
    ER_CON_COUNT_ERROR = 1040, "08004";
    /// Out of memory / resources.
    ER_OUT_OF_RESOURCES = 1041, "HY000";
    /// Bad handshake.
    ER_HANDSHAKE_ERROR = 1043, "08S01";
    /// Access denied for user to database.
    ER_DBACCESS_DENIED_ERROR = 1044, "42000";
    /// Access denied for user (using password: YES/NO).
    ER_ACCESS_DENIED_ERROR = 1045, "28000";
    /// No database selected.
    ER_NO_DB_ERROR = 1046, "3D000";
    /// Unknown command.
    ER_UNKNOWN_COM_ERROR = 1047, "08S01";
    /// Unknown database.
    ER_BAD_DB_ERROR = 1049, "42000";
    /// Server shutdown in progress.
    ER_SERVER_SHUTDOWN = 1053, "08S01";
    /// "You have an error in your SQL syntax".
    ER_PARSE_ERROR = 1064, "42000";
    /// "Query was empty".
    ER_EMPTY_QUERY = 1065, "42000";
    /// Unknown thread id (KILL of a connection that does not exist).
    ER_NO_SUCH_THREAD = 1094, "HY000";
    /// Unknown error.
    ER_UNKNOWN_ERROR = 1105, "HY000";
    /// "This version doesn't yet support ...".
    ER_NOT_SUPPORTED_YET = 1235, "42000";
    /// The used command is not allowed with this server version.
    ER_NOT_ALLOWED_COMMAND = 1148, "42000";
    /// Got a packet bigger than 'max_allowed_packet' bytes.
    ER_NET_PACKET_TOO_LARGE = 1153, "08S01";
    /// Got packets out of order.
    ER_NET_PACKETS_OUT_OF_ORDER = 1156, "08S01";
    /// Got an error reading communication packets.
    ER_NET_READ_ERROR = 1158, "08S01";
    /// Got timeout reading communication packets.
    ER_NET_READ_INTERRUPTED = 1159, "08S01";
    /// Got an error writing communication packets.
    ER_NET_ERROR_ON_WRITE = 1160, "08S01";
    /// Got timeout writing communication packets.
    ER_NET_WRITE_INTERRUPTED = 1161, "08S01";
    /// User already has more than 'max_user_connections' active connections.
    ER_TOO_MANY_USER_CONNECTIONS = 1203, "42000";
    /// Lock wait timeout exceeded.
    ER_LOCK_WAIT_TIMEOUT = 1205, "HY000";
    /// Deadlock found; the transaction was rolled back.
    ER_LOCK_DEADLOCK = 1213, "40001";
    /// User has exceeded a resource limit.
    ER_USER_LIMIT_REACHED = 1226, "42000";
    /// A command denied to a user on a table (what a proxy rule's block answers).
    ER_TABLEACCESS_DENIED_ERROR = 1142, "42000";
    /// Access denied; you need a privilege.
    ER_SPECIFIC_ACCESS_DENIED_ERROR = 1227, "42000";
    /// Unknown prepared statement handler.
    ER_UNKNOWN_STMT_HANDLER = 1243, "HY000";
    /// Client does not support the authentication protocol requested.
    ER_NOT_SUPPORTED_AUTH_MODE = 1251, "08004";
    /// The server is running with an option that prevents this statement
    /// (e.g. `--read-only`).
    ER_OPTION_PREVENTS_STATEMENT = 1290, "HY000";
    /// Query execution was interrupted.
    ER_QUERY_INTERRUPTED = 1317, "70100";
    /// Can't create more than max_prepared_stmt_count statements.
    ER_MAX_PREPARED_STMT_COUNT_REACHED = 1461, "42000";
    /// Prepared statement needs to be re-prepared.
    ER_NEED_REPREPARE = 1615, "HY000";
    /// Access denied (no password given).
    ER_ACCESS_DENIED_NO_PASSWORD_ERROR = 1698, "28000";
    /// Cannot execute statement in a READ ONLY transaction.
    ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION = 1792, "25006";
    /// Malformed communication packet.
    ER_MALFORMED_PACKET = 1835, "HY000";
    /// Connection was killed (MariaDB).
    ER_CONNECTION_KILLED = 1927, "70100";
    /// max_statement_time exceeded (MariaDB).
    ER_STATEMENT_TIMEOUT = 1969, "70100";
    /// Connections using insecure transport are prohibited (MySQL 5.7+ only).
    ER_SECURE_TRANSPORT_REQUIRED = 3159, "HY000";
}

/// Looks up a known error by number.
pub fn by_code(code: u16) -> Option<MyError> {
    ALL.iter().copied().find(|e| e.code == code)
}
