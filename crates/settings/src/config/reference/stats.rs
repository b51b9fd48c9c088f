//! The reference for `[stats]`: what `/metrics` records beyond its counters.

use super::{Key, Section};

pub(super) const STATS: Section = Section {
    name: "[stats]",
    about: "What `GET /metrics` records beyond its counters: latency histograms and per-tenant series. Optional; \
            a reload applies to the sessions that log in after it (the number of tenant series to the next scrape).",
    keys: &[
        Key {
            name: "histograms",
            kind: "boolean",
            default: Some("true"),
            about: "Whether the latency histograms are kept: `gatehouse_lease_wait_seconds`, \
                    `gatehouse_query_seconds` and `gatehouse_database_response_seconds`, per endpoint.",
        },
        Key {
            name: "tenant_series",
            kind: "integer",
            default: Some("20"),
            about: "How many tenants get series of their own in `gatehouse_tenant_transactions_total` and \
                    `gatehouse_tenant_queries_total` (those with the most transactions; the rest are summed in \
                    one `tenant=\"other\"` series). Between 0 and 1000; 0 turns per-tenant counting off.",
        },
    ],
};
