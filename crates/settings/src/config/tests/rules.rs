//! Unit tests for the `[[rules]]` and `[digests]` sections: parsing,
//! defaults, every validation problem with its line, and what a reload
//! reports as changed.

use std::path::Path;

use super::{good, problems};
use crate::config::validate::{DEFAULT_MAX_DIGESTS, MAX_MAX_DIGESTS};
use crate::config::{Settings, parse, rules_changes};
use crate::rules::{MAX_RULES, SessionFacts};

/// `good()` plus a PostgreSQL cluster "other" and a MySQL cluster "maria"
/// (without endpoints), then `extra`.
fn with(extra: &str) -> String {
    format!(
        "{}\n[[clusters]]\nname = \"other\"\nengine = \"postgres\"\nbackends = [\"127.0.0.1:6432\"]\n\n\
         [[clusters]]\nname = \"maria\"\nengine = \"mysql\"\nbackends = [\"127.0.0.1:3306\"]\n\n{extra}",
        good()
    )
}

fn settings(text: &str) -> Settings {
    parse(text, Path::new(".")).unwrap()
}

#[test]
fn rules_and_digests_are_off_by_default() {
    let s = settings(&good());
    assert!(s.rules.is_empty());
    assert!(!s.digests.enabled);
    assert_eq!(s.digests.max_digests, DEFAULT_MAX_DIGESTS);
    let s = settings(&with("[digests]\n"));
    assert_eq!((s.digests.enabled, s.digests.max_digests), (false, DEFAULT_MAX_DIGESTS));
}

#[test]
fn every_rule_key_parses() {
    let s = settings(&with(
        r#"
[digests]
enabled = true
max_digests = 500

[[rules]]
name = "no-big-deletes"
tenants = ["app"]
databases = ["app"]
endpoints = ["rw"]
client_cidrs = ["10.0.0.0/8", "127.0.0.1", "::1/128"]
kinds = ["delete"]
digest = "delete from t"
query_regex = "(?i)^delete"
block = "deletes without a WHERE are not allowed"
log = true

[[rules]]
name = "orders.to-backend_1"
digest_id = "00ff00ff00ff00ff"
digest_regex = "^select .* from orders"
route = { backend = "127.0.0.1:5433" }
rewrite = { pattern = "(?i)^select \\*", replacement = "SELECT id" }
statement_timeout = "5s"
continue = true

[[rules]]
name = "reports"
route = { cluster = "other" }

[[rules]]
name = "reads"
route = "replica"

[[rules]]
name = "writes"
route = "writer"
"#,
    ));
    assert!(s.digests.enabled);
    assert_eq!(s.digests.max_digests, 500);
    assert_eq!(s.rules.len(), 5);
    let names: Vec<String> = s.rules.counters().into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        ["no-big-deletes", "orders.to-backend_1", "reports", "reads", "writes"]
    );
    let session = SessionFacts {
        tenant: "app",
        database: "app",
        endpoint: "rw",
        client: Some("127.0.0.1".parse().unwrap()),
    };
    let v = s
        .rules
        .for_session(&session)
        .unwrap()
        .evaluate(
            "DELETE FROM t",
            &crate::rules::Reader {
                digest: &gatehouse_sql::digest,
                kind: &gatehouse_sql::statement_kind_at,
            },
        )
        .unwrap();
    assert_eq!(v.block.as_deref(), Some("deletes without a WHERE are not allowed"));
}

#[test]
fn digests_max_digests_is_checked() {
    for bad in ["0".to_string(), (MAX_MAX_DIGESTS + 1).to_string()] {
        let text = with(&format!("[digests]\nmax_digests = {bad}\n"));
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].message.contains("max_digests must be between 1 and 100000"),
            "{p:?}"
        );
        let line = text.lines().position(|l| l.starts_with("max_digests")).unwrap() + 1;
        assert_eq!(p[0].line, Some(line));
    }
    assert_eq!(problems(&with("[digests]\nmax_digests = -1\n")).len(), 1);
    assert!(
        problems(&with("[digests]\nenable = true\n"))[0]
            .message
            .contains("enable")
    );
}

/// Each rule body, the problem it has, and the start of the line it is on.
const BAD_RULES: &[(&str, &str, &str)] = &[
    (
        "name = \"has space\"\nlog = true",
        "rule \"has space\": name must be 1 to 64",
        "name =",
    ),
    ("name = \"\"\nlog = true", "name must be 1 to 64", "name ="),
    (
        "name = \"x\"\nlog = true\nquery_regex = \"(\"",
        "rule \"x\": query_regex does not compile",
        "query_regex",
    ),
    (
        "name = \"x\"\nlog = true\ndigest_regex = \"(?:a{1000}){1000}\"",
        "digest_regex does not compile",
        "digest_regex",
    ),
    (
        "name = \"x\"\nlog = true\ndigest_id = \"ff\"",
        "digest_id \"ff\" must be 16 hex digits",
        "digest_id",
    ),
    (
        "name = \"x\"\nlog = true\ndigest_id = \"00ff00ff00ff00fg\"",
        "must be 16 hex digits",
        "digest_id",
    ),
    (
        "name = \"x\"\nlog = true\ndigest = \"select ?\"\ndigest_id = \"00ff00ff00ff00ff\"",
        "one of digest or digest_id",
        "digest_id",
    ),
    (
        "name = \"x\"\nlog = true\nendpoints = [\"rw\", \"nope\"]",
        "endpoints: unknown endpoint \"nope\"",
        "endpoints",
    ),
    (
        "name = \"x\"\nblock = \"no\"\nroute = \"writer\"\nstatement_timeout = \"1s\"",
        "block cannot be combined with route, statement_timeout",
        "block",
    ),
    (
        "name = \"x\"\nblock = \"no\"\nrewrite = { pattern = \"a\", replacement = \"b\" }",
        "block cannot be combined with rewrite",
        "block",
    ),
    ("name = \"x\"\nblock = \" \"", "block needs the message", "block"),
    (
        "name = \"x\"\nkinds = [\"select\"]\nlog = false",
        "rule \"x\": a rule needs an action",
        "name =",
    ),
    (
        "name = \"x\"\nroute = { backend = \"127.0.0.1:9999\" }",
        "route backend \"127.0.0.1:9999\" is not a backend of cluster \"main\"",
        "route",
    ),
    (
        "name = \"x\"\nroute = { cluster = \"nope\" }",
        "route: unknown cluster \"nope\"",
        "route",
    ),
    (
        "name = \"x\"\nroute = { cluster = \"maria\" }",
        "route cluster \"maria\" is another engine than cluster \"main\"",
        "route",
    ),
    (
        "name = \"x\"\nroute = \"primary\"",
        "unknown route \"primary\"",
        "route",
    ),
    (
        "name = \"x\"\nroute = { backend = \"a\", cluster = \"b\" }",
        "not both",
        "route",
    ),
    (
        "name = \"x\"\nroute = { host = \"a\" }",
        "unknown field `host`",
        "route",
    ),
    (
        "name = \"x\"\nlog = true\nkinds = [\"SELECT\"]",
        "kinds: \"SELECT\" must be a lower-case key word",
        "kinds",
    ),
    (
        "name = \"x\"\nlog = true\nkinds = [\"drop table\"]",
        "must be a lower-case key word",
        "kinds",
    ),
    (
        "name = \"x\"\nstatement_timeout = \"0s\"",
        "statement_timeout must be more than 0",
        "statement_timeout",
    ),
    ("name = \"x\"\nstatement_timeout = \"soon\"", "", "statement_timeout"),
    ("name = \"x\"\nlog = true\ntenants = []", "tenants is empty", "tenants"),
    (
        "name = \"x\"\nlog = true\nclient_cidrs = [\"10.0.0.0/33\"]",
        "\"10.0.0.0/33\" is not an address or a CIDR block",
        "client_cidrs",
    ),
    (
        "name = \"x\"\nrewrite = { pattern = \"(a)\", replacement = \"$1b\" }",
        "rewrite replacement: refers to group \"1b\"",
        "rewrite",
    ),
    (
        "name = \"x\"\nrewrite = { pattern = \"(a)\", replacement = \"${2}\" }",
        "refers to group \"2\"",
        "rewrite",
    ),
    (
        "name = \"x\"\nrewrite = { pattern = \"[\", replacement = \"\" }",
        "rewrite pattern does not compile",
        "rewrite",
    ),
    (
        "name = \"x\"\nlog = true\nblokc = \"typo\"",
        "unknown field `blokc`",
        "blokc",
    ),
];

#[test]
fn every_rule_problem_names_the_rule_and_its_line() {
    for (body, expected, line_start) in BAD_RULES {
        let text = with(&format!("[[rules]]\n{body}\n"));
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{body}: {p:?}");
        assert!(p[0].message.contains(expected), "{body}: {p:?}");
        let rules_at = text.find("[[rules]]").unwrap();
        let line = text[rules_at..]
            .lines()
            .position(|l| l.starts_with(line_start))
            .map(|i| text[..rules_at].lines().count() + i + 1);
        assert_eq!(p[0].line, line, "{body}: {p:?}");
    }
}

#[test]
fn a_rules_route_is_checked_against_only_its_endpoints() {
    // The backend is main's; an endpoint on another cluster is what makes
    // a rule without `endpoints` wrong.
    let rule = "[[rules]]\nname = \"pin\"\nroute = { backend = \"127.0.0.1:5433\" }\n";
    settings(&with(rule));
    let mysql_endpoint =
        "[[endpoints]]\nname = \"my\"\nlisten = \"127.0.0.1:0\"\ncluster = \"maria\"\nrole = \"read_write\"\n\n";
    let p = problems(&with(&format!("{mysql_endpoint}{rule}")));
    assert!(p[0].message.contains("of endpoint \"my\""), "{p:?}");
    settings(&with(&format!("{mysql_endpoint}{rule}endpoints = [\"rw\"]\n")));
    // `replica` and `writer` are fine anywhere.
    settings(&with(&format!(
        "{mysql_endpoint}[[rules]]\nname = \"r\"\nroute = \"replica\"\n"
    )));
}

#[test]
fn duplicate_rule_names_are_refused() {
    let text = with("[[rules]]\nname = \"a\"\nlog = true\n\n[[rules]]\nname = \"a\"\nlog = true\n");
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].message.contains("rule \"a\": duplicate rule name"), "{p:?}");
    assert_eq!(p[0].line, Some(text.lines().count() - 1));
}

#[test]
fn too_many_rules_are_refused() {
    let many: String = (0..=MAX_RULES)
        .map(|i| format!("[[rules]]\nname = \"r{i}\"\nlog = true\n"))
        .collect();
    let p = problems(&with(&many));
    assert_eq!(p.len(), 1);
    assert!(p[0].message.contains("too many [[rules]]: at most 10000"), "{p:?}");
}

#[test]
fn a_reload_reports_rule_and_digest_changes() {
    let old = settings(&with(
        "[[rules]]\nname = \"a\"\nlog = true\n[[rules]]\nname = \"b\"\nlog = true\n[[rules]]\nname = \"c\"\nlog = true\n",
    ));
    assert!(rules_changes(&old, &old).is_empty());
    let same = settings(&with(
        "[[rules]]\nname = \"a\"\nlog = true\n[[rules]]\nname = \"b\"\nlog = true\n[[rules]]\nname = \"c\"\nlog = true\n",
    ));
    assert!(rules_changes(&old, &same).is_empty());
    let new = settings(&with(
        "[digests]\nenabled = true\nmax_digests = 10\n\
         [[rules]]\nname = \"a\"\nlog = true\n[[rules]]\nname = \"b\"\nroute = \"writer\"\n\
         [[rules]]\nname = \"c\"\nlog = true\n[[rules]]\nname = \"d\"\nlog = true\n",
    ));
    assert_eq!(
        rules_changes(&old, &new),
        [
            "rules: 3 -> 4 (added \"d\"; changed \"b\")",
            "digests.enabled: false -> true",
            "digests.max_digests: 2000 -> 10",
        ]
    );
    let reordered = settings(&with(
        "[[rules]]\nname = \"c\"\nlog = true\n[[rules]]\nname = \"b\"\nlog = true\n[[rules]]\nname = \"a\"\nlog = true\n",
    ));
    assert_eq!(rules_changes(&old, &reordered), ["rules: 3 -> 3 (reordered)"]);
    assert_eq!(
        rules_changes(&old, &settings(&good())),
        ["rules: 3 -> 0 (removed \"a\", \"b\", \"c\")"]
    );
}
