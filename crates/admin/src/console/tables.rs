//! The console's `SHOW` tables, from every core's snapshot and client
//! list. Column names follow PgBouncer's where it shows the same thing
//! (`cl_active`, `cl_waiting`, `sv_active`, `sv_idle`, `maxwait`,
//! `maxwait_us`, `pool_mode`, `connect_time`, `remote_pid`, `tls`); what
//! PgBouncer does not have (engines, clusters, backends, pins) has names
//! of its own. Times are seconds unless the name says `_us`.
//!
//! The tables of topology and pools are in [`topology`], those of traffic
//! and configuration in [`traffic`]; the help, the version and the cells
//! of times they share are here.

mod topology;
mod traffic;

use std::time::{Duration, SystemTime};

use gatehouse_core::console::{Cell, ColumnType, Table};

pub use topology::{backends, clients, clusters, endpoints, pools, servers};
pub use traffic::{config, digests, stats, totals, variables};

use ColumnType::Text as T;

fn secs(d: Duration) -> Cell {
    Cell::Real(d.as_secs_f64())
}

fn micros(d: Duration) -> Cell {
    Cell::from(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A wall-clock time as `YYYY-MM-DD HH:MM:SS` UTC (as PgBouncer shows
/// `connect_time`).
fn timestamp(t: SystemTime) -> Cell {
    let s = t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (s / 86_400, s % 86_400);
    // Civil from days (Howard Hinnant's algorithm), for 1970 onwards.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    Cell::Text(format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}

const COMMANDS: [(&str, &str); 19] = [
    ("SHOW HELP", "this list"),
    ("SHOW VERSION", "the proxy's version"),
    (
        "SHOW POOLS",
        "per cluster, database and backend user: clients active and waiting, server connections",
    ),
    (
        "SHOW CLIENTS",
        "every logged-in client: tenant, endpoint, address, state, pin, its backend now",
    ),
    (
        "SHOW SERVERS",
        "every backend connection: idle in its pool, or lent to a client",
    ),
    (
        "SHOW BACKENDS",
        "every backend: role, health, last probe error, lag, leases",
    ),
    ("SHOW CLUSTERS", "every cluster: writer, waiting sessions, failovers"),
    ("SHOW ENDPOINTS", "every endpoint: clients, limit, paused, disabled"),
    (
        "SHOW STATS",
        "per endpoint and tenant: transactions, queries, bytes, query, wait and server times",
    ),
    ("SHOW TOTALS", "counters per engine: connections, errors, pins, reloads"),
    (
        "SHOW DIGESTS",
        "per-digest statistics, heaviest first (with [digests] enabled)",
    ),
    ("SHOW CONFIG", "the running configuration's settings"),
    (
        "PAUSE [CLUSTER | ENDPOINT] [name]",
        "new transactions wait (all clusters without a name)",
    ),
    ("RESUME [CLUSTER | ENDPOINT] [name]", "they go on"),
    (
        "DISABLE [ENDPOINT] name / ENABLE",
        "refuse new logins on an endpoint / take them again",
    ),
    (
        "DRAIN cluster backend / UNDRAIN",
        "no new leases on a backend / lease again",
    ),
    ("SWITCHOVER cluster backend", "make the backend the cluster's writer"),
    ("RELOAD", "read the configuration file again"),
    ("KILL id", "end a client's session (the id SHOW CLIENTS lists)"),
];

pub fn help() -> Table {
    let mut t = Table::new(&[("command", T), ("what", T)]);
    for (c, w) in COMMANDS {
        t.push(vec![c.into(), w.into()]);
    }
    t
}

pub fn version() -> Table {
    let mut t = Table::new(&[("version", T)]);
    t.push(vec![format!("Gatehouse {}", env!("CARGO_PKG_VERSION")).into()]);
    t
}
