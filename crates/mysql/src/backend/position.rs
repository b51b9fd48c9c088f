//! Replication positions read on a backend connection, for read-your-writes
//! on split endpoints: the GTID a writer connection last wrote
//! (`@@last_gtid`) and the GTIDs a replica has applied (`@@gtid_slave_pos`).

use super::{ER_UNKNOWN_SYSTEM_VARIABLE, MyConn, query_error};
use gatehouse_core::engine::position::Position;
use gatehouse_core::error::ProxyError;

/// The GTID of the last transaction this connection wrote to the binary
/// log (MariaDB; empty on a connection that wrote nothing yet).
const WRITE_POSITION_SQL: &str = "SELECT @@last_gtid";

/// [`gatehouse_core::engine::Engine::write_position`]: the connection's last GTID
/// (`None` on servers without `@@last_gtid`, such as MySQL).
pub async fn write_position(conn: &mut MyConn) -> Result<Option<Position>, ProxyError> {
    gtids_of(conn, WRITE_POSITION_SQL).await
}

/// The GTIDs a replica has applied (MariaDB).
const REPLAY_POSITION_SQL: &str = "SELECT @@gtid_slave_pos";

/// [`gatehouse_core::engine::Engine::replay_position`]: `@@gtid_slave_pos` (`None`
/// on servers without it, such as MySQL).
pub async fn replay_position(conn: &mut MyConn) -> Result<Option<Position>, ProxyError> {
    gtids_of(conn, REPLAY_POSITION_SQL).await
}

/// The GTID list the variable `sql` selects; `None` when the server does
/// not know the variable.
async fn gtids_of(conn: &mut MyConn, sql: &str) -> Result<Option<Position>, ProxyError> {
    match conn.query_raw(sql).await? {
        Ok(r) => Ok(r
            .rows
            .first()
            .and_then(|row| row.first().cloned().flatten())
            .and_then(|v| Position::parse_gtid(&v))),
        Err(e) if e.code == ER_UNKNOWN_SYSTEM_VARIABLE => Ok(None),
        Err(e) => Err(query_error(&conn.addr.clone(), &e)),
    }
}
