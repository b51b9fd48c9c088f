//! Unit tests for the abuse limits, on a fake clock.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::FakeRelativeClock;

use super::*;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn limits(per_address: u32, per_user: u32) -> (Limits<FakeRelativeClock>, FakeRelativeClock) {
    let clock = FakeRelativeClock::default();
    (Limits::with_clock(nz(per_address), nz(per_user), clock.clone()), clock)
}

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));

#[test]
fn a_user_name_is_blocked_after_its_failures_from_any_address() {
    let (l, clock) = limits(1000, 3);
    for i in 0..3 {
        assert!(l.login_allowed(A, "ivan"), "failure {i}");
        l.record_failure(A, "ivan");
    }
    assert!(!l.login_allowed(A, "ivan"));
    assert!(
        !l.login_allowed(B, "ivan"),
        "the name is limited wherever it comes from"
    );
    assert!(l.login_allowed(A, "olga"), "other names are unaffected");
    // 3 a minute: one more failure every 20 s.
    clock.advance(Duration::from_secs(19));
    assert!(!l.login_allowed(A, "ivan"));
    clock.advance(Duration::from_secs(1));
    assert!(l.login_allowed(A, "ivan"));
    l.record_failure(A, "ivan");
    assert!(
        !l.login_allowed(A, "ivan"),
        "one failure's worth came back, not the burst"
    );
    clock.advance(Duration::from_secs(60));
    for _ in 0..3 {
        assert!(l.login_allowed(A, "ivan"));
        l.record_failure(A, "ivan");
    }
    assert!(!l.login_allowed(A, "ivan"));
}

#[test]
fn an_address_is_blocked_after_its_failures_under_any_name() {
    let (l, clock) = limits(2, 1000);
    l.record_failure(A, "u1");
    assert!(l.login_allowed(A, "u2"));
    l.record_failure(A, "u2");
    assert!(!l.login_allowed(A, "u3"), "every name from a blocked address");
    assert!(!l.login_allowed(A, "u1"));
    assert!(l.login_allowed(B, "u1"), "other addresses are unaffected");
    clock.advance(Duration::from_secs(30));
    assert!(l.login_allowed(A, "u3"));
}

#[test]
fn ipv6_is_limited_per_64_and_mapped_ipv4_as_ipv4() {
    let (l, _clock) = limits(1, 1000);
    let a1: IpAddr = "2001:db8:1:2::1".parse().unwrap();
    let a2: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
    let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
    l.record_failure(a1, "x");
    assert!(!l.login_allowed(a2, "y"), "same /64");
    assert!(l.login_allowed(other, "y"), "another /64");
    let mapped = IpAddr::V6(Ipv4Addr::new(192, 0, 2, 1).to_ipv6_mapped());
    assert_eq!(address_key(mapped), A);
    l.record_failure(A, "z");
    assert!(!l.login_allowed(mapped, "w"));
    assert_eq!(
        address_key(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    );
}

#[test]
fn checks_and_successes_cost_nothing() {
    let (l, _clock) = limits(1, 1);
    for _ in 0..100 {
        assert!(l.login_allowed(A, "ivan"));
    }
    assert_eq!(l.tracked_keys(), 0);
}

#[test]
fn connection_rate_is_per_tenant() {
    let (l, clock) = limits(10, 10);
    let rate = Some(ConnectionRate {
        per_second: nz(2),
        burst: nz(2),
    });
    assert!(l.connection_allowed("noisy", rate));
    assert!(l.connection_allowed("noisy", rate));
    assert!(!l.connection_allowed("noisy", rate));
    assert!(l.connection_allowed("quiet", rate), "another tenant is unaffected");
    assert!(l.connection_allowed("free", None));
    clock.advance(Duration::from_millis(500));
    assert!(l.connection_allowed("noisy", rate));
    assert!(!l.connection_allowed("noisy", rate));
    // A new rate (reload) starts afresh; forgotten tenants too.
    let more = Some(ConnectionRate {
        per_second: nz(2),
        burst: nz(5),
    });
    assert!(l.connection_allowed("noisy", more));
    l.retain_tenants(|name| name != "quiet");
    assert!(l.connection_allowed("quiet", rate));
    assert!(l.connection_allowed("quiet", rate));
    assert!(!l.connection_allowed("quiet", rate));
}

#[test]
fn a_flood_of_distinct_keys_stays_bounded() {
    let (l, clock) = limits(30, 10);
    let mut most = 0;
    for i in 0..20 * PRUNE_FLOOR as u32 {
        l.record_failure(IpAddr::V4(Ipv4Addr::from(i)), &format!("user{i}"));
        if i % 1000 == 0 {
            clock.advance(Duration::from_secs(13));
        }
        most = most.max(l.tracked_keys());
    }
    assert!(most < 3 * PRUNE_FLOOR, "{most} keys held");
}

#[test]
fn blocked_keys_are_pruned_once_expired() {
    let (l, clock) = limits(1, 1);
    for i in 0..3 * PRUNE_FLOOR as u32 {
        l.record_failure(IpAddr::V4(Ipv4Addr::from(i)), &format!("user{i}"));
        if i % 1000 == 0 {
            clock.advance(Duration::from_secs(121));
        }
    }
    let blocked = l.by_user.load().blocked.lock().unwrap().until.len();
    assert!(blocked <= 2 * PRUNE_FLOOR, "{blocked} blocked names held");
}

#[test]
fn a_lowered_user_limit_refuses_the_next_failure_at_once() {
    let (l, _clock) = limits(1000, 10);
    l.record_failure(A, "ivan");
    assert!(l.login_allowed(A, "ivan"), "1 of 10");
    l.set_failure_limits(nz(1000), nz(1));
    assert_eq!(l.failure_limits(), (nz(1000), nz(1)));
    assert!(l.login_allowed(A, "ivan"), "counting starts afresh");
    l.record_failure(A, "ivan");
    assert!(!l.login_allowed(A, "ivan"), "1 failure a minute, used");
    assert!(l.login_allowed(A, "olga"));
}

#[test]
fn a_raised_limit_keeps_blocked_keys_blocked_until_their_time() {
    let (l, clock) = limits(1, 1000);
    l.record_failure(A, "ivan");
    assert!(!l.login_allowed(A, "olga"), "the address is over 1 a minute");
    l.set_failure_limits(nz(60), nz(1000));
    assert!(!l.login_allowed(A, "olga"), "a reload lifts no block");
    clock.advance(Duration::from_secs(60));
    assert!(l.login_allowed(A, "olga"));
    for _ in 0..59 {
        l.record_failure(A, "olga");
    }
    assert!(l.login_allowed(A, "olga"), "59 of 60 under the new limit");
}

#[test]
fn an_unchanged_limit_keeps_its_counts() {
    let (l, _clock) = limits(1000, 2);
    l.record_failure(A, "ivan");
    l.set_failure_limits(nz(500), nz(2));
    l.record_failure(A, "ivan");
    assert!(!l.login_allowed(A, "ivan"), "the first failure still counts");
}
