//! Unit tests for a cluster's `backend_tls` keys: the default, each mode,
//! direct negotiation, and every problem pointing at its line.

use std::path::Path;

use super::{good, problems};
use crate::backend_tls::{Negotiation, TlsMode};
use crate::config::parse;

/// `good()` with `keys` added to its cluster.
fn with(keys: &str) -> String {
    good().replace(
        "monitor_secret = \"admin\"",
        &format!("monitor_secret = \"admin\"\n{keys}"),
    )
}

#[test]
fn backend_tls_is_prefer_by_default_and_each_mode_parses() {
    let s = parse(&good(), Path::new(".")).unwrap();
    assert_eq!(s.clusters[0].backend_tls.mode, TlsMode::Prefer);
    for mode in ["disable", "prefer", "require"] {
        let s = parse(&with(&format!("backend_tls = \"{mode}\"")), Path::new(".")).unwrap();
        assert_eq!(s.clusters[0].backend_tls.mode.as_str(), mode);
    }
}

#[test]
fn direct_negotiation_is_taken_from_require_up_on_postgresql_clusters_only() {
    let s = parse(&good(), Path::new(".")).unwrap();
    assert_eq!(s.clusters[0].backend_tls.negotiation, Negotiation::Postgres);
    let keys = "backend_tls = \"require\"\nbackend_tls_negotiation = \"direct\"";
    let s = parse(&with(keys), Path::new(".")).unwrap();
    assert_eq!(s.clusters[0].backend_tls.negotiation, Negotiation::Direct);
    let mysql = with(keys).replace("engine = \"postgres\"", "engine = \"mysql\"");
    let found = problems(&mysql);
    assert!(
        found
            .iter()
            .any(|p| p.message.contains("PostgreSQL's (17 and later)") && p.line.is_some()),
        "{found:?}"
    );
}

#[test]
fn backend_tls_problems_name_the_key_and_its_line() {
    let scratch = tempfile::Builder::new()
        .prefix("gatehouse-config-backend-tls-")
        .tempdir()
        .unwrap();
    let dir = scratch.path().to_path_buf();
    std::fs::write(dir.join("junk.pem"), "no certificate here\n").unwrap();
    let line = good()
        .lines()
        .position(|l| l.starts_with("monitor_secret"))
        .map(|i| i + 2)
        .unwrap();
    for (keys, wanted) in [
        ("backend_tls = \"allow\"", "unknown backend_tls \"allow\""),
        ("backend_tls = \"verify-full\"", "needs backend_tls_ca"),
        ("backend_tls = \"verify-ca\"", "needs backend_tls_ca"),
        ("backend_tls_cert = \"c.pem\"", "go together"),
        ("backend_tls_key = \"k.pem\"", "go together"),
        (
            "backend_tls = \"verify-ca\"\nbackend_tls_ca = \"missing.pem\"",
            "cannot read backend_tls_ca",
        ),
        ("backend_tls_server_name = \"not a name!\"", "neither a DNS name"),
        (
            "backend_tls_negotiation = \"tls\"",
            "unknown backend_tls_negotiation \"tls\"",
        ),
        (
            "backend_tls_negotiation = \"direct\"",
            "needs backend_tls = \"require\"",
        ),
        (
            "backend_tls = \"prefer\"\nbackend_tls_negotiation = \"direct\"",
            "with \"prefer\" a server without direct TLS",
        ),
    ] {
        let text = with(keys);
        let found = match parse(&text, &dir) {
            Ok(_) => panic!("{keys}: accepted"),
            Err(p) => p.0,
        };
        assert!(
            found
                .iter()
                .any(|p| p.message.contains(wanted) && p.line.is_some_and(|l| l >= line)),
            "{keys}: {found:?}"
        );
    }
    let found = problems(&with(&format!(
        "backend_tls = \"verify-full\"\nbackend_tls_ca = \"{}\"",
        dir.join("junk.pem").display()
    )));
    assert!(
        found.iter().any(|p| p.message.contains("holds no certificate")),
        "{found:?}"
    );
}
