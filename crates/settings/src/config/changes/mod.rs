//! What differs between the running configuration and a reloaded one, by
//! the names the configuration file uses: for a reload's answer, and to
//! tell what a reload applies in place from what needs a restart. Clusters
//! and rules here; endpoints in [`endpoint`], the process-wide sections in
//! [`process`], tenants and secrets in [`credentials`].

mod credentials;
mod endpoint;
mod process;

pub use credentials::credential_changes;
pub use endpoint::endpoint_changes;
pub use process::{Change, Takes, process_changes};

use super::{ClusterSettings, Settings};

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
    d.check(old.backend_tls != new.backend_tls, "backend_tls");
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

/// What a reload changes in the query rules and the digest settings, both
/// applied in place: `rules: 3 -> 4 (added "a"; changed "b")`,
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
fn name_list<S: AsRef<str>>(names: &[S]) -> String {
    first_few(names.iter().map(|n| format!("\"{}\"", n.as_ref())).collect())
}

/// The first few items of a long list, and how many more.
fn first_few(items: Vec<String>) -> String {
    const SHOWN: usize = 5;
    let mut s = items.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > SHOWN {
        s.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    s
}

/// `value` as an answer shows it: an absent option as `none`, a present
/// one without its `Some(…)`.
fn shown(value: &impl std::fmt::Debug) -> String {
    let s = format!("{value:?}");
    if s == "None" {
        return "none".to_owned();
    }
    match s.strip_prefix("Some(").and_then(|v| v.strip_suffix(')')) {
        Some(inner) => inner.to_owned(),
        None => s,
    }
}

/// `name: old -> new` when the two differ.
fn value_change<T: PartialEq + std::fmt::Debug>(name: &str, old: &T, new: &T) -> Option<String> {
    (old != new).then(|| format!("{name}: {} -> {}", shown(old), shown(new)))
}
