//! The query-control sections of the configuration: `[[rules]]`, compiled
//! by [`crate::rules::compile`] against the endpoints and clusters (its
//! problems reported with their lines), and `[digests]`.

use std::sync::Arc;

use toml::Spanned;

use super::model::{ClusterSettings, DigestSettings};
use super::raw::{RawDigests, RawEndpoint, RawRule};
use super::validate::{Ctx, DEFAULT_MAX_DIGESTS, MAX_MAX_DIGESTS};
use crate::rules::{ClusterFacts, EndpointFacts, Rules, Topology};

/// The compiled rules; empty (with the problems recorded) when any is wrong.
pub(super) fn rules(
    cx: &mut Ctx,
    raw: &[RawRule],
    endpoints: &[RawEndpoint],
    clusters: &[Arc<ClusterSettings>],
) -> Arc<Rules> {
    if raw.is_empty() {
        return Arc::new(Rules::empty());
    }
    // Endpoints as written (one whose other keys are wrong still exists
    // for `endpoints`); the clusters that validated.
    let topology = Topology {
        endpoints: endpoints
            .iter()
            .map(|e| EndpointFacts {
                name: e.name.get_ref(),
                cluster: e.cluster.get_ref(),
            })
            .collect(),
        clusters: clusters
            .iter()
            .map(|c| ClusterFacts {
                name: &c.name,
                engine: c.engine,
                backends: &c.backends,
            })
            .collect(),
    };
    match crate::rules::compile(raw, &topology) {
        Ok(rules) => Arc::new(rules),
        Err(errors) => {
            for e in errors {
                cx.at_offset(e.span.start, e.message);
            }
            Arc::new(Rules::empty())
        }
    }
}

pub(super) fn digests(cx: &mut Ctx, raw: Option<&Spanned<RawDigests>>) -> DigestSettings {
    let Some(d) = raw.map(Spanned::get_ref) else {
        return DigestSettings {
            enabled: false,
            max_digests: DEFAULT_MAX_DIGESTS,
        };
    };
    let max_digests = match &d.max_digests {
        None => DEFAULT_MAX_DIGESTS,
        Some(m) => match usize::try_from(*m.get_ref()) {
            Ok(n) if (1..=MAX_MAX_DIGESTS).contains(&n) => n,
            _ => {
                cx.at(
                    m,
                    format!("digests.max_digests must be between 1 and {MAX_MAX_DIGESTS}"),
                );
                DEFAULT_MAX_DIGESTS
            }
        },
    };
    DigestSettings {
        enabled: d.enabled.unwrap_or(false),
        max_digests,
    }
}
