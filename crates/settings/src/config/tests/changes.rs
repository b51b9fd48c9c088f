//! Unit tests for what a reload's answer names: every key of `[proxy]`,
//! `[admin]` and `[console]` (taken from the reference, so a new key cannot
//! be left out) changed alone is named once, as applied or as needing a
//! restart, as its reference text says; a certificate is compared by its
//! content, and so are token keys; tenant and secret changes are named,
//! passwords never shown.

use std::path::{Path, PathBuf};

use super::good;
use crate::config::reference::SECTIONS;
use crate::config::{Settings, Takes, credential_changes, endpoint_changes, parse, process_changes};

/// A directory of its own for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("gatehouse-config-changes-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Two values for each process-wide key: the base's, and another.
const VALUES: &[(&str, &str, &str, &str)] = &[
    ("[proxy]", "login_timeout", "\"3s\"", "\"4s\""),
    ("[proxy]", "client_message_timeout", "\"3s\"", "\"4s\""),
    ("[proxy]", "shutdown_timeout", "\"3s\"", "\"4s\""),
    ("[proxy]", "park_idle_after", "\"100ms\"", "\"0s\""),
    ("[proxy]", "max_message_bytes", "2048", "4096"),
    ("[proxy]", "log_filter", "\"info\"", "\"warn\""),
    ("[proxy]", "log_format", "\"text\"", "\"json\""),
    ("[proxy]", "worker_threads", "1", "2"),
    ("[proxy]", "tenant_directory", "\"a.jsonl\"", "\"b.jsonl\""),
    ("[proxy]", "auth_failures_per_minute_per_address", "30", "31"),
    ("[proxy]", "auth_failures_per_minute_per_user", "10", "1"),
    ("[proxy]", "upgrade_socket", "\"u1.sock\"", "\"u2.sock\""),
    ("[admin]", "listen", "\"127.0.0.1:9930\"", "\"127.0.0.1:9931\""),
    ("[admin]", "token_file", "\"t1\"", "\"t2\""),
    ("[console]", "database", "\"gatehouse\"", "\"console\""),
    ("[console]", "admin_users", "[]", "[\"app\"]"),
    ("[console]", "monitor_users", "[]", "[\"app\"]"),
];

/// The test configuration with every process-wide key at its base value,
/// but `changed` (section, key) at its other one.
fn process_config(dir: &Path, changed: Option<(&str, &str)>) -> Settings {
    let mut text = good().replace("[proxy]\nlogin_timeout = \"3s\"\n", "");
    for section in ["[proxy]", "[admin]", "[console]"] {
        text.push_str(&format!("\n{section}\n"));
        for (s, key, base, other) in VALUES.iter().filter(|v| v.0 == section) {
            let value = if changed == Some((s, key)) { other } else { base };
            text.push_str(&format!("{key} = {value}\n"));
        }
    }
    parse(&text, dir).unwrap_or_else(|p| panic!("{p}\n{text}"))
}

#[test]
fn every_process_wide_key_changed_is_named_once_as_applied_or_needing_a_restart() {
    let dir = Scratch::new("process");
    std::fs::write(dir.0.join("a.jsonl"), "# no tenants\n").unwrap();
    std::fs::write(dir.0.join("b.jsonl"), "# none either\n").unwrap();
    std::fs::write(dir.0.join("t1"), "token-one").unwrap();
    std::fs::write(dir.0.join("t2"), "token-two").unwrap();
    let base = process_config(&dir.0, None);
    assert!(process_changes(&base, &process_config(&dir.0, None)).is_empty());
    let mut seen = 0;
    for section in SECTIONS
        .iter()
        .filter(|s| ["[proxy]", "[admin]", "[console]"].contains(&s.name))
    {
        for key in section.keys {
            let at = format!("{} {}", section.name, key.name);
            assert!(
                VALUES.iter().any(|v| v.0 == section.name && v.1 == key.name),
                "{at}: no values in VALUES: add two, and say in the reference whether a reload applies it"
            );
            let changed = process_config(&dir.0, Some((section.name, key.name)));
            let changes = process_changes(&base, &changed);
            let name = format!("{}.{}", section.name.trim_matches(['[', ']']), key.name);
            assert!(
                changes.len() == 1 && changes[0].key == name,
                "{at}: changed alone, named {changes:?}"
            );
            let restart = key.about.contains("A change takes a restart.");
            assert_eq!(
                changes[0].takes == Takes::Restart,
                restart,
                "{at}: the reference says a change takes a restart: {restart}; the reload: {:?}",
                changes[0]
            );
            assert!(
                restart || key.about.to_lowercase().contains("reload"),
                "{at}: applied by a reload, which its reference text does not say"
            );
            assert!(changes[0].detail.starts_with(&name), "{:?}", changes[0]);
            seen += 1;
        }
    }
    assert_eq!(seen, VALUES.len(), "VALUES holds keys the reference does not have");
}

#[test]
fn a_changed_value_is_shown_old_to_new_and_the_admin_token_never() {
    let dir = Scratch::new("details");
    std::fs::write(dir.0.join("a.jsonl"), "").unwrap();
    std::fs::write(dir.0.join("t1"), "token-one").unwrap();
    std::fs::write(dir.0.join("t2"), "token-two").unwrap();
    let base = process_config(&dir.0, None);
    let detail = |section, key| {
        process_changes(&base, &process_config(&dir.0, Some((section, key))))
            .pop()
            .map(|c| c.detail)
            .unwrap_or_default()
    };
    assert_eq!(
        detail("[proxy]", "auth_failures_per_minute_per_user"),
        "proxy.auth_failures_per_minute_per_user: 10 -> 1 (counting afresh)"
    );
    assert_eq!(
        detail("[proxy]", "login_timeout"),
        "proxy.login_timeout: 3s -> 4s (new logins)"
    );
    assert_eq!(
        detail("[proxy]", "park_idle_after"),
        "proxy.park_idle_after: 100ms -> none"
    );
    let token = detail("[admin]", "token_file");
    assert!(!token.contains("token-one") && !token.contains("token-two"), "{token}");
}

/// A self-signed certificate for localhost and its key, in PEM.
fn certificate() -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    (cert.pem(), key.serialize_pem())
}

fn write_pair(dir: &Path, name: &str, (cert, key): &(String, String)) {
    std::fs::write(dir.join(format!("{name}.pem")), cert).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), key).unwrap();
}

fn tls_config(dir: &Path, name: &str) -> Result<Settings, crate::config::Problems> {
    let tls = format!("role = \"read_write\"\ntls = {{ cert = \"{name}.pem\", key = \"{name}.key\" }}");
    parse(&good().replacen("role = \"read_write\"", &tls, 1), dir)
}

#[test]
fn a_certificate_rotated_in_place_is_a_change_and_the_same_one_moved_is_not() {
    let dir = Scratch::new("tls");
    let (a, b) = (certificate(), certificate());
    write_pair(&dir.0, "live", &a);
    write_pair(&dir.0, "copy", &a);
    let before = tls_config(&dir.0, "live").unwrap();
    let moved = tls_config(&dir.0, "copy").unwrap();
    assert!(endpoint_changes(&before.endpoints[0], &moved.endpoints[0]).is_empty());
    write_pair(&dir.0, "live", &b);
    let rotated = tls_config(&dir.0, "live").unwrap();
    let changes = endpoint_changes(&before.endpoints[0], &rotated.endpoints[0]);
    assert!(
        changes.len() == 1 && changes[0].starts_with("TLS certificate reloaded (sha256 "),
        "{changes:?}"
    );
    // A certificate that does not load refuses the configuration whole.
    std::fs::write(dir.0.join("live.pem"), "-----BEGIN CERTIFICATE-----\ngarbage\n").unwrap();
    assert!(tls_config(&dir.0, "live").is_err());
    write_pair(&dir.0, "live", &(b.0.clone(), a.1.clone()));
    let mismatched = tls_config(&dir.0, "live").err().map(|p| p.to_string());
    assert!(
        mismatched.is_some_and(|p| p.contains("TLS")),
        "a certificate with another's key was taken"
    );
}

#[test]
fn endpoint_and_tenant_limits_are_named_with_old_and_new_values() {
    let before = parse(&good(), Path::new(".")).unwrap();
    let text = good()
        .replace(
            "role = \"read_write\"",
            "role = \"read_write\"\nmax_client_connections = 5",
        )
        .replace(
            "name = \"app\"\n",
            "name = \"app\"\nmax_client_connections = 3\nmax_backend_connections = 2\nconnection_rate = 4\n",
        )
        .replace("password = \"pw\"", "password = \"new-pw\"");
    let after = parse(&text, Path::new(".")).unwrap();
    assert_eq!(
        endpoint_changes(&before.endpoints[0], &after.endpoints[0]),
        ["max_client_connections: 10000 -> 5"]
    );
    let changes = credential_changes(&before, &after);
    assert_eq!(
        changes,
        [
            "tenants: 1 -> 1 (changed \"app\" (max_client_connections: none -> 3, max_backend_connections: none -> 2, connection_rate: none -> 4/s, burst 4))",
            "secrets: 1 -> 1 (changed \"admin\" (password))",
        ]
    );
    assert!(!changes.iter().any(|c| c.contains("new-pw")));
}

#[test]
fn a_token_key_rotated_in_its_file_is_named_and_the_same_one_is_not() {
    let dir = Scratch::new("tokens");
    let secret = dir.0.join("hs.secret");
    std::fs::write(&secret, b"0123456789abcdef0123456789abcdef").unwrap();
    let text = format!(
        "{}\n[tokens]\nissuer = \"me\"\nhs256_secret_file = \"hs.secret\"\n",
        good()
    );
    let before = parse(&text, &dir.0).unwrap();
    assert!(credential_changes(&before, &parse(&text, &dir.0).unwrap()).is_empty());
    std::fs::write(&secret, b"fedcba9876543210fedcba9876543210").unwrap();
    let rotated = parse(&text, &dir.0).unwrap();
    assert_eq!(
        credential_changes(&before, &rotated),
        ["tokens: [tokens] changed (issuer, leeway, cache or keys)"]
    );
    let reissued = parse(&text.replace("issuer = \"me\"", "issuer = \"you\""), &dir.0).unwrap();
    assert_eq!(credential_changes(&rotated, &reissued).len(), 1);
}
