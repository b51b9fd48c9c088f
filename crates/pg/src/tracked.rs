//! Session parameters that move with the client in transaction pooling:
//! their values are read back from the backend after a transaction that
//! changed them, and replayed (with `set_config`, which parses list values
//! such as `search_path` the way the server's own config does) on whichever
//! backend connection serves the client next, only where they differ.

use super::backend::PgConn;
use gatehouse_core::error::ProxyError;

/// The tracked parameters, lower-case as the statement classifier reports
/// names. Everything else a client SETs pins its session.
pub const TRACKED: &[&str] = &[
    "search_path",
    "application_name",
    "timezone",
    "datestyle",
    "intervalstyle",
    "client_encoding",
    "extra_float_digits",
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "standard_conforming_strings",
    "default_transaction_isolation",
    "default_transaction_read_only",
];

pub fn is_tracked(name: &str) -> bool {
    TRACKED.contains(&name)
}

/// The position of `name` in [`TRACKED`].
pub fn index(name: &str) -> Option<usize> {
    TRACKED.iter().position(|n| *n == name)
}

const _: () = assert!(TRACKED.len() <= 16, "tracked parameters are u16 bits");

/// Every tracked parameter, as a set of [`index`] bits.
pub const ALL: u16 = (1 << TRACKED.len()) - 1;

/// `read` (what a connection has now) with the parameters in `reset` (bits
/// by [`index`]) taken from `baseline` instead: what a session whose
/// transaction reset them has, once they are back at its own defaults.
pub fn with_baseline(read: &Values, baseline: &Values, reset: u16) -> Values {
    let values = read
        .iter()
        .zip(baseline.iter())
        .enumerate()
        .map(|(i, (now, base))| {
            if reset & (1 << i) != 0 {
                base.clone()
            } else {
                now.clone()
            }
        })
        .collect();
    std::sync::Arc::new(values)
}

/// ParameterStatus messages, into `out`, for the parameters the server
/// reports (those in `reported`, the connection's ParameterStatus list)
/// whose value goes from `from` (what the client was last told) to `to`:
/// a value the proxy set, not the client, reaches the client as the
/// server's own change would.
pub fn announce(reported: &[(String, String)], from: &Values, to: &Values, out: &mut bytes::BytesMut) {
    for ((name, old), new) in TRACKED.iter().zip(from.iter()).zip(to.iter()) {
        if old == new {
            continue;
        }
        if let Some((server_name, _)) = reported.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            gatehouse_proto_pg::messages::put_parameter_status(out, server_name, new);
        }
    }
}

/// Values of [`TRACKED`], in that order (a connection holds them, so the
/// type is the backend's).
pub use crate::backend::TrackedValues as Values;

fn literal(v: &str) -> String {
    format!("'{}'", v.replace('\'', "''"))
}

/// Reads the tracked parameters' current values from `conn`.
pub async fn read(conn: &mut PgConn) -> Result<Values, ProxyError> {
    let columns: Vec<String> = TRACKED
        .iter()
        .map(|n| format!("current_setting({})", literal(n)))
        .collect();
    let rows = conn.control_query(&format!("SELECT {}", columns.join(", "))).await?;
    let row = rows.into_iter().next().unwrap_or_default();
    let values: Vec<String> = row
        .into_iter()
        .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default())
        .collect();
    if values.len() != TRACKED.len() {
        return Err(gatehouse_core::error::ProxyError::new(
            gatehouse_core::error::Condition::BackendUnavailable,
            "could not read session parameters",
        ));
    }
    Ok(std::sync::Arc::new(values))
}

/// Whether `conn` is known to have `wanted` already (nothing to apply).
pub fn in_step(conn: &PgConn, wanted: &Values) -> bool {
    conn.tracked
        .as_ref()
        .is_some_and(|current| std::sync::Arc::ptr_eq(current, wanted) || current == wanted)
}

/// Makes `conn`'s tracked parameters equal to `wanted`, sending only the
/// differences; records the result on the connection.
pub async fn apply(conn: &mut PgConn, wanted: &Values) -> Result<(), ProxyError> {
    let current = match conn.tracked.take() {
        Some(v) => v,
        None => read(conn).await?,
    };
    if std::sync::Arc::ptr_eq(&current, wanted) || current == *wanted {
        conn.tracked = Some(current);
        return Ok(());
    }
    let calls: Vec<String> = TRACKED
        .iter()
        .zip(wanted.iter().zip(current.iter()))
        .filter(|(_, (w, c))| w != c)
        .map(|(n, (w, _))| format!("set_config({}, {}, false)", literal(n), literal(w)))
        .collect();
    if !calls.is_empty() {
        conn.control_query(&format!("SELECT {}", calls.join(", "))).await?;
    }
    conn.tracked = Some(wanted.clone());
    Ok(())
}
