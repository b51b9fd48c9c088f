//! The meters' arithmetic: bucket placement, transaction boundaries, the
//! top tenants and the rest, the switches.

use std::time::Duration;

use super::*;

fn stats(histograms: bool, tenant_series: usize) -> StatsSettings {
    StatsSettings {
        histograms,
        tenant_series,
    }
}

#[test]
fn a_value_goes_to_the_first_bucket_whose_bound_it_does_not_exceed() {
    let h = Histogram::default();
    h.record(Duration::from_micros(100)); // exactly the first bound
    h.record(Duration::from_micros(101));
    h.record(Duration::from_secs(11)); // past the last bound
    h.record(Duration::ZERO);
    let s = h.snapshot();
    assert_eq!(s.buckets.len(), BUCKETS_SECONDS.len() + 1);
    assert_eq!(s.buckets[0], (0.0001, 2));
    assert_eq!(s.buckets[1], (0.00025, 1));
    assert_eq!(s.buckets.last(), Some(&(f64::INFINITY, 1)));
    assert_eq!(s.count, 4);
    assert!((s.sum_seconds - 11.000201).abs() < 1e-9, "{}", s.sum_seconds);
}

#[test]
fn bucket_bounds_ascend() {
    assert!(BUCKETS_SECONDS.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn a_transaction_is_counted_once_when_the_session_leaves_it_after_a_statement() {
    let meters = Meters::default();
    let mut s = meters.session(meters.endpoint("rw"), "alice", &stats(true, 20));
    // A Sync alone (no statement) ends nothing.
    s.boundary(false);
    // BEGIN; two statements; COMMIT.
    for in_transaction in [true, true, true, false] {
        s.statement();
        s.boundary(in_transaction);
    }
    // Two statements outside a transaction: two transactions.
    s.statement();
    s.boundary(false);
    s.statement();
    s.boundary(false);
    s.boundary(false);
    let e = &meters.endpoints(["rw"])[0];
    assert_eq!((e.transactions, e.statements), (3, 6));
    let t = top_tenants(meters.tenants(), 20);
    assert_eq!(
        t,
        vec![TenantCounts {
            tenant: "alice".into(),
            transactions: 3,
            statements: 6
        }]
    );
}

#[test]
fn tenants_past_the_top_n_are_summed_as_other_and_a_tenant_named_other_joins_them() {
    let meters = Meters::default();
    let endpoint = meters.endpoint("rw");
    for (tenant, transactions) in [("a", 5), ("b", 9), ("c", 1), ("other", 100), ("d", 5)] {
        let mut s = meters.session(endpoint.clone(), tenant, &stats(true, 2));
        for _ in 0..transactions {
            s.statement();
            s.boundary(false);
        }
    }
    let names = |v: &[TenantCounts]| v.iter().map(|t| (t.tenant.clone(), t.transactions)).collect::<Vec<_>>();
    assert_eq!(
        names(&top_tenants(meters.tenants(), 2)),
        [("b".into(), 9), ("a".into(), 5), ("other".into(), 106)]
    );
    // Everyone fits: no rest, but the tenant named "other" is still summed.
    assert_eq!(
        names(&top_tenants(meters.tenants(), 10)),
        [
            ("b".into(), 9),
            ("a".into(), 5),
            ("d".into(), 5),
            ("c".into(), 1),
            ("other".into(), 100)
        ]
    );
    assert!(top_tenants(meters.tenants(), 0).is_empty());
}

#[test]
fn a_tenant_counted_by_both_engines_is_one_series() {
    let (pg, my) = (Meters::default(), Meters::default());
    for (meters, n) in [(&pg, 2), (&my, 3)] {
        let mut s = meters.session(meters.endpoint("rw"), "alice", &stats(true, 20));
        for _ in 0..n {
            s.statement();
            s.boundary(false);
        }
    }
    let all = top_tenants(pg.tenants().into_iter().chain(my.tenants()), 20);
    assert_eq!(
        all,
        vec![TenantCounts {
            tenant: "alice".into(),
            transactions: 5,
            statements: 5
        }]
    );
}

#[test]
fn with_tenant_series_off_no_tenant_is_counted() {
    let meters = Meters::default();
    let mut s = meters.session(meters.endpoint("rw"), "alice", &stats(true, 0));
    s.statement();
    s.boundary(false);
    assert!(meters.tenants().is_empty());
    assert_eq!(meters.endpoints(["rw"])[0].transactions, 1);
}

#[test]
fn with_histograms_off_no_clock_is_read_and_no_wait_recorded() {
    let meters = Meters::default();
    let s = meters.session(meters.endpoint("rw"), "alice", &stats(false, 20));
    assert!(s.clock().is_none());
    s.lease_waited(Duration::from_millis(3));
    assert_eq!(meters.endpoints(["rw"])[0].lease_wait.count, 0);
    let on = meters.session(meters.endpoint("rw"), "alice", &stats(true, 20));
    on.lease_waited(Duration::from_millis(3));
    assert_eq!(meters.endpoints(["rw"])[0].lease_wait.count, 1);
}

#[test]
fn listed_endpoints_appear_unused_logins_and_failures_by_reason() {
    let meters = Meters::default();
    let s = meters.session(meters.endpoint("b"), "alice", &stats(true, 20));
    s.logged_in(true);
    s.logged_in(false);
    s.logged_in(true);
    s.endpoint().login_failed("invalid_password");
    s.endpoint().login_failed("invalid_password");
    s.endpoint().received(10);
    s.endpoint().sent(7);
    let all = meters.endpoints(["a", "b"]);
    assert_eq!(all.iter().map(|e| e.endpoint.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    let b = &all[1];
    assert_eq!((b.logins_plain, b.logins_tls), (1, 2));
    assert_eq!(b.login_failures.get("invalid_password"), Some(&2));
    assert_eq!((b.bytes_received, b.bytes_sent), (10, 7));
}
