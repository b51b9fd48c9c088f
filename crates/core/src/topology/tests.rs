//! Writer election and reader choice, without servers: probes are fed in
//! by hand.

use super::*;
use crate::config::{EndpointRole, EndpointSettings, Settings};
use crate::engine::position::Position;

/// Settings for one cluster of `n` backends named `b0`, `b1`, ... (probed:
/// roles are discovered) with a read/write and a read-only endpoint.
fn settings(n: usize, read_only: &str) -> Settings {
    let backends: Vec<String> = (0..n).map(|i| format!("\"b{i}:1\"")).collect();
    let text = format!(
        r#"
[[clusters]]
name = "c"
engine = "postgres"
backends = [{}]
monitor_secret = "s"
health_check_failures = 2
health_check_successes = 2

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "c"
role = "read_write"

[[endpoints]]
name = "ro"
listen = "127.0.0.1:0"
cluster = "c"
role = "read_only"
{read_only}

[[endpoints]]
name = "split"
listen = "127.0.0.1:0"
cluster = "c"
role = "split"

[[secrets]]
name = "s"
user = "u"
password = "p"
"#,
        backends.join(", ")
    );
    match crate::config::parse(&text, std::path::Path::new(".")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn cluster(n: usize) -> ClusterState {
    ClusterState::new(&settings(n, "").clusters[0])
}

fn ok(writable: bool) -> Result<Probe, String> {
    Ok(Probe {
        writable,
        max_connections: Some(100),
        lag: None,
        position: None,
        replayed: None,
    })
}

fn down(c: &ClusterState, i: usize) {
    let b = c.backends()[i].clone();
    c.record(&b, Err("refused".into()));
    c.record(&b, Err("refused".into()));
}

/// `b0:1` as `b0`.
fn short(addr: &str) -> &str {
    addr.trim_end_matches(":1")
}

fn writer(c: &ClusterState) -> Option<String> {
    c.writer().map(|w| short(&w.addr).to_owned())
}

#[test]
fn the_writer_is_discovered_not_configured() {
    let c = cluster(2);
    c.record(&c.backends()[0], ok(false));
    c.record(&c.backends()[1], ok(true));
    c.elect();
    assert_eq!(writer(&c).as_deref(), Some("b1"));
}

#[test]
fn a_promoted_replica_becomes_the_writer() {
    let c = cluster(2);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.elect();
    assert_eq!(writer(&c).as_deref(), Some("b0"));
    down(&c, 0);
    c.elect();
    assert_eq!(writer(&c), None);
    assert_eq!(c.events().last().and_then(|e| e.lost.clone()).as_deref(), Some("b0:1"));
    c.record(&c.backends()[1], ok(true));
    c.elect();
    assert_eq!(writer(&c).as_deref(), Some("b1"));
    let e = c.events();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].elected.as_deref(), Some("b1:1"));
    assert!(e[0].seconds_without_writer.is_some());
}

#[test]
fn a_returning_old_writer_is_fenced_until_read_only() {
    let c = cluster(2);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.elect();
    down(&c, 0);
    c.record(&c.backends()[1], ok(true));
    c.elect();
    assert_eq!(writer(&c).as_deref(), Some("b1"));
    // The old writer restarts, still writable: split brain, not used.
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[0], ok(true));
    c.elect();
    assert_eq!(writer(&c).as_deref(), Some("b1"));
    assert_eq!(c.backends()[0].health().fence, Fence::Superseded);
    // Even when the new writer is lost, the superseded one is not elected.
    down(&c, 1);
    c.elect();
    assert_eq!(writer(&c), None);
    // Rebuilt as a replica, it is safe again.
    c.record(&c.backends()[0], ok(false));
    c.elect();
    assert_eq!(c.backends()[0].health().fence, Fence::None);
}

#[test]
fn a_writer_restarted_in_place_is_used_again() {
    let c = cluster(2);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.elect();
    down(&c, 0);
    c.elect();
    assert_eq!(writer(&c), None);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[0], ok(true));
    c.elect();
    assert_eq!(writer(&c).as_deref(), Some("b0"));
}

#[test]
fn a_demoted_writer_is_replaced_without_a_fence() {
    let c = cluster(2);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.elect();
    // Switchover: the old writer becomes a replica, the replica a writer.
    c.record(&c.backends()[0], ok(false));
    c.record(&c.backends()[1], ok(true));
    c.elect();
    assert_eq!(writer(&c).as_deref(), Some("b1"));
    assert_eq!(c.backends()[0].health().fence, Fence::None);
}

/// The read/write endpoint, or the read-only one with `read_only`'s settings.
fn endpoint(role: EndpointRole, read_only: &str) -> Arc<EndpointSettings> {
    let s = settings(3, read_only);
    let name = if role == EndpointRole::ReadWrite { "rw" } else { "ro" };
    let e = s.endpoints.iter().find(|e| e.name == name).cloned();
    e.unwrap_or_else(|| panic!("no endpoint {name}"))
}

#[test]
fn readers_are_chosen_by_fewest_leases_outstanding() {
    let c = cluster(3);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.record(&c.backends()[2], ok(false));
    c.elect();
    let ro = endpoint(EndpointRole::ReadOnly, "");
    c.backends()[1].leases.store(3, Ordering::Relaxed);
    for _ in 0..4 {
        let choice = c
            .choose(&ro, Intent::Write)
            .map(|ch| (short(&ch.backend.addr).to_string(), ch.why));
        assert_eq!(choice, Some(("b2".to_string(), Why::LeastBusyReader)));
    }
    c.backends()[2].leases.store(5, Ordering::Relaxed);
    assert_eq!(
        c.choose(&ro, Intent::Write)
            .map(|ch| short(&ch.backend.addr).to_string())
            .as_deref(),
        Some("b1")
    );
    // Equal load: both are used.
    c.backends()[1].leases.store(0, Ordering::Relaxed);
    c.backends()[2].leases.store(0, Ordering::Relaxed);
    let picked: std::collections::HashSet<String> = (0..4)
        .filter_map(|_| c.choose(&ro, Intent::Write))
        .map(|ch| short(&ch.backend.addr).to_string())
        .collect();
    assert_eq!(picked.len(), 2);
}

#[test]
fn lagging_or_down_replicas_are_skipped_then_the_writer_serves() {
    let c = cluster(3);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.record(
        &c.backends()[2],
        Ok(Probe {
            writable: false,
            max_connections: None,
            lag: Some(Duration::from_secs(30)),
            position: None,
            replayed: None,
        }),
    );
    c.elect();
    let ro = endpoint(EndpointRole::ReadOnly, "max_replica_lag = \"5s\"");
    for _ in 0..3 {
        assert_eq!(
            c.choose(&ro, Intent::Write)
                .map(|ch| short(&ch.backend.addr).to_string())
                .as_deref(),
            Some("b1")
        );
    }
    down(&c, 1);
    let ch = c
        .choose(&ro, Intent::Write)
        .map(|ch| (short(&ch.backend.addr).to_string(), ch.why));
    assert_eq!(ch, Some(("b0".to_string(), Why::WriterFallback)));
    let strict = endpoint(
        EndpointRole::ReadOnly,
        "max_replica_lag = \"5s\"\nreader_fallback = \"error\"",
    );
    assert!(c.choose(&strict, Intent::Write).is_none());
    let rw = endpoint(EndpointRole::ReadWrite, "");
    assert_eq!(c.choose(&rw, Intent::Write).map(|ch| ch.why), Some(Why::Writer));
}

#[test]
fn a_backend_added_by_reload_is_probed_then_used() {
    let c = cluster(2);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.elect();
    let addrs: Vec<String> = ["b0:1", "b1:1", "b2:1"].iter().map(|s| s.to_string()).collect();
    let (added, removed) = c.set_backends(&addrs, true, &Default::default());
    assert_eq!((added, removed), (vec!["b2:1".to_string()], vec![]));
    let ro = endpoint(EndpointRole::ReadOnly, "");
    c.backends()[1].leases.store(2, Ordering::Relaxed);
    // Not probed yet: not used.
    assert_eq!(
        c.choose(&ro, Intent::Write)
            .map(|ch| short(&ch.backend.addr).to_string())
            .as_deref(),
        Some("b1")
    );
    c.record(&c.backends()[2], ok(false));
    assert_eq!(
        c.choose(&ro, Intent::Write)
            .map(|ch| short(&ch.backend.addr).to_string())
            .as_deref(),
        Some("b2")
    );
    // The writer removed: unelected, and nothing else is writable.
    let addrs: Vec<String> = ["b1:1", "b2:1"].iter().map(|s| s.to_string()).collect();
    let (_, removed) = c.set_backends(&addrs, true, &Default::default());
    assert_eq!(removed, vec!["b0:1".to_string()]);
    assert_eq!(writer(&c), None);
}

#[test]
fn weighted_replicas_take_leases_in_proportion() {
    let c = cluster(3);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.record(&c.backends()[2], ok(false));
    c.elect();
    c.backends()[2].weight.store(3, Ordering::Relaxed);
    let ro = endpoint(EndpointRole::ReadOnly, "");
    // Leases taken and held: b2 (weight 3) ends up with 3 for b1's 1.
    let mut held = std::collections::HashMap::<String, usize>::new();
    for _ in 0..8 {
        let ch = c.choose(&ro, Intent::Write).map(|ch| ch.backend);
        let Some(b) = ch else { panic!("no reader") };
        b.leases.fetch_add(1, Ordering::Relaxed);
        *held.entry(short(&b.addr).to_string()).or_default() += 1;
    }
    assert_eq!(held.get("b1"), Some(&2), "{held:?}");
    assert_eq!(held.get("b2"), Some(&6), "{held:?}");
}

#[test]
fn idle_replicas_share_reads_evenly() {
    // The writer listed between the replicas, and a fourth backend down:
    // neither may skew the turns.
    let c = cluster(4);
    c.record(&c.backends()[0], ok(false));
    c.record(&c.backends()[1], ok(true));
    c.record(&c.backends()[2], ok(false));
    c.elect();
    let ro = endpoint(EndpointRole::ReadOnly, "");
    let mut count = std::collections::HashMap::<String, usize>::new();
    for _ in 0..300 {
        // Looks in between (sessions starting) move no turn.
        let _ = c.peek(&ro, &|_| false);
        let Some(ch) = c.choose(&ro, Intent::Write) else {
            panic!("no reader")
        };
        *count.entry(short(&ch.backend.addr).to_string()).or_default() += 1;
    }
    assert_eq!(count.get("b0"), Some(&150), "{count:?}");
    assert_eq!(count.get("b2"), Some(&150), "{count:?}");
}

#[test]
fn among_equally_busy_replicas_the_one_where_the_tenant_has_an_idle_connection_is_chosen() {
    let c = cluster(3);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.record(&c.backends()[2], ok(false));
    c.elect();
    let ro = endpoint(EndpointRole::ReadOnly, "");
    let warm_b2 = |b: &BackendState| short(&b.addr) == "b2";
    for _ in 0..10 {
        let Some(ch) = c.choose_warm(&ro, Intent::Write, &warm_b2) else {
            panic!("no reader")
        };
        assert_eq!(short(&ch.backend.addr), "b2");
        let Some(ch) = c.peek(&ro, &warm_b2) else {
            panic!("no reader")
        };
        assert_eq!(short(&ch.backend.addr), "b2");
    }
    // A busier warm replica loses to an idle cold one: load comes first.
    c.backends()[2].leases.fetch_add(1, Ordering::Relaxed);
    let Some(ch) = c.choose_warm(&ro, Intent::Write, &warm_b2) else {
        panic!("no reader")
    };
    assert_eq!(short(&ch.backend.addr), "b1");
    // With none warm, the tied replicas take turns as before.
    c.backends()[2].leases.fetch_sub(1, Ordering::Relaxed);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4 {
        if let Some(ch) = c.choose_warm(&ro, Intent::Write, &|_| false) {
            seen.insert(short(&ch.backend.addr).to_string());
        }
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

#[test]
fn split_reads_go_to_a_replica_that_replayed_the_clients_write() {
    let c = cluster(3);
    let at = |lsn: u64| {
        Ok(Probe {
            writable: false,
            max_connections: None,
            lag: None,
            position: None,
            replayed: Some(Position::Lsn(lsn)),
        })
    };
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], at(100));
    c.record(&c.backends()[2], at(200));
    c.elect();
    let s = settings(3, "");
    let split = s
        .endpoints
        .iter()
        .find(|e| e.name == "split")
        .cloned()
        .expect("split endpoint");
    let pick = |intent| {
        c.choose(&split, intent)
            .map(|ch| (short(&ch.backend.addr).to_string(), ch.why))
    };
    assert_eq!(pick(Intent::Write), Some(("b0".to_string(), Why::Writer)));
    // No write yet: either replica.
    assert_eq!(
        pick(Intent::Read { after: None }).map(|p| p.1),
        Some(Why::LeastBusyReader)
    );
    // Only b2 has replayed 150.
    for _ in 0..4 {
        assert_eq!(
            pick(Intent::Read {
                after: Some(&Position::Lsn(150))
            }),
            Some(("b2".to_string(), Why::LeastBusyReader))
        );
    }
    // Neither has replayed 300: the writer, saying why.
    assert_eq!(
        pick(Intent::Read {
            after: Some(&Position::Lsn(300))
        }),
        Some(("b0".to_string(), Why::WriterReadYourWrites))
    );
    // No replica at all: the writer, as a fallback.
    down(&c, 1);
    down(&c, 2);
    assert_eq!(
        pick(Intent::Read { after: None }),
        Some(("b0".to_string(), Why::WriterFallback))
    );
}

#[test]
fn a_rules_route_to_a_backend_takes_it_whatever_its_role_while_it_is_usable() {
    let c = cluster(3);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.record(&c.backends()[2], ok(false));
    c.elect();
    let s = settings(3, "");
    let pick = |endpoint: &str, route: &RouteTo| {
        let e = s.endpoints.iter().find(|e| e.name == endpoint).expect("endpoint");
        c.choose(e, Intent::Ruled(route))
            .map(|ch| (short(&ch.backend.addr).to_string(), ch.why))
    };
    let b2 = RouteTo::Backend("b2:1".into());
    let b0 = RouteTo::Backend("b0:1".into());
    // A replica from a read/write endpoint, the writer from a read-only one.
    assert_eq!(pick("rw", &b2), Some(("b2".into(), Why::RuleBackend)));
    assert_eq!(pick("ro", &b0), Some(("b0".into(), Why::RuleBackend)));
    // Not another replica when it drains or goes down: the lease waits.
    c.set_draining("b2:1", true).expect("drain");
    assert_eq!(pick("rw", &b2), None);
    c.set_draining("b2:1", false).expect("undrain");
    down(&c, 2);
    assert_eq!(pick("rw", &b2), None);
    assert_eq!(pick("rw", &RouteTo::Backend("elsewhere:1".into())), None);
    // Asked of the cluster a rule names, a cluster route is its writer.
    assert_eq!(
        pick("ro", &RouteTo::Cluster("c".into())),
        Some(("b0".into(), Why::RuleCluster))
    );
    assert_eq!(pick("ro", &RouteTo::Writer), Some(("b0".into(), Why::RuleWriter)));
    assert_eq!(pick("rw", &RouteTo::Replica), Some(("b1".into(), Why::RuleReplica)));
}

#[test]
fn a_failing_probe_is_logged_at_once_then_again_only_when_its_error_changes_or_a_while_passed() {
    let b = BackendState::new("b0:1", Role::Unknown, false, 1);
    let every = Duration::from_secs(60);
    let t0 = Instant::now();
    assert!(
        b.failure_to_log(Some("connection refused"), t0, every),
        "the first failure"
    );
    assert!(!b.failure_to_log(Some("connection refused"), t0 + Duration::from_secs(1), every));
    assert!(
        b.failure_to_log(
            Some("password authentication failed"),
            t0 + Duration::from_secs(2),
            every
        ),
        "another error"
    );
    assert!(!b.failure_to_log(
        Some("password authentication failed"),
        t0 + Duration::from_secs(61),
        every
    ));
    assert!(
        b.failure_to_log(
            Some("password authentication failed"),
            t0 + Duration::from_secs(62),
            every
        ),
        "the same error, a minute later"
    );
    assert!(
        !b.failure_to_log(None, t0 + Duration::from_secs(63), every),
        "a success is not logged here"
    );
    assert!(
        b.failure_to_log(
            Some("password authentication failed"),
            t0 + Duration::from_secs(64),
            every
        ),
        "a new run of failures after a success"
    );
}

#[test]
fn a_sessions_cluster_cache_follows_a_reload_that_replaces_or_removes_the_cluster() {
    let s = settings(2, "");
    let topology = Topology::new(&s, crate::config::EngineKind::Postgres);
    let mut cache = ClusterCache::default();
    let first = topology.cluster_cached("c", &mut cache).expect("listed");
    // Unchanged topology: the same state, from the cache.
    let again = topology.cluster_cached("c", &mut cache).expect("listed");
    assert!(Arc::ptr_eq(&first, &again));
    // A reload replaces the cluster: the next look finds the new state.
    let replaced = Arc::new(ClusterState::new(&s.clusters[0]));
    topology.insert(replaced.clone());
    let after = topology.cluster_cached("c", &mut cache).expect("listed");
    assert!(Arc::ptr_eq(&after, &replaced));
    assert!(!Arc::ptr_eq(&after, &first));
    // Another name is looked up, not taken from the cache.
    assert!(topology.cluster_cached("other", &mut cache).is_none());
    assert!(Arc::ptr_eq(
        &topology.cluster_cached("c", &mut cache).expect("listed"),
        &replaced
    ));
    // A reload removes it: gone for the session too.
    topology.remove("c");
    assert!(topology.cluster_cached("c", &mut cache).is_none());
}

#[test]
fn with_writer_reads_the_writer_takes_reads_when_it_is_the_least_busy() {
    let c = cluster(3);
    c.record(&c.backends()[0], ok(true));
    c.record(&c.backends()[1], ok(false));
    c.record(&c.backends()[2], ok(false));
    c.elect();
    let ro = endpoint(EndpointRole::ReadOnly, "writer_reads = true");
    let mut count = std::collections::HashMap::<String, usize>::new();
    for _ in 0..300 {
        let Some(ch) = c.choose(&ro, Intent::Write) else {
            panic!("no reader")
        };
        let expected = if short(&ch.backend.addr) == "b0" {
            Why::WriterAsReader
        } else {
            Why::LeastBusyReader
        };
        assert_eq!(ch.why, expected);
        *count.entry(short(&ch.backend.addr).to_string()).or_default() += 1;
    }
    // Idle, all three are tied and take turns.
    for b in ["b0", "b1", "b2"] {
        assert_eq!(count.get(b), Some(&100), "{count:?}");
    }
    // A busy writer loses to the idle replicas.
    c.backends()[0].leases.fetch_add(1, Ordering::Relaxed);
    for _ in 0..10 {
        let Some(ch) = c.choose(&ro, Intent::Write) else {
            panic!("no reader")
        };
        assert_ne!(short(&ch.backend.addr), "b0");
    }
    // With no usable replica the writer is the fallback, as without it.
    down(&c, 1);
    down(&c, 2);
    let Some(ch) = c.choose(&ro, Intent::Write) else {
        panic!("no fallback")
    };
    assert_eq!((short(&ch.backend.addr), ch.why), ("b0", Why::WriterFallback));
    c.record(&c.backends()[1], ok(false));
    c.record(&c.backends()[1], ok(false));
    c.record(&c.backends()[2], ok(false));
    c.record(&c.backends()[2], ok(false));
    // Without the setting the writer never reads while a replica can.
    c.backends()[0].leases.fetch_sub(1, Ordering::Relaxed);
    let plain = endpoint(EndpointRole::ReadOnly, "");
    for _ in 0..10 {
        let Some(ch) = c.choose(&plain, Intent::Write) else {
            panic!("no reader")
        };
        assert_eq!(ch.why, Why::LeastBusyReader);
    }
}
