//! The capability flags of a relayed MySQL connection: what backend
//! connections are opened with and clients are offered ([`RELAY_CAPS`]),
//! the session capabilities a client's login may add ([`SESSION_CAPS`],
//! [`SESSION_EXT_CAPS`]), and how a pool's startup parameters name them.

use gatehouse_proto_mysql::consts::*;

/// Capabilities used on both sides of a relayed connection: backend
/// connections are opened with exactly these, and clients get at most
/// these, so replies pass through unchanged. `CLIENT_LOCAL_FILES`: every
/// backend connection may be asked for a file (`LOAD DATA LOCAL INFILE`);
/// the request reaches only clients that offered it too, the others'
/// server gets an empty file ([`relay`](crate::relay)). Left out on
/// purpose: `CLIENT_DEPRECATE_EOF` (every reply keeps its EOF packets,
/// whichever client reads it), `CLIENT_SESSION_TRACK`, compression, query
/// attributes and MariaDB's extended capabilities (but see
/// [`SESSION_EXT_CAPS`]).
pub const RELAY_CAPS: u32 = CLIENT_LONG_PASSWORD
    | CLIENT_LOCAL_FILES
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

/// Capabilities that change what the server does for the session, which
/// only a connection's handshake can ask for: `CLIENT_FOUND_ROWS` (an
/// UPDATE's affected rows count the rows matched, as Connector/J and
/// MariaDB Connector/J ask by default), `CLIENT_IGNORE_SPACE` (the
/// session's `sql_mode` gets `IGNORE_SPACE`: the `mysql` client's `-i`)
/// and `CLIENT_INTERACTIVE` (`wait_timeout` is `interactive_timeout`).
/// Clients are offered them; a client that asks for any leases from the
/// pool of backend connections opened with the same ones
/// ([`session_caps_startup`], `session::pool_for_caps`). Where a backend's share
/// is full and only connections of another kind are idle, one of them is
/// closed and its place goes to the waiting lease (`pool::idle`).
pub const SESSION_CAPS: u32 = CLIENT_FOUND_ROWS | CLIENT_IGNORE_SPACE | CLIENT_INTERACTIVE;

/// MariaDB's extended capabilities that change what the server sends the
/// session: `MARIADB_CLIENT_EXTENDED_TYPE_INFO` (column definitions name a
/// column's data type, such as `json`, and format). Offered to clients once
/// a backend was seen offering them; carried as [`SESSION_CAPS`] are.
pub const SESSION_EXT_CAPS: u32 = MARIADB_CLIENT_EXTENDED_TYPE_INFO;

/// The [`gatehouse_core::pool::PoolKey::startup`] entry naming the session
/// capabilities backend connections are opened with.
const CAPS_STARTUP_KEY: &str = "client_flags";

/// A session's capabilities that backend connections must be opened with,
/// as MariaDB writes all its capabilities: one 64-bit word, the extended
/// ones in the upper half.
pub fn session_word(caps: u32, ext_caps: u32) -> u64 {
    u64::from(caps & SESSION_CAPS) | (u64::from(ext_caps & SESSION_EXT_CAPS) << 32)
}

/// The session capabilities `word` ([`session_word`]) as a pool's startup
/// parameters: none for a client that asked for none (the shared pool),
/// else the pool of connections opened with exactly these.
pub fn session_caps_startup(word: u64) -> Vec<(String, String)> {
    if word == 0 {
        return Vec::new();
    }
    vec![(CAPS_STARTUP_KEY.to_owned(), format!("{word:#x}"))]
}

/// The session capabilities a pool's startup parameters name (the inverse
/// of [`session_caps_startup`]); anything else there is ignored.
pub(crate) fn startup_caps(startup: &[(String, String)]) -> u64 {
    let all = session_word(SESSION_CAPS, SESSION_EXT_CAPS);
    startup
        .iter()
        .filter(|(k, _)| k == CAPS_STARTUP_KEY)
        .filter_map(|(_, v)| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .fold(0, |word, c| word | (c & all))
}
