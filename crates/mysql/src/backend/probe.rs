//! The health probe of a MySQL / MariaDB backend: its role (`read_only`,
//! `innodb_read_only`), connection limit, replication delay and positions,
//! and on request its collation table, over the monitor connection kept
//! from the last probe when it is still good.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use zeroize::Zeroizing;

use super::{
    ER_UNKNOWN_SYSTEM_VARIABLE, MyConn, QueryResult, connect_inner, io_error, malformed, position, query_error,
};
use gatehouse_core::backend_tls::BackendTls;
use gatehouse_core::engine::Probe;
use gatehouse_core::error::ProxyError;

/// Role probe: `read_only` (set on replicas; `super_read_only` implies it on
/// MySQL), InnoDB's own read-only mode, and the connection limit.
const PROBE_SQL: &str = "SELECT @@global.read_only, @@global.max_connections, @@global.innodb_read_only";
/// A replica's replication status (one row per source; none on a primary).
const REPLICA_STATUS_SQL: &str = "SHOW SLAVE STATUS";

/// `Seconds_Behind_Master` and the GTID position the replica has received
/// (MariaDB's `Gtid_IO_Pos`; MySQL's `Executed_Gtid_Set`), shown by the
/// admin API, from a `SHOW SLAVE STATUS` reply. What it has *applied*
/// (compared for read-your-writes) is asked apart: `SHOW SLAVE STATUS`
/// has no `Gtid_Slave_Pos` (only `SHOW ALL SLAVES STATUS` does). A NULL delay (replication stopped or broken: how stale
/// the replica is, nobody knows) reads as [`REPLICATION_STOPPED_LAG`].
fn replica_status(status: &QueryResult) -> (Option<Duration>, Option<String>) {
    let Some(row) = status.rows.first() else {
        return (None, None);
    };
    let column = |name: &str| {
        status
            .columns
            .iter()
            .position(|c| c.eq_ignore_ascii_case(name))
            .and_then(|i| row.get(i).cloned().flatten())
    };
    let lag = match column("Seconds_Behind_Master") {
        Some(v) => v.parse().ok().map(Duration::from_secs),
        None => Some(REPLICATION_STOPPED_LAG),
    };
    let position = column("Gtid_IO_Pos").or_else(|| column("Executed_Gtid_Set"));
    (lag, position)
}

/// The lag reported for a replica whose replication is stopped (NULL
/// `Seconds_Behind_Master`): far behind, as far as `max_replica_lag` knows.
pub const REPLICATION_STOPPED_LAG: Duration = Duration::from_secs(365 * 24 * 3600);

/// The probe for servers without InnoDB.
const PROBE_SQL_BASIC: &str = "SELECT @@global.read_only, @@global.max_connections";

/// Asks the server its role and connection limit: writable unless
/// `read_only` (replicas) or `innodb_read_only` is on.
pub async fn probe(
    addr: &str,
    user: &str,
    password: &[u8],
    timeout: Duration,
    tls: &BackendTls,
) -> Result<Probe, ProxyError> {
    let (result, conn) = probe_with(addr, user, password, timeout, tls, false, None).await;
    if let Some(c) = conn {
        c.close().await;
    }
    result.map(|(p, _)| p)
}

/// Collation id → (character set, collation name), as the server names them.
pub type CollationTable = HashMap<u8, (String, String)>;

/// The server's one-byte collation ids (what a handshake can carry), by
/// character set and name.
const COLLATIONS_SQL: &str =
    "SELECT ID, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLLATIONS WHERE ID < 256";

/// What a probe learned, and the server's collation table when asked.
pub type ProbeResult = Result<(Probe, Option<CollationTable>), ProxyError>;

/// [`probe`] over `cached` (the monitor connection kept from the last probe)
/// or a new connection, and with `collations` the server's collation table
/// too. The connection comes back for next time when it is still good, so a
/// health check does not cost the server a login every interval.
pub async fn probe_with(
    addr: &str,
    user: &str,
    password: &[u8],
    timeout: Duration,
    tls: &BackendTls,
    collations: bool,
    cached: Option<MyConn>,
) -> (ProbeResult, Option<MyConn>) {
    let work = async {
        let mut conn = match cached.map(|mut c| (c.cancel.tls == *tls && c.is_usable(), c)) {
            Some((true, c)) => c,
            _ => {
                let password = Arc::new(Zeroizing::new(password.to_vec()));
                connect_inner(addr, user, password, None, 0, tls).await?
            }
        };
        let result = match conn.query_raw(PROBE_SQL).await? {
            Ok(r) => r,
            Err(e) if e.code == ER_UNKNOWN_SYSTEM_VARIABLE => conn.query(PROBE_SQL_BASIC).await?,
            Err(e) => return Err(query_error(addr, &e)),
        };
        // A replica's delay and position; a primary has no replica status.
        let (lag, position) = match conn.query_raw(REPLICA_STATUS_SQL).await? {
            Ok(status) => replica_status(&status),
            Err(_) => (None, None),
        };
        let replayed = if lag.is_some() || position.is_some() {
            position::replay_position(&mut conn).await?
        } else {
            None
        };
        let table = if collations {
            let rows = conn.query(COLLATIONS_SQL).await?.rows;
            let table: CollationTable = rows
                .into_iter()
                .filter_map(|r| match r.as_slice() {
                    [Some(id), Some(charset), Some(name)] => Some((id.parse().ok()?, (charset.clone(), name.clone()))),
                    _ => None,
                })
                .collect();
            Some(table).filter(|t| !t.is_empty())
        } else {
            None
        };
        let row = result
            .rows
            .first()
            .ok_or_else(|| malformed(addr, "probe returned no row"))?;
        let flag = |i: usize| matches!(row.get(i), Some(Some(v)) if v == "1" || v.eq_ignore_ascii_case("ON"));
        let max_connections = row.get(1).and_then(|v| v.as_deref()).and_then(|v| v.parse().ok());
        let probe = Probe {
            writable: !(flag(0) || flag(2)),
            max_connections,
            lag,
            replayed,
            position,
        };
        Ok(((probe, table), conn))
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok((learned, conn))) => (Ok(learned), Some(conn)),
        Ok(Err(e)) => (Err(e), None),
        Err(_) => (Err(io_error(addr, "probe timed out")), None),
    }
}
