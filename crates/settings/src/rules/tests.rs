//! Unit tests for rule matching, actions, evaluation order, the lazy
//! digest, and hit counters (configuration errors are tested with the
//! configuration, in `config::tests::rules`).

use std::cell::Cell;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_sql::Digest;
use serde::Deserialize;

use super::raw::RawRule;
use super::*;
use crate::kind::EngineKind;

/// The backends of clusters main, other and maria.
fn backends() -> [Vec<String>; 3] {
    [
        vec!["10.0.0.1:5432".into(), "10.0.0.2:5432".into()],
        vec!["10.0.1.1:5432".into()],
        vec!["10.0.2.1:3306".into()],
    ]
}

/// Endpoints rw and ro on PostgreSQL cluster main, my on MySQL cluster
/// maria; cluster other is PostgreSQL without endpoints.
fn topology(backends: &[Vec<String>; 3]) -> Topology<'_> {
    let [main, other, maria] = backends;
    Topology {
        endpoints: vec![
            EndpointFacts {
                name: "rw",
                cluster: "main",
            },
            EndpointFacts {
                name: "ro",
                cluster: "main",
            },
            EndpointFacts {
                name: "my",
                cluster: "maria",
            },
        ],
        clusters: vec![
            ClusterFacts {
                name: "main",
                engine: EngineKind::Postgres,
                backends: main,
            },
            ClusterFacts {
                name: "other",
                engine: EngineKind::Postgres,
                backends: other,
            },
            ClusterFacts {
                name: "maria",
                engine: EngineKind::Mysql,
                backends: maria,
            },
        ],
    }
}

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    rules: Vec<RawRule>,
}

fn compile_toml(text: &str) -> Result<Rules, Vec<RuleError>> {
    let doc: Doc = toml::from_str(text).unwrap();
    compile(&doc.rules, &topology(&backends()))
}

fn rules(text: &str) -> Arc<Rules> {
    Arc::new(compile_toml(text).unwrap())
}

fn facts() -> SessionFacts<'static> {
    SessionFacts {
        tenant: "alice",
        database: "app",
        endpoint: "rw",
        client: Some("10.1.2.3".parse().unwrap()),
    }
}

fn session(r: &Arc<Rules>) -> SessionRules {
    r.for_session(&facts()).expect("candidate rules")
}

/// PostgreSQL's reading of a statement, with `digest` as its digest.
fn pg_with(digest: &dyn Fn(&str) -> Digest) -> Reader<'_> {
    Reader {
        digest,
        kind: &gatehouse_sql::statement_kind_at,
    }
}

/// MySQL's reading of a statement (in the default dialect).
fn mysql() -> Reader<'static> {
    Reader {
        digest: &|text| gatehouse_sql::mysql::digest(text, gatehouse_sql::mysql::Dialect::DEFAULT),
        kind: &gatehouse_sql::mysql::statement_kind_at,
    }
}

fn eval(s: &SessionRules, text: &str) -> Option<Verdict> {
    s.evaluate(text, &pg_with(&gatehouse_sql::digest))
}

fn matched(v: &Option<Verdict>) -> Vec<String> {
    v.as_ref()
        .map(|v| v.matched.iter().map(|n| n.to_string()).collect())
        .unwrap_or_default()
}

#[test]
fn a_rule_without_match_fields_matches_every_statement() {
    let r = rules("[[rules]]\nname = \"all\"\nlog = true\n");
    let s = session(&r);
    for text in ["select 1", "", "-- nothing"] {
        let v = eval(&s, text).unwrap();
        assert!(v.log && v.block.is_none() && v.route.is_none(), "{v:?}");
        assert_eq!(matched(&Some(v)), ["all"]);
    }
}

#[test]
fn no_match_returns_none_and_counts_nothing() {
    let r = rules("[[rules]]\nname = \"d\"\nkinds = [\"delete\"]\nlog = true\n");
    let s = session(&r);
    assert_eq!(eval(&s, "select 1"), None);
    assert_eq!(r.counters()[0].hits, 0);
}

#[test]
fn session_fields_filter_the_rules_once_at_login() {
    let r = rules(
        r#"
[[rules]]
name = "alice-only"
tenants = ["alice"]
log = true
[[rules]]
name = "app2-only"
databases = ["app2"]
log = true
[[rules]]
name = "ro-only"
endpoints = ["ro"]
log = true
"#,
    );
    let s = session(&r);
    assert_eq!(s.len(), 1);
    assert_eq!(matched(&eval(&s, "select 1")), ["alice-only"]);
    let bob_on_ro = SessionFacts {
        tenant: "bob",
        endpoint: "ro",
        ..facts()
    };
    assert_eq!(matched(&eval(&r.for_session(&bob_on_ro).unwrap(), "x")), ["ro-only"]);
    let bob = SessionFacts {
        tenant: "bob",
        ..facts()
    };
    assert!(r.for_session(&bob).is_none(), "no rule applies: nothing per statement");
    assert!(Rules::empty().is_empty() && Arc::new(Rules::empty()).for_session(&facts()).is_none());
}

#[test]
fn client_cidrs_match_v4_v6_bare_and_mapped_addresses() {
    let r = rules(
        "[[rules]]\nname = \"nets\"\nclient_cidrs = [\"10.0.0.0/8\", \"192.168.1.7\", \"::1/128\"]\nlog = true\n",
    );
    let at = |ip: Option<&str>| {
        let f = SessionFacts {
            client: ip.map(|i| i.parse::<IpAddr>().unwrap()),
            ..facts()
        };
        r.for_session(&f).is_some()
    };
    assert!(at(Some("10.200.0.1")));
    assert!(at(Some("192.168.1.7")));
    assert!(!at(Some("192.168.1.8")));
    assert!(at(Some("::1")));
    assert!(at(Some("::ffff:10.0.0.5")), "an IPv4-mapped address matches as IPv4");
    assert!(!at(Some("2001:db8::1")));
    assert!(!at(None), "a Unix-socket client matches no client_cidrs");
}

#[test]
fn kinds_match_the_first_key_word_case_insensitively() {
    let r = rules("[[rules]]\nname = \"writes\"\nkinds = [\"delete\", \"update\"]\nlog = true\n");
    let s = session(&r);
    assert!(eval(&s, "DELETE FROM t").is_some());
    assert!(eval(&s, "/* c */ (update t set a = 1)").is_some());
    assert!(eval(&s, "select 1").is_none());
    assert!(eval(&s, "with x as (delete from t returning 1) select 1").is_none());
    assert!(eval(&s, "").is_none());
}

#[test]
fn kinds_use_the_comment_syntax_the_engine_reads_with() {
    let r = rules("[[rules]]\nname = \"no-deletes\"\nkinds = [\"delete\"]\nblock = \"no\"\n");
    let text = "/* /* */ DELETE FROM t";
    assert!(session(&r).evaluate(text, &mysql()).is_some());
    assert!(eval(&session(&r), text).is_none(), "in PostgreSQL the comment nests");
}

#[test]
fn digest_text_and_digest_id_match_exactly() {
    let d = gatehouse_sql::digest("SELECT * FROM t WHERE id = 42");
    let r = rules(&format!(
        "[[rules]]\nname = \"by-text\"\ndigest = \"{}\"\nlog = true\ncontinue = true\n\
         [[rules]]\nname = \"by-id\"\ndigest_id = \"{:016X}\"\nlog = true\n",
        d.text, d.id
    ));
    let s = session(&r);
    assert_eq!(matched(&eval(&s, "select * from t where id = 7")), ["by-text", "by-id"]);
    assert!(eval(&s, "select * from t where id = 7 and a = 1").is_none());
}

#[test]
fn digest_regex_matches_the_digest_text_and_query_regex_the_raw_text() {
    let r = rules(
        r#"
[[rules]]
name = "orders"
digest_regex = "^select .* from orders where id = \\?$"
log = true
[[rules]]
name = "sleep"
query_regex = "(?i)\\bsleep\\("
log = true
"#,
    );
    let s = session(&r);
    assert_eq!(matched(&eval(&s, "SELECT a FROM orders WHERE id = 5")), ["orders"]);
    assert_eq!(matched(&eval(&s, "select pg_sleep(1), SLEEP(2)")), ["sleep"]);
    assert!(eval(&s, "select 1").is_none());
}

#[test]
fn every_given_field_must_match() {
    let r = rules("[[rules]]\nname = \"both\"\nkinds = [\"select\"]\nquery_regex = \"secret\"\nlog = true\n");
    let s = session(&r);
    assert!(eval(&s, "select secret from t").is_some());
    assert!(eval(&s, "select a from t").is_none());
    assert!(eval(&s, "delete from secret").is_none());
}

#[test]
fn block_returns_the_message_and_stops_evaluation() {
    let r = rules(
        r#"
[[rules]]
name = "log-all"
log = true
continue = true
[[rules]]
name = "no-deletes"
kinds = ["delete"]
block = "deletes are not allowed"
[[rules]]
name = "after"
route = "writer"
"#,
    );
    let v = eval(&session(&r), "delete from t").unwrap();
    assert_eq!(v.block.as_deref(), Some("deletes are not allowed"));
    assert_eq!(v.route, None);
    assert_eq!(matched(&Some(v)), ["log-all", "no-deletes"]);
    assert_eq!(r.counters()[2].hits, 0);
}

#[test]
fn route_takes_every_form() {
    let r = rules(
        r#"
[[rules]]
name = "w"
kinds = ["insert"]
route = "writer"
[[rules]]
name = "r"
kinds = ["select"]
route = "replica"
[[rules]]
name = "b"
kinds = ["update"]
endpoints = ["rw"]
route = { backend = "10.0.0.2:5432" }
[[rules]]
name = "c"
kinds = ["delete"]
endpoints = ["rw", "ro"]
route = { cluster = "other" }
"#,
    );
    let s = session(&r);
    let route = |t| eval(&s, t).and_then(|v| v.route);
    assert_eq!(route("insert into t values (1)"), Some(RouteTo::Writer));
    assert_eq!(route("select 1"), Some(RouteTo::Replica));
    assert_eq!(
        route("update t set a = 1"),
        Some(RouteTo::Backend("10.0.0.2:5432".into()))
    );
    assert_eq!(route("delete from t"), Some(RouteTo::Cluster("other".into())));
}

#[test]
fn rewrite_replaces_every_match_with_group_references() {
    let r = rules(
        r#"
[[rules]]
name = "limit"
rewrite = { pattern = "(?i)from (?<t>\\w+)", replacement = "FROM archive.${t}" }
"#,
    );
    let v = eval(&session(&r), "select 1 from a union select 2 from b").unwrap();
    assert_eq!(
        v.rewritten.as_deref(),
        Some("select 1 FROM archive.a union select 2 FROM archive.b")
    );
    let v = eval(&session(&r), "select 1").unwrap();
    assert_eq!(v.rewritten, None, "a rewrite that does not match changes nothing");
}

#[test]
fn statement_timeout_and_log_are_reported() {
    let r = rules("[[rules]]\nname = \"slow\"\nstatement_timeout = \"1m 30s\"\nlog = true\n");
    let v = eval(&session(&r), "select 1").unwrap();
    assert_eq!(v.statement_timeout, Some(Duration::from_secs(90)));
    assert!(v.log);
}

#[test]
fn the_first_matching_rule_stops_evaluation_by_default() {
    let r = rules("[[rules]]\nname = \"a\"\nlog = true\n[[rules]]\nname = \"b\"\nroute = \"writer\"\n");
    let v = eval(&session(&r), "select 1");
    assert_eq!(matched(&v), ["a"]);
    assert_eq!(v.unwrap().route, None);
}

#[test]
fn a_continuing_rule_lets_later_rules_apply() {
    let r = rules(
        "[[rules]]\nname = \"a\"\nstatement_timeout = \"5s\"\ncontinue = true\n\
         [[rules]]\nname = \"b\"\nroute = \"writer\"\n[[rules]]\nname = \"c\"\nlog = true\n",
    );
    let v = eval(&session(&r), "select 1").unwrap();
    assert_eq!(v.statement_timeout, Some(Duration::from_secs(5)));
    assert_eq!(v.route, Some(RouteTo::Writer));
    assert!(!v.log, "b does not continue, so c is not reached");
    assert_eq!(matched(&Some(v)), ["a", "b"]);
}

#[test]
fn the_first_rule_that_sets_an_action_wins_and_log_is_ored() {
    let r = rules(
        r#"
[[rules]]
name = "first"
route = "replica"
statement_timeout = "1s"
continue = true
[[rules]]
name = "second"
route = "writer"
statement_timeout = "2s"
log = true
continue = true
[[rules]]
name = "third"
kinds = ["update"]
log = false
statement_timeout = "3s"
"#,
    );
    let v = eval(&session(&r), "select 1").unwrap();
    assert_eq!(v.route, Some(RouteTo::Replica));
    assert_eq!(v.statement_timeout, Some(Duration::from_secs(1)));
    assert!(v.log);
    assert_eq!(matched(&Some(v)), ["first", "second"]);
}

#[test]
fn rewrites_compose_and_later_rules_see_the_rewritten_text() {
    let r = rules(
        r#"
[[rules]]
name = "star"
rewrite = { pattern = "^select \\*", replacement = "select id" }
continue = true
[[rules]]
name = "table"
query_regex = "^select id from"
rewrite = { pattern = "from t\\b", replacement = "from t2" }
continue = true
[[rules]]
name = "to-delete"
rewrite = { pattern = "^select", replacement = "delete" }
continue = true
[[rules]]
name = "sees-delete"
kinds = ["delete"]
block = "no"
"#,
    );
    let v = eval(&session(&r), "select * from t where a = 1").unwrap();
    assert_eq!(v.rewritten.as_deref(), Some("delete id from t2 where a = 1"));
    assert_eq!(v.block.as_deref(), Some("no"));
    assert_eq!(matched(&Some(v)), ["star", "table", "to-delete", "sees-delete"]);
}

/// A digest function that counts its calls.
fn counting(calls: &Cell<usize>) -> impl Fn(&str) -> Digest + '_ {
    move |text| {
        calls.set(calls.get() + 1);
        gatehouse_sql::digest(text)
    }
}

#[test]
fn the_digest_is_not_computed_when_no_rule_needs_it() {
    let r = rules("[[rules]]\nname = \"q\"\nquery_regex = \"x\"\nkinds = [\"select\"]\nlog = true\n");
    let calls = Cell::new(0);
    let s = session(&r);
    assert!(s.evaluate("select x", &pg_with(&counting(&calls))).is_some());
    assert!(s.evaluate("select y", &pg_with(&counting(&calls))).is_none());
    assert_eq!(calls.get(), 0);
}

#[test]
fn the_digest_waits_for_the_cheaper_fields() {
    let r = rules(
        "[[rules]]\nname = \"d\"\nkinds = [\"delete\"]\ndigest_regex = \"from t\"\nlog = true\n\
         [[rules]]\nname = \"q\"\nquery_regex = \"nomatch\"\ndigest_regex = \"t\"\nlog = true\n",
    );
    let calls = Cell::new(0);
    assert!(
        session(&r)
            .evaluate("select * from t", &pg_with(&counting(&calls)))
            .is_none()
    );
    assert_eq!(calls.get(), 0, "kinds and query_regex failed first");
}

#[test]
fn the_digest_is_computed_once_per_distinct_text() {
    let r = rules(
        r#"
[[rules]]
name = "a"
digest_regex = "select"
rewrite = { pattern = "1", replacement = "1" }
continue = true
[[rules]]
name = "b"
digest_regex = "from"
log = true
continue = true
[[rules]]
name = "c"
rewrite = { pattern = "from t", replacement = "from u" }
continue = true
[[rules]]
name = "d"
digest_regex = "from u"
log = true
continue = true
[[rules]]
name = "e"
digest_id = "0000000000000000"
log = true
"#,
    );
    let calls = Cell::new(0);
    let v = session(&r)
        .evaluate("select 1 from t", &pg_with(&counting(&calls)))
        .unwrap();
    assert_eq!(matched(&Some(v.clone())), ["a", "b", "c", "d"]);
    assert_eq!(v.rewritten.as_deref(), Some("select 1 from u"));
    assert_eq!(calls.get(), 2, "once for the text, once for the rewritten text");
}

#[test]
fn hits_are_counted_per_rule_and_reset() {
    let r = rules(
        "[[rules]]\nname = \"a\"\nkinds = [\"select\"]\nlog = true\ncontinue = true\n\
         [[rules]]\nname = \"b\"\nlog = true\n",
    );
    let s = session(&r);
    for text in ["select 1", "select 2", "update t set a = 1"] {
        eval(&s, text);
    }
    let hits: Vec<(String, u64)> = r.counters().into_iter().map(|c| (c.name, c.hits)).collect();
    assert_eq!(hits, [("a".to_string(), 2), ("b".to_string(), 3)]);
    r.reset_counters();
    assert!(r.counters().iter().all(|c| c.hits == 0));
}

#[test]
fn counters_show_each_rules_definition() {
    let r = rules(
        "[[rules]]\nname = \"a\"\nkinds = [\"delete\"]\nclient_cidrs = [\"10.1.2.3\"]\nblock = \"no \\\"x\\\"\"\n",
    );
    assert_eq!(
        r.counters()[0].definition,
        r#"{ client_cidrs = ["10.1.2.3/32"], kinds = ["delete"], block = "no \"x\"" }"#
    );
}

const BEFORE: &str = r#"
[[rules]]
name = "same"
kinds = ["select"]
log = true
[[rules]]
name = "changed"
route = "writer"
[[rules]]
name = "gone"
log = true
"#;

const AFTER: &str = r#"
[[rules]]
name = "changed"
route = "replica"
[[rules]]
name = "same"
kinds = ["select"]
log = true
[[rules]]
name = "new"
log = true
"#;

#[test]
fn counters_carry_over_a_reload_for_identical_rules_only() {
    let old = rules(BEFORE);
    let s = session(&old);
    eval(&s, "select 1");
    eval(&s, "update t set a = 1");
    let new = rules(AFTER);
    new.carry_counters_from(&old);
    new.carry_counters_from(&old);
    let hits: Vec<(String, u64)> = new.counters().into_iter().map(|c| (c.name, c.hits)).collect();
    assert_eq!(
        hits,
        [
            ("changed".to_string(), 0),
            ("same".to_string(), 1),
            ("new".to_string(), 0)
        ]
    );
}

#[test]
fn diff_names_added_removed_changed_and_reordered_rules() {
    let (old, new) = (rules(BEFORE), rules(AFTER));
    let d = new.diff(&old);
    let names = |v: &[Arc<str>]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(names(&d.added), ["new"]);
    assert_eq!(names(&d.removed), ["gone"]);
    assert_eq!(names(&d.changed), ["changed"]);
    assert!(d.reordered);
    assert!(rules(BEFORE).diff(&old).is_empty());
}

#[test]
fn session_rules_know_the_rule_set_they_came_from() {
    let (a, b) = (rules(BEFORE), rules(BEFORE));
    let s = session(&a);
    assert!(s.is_from(&a) && !s.is_from(&b));
}
