//! What differs between the running configuration and a reloaded one, by
//! the names the configuration file uses: for a reload's answer, and to
//! tell what a reload applies in place from what needs a restart.

use super::{ClusterSettings, EndpointSettings, Settings};

/// Collects the names of the settings that differ.
struct Diff(Vec<&'static str>);

impl Diff {
    fn check(&mut self, differs: bool, name: &'static str) {
        if differs {
            self.0.push(name);
        }
    }
}

/// The settings of a cluster that differ between `old` and `new`, other
/// than its backends (which a reload lists one by one).
pub fn cluster_changes(old: &ClusterSettings, new: &ClusterSettings) -> Vec<&'static str> {
    let mut d = Diff(Vec::new());
    d.check(old.engine != new.engine, "engine");
    d.check(
        old.monitor.as_ref().map(|s| &s.name) != new.monitor.as_ref().map(|s| &s.name),
        "monitor_secret",
    );
    d.check(
        old.health_check_interval != new.health_check_interval,
        "health_check_interval",
    );
    d.check(
        old.health_check_timeout != new.health_check_timeout,
        "health_check_timeout",
    );
    d.check(
        old.health_check_failures != new.health_check_failures,
        "health_check_failures",
    );
    d.check(
        old.health_check_successes != new.health_check_successes,
        "health_check_successes",
    );
    d.check(old.failover_hold != new.failover_hold, "failover_hold");
    d.check(old.switchover_command != new.switchover_command, "switchover_command");
    d.check(old.weights != new.weights, "weights");
    d.check(old.connect_timeout != new.connect_timeout, "connect_timeout");
    d.check(old.pool_size != new.pool_size, "pool.size");
    d.check(old.borrow_timeout != new.borrow_timeout, "pool.borrow_timeout");
    d.check(
        old.max_connections_percent != new.max_connections_percent,
        "pool.max_connections_percent",
    );
    d.check(old.max_idle_percent != new.max_idle_percent, "pool.max_idle_percent");
    d.check(old.init_query != new.init_query, "pool.init_query");
    d.check(old.server_lifetime != new.server_lifetime, "pool.server_lifetime");
    d.check(
        old.server_idle_timeout != new.server_idle_timeout,
        "pool.server_idle_timeout",
    );
    d.0
}

/// Whether an endpoint's settings differ in anything but its listen
/// address and its cluster's settings (a changed cluster is reported as
/// the cluster's change).
pub fn endpoint_changed(old: &EndpointSettings, new: &EndpointSettings) -> bool {
    !(old.cluster.name == new.cluster.name
        && old.cluster.engine == new.cluster.engine
        && old.role == new.role
        && old.pool_mode == new.pool_mode
        && old.max_client_connections == new.max_client_connections
        && old.idle_client_timeout == new.idle_client_timeout
        && old.max_replica_lag == new.max_replica_lag
        && old.reader_fallback == new.reader_fallback
        && old.read_your_writes == new.read_your_writes
        && old.read_only_functions == new.read_only_functions
        && old.pinning_filter == new.pinning_filter
        && old.require_tls == new.require_tls
        && old.client_auth == new.client_auth
        && old.allow_plaintext_tokens == new.allow_plaintext_tokens
        && old.mysql_default_auth == new.mysql_default_auth
        && old.tls.is_some() == new.tls.is_some()
        && old.mysql_rsa_key.is_some() == new.mysql_rsa_key.is_some())
}

/// Settings outside clusters and endpoints that a reload cannot apply
/// (the runtime, the parking lot, the log format, the admin listener and
/// the login-failure limiters are set up once, at start).
pub fn restart_changes(old: &Settings, new: &Settings) -> Vec<&'static str> {
    let (o, n) = (&old.proxy, &new.proxy);
    let mut d = Diff(Vec::new());
    d.check(o.worker_threads != n.worker_threads, "proxy.worker_threads");
    d.check(o.park_idle_after != n.park_idle_after, "proxy.park_idle_after");
    d.check(o.log_format != n.log_format, "proxy.log_format");
    d.check(o.upgrade_socket != n.upgrade_socket, "proxy.upgrade_socket");
    d.check(
        o.auth_failures_per_minute_per_address != n.auth_failures_per_minute_per_address,
        "proxy.auth_failures_per_minute_per_address",
    );
    d.check(
        o.auth_failures_per_minute_per_user != n.auth_failures_per_minute_per_user,
        "proxy.auth_failures_per_minute_per_user",
    );
    d.check(
        old.admin.as_ref().map(|a| a.listen) != new.admin.as_ref().map(|a| a.listen),
        "admin.listen",
    );
    d.check(
        old.admin
            .as_ref()
            .and_then(|a| a.token.as_ref().map(|t| t.as_str().to_owned()))
            != new
                .admin
                .as_ref()
                .and_then(|a| a.token.as_ref().map(|t| t.as_str().to_owned())),
        "admin.token",
    );
    d.0
}

/// What a reload changes in the query rules, the digest settings and
/// `[stats]`, all applied in place: `rules: 3 -> 4 (added "a"; changed "b")`,
/// `digests.enabled: false -> true`. Empty when nothing changed.
pub fn rules_changes(old: &Settings, new: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    let d = new.rules.diff(&old.rules);
    if !d.is_empty() {
        let mut parts = Vec::new();
        for (what, names) in [("added", &d.added), ("removed", &d.removed), ("changed", &d.changed)] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", name_list(names)));
            }
        }
        if d.reordered {
            parts.push("reordered".to_owned());
        }
        out.push(format!(
            "rules: {} -> {} ({})",
            old.rules.len(),
            new.rules.len(),
            parts.join("; ")
        ));
    }
    let (o, n) = (&old.digests, &new.digests);
    if o.enabled != n.enabled {
        out.push(format!("digests.enabled: {} -> {}", o.enabled, n.enabled));
    }
    if o.max_digests != n.max_digests {
        out.push(format!("digests.max_digests: {} -> {}", o.max_digests, n.max_digests));
    }
    let (o, n) = (&old.stats, &new.stats);
    if o.histograms != n.histograms {
        out.push(format!("stats.histograms: {} -> {}", o.histograms, n.histograms));
    }
    if o.tenant_series != n.tenant_series {
        out.push(format!(
            "stats.tenant_series: {} -> {}",
            o.tenant_series, n.tenant_series
        ));
    }
    out
}

/// `"a", "b", "c"`, the first few names of a long list and how many more.
fn name_list(names: &[std::sync::Arc<str>]) -> String {
    const SHOWN: usize = 5;
    let mut s = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    s
}
