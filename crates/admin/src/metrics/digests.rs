//! Query rules' hits, and the heaviest digests' calls, errors and backend
//! time, in `/metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::labels::{DigestLabels, RuleLabels};
use crate::state::AdminState;

/// Digests exported per engine (the heaviest): the admin API lists them all.
const DIGESTS_IN_METRICS: usize = 50;

/// Query rules' hits, and the heaviest digests' calls, errors and backend time.
pub(super) fn register(state: &AdminState, registry: &mut Registry) {
    let hits = Family::<RuleLabels, Counter>::default();
    if let Some(core) = state.cores.first() {
        for r in core.settings_now().rules.counters() {
            hits.get_or_create(&RuleLabels { rule: r.name }).inc_by(r.hits);
        }
    }
    registry.register("rule_hits", "Statements a query rule matched", hits);
    let calls = Family::<DigestLabels, Counter>::default();
    let errors = Family::<DigestLabels, Counter>::default();
    let seconds = Family::<DigestLabels, Counter<f64>>::default();
    for core in &state.cores {
        let engine = core.snapshot().engine.to_string();
        for d in core.digests(Some(DIGESTS_IN_METRICS)).unwrap_or_default() {
            let l = DigestLabels {
                engine: engine.clone(),
                digest: d.id,
            };
            calls.get_or_create(&l).inc_by(d.calls);
            errors.get_or_create(&l).inc_by(d.errors);
            seconds.get_or_create(&l).inc_by(d.total_us as f64 / 1e6);
        }
    }
    registry.register(
        "digest_calls",
        "Statements run, by digest id (the heaviest digests; /api/digests has their text)",
        calls,
    );
    registry.register("digest_errors", "Statements that failed, by digest id", errors);
    registry.register("digest_backend_seconds", "Time in the backend, by digest id", seconds);
}
