//! The console's `SHOW` tables of topology and pools: `POOLS`, `CLIENTS`,
//! `SERVERS` (each with the times it changed tenant), `BACKENDS` (with the
//! connections opened, switched between tenants and closed), `CLUSTERS`
//! and `ENDPOINTS`, from every core's
//! snapshot, client list (each client's cluster and backend user as it
//! logged in) and running settings.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::process::Listeners;
use crate::view::CoreView;
use gatehouse_core::console::{Cell, ColumnType, Table};

use super::{micros, secs, timestamp};

use ColumnType::{Integer as I, Real as R, Text as T};

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
        for c in core.clients() {
            // A console session has no pool.
            let Some(route) = &c.info.route else { continue };
            let row = rows
                .entry((route.cluster.to_string(), c.info.database(), route.user.to_string()))
                .or_default();
            match c.state {
                gatehouse_core::cancel::ClientState::Active => row.cl_active += 1,
                gatehouse_core::cancel::ClientState::Waiting => {
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
        ("tls", T),
        ("switches", I),
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
                s.tls.as_deref().map(str::to_owned).into(),
                s.switches.into(),
            ]);
        }
        for c in core.clients() {
            let Some((backend, pid)) = c.server else { continue };
            let route = c.info.route.as_ref();
            t.push(vec![
                core.engine_name().into(),
                route.map(|r| r.cluster.to_string()).into(),
                backend.into(),
                route.map(|r| r.user.to_string()).into(),
                c.info.database().into(),
                "active".into(),
                pid.into(),
                Cell::Null,
                Cell::Null,
                c.id.into(),
                c.server_tls.as_deref().map(str::to_owned).into(),
                Cell::Null,
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
        ("opened", I),
        ("switched", I),
        ("closed", I),
    ]);
    for core in cores {
        let s = core.snapshot();
        let connects = core.traffic().backends;
        for b in s.backends {
            let c = connects
                .iter()
                .find(|c| c.cluster == b.cluster && c.backend == b.backend);
            let count =
                |f: fn(&gatehouse_core::pool::BackendConnects) -> u64| c.map_or(Cell::from(0u64), |c| f(c).into());
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
                count(|c| c.opened),
                count(|c| c.switched),
                count(|c| c.closed),
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

fn engine_name(kind: gatehouse_settings::config::EngineKind) -> &'static str {
    match kind {
        gatehouse_settings::config::EngineKind::Postgres => "postgres",
        gatehouse_settings::config::EngineKind::Mysql => "mysql",
    }
}

pub fn endpoints(cores: &[Arc<dyn CoreView>], running: &dyn Listeners) -> Table {
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
