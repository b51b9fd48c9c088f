//! The console's `SHOW` tables, from every core's snapshot and client
//! list. Column names follow PgBouncer's where it shows the same thing
//! (`cl_active`, `cl_waiting`, `sv_active`, `sv_idle`, `maxwait`,
//! `maxwait_us`, `pool_mode`, `connect_time`, `remote_pid`, `tls`); what
//! PgBouncer does not have (engines, clusters, backends, pins) has names
//! of its own. Times are seconds unless the name says `_us`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::admin::view::CoreView;
use crate::console::{Cell, ColumnType, Table};
use crate::endpoints::Endpoints;
use crate::reload::Reloader;

use ColumnType::{Integer as I, Real as R, Text as T};

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

/// What a client's endpoint routes to, and its backend user.
struct Routing {
    cluster: BTreeMap<String, String>,
    user: BTreeMap<String, String>,
}

fn routing(core: &dyn CoreView) -> Routing {
    let s = core.settings_now();
    Routing {
        cluster: s
            .endpoints
            .iter()
            .map(|e| (e.name.clone(), e.cluster.name.clone()))
            .collect(),
        user: s
            .tenants
            .iter()
            .map(|(n, t)| (n.clone(), t.secret.user.clone()))
            .collect(),
    }
}

#[derive(Default)]
struct PoolRow {
    backends: usize,
    sv_active: usize,
    sv_idle: usize,
    sv_open: usize,
    cl_active: usize,
    cl_waiting: usize,
    maxwait: Duration,
}

pub fn pools(cores: &[Arc<dyn CoreView>]) -> Table {
    let mut t = Table::new(&[
        ("engine", T),
        ("cluster", T),
        ("database", T),
        ("user", T),
        ("backends", I),
        ("cl_active", I),
        ("cl_waiting", I),
        ("sv_active", I),
        ("sv_idle", I),
        ("sv_open", I),
        ("pool_size", I),
        ("maxwait", I),
        ("maxwait_us", I),
    ]);
    for core in cores {
        let snapshot = core.snapshot();
        let settings = core.settings_now();
        let mut rows: BTreeMap<(String, String, String), PoolRow> = BTreeMap::new();
        for p in &snapshot.pools {
            let row = rows
                .entry((p.cluster.clone(), p.database.clone(), p.user.clone()))
                .or_default();
            row.backends += 1;
            row.sv_active += p.leased;
            row.sv_idle += p.idle;
            row.sv_open += p.open;
        }
        let routing = routing(core.as_ref());
        for c in core.clients() {
            if c.info.console {
                continue;
            }
            let Some(cluster) = routing.cluster.get(c.info.endpoint.as_ref()) else {
                continue;
            };
            let user = routing.user.get(c.info.tenant.as_ref()).cloned().unwrap_or_default();
            let row = rows.entry((cluster.clone(), c.info.database(), user)).or_default();
            match c.state {
                crate::cancel::ClientState::Active => row.cl_active += 1,
                crate::cancel::ClientState::Waiting => {
                    row.cl_waiting += 1;
                    row.maxwait = row.maxwait.max(c.wait.unwrap_or_default());
                }
                _ => {}
            }
        }
        for ((cluster, database, user), r) in rows {
            let size = settings
                .clusters
                .iter()
                .find(|c| c.name == cluster)
                .map_or(Cell::Null, |c| Cell::from(c.pool_size));
            t.push(vec![
                core.engine_name().into(),
                cluster.into(),
                database.into(),
                user.into(),
                r.backends.into(),
                r.cl_active.into(),
                r.cl_waiting.into(),
                r.sv_active.into(),
                r.sv_idle.into(),
                r.sv_open.into(),
                size,
                r.maxwait.as_secs().into(),
                micros(r.maxwait - Duration::from_secs(r.maxwait.as_secs())),
            ]);
        }
    }
    t
}

pub fn clients(cores: &[Arc<dyn CoreView>]) -> Table {
    let mut t = Table::new(&[
        ("id", I),
        ("engine", T),
        ("user", T),
        ("database", T),
        ("endpoint", T),
        ("state", T),
        ("addr", T),
        ("tls", I),
        ("connect_time", T),
        ("age", R),
        ("wait", I),
        ("wait_us", I),
        ("pinned", T),
        ("server", T),
        ("remote_pid", I),
        ("console", I),
    ]);
    for core in cores {
        for c in core.clients() {
            let wait = c.wait.unwrap_or_default();
            let (server, pid) = match &c.server {
                Some((addr, pid)) => (Cell::from(addr.as_str()), Cell::from(*pid)),
                None => (Cell::Null, Cell::Null),
            };
            t.push(vec![
                c.id.into(),
                core.engine_name().into(),
                c.info.tenant.as_ref().into(),
                c.info.database().into(),
                c.info.endpoint.as_ref().into(),
                c.state.name().into(),
                c.info.addr.map(|a| a.to_string()).into(),
                c.info.tls.into(),
                timestamp(c.info.connected_at),
                secs(c.info.since.elapsed()),
                wait.as_secs().into(),
                micros(wait - Duration::from_secs(wait.as_secs())),
                c.info.pin().map(str::to_owned).into(),
                server,
                pid,
                c.info.console.into(),
            ]);
        }
    }
    t
}

pub fn servers(cores: &[Arc<dyn CoreView>]) -> Table {
    let mut t = Table::new(&[
        ("engine", T),
        ("cluster", T),
        ("backend", T),
        ("user", T),
        ("database", T),
        ("state", T),
        ("remote_pid", I),
        ("age", R),
        ("idle", R),
        ("client_id", I),
    ]);
    for core in cores {
        for s in core.idle_servers() {
            t.push(vec![
                core.engine_name().into(),
                s.cluster.into(),
                s.backend.into(),
                s.user.into(),
                s.database.into(),
                "idle".into(),
                s.server_id.into(),
                secs(s.age),
                secs(s.idle_for),
                Cell::Null,
            ]);
        }
        let routing = routing(core.as_ref());
        for c in core.clients() {
            let Some((backend, pid)) = c.server else { continue };
            t.push(vec![
                core.engine_name().into(),
                routing.cluster.get(c.info.endpoint.as_ref()).cloned().into(),
                backend.into(),
                routing.user.get(c.info.tenant.as_ref()).cloned().into(),
                c.info.database().into(),
                "active".into(),
                pid.into(),
                Cell::Null,
                Cell::Null,
                c.id.into(),
            ]);
        }
    }
    t
}

pub fn backends(cores: &[Arc<dyn CoreView>]) -> Table {
    let mut t = Table::new(&[
        ("engine", T),
        ("cluster", T),
        ("backend", T),
        ("role", T),
        ("up", I),
        ("elected_writer", I),
        ("fenced", I),
        ("lag", R),
        ("position", T),
        ("leases", I),
        ("routed", I),
        ("max_connections", I),
        ("last_error", T),
    ]);
    for core in cores {
        let s = core.snapshot();
        for b in s.backends {
            t.push(vec![
                s.engine.into(),
                b.cluster.into(),
                b.backend.into(),
                b.role.into(),
                b.up.into(),
                b.elected.into(),
                b.fenced.into(),
                b.lag_seconds.map_or(Cell::Null, Cell::Real),
                b.position.into(),
                b.leases.into(),
                b.routed.into(),
                b.max_connections.map_or(Cell::Null, Cell::from),
                b.last_error.into(),
            ]);
        }
    }
    t
}

pub fn clusters(cores: &[Arc<dyn CoreView>]) -> Table {
    let mut t = Table::new(&[
        ("engine", T),
        ("cluster", T),
        ("writer", T),
        ("waiting", I),
        ("failovers", I),
        ("last_failover_without_writer", R),
    ]);
    for core in cores {
        let s = core.snapshot();
        for c in s.clusters {
            let done: Vec<_> = c.failovers.iter().filter(|f| f.elected.is_some()).collect();
            t.push(vec![
                s.engine.into(),
                c.cluster.into(),
                c.writer.into(),
                c.waiting.into(),
                done.len().into(),
                done.last()
                    .and_then(|f| f.seconds_without_writer)
                    .map_or(Cell::Null, Cell::Real),
            ]);
        }
    }
    t
}

fn engine_name(kind: crate::config::EngineKind) -> &'static str {
    match kind {
        crate::config::EngineKind::Postgres => "postgres",
        crate::config::EngineKind::Mysql => "mysql",
    }
}

pub fn endpoints(cores: &[Arc<dyn CoreView>], running: &Endpoints) -> Table {
    let mut t = Table::new(&[
        ("endpoint", T),
        ("engine", T),
        ("cluster", T),
        ("role", T),
        ("listen", T),
        ("pool_mode", T),
        ("cl_connected", I),
        ("max_client_connections", I),
        ("paused", I),
        ("disabled", I),
    ]);
    let load = running.load();
    for core in cores {
        let settings = core.settings_now();
        let ready = core.readiness();
        for e in settings
            .endpoints
            .iter()
            .filter(|e| engine_name(e.cluster.engine) == core.engine_name())
        {
            let connected = load.iter().find(|l| l.name == e.name).map_or(0, |l| l.connected);
            let paused = ready.iter().any(|r| r.endpoint == e.name && r.why == "paused");
            t.push(vec![
                e.name.as_str().into(),
                core.engine_name().into(),
                e.cluster.name.as_str().into(),
                format!("{:?}", e.role).to_lowercase().into(),
                running
                    .local_addr(&e.name)
                    .map_or_else(|| e.listen.to_string(), |a| a.to_string())
                    .into(),
                format!("{:?}", e.pool_mode).to_lowercase().into(),
                connected.into(),
                e.max_client_connections.into(),
                paused.into(),
                core.is_disabled(&e.name).into(),
            ]);
        }
    }
    t
}

/// Microseconds in `seconds`, as PgBouncer's `total_*_time` columns.
fn total_us(seconds: f64) -> Cell {
    Cell::from((seconds * 1e6).round().max(0.0) as u64)
}

/// The mean of a histogram in microseconds; NULL with no sample.
fn mean_us(h: &crate::meter::HistogramSnapshot) -> Cell {
    if h.count == 0 {
        return Cell::Null;
    }
    total_us(h.sum_seconds / h.count as f64)
}

/// PgBouncer's `SHOW STATS` columns, per endpoint (the times from the
/// latency histograms: zero with `[stats] histograms = false`), then per
/// tenant (transactions and queries; tenants counted while `[stats]
/// tenant_series` is above 0).
pub fn stats(cores: &[Arc<dyn CoreView>]) -> Table {
    let mut t = Table::new(&[
        ("engine", T),
        ("scope", T),
        ("name", T),
        ("total_xact_count", I),
        ("total_query_count", I),
        ("total_received", I),
        ("total_sent", I),
        ("total_query_time", I),
        ("total_wait_time", I),
        ("total_server_time", I),
        ("avg_query_time", I),
        ("avg_wait_time", I),
        ("total_logins", I),
        ("total_login_failures", I),
    ]);
    for core in cores {
        let traffic = core.traffic();
        for e in &traffic.endpoints {
            t.push(vec![
                traffic.engine.into(),
                "endpoint".into(),
                e.endpoint.as_str().into(),
                e.transactions.into(),
                e.statements.into(),
                e.bytes_received.into(),
                e.bytes_sent.into(),
                total_us(e.statement.sum_seconds),
                total_us(e.lease_wait.sum_seconds),
                total_us(e.response.sum_seconds),
                mean_us(&e.statement),
                mean_us(&e.lease_wait),
                (e.logins_plain + e.logins_tls).into(),
                e.login_failures.values().sum::<u64>().into(),
            ]);
        }
        for tenant in &traffic.tenants {
            t.push(vec![
                traffic.engine.into(),
                "tenant".into(),
                tenant.tenant.as_str().into(),
                tenant.transactions.into(),
                tenant.statements.into(),
            ]);
        }
    }
    t
}

pub fn totals(cores: &[Arc<dyn CoreView>], reloader: &Reloader) -> Table {
    let mut t = Table::new(&[("engine", T), ("stat", T), ("value", I)]);
    let (applied, refused) = reloader.counts();
    for core in cores {
        let s = core.snapshot();
        let mut row = |stat: String, value: u64| t.push(vec![s.engine.into(), stat.into(), value.into()]);
        row("clients_accepted".into(), s.accepted_connections);
        row("clients_now".into(), core.clients().len() as u64);
        for (reason, n) in &s.pinned_sessions {
            row(format!("pinned.{reason}"), *n);
        }
        for e in &s.errors {
            row(format!("errors.{}.{}", e.kind, e.condition), e.count);
        }
    }
    t.push(vec!["".into(), "reloads.applied".into(), applied.into()]);
    t.push(vec!["".into(), "reloads.refused".into(), refused.into()]);
    t
}

pub fn digests(cores: &[Arc<dyn CoreView>]) -> Table {
    let mut t = Table::new(&[
        ("engine", T),
        ("digest", T),
        ("calls", I),
        ("errors", I),
        ("rows", I),
        ("total_us", I),
        ("mean_us", I),
        ("p99_us", I),
        ("max_us", I),
        ("lease_wait_total_us", I),
        ("tenants", T),
        ("text", T),
    ]);
    for core in cores {
        for d in core.digests(None).unwrap_or_default() {
            t.push(vec![
                core.engine_name().into(),
                d.id.into(),
                d.calls.into(),
                d.errors.into(),
                d.rows.into(),
                d.total_us.into(),
                d.mean_us.into(),
                d.p99_us.into(),
                d.max_us.into(),
                d.lease_wait_total_us.into(),
                d.tenants.join(",").into(),
                d.text.into(),
            ]);
        }
    }
    t
}

pub fn config(cores: &[Arc<dyn CoreView>]) -> Table {
    let mut t = Table::new(&[("key", T), ("value", T), ("default", T), ("changeable", I)]);
    let Some(core) = cores.first() else { return t };
    let s = core.settings_now();
    let p = &s.proxy;
    let dur = |d: Duration| format!("{}ms", d.as_millis());
    let rows: Vec<(&str, &str, String)> = vec![
        ("[proxy]", "login_timeout", dur(p.login_timeout)),
        ("[proxy]", "client_message_timeout", dur(p.client_message_timeout)),
        ("[proxy]", "shutdown_timeout", dur(p.shutdown_timeout)),
        (
            "[proxy]",
            "park_idle_after",
            p.park_idle_after.map_or_else(|| "off".to_owned(), dur),
        ),
        ("[proxy]", "max_message_bytes", p.max_message_bytes.to_string()),
        ("[proxy]", "log_filter", p.log_filter.clone()),
        ("[proxy]", "log_format", format!("{:?}", p.log_format).to_lowercase()),
        ("[proxy]", "worker_threads", p.worker_threads.to_string()),
        (
            "[proxy]",
            "auth_failures_per_minute_per_address",
            p.auth_failures_per_minute_per_address.to_string(),
        ),
        (
            "[proxy]",
            "auth_failures_per_minute_per_user",
            p.auth_failures_per_minute_per_user.to_string(),
        ),
        (
            "[admin]",
            "listen",
            s.admin
                .as_ref()
                .map_or_else(|| "off".to_owned(), |a| a.listen.to_string()),
        ),
        ("[digests]", "enabled", s.digests.enabled.to_string()),
        ("[digests]", "max_digests", s.digests.max_digests.to_string()),
        ("[console]", "database", s.console.database.clone()),
        ("[console]", "admin_users", s.console.admin_users.join(",")),
        ("[console]", "monitor_users", s.console.monitor_users.join(",")),
    ];
    for (section, key, value) in rows {
        let documented = crate::config::reference::SECTIONS
            .iter()
            .find(|sec| sec.name == section)
            .and_then(|sec| sec.keys.iter().find(|k| k.name == key));
        let default = documented.and_then(|k| k.default).map(str::to_owned);
        let restart = documented.is_some_and(|k| k.about.contains("takes a restart"));
        t.push(vec![
            format!("{}.{key}", section.trim_matches(['[', ']'])).into(),
            value.into(),
            default.into(),
            (!restart).into(),
        ]);
    }
    let counts = [
        ("clusters", s.clusters.len()),
        ("endpoints", s.endpoints.len()),
        ("tenants", s.tenants.len()),
        ("secrets", s.secrets.len()),
        ("rules", s.rules.counters().len()),
    ];
    for (what, n) in counts {
        t.push(vec![
            format!("count.{what}").into(),
            n.to_string().into(),
            Cell::Null,
            true.into(),
        ]);
    }
    t
}

/// What `SELECT @@name` answers on the console: the few variables MySQL
/// clients read as they connect; any other is NULL.
pub fn variables(names: &[String]) -> Table {
    let columns: Vec<(&'static str, ColumnType)> = names
        .iter()
        .map(|n| match n.as_str() {
            "version_comment" => ("@@version_comment", T),
            "version" => ("@@version", T),
            "max_allowed_packet" => ("@@max_allowed_packet", I),
            "wait_timeout" => ("@@wait_timeout", I),
            "socket" => ("@@socket", T),
            _ => ("@@variable", T),
        })
        .collect();
    let row = names
        .iter()
        .map(|n| match n.as_str() {
            "version_comment" => Cell::from("Gatehouse admin console"),
            "version" => Cell::Text(format!("{}-gatehouse-console", env!("CARGO_PKG_VERSION"))),
            "max_allowed_packet" => Cell::Integer(i64::from(gatehouse_proto_mysql::consts::DEFAULT_MAX_PACKET_SIZE)),
            "wait_timeout" => Cell::Integer(28_800),
            _ => Cell::Null,
        })
        .collect();
    let mut t = Table::new(&columns);
    t.push(row);
    t
}
