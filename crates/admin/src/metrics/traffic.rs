//! What sessions and pools counted ([`gatehouse_core::meter`]), the metrics an SRE
//! alerts on (after a managed proxy's set, in Prometheus' conventions):
//! client logins that succeeded (with or without TLS) and failed (by
//! reason), backend connections opened, failed, switched between tenants
//! and closed, idle and borrowed, the cap on them and the time leases spent
//! waiting, opening and switching; per endpoint, transactions, statements, bytes each way
//! and the latency histograms; and the busiest tenants' transactions and
//! statements (the top `[stats] tenant_series`, the rest as `other`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::gauge;
use super::histogram::Histograms;
use super::labels::{
    EngineEndpointLabels, LoginFailureLabels, LoginLabels, ServerLabels, ServerPhaseLabels, ServerStateLabels,
    TenantLabels,
};
use crate::state::AdminState;
use crate::view::{CoreSnapshot, Traffic};
use gatehouse_core::pool::Phase;

/// Registers the metrics of what sessions and pools counted; `snapshots`
/// are the cores' (for their pools), in the order of `state.cores`.
pub(super) fn register(state: &AdminState, snapshots: &[CoreSnapshot], registry: &mut Registry) {
    let traffic: Vec<Traffic> = state.cores.iter().map(|c| c.traffic()).collect();
    register_logins(&traffic, registry);
    register_backend_connections(&traffic, snapshots, registry);
    register_endpoints(&traffic, registry);
    let top = state.cores.first().map_or(0, |c| c.settings_now().stats.tenant_series);
    register_tenants(&traffic, top, registry);
}

fn endpoint_labels(engine: &str, endpoint: &str) -> EngineEndpointLabels {
    EngineEndpointLabels {
        engine: engine.to_owned(),
        endpoint: endpoint.to_owned(),
    }
}

fn register_logins(traffic: &[Traffic], registry: &mut Registry) {
    let succeeded = Family::<LoginLabels, Counter>::default();
    let failed = Family::<LoginFailureLabels, Counter>::default();
    for t in traffic {
        for e in &t.endpoints {
            for (tls, n) in [("false", e.logins_plain), ("true", e.logins_tls)] {
                succeeded
                    .get_or_create(&LoginLabels {
                        engine: t.engine.to_owned(),
                        endpoint: e.endpoint.clone(),
                        tls: tls.to_owned(),
                    })
                    .inc_by(n);
            }
            for (reason, n) in &e.login_failures {
                failed
                    .get_or_create(&LoginFailureLabels {
                        engine: t.engine.to_owned(),
                        endpoint: e.endpoint.clone(),
                        reason: (*reason).to_owned(),
                    })
                    .inc_by(*n);
            }
        }
    }
    registry.register(
        "client_connections_setup_succeeded",
        "Client logins that succeeded (authenticated and admitted), with or without TLS",
        succeeded,
    );
    registry.register(
        "client_connections_setup_failed",
        "Client logins that failed, by the condition of their error (invalid_password, not_allowed, \
         too_many_connections, login_timeout, protocol_violation, ...)",
        failed,
    );
}

fn register_backend_connections(traffic: &[Traffic], snapshots: &[CoreSnapshot], registry: &mut Registry) {
    let opened = Family::<ServerLabels, Counter>::default();
    let failed = Family::<ServerLabels, Counter>::default();
    let switched = Family::<ServerLabels, Counter>::default();
    let switch_failed = Family::<ServerLabels, Counter>::default();
    let closed = Family::<ServerLabels, Counter>::default();
    let phase_seconds = Family::<ServerPhaseLabels, Counter<f64>>::default();
    let phases = Family::<ServerPhaseLabels, Counter>::default();
    let cap = Family::<ServerLabels, Gauge>::default();
    let server = |engine: &str, cluster: &str, backend: &str| ServerLabels {
        engine: engine.to_owned(),
        cluster: cluster.to_owned(),
        backend: backend.to_owned(),
    };
    for t in traffic {
        for b in &t.backends {
            let labels = server(t.engine, &b.cluster, &b.backend);
            opened.get_or_create(&labels).inc_by(b.opened);
            failed.get_or_create(&labels).inc_by(b.failed);
            switched.get_or_create(&labels).inc_by(b.switched);
            switch_failed.get_or_create(&labels).inc_by(b.switch_failed);
            closed.get_or_create(&labels).inc_by(b.closed);
            for (phase, (took, count)) in Phase::ALL.iter().zip(b.phases) {
                let labels = ServerPhaseLabels {
                    engine: t.engine.to_owned(),
                    cluster: b.cluster.clone(),
                    backend: b.backend.clone(),
                    phase: phase.name().to_owned(),
                };
                phase_seconds.get_or_create(&labels).inc_by(took.as_secs_f64());
                phases.get_or_create(&labels).inc_by(count);
            }
            if let Some(c) = b.cap {
                cap.get_or_create(&labels).set(gauge(c));
            }
        }
    }
    let connections = Family::<ServerStateLabels, Gauge>::default();
    for s in snapshots {
        for p in &s.pools {
            for (state, n) in [("idle", p.idle), ("borrowed", p.leased)] {
                connections
                    .get_or_create(&ServerStateLabels {
                        engine: s.engine.to_owned(),
                        cluster: p.cluster.clone(),
                        backend: p.backend.clone(),
                        state: state.to_owned(),
                    })
                    .inc_by(gauge(n));
            }
        }
    }
    registry.register(
        "database_connections_setup_succeeded",
        "Backend connections the pools opened",
        opened,
    );
    registry.register(
        "database_connections_setup_failed",
        "Backend connections the pools failed to open (connect, authentication or init_query)",
        failed,
    );
    registry.register(
        "database_connections_switched",
        "Backend connections moved from one tenant's pool to another's (MySQL: COM_CHANGE_USER, or a reset \
         and COM_INIT_DB for the same backend user) instead of being closed and opened again",
        switched,
    );
    registry.register(
        "database_connections_switch_failed",
        "Backend connections that could not be moved to another tenant's pool (they were closed)",
        switch_failed,
    );
    registry.register(
        "database_connections_closed",
        "Backend connections the pools closed (expired, retired, over the idle cap, failed, or given up for another pool)",
        closed,
    );
    registry.register(
        "database_lease_phase_seconds",
        "Time leases spent getting a connection beyond their pool's idle ones, by phase: place (waiting \
         for a place under the backend's cap or a connection handed over), open (connect, TLS, \
         authentication, init_query), switch (moving another pool's connection to this one)",
        phase_seconds,
    );
    registry.register(
        "database_lease_phases",
        "Leases that went through each phase of database_lease_phase_seconds",
        phases,
    );
    registry.register(
        "database_connections",
        "Backend connections open now, idle or borrowed, summed over a backend's pools",
        connections,
    );
    registry.register(
        "database_connections_max_allowed",
        "The most connections the proxy opens to a backend (max_connections_percent of the server's \
         max_connections), once the server's limit is known",
        cap,
    );
}

fn register_endpoints(traffic: &[Traffic], registry: &mut Registry) {
    let transactions = Family::<EngineEndpointLabels, Counter>::default();
    let queries = Family::<EngineEndpointLabels, Counter>::default();
    let received = Family::<EngineEndpointLabels, Counter>::default();
    let sent = Family::<EngineEndpointLabels, Counter>::default();
    let mut lease_wait = Histograms::default();
    let mut query = Histograms::default();
    let mut response = Histograms::default();
    for t in traffic {
        for e in &t.endpoints {
            let labels = endpoint_labels(t.engine, &e.endpoint);
            transactions.get_or_create(&labels).inc_by(e.transactions);
            queries.get_or_create(&labels).inc_by(e.statements);
            received.get_or_create(&labels).inc_by(e.bytes_received);
            sent.get_or_create(&labels).inc_by(e.bytes_sent);
            lease_wait.0.push((labels.clone(), e.lease_wait.clone()));
            query.0.push((labels.clone(), e.statement.clone()));
            response.0.push((labels, e.response.clone()));
        }
    }
    registry.register(
        "transactions",
        "Transactions clients ran (a statement outside a transaction is one)",
        transactions,
    );
    registry.register(
        "queries",
        "Client statements sent to a backend (a simple Query or Execute, a COM_QUERY or COM_STMT_EXECUTE)",
        queries,
    );
    registry.register(
        "client_bytes_received",
        "Bytes read from clients (after TLS), login included",
        received,
    );
    registry.register(
        "client_bytes_sent",
        "Bytes written to clients (before TLS), login included",
        sent,
    );
    registry.register_with_unit(
        "lease_wait",
        "How long a transaction waited for a backend connection (with [stats] histograms)",
        Unit::Seconds,
        lease_wait,
    );
    registry.register_with_unit(
        "query",
        "A statement's time through the proxy: its request read to the last byte of its answer written \
         (with [stats] histograms)",
        Unit::Seconds,
        query,
    );
    registry.register_with_unit(
        "database_response",
        "A statement's time on its backend: sent to its answer complete (with [stats] histograms)",
        Unit::Seconds,
        response,
    );
}

fn register_tenants(traffic: &[Traffic], top: usize, registry: &mut Registry) {
    let transactions = Family::<TenantLabels, Counter>::default();
    let queries = Family::<TenantLabels, Counter>::default();
    let all = traffic.iter().flat_map(|t| t.tenants.iter().cloned());
    for t in gatehouse_core::meter::top_tenants(all, top) {
        let labels = TenantLabels { tenant: t.tenant };
        transactions.get_or_create(&labels).inc_by(t.transactions);
        queries.get_or_create(&labels).inc_by(t.statements);
    }
    registry.register(
        "tenant_transactions",
        "Transactions of the tenants with the most ([stats] tenant_series of them); the tenant other sums the rest",
        transactions,
    );
    registry.register(
        "tenant_queries",
        "Statements of the same tenants; the tenant other sums the rest",
        queries,
    );
}
