//! `GET /metrics`: the proxy's state in the OpenMetrics text format
//! (prometheus-client's encoder), built from fresh snapshots at each
//! scrape (so a scrape costs nothing between scrapes and nothing is kept
//! twice). Labels name pools, backends, endpoints, tenants and reasons;
//! never a password, token or secret value. This file: clients, pools,
//! backends, clusters, pins, errors and reloads; [`traffic`]: what
//! sessions and pools counted (logins, transactions, statements, bytes,
//! latency histograms, tenants, backend connections); [`digests`]: query
//! rules and digests; [`labels`] and [`histogram`]: their encoding.

mod digests;
mod histogram;
mod labels;
mod traffic;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use self::labels::{
    BackendLabels, ClusterLabels, EndpointLabels, EngineLabels, ErrorLabels, PinLabels, PoolLabels, ResultLabels,
    RoutedLabels,
};
use super::view::CoreSnapshot;
use crate::state::AdminState;

/// The content type of what [`render`] returns: the encoder writes
/// OpenMetrics 1.0 text (counters' `_total`, `# UNIT`, a final `# EOF`).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub(super) fn gauge(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The whole exposition text.
pub fn render(state: &AdminState) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::with_prefix("gatehouse");
    let clients = Family::<EndpointLabels, Gauge>::default();
    for e in state.endpoints.load() {
        clients
            .get_or_create(&EndpointLabels { endpoint: e.name })
            .set(gauge(e.connected));
    }
    let accepted = Family::<EngineLabels, Counter>::default();
    // One configuration, one tenant table for both engines: a gauge of
    // its own, not a series per engine that a sum would double.
    let tenants = Gauge::<i64>::default();
    let pools = Family::<EngineLabels, Gauge>::default();
    let pool_conns = Family::<PoolLabels, Gauge>::default();
    let backend_up = Family::<BackendLabels, Gauge>::default();
    let backend_leases = Family::<BackendLabels, Gauge>::default();
    let backend_routed = Family::<BackendLabels, Counter>::default();
    let backend_lag = Family::<BackendLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let backend_elected = Family::<BackendLabels, Gauge>::default();
    let waiting = Family::<ClusterLabels, Gauge>::default();
    let failovers = Family::<ClusterLabels, Counter>::default();
    let routed_why = Family::<RoutedLabels, Counter>::default();
    let without_writer = Family::<ClusterLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let pins = Family::<PinLabels, Counter>::default();
    let errors = Family::<ErrorLabels, Counter>::default();
    let snapshots: Vec<CoreSnapshot> = state.cores.iter().map(|c| c.snapshot()).collect();
    for s in &snapshots {
        let engine = EngineLabels {
            engine: s.engine.to_owned(),
        };
        accepted.get_or_create(&engine).inc_by(s.accepted_connections);
        // Every core holds the same table: the value is the same.
        tenants.set(gauge(s.tenants));
        pools.get_or_create(&engine).set(gauge(s.pools.len()));
        for p in &s.pools {
            for (state, n) in [("idle", p.idle), ("leased", p.leased)] {
                pool_conns
                    .get_or_create(&PoolLabels {
                        engine: s.engine.to_owned(),
                        cluster: p.cluster.clone(),
                        backend: p.backend.clone(),
                        user: p.user.clone(),
                        database: p.database.clone(),
                        state: state.to_owned(),
                    })
                    .set(gauge(n));
            }
        }
        for b in &s.backends {
            let labels = BackendLabels {
                engine: s.engine.to_owned(),
                cluster: b.cluster.clone(),
                backend: b.backend.clone(),
                role: b.role.to_owned(),
            };
            backend_up.get_or_create(&labels).set(i64::from(b.up));
            backend_elected.get_or_create(&labels).set(i64::from(b.elected));
            backend_leases.get_or_create(&labels).set(gauge(b.leases));
            backend_routed.get_or_create(&labels).inc_by(b.routed);
            if let Some(lag) = b.lag_seconds {
                backend_lag.get_or_create(&labels).set(lag);
            }
        }
        for c in &s.clusters {
            let labels = ClusterLabels {
                engine: s.engine.to_owned(),
                cluster: c.cluster.clone(),
            };
            waiting.get_or_create(&labels).set(gauge(c.waiting));
            for (reason, n) in &c.routed {
                routed_why
                    .get_or_create(&RoutedLabels {
                        engine: s.engine.to_owned(),
                        cluster: c.cluster.clone(),
                        reason: (*reason).to_owned(),
                    })
                    .inc_by(*n);
            }
            let done: Vec<_> = c.failovers.iter().filter(|f| f.elected.is_some()).collect();
            failovers.get_or_create(&labels).inc_by(done.len() as u64);
            if let Some(last) = done.last().and_then(|f| f.seconds_without_writer) {
                without_writer.get_or_create(&labels).set(last);
            }
        }
        for (reason, n) in &s.pinned_sessions {
            pins.get_or_create(&PinLabels {
                engine: s.engine.to_owned(),
                reason: (*reason).to_owned(),
            })
            .inc_by(*n);
        }
        for e in &s.errors {
            errors
                .get_or_create(&ErrorLabels {
                    engine: s.engine.to_owned(),
                    kind: e.kind.to_owned(),
                    condition: e.condition.to_owned(),
                })
                .inc_by(e.count);
        }
    }
    // Pinned now (a gauge), beside pinned since start (the counter above).
    let pinned_now = Family::<PinLabels, Gauge>::default();
    for core in &state.cores {
        for (reason, n) in core.pinned_now() {
            pinned_now
                .get_or_create(&PinLabels {
                    engine: core.engine_name().to_owned(),
                    reason: reason.to_owned(),
                })
                .set(gauge(n));
        }
    }
    let reloads = Family::<ResultLabels, Counter>::default();
    let (applied, refused) = state.reloader.counts();
    for (result, n) in [("applied", applied), ("refused", refused)] {
        reloads
            .get_or_create(&ResultLabels {
                result: result.to_owned(),
            })
            .inc_by(n);
    }
    registry.register("client_connections", "Client connections open, by endpoint", clients);
    registry.register(
        "client_connections_accepted",
        "Client connections accepted since start",
        accepted,
    );
    registry.register("tenants", "Tenants configured", tenants);
    registry.register("pools", "Backend connection pools open", pools);
    registry.register(
        "pool_connections",
        "Backend connections per pool, idle or leased",
        pool_conns,
    );
    registry.register("backend_up", "Whether a backend passes its health checks", backend_up);
    registry.register(
        "backend_elected_writer",
        "Whether the backend is its cluster's elected writer",
        backend_elected,
    );
    registry.register("backend_leases", "Leases outstanding on a backend now", backend_leases);
    registry.register(
        "backend_routed",
        "Leases routed to a backend since start",
        backend_routed,
    );
    registry.register(
        "backend_replication_lag_seconds",
        "A replica's replication lag, as its last probe reported it",
        backend_lag,
    );
    registry.register(
        "cluster_waiting_sessions",
        "Sessions waiting for a backend to route to (no writer during a failover)",
        waiting,
    );
    registry.register("cluster_failovers", "Writer changes after a writer was lost", failovers);
    registry.register(
        "routed",
        "Leases routed, by why the router chose their backend (writer, least_busy_reader, writer_fallback, writer_read_your_writes, caught_up_reader, writer_as_reader, rule_*)",
        routed_why,
    );
    registry.register(
        "cluster_last_failover_seconds",
        "How long the cluster's last failover went without a writer",
        without_writer,
    );
    registry.register(
        "pinned_sessions",
        "Client sessions pinned to a backend connection, by reason",
        pins,
    );
    registry.register(
        "sessions_pinned",
        "Client sessions pinned to a backend connection now, by reason",
        pinned_now,
    );
    registry.register(
        "client_errors",
        "Errors that ended a client session or login, by kind and condition",
        errors,
    );
    registry.register("reloads", "Configuration reloads, applied or refused", reloads);
    let parked = Gauge::<i64>::default();
    parked.set(gauge(state.parking.as_ref().map_or(0, |lot| lot.len())));
    registry.register(
        "parked_sessions",
        "Idle client sessions parked (no task, no socket registration)",
        parked,
    );
    traffic::register(state, &snapshots, &mut registry);
    digests::register(state, &mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}
