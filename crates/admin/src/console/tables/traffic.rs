//! The console's traffic and configuration tables: `SHOW STATS`,
//! `TOTALS`, `DIGESTS` and `CONFIG`, and the `SELECT @@name` variables
//! MySQL clients read as they connect.

use std::sync::Arc;
use std::time::Duration;

use crate::process::Reload;
use crate::view::CoreView;
use gatehouse_core::console::{Cell, ColumnType, Table};

use ColumnType::{Integer as I, Text as T};

/// Microseconds in `seconds`, as PgBouncer's `total_*_time` columns.
fn total_us(seconds: f64) -> Cell {
    Cell::from((seconds * 1e6).round().max(0.0) as u64)
}

/// The mean of a histogram in microseconds; NULL with no sample.
fn mean_us(h: &gatehouse_core::meter::HistogramSnapshot) -> Cell {
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

pub fn totals(cores: &[Arc<dyn CoreView>], reloader: &dyn Reload) -> Table {
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
        let documented = gatehouse_settings::config::reference::SECTIONS
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
