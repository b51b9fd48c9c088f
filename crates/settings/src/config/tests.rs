//! Unit tests for configuration parsing and validation.

use std::path::Path;

use super::*;

const VERIFIER: &str = "SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0c2FsdA==$WHJm3PQMNaUB3G2n5nRAOnmrFpzDtjcPHlQTI6QsdFE=:PYxeIJb3uDnnt7fkSDbcDl3jmHDnd2T+GJFIRhqqIhk=";

fn good() -> String {
    format!(
        r#"
[proxy]
login_timeout = "3s"

[[clusters]]
name = "main"
engine = "postgres"
backends = ["127.0.0.1:5432", "127.0.0.1:5433"]
monitor_secret = "admin"

[[endpoints]]
name = "rw"
listen = "127.0.0.1:0"
cluster = "main"
role = "read_write"

[[tenants]]
name = "app"
databases = ["app"]
secret = "admin"
scram_verifier = "{VERIFIER}"

[[secrets]]
name = "admin"
user = "postgres"
password = "pw"
"#
    )
}

fn problems(text: &str) -> Vec<Problem> {
    match parse(text, Path::new(".")) {
        Ok(_) => panic!("expected problems"),
        Err(p) => p.0,
    }
}

#[test]
fn a_good_config_resolves_references_and_defaults() {
    let s = parse(&good(), Path::new(".")).unwrap();
    assert_eq!(s.proxy.login_timeout, std::time::Duration::from_secs(3));
    assert_eq!(s.clusters[0].backends.len(), 2);
    assert_eq!(s.clusters[0].pool_size, validate::DEFAULT_POOL_SIZE);
    assert_eq!(s.endpoints[0].cluster.name, "main");
    assert_eq!(s.endpoints[0].pool_mode, PoolMode::Transaction);
    let t = &s.tenants["app"];
    assert!(t.may_use("app") && !t.may_use("other"));
    assert_eq!(t.secret.user, "postgres");
    assert!(
        !format!("{:?}", t.secret).contains("pw\""),
        "Debug must not show the password"
    );
}

#[test]
fn parking_is_on_by_default_and_zero_turns_it_off() {
    let s = parse(&good(), Path::new(".")).unwrap();
    assert_eq!(s.proxy.park_idle_after, Some(validate::DEFAULT_PARK_IDLE_AFTER));
    let text = good().replace(
        "login_timeout = \"3s\"",
        "login_timeout = \"3s\"\npark_idle_after = \"2s\"",
    );
    let s = parse(&text, Path::new(".")).unwrap();
    assert_eq!(s.proxy.park_idle_after, Some(std::time::Duration::from_secs(2)));
    let text = good().replace(
        "login_timeout = \"3s\"",
        "login_timeout = \"3s\"\npark_idle_after = \"0s\"",
    );
    let s = parse(&text, Path::new(".")).unwrap();
    assert_eq!(s.proxy.park_idle_after, None);
}

#[test]
fn unknown_keys_are_errors_with_their_line() {
    let text = good().replace("role = \"read_write\"", "role = \"read_write\"\nrolle = 1");
    let p = problems(&text);
    assert_eq!(p.len(), 1);
    assert!(p[0].message.contains("rolle"), "{p:?}");
    let expected_line = text.lines().position(|l| l.starts_with("rolle")).unwrap() + 1;
    assert_eq!(p[0].line, Some(expected_line));
}

#[test]
fn every_semantic_problem_is_listed_with_its_line() {
    let text = good()
        .replace("cluster = \"main\"", "cluster = \"nope\"")
        .replace("secret = \"admin\"\nscram", "secret = \"missing\"\nscram")
        .replace("\"127.0.0.1:5433\"", "\"no-port\"");
    let p = problems(&text);
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).map(|i| i + 1);
    let find = |m: &str| {
        p.iter()
            .find(|x| x.message.contains(m))
            .unwrap_or_else(|| panic!("{m}: {p:?}"))
    };
    assert_eq!(find("unknown cluster").line, line_of("cluster = \"nope\""));
    assert_eq!(find("unknown secret").line, line_of("secret = \"missing\""));
    assert_eq!(find("must be host:port").line, line_of("no-port"));
    assert_eq!(p.len(), 3, "{p:?}");
}

#[test]
fn credentials_and_tls_are_checked() {
    let p = problems(&good().replace(VERIFIER, "SCRAM-SHA-256$0:x$y:z"));
    assert!(p[0].message.contains("scram_verifier"), "{p:?}");
    let p = problems(&good().replace("role = \"read_write\"", "role = \"read_write\"\nrequire_tls = true"));
    assert!(p[0].message.contains("require_tls"), "{p:?}");
    let p = problems(&good().replace(
        "role = \"read_write\"",
        "role = \"read_write\"\ntls = { cert = \"/nonexistent.pem\", key = \"/nonexistent.key\" }",
    ));
    assert!(p[0].message.contains("/nonexistent.pem"), "{p:?}");
    let p = problems(&good().replace("password = \"pw\"", "password_env = \"GATEHOUSE_TEST_SURELY_UNSET\""));
    assert!(p[0].message.contains("GATEHOUSE_TEST_SURELY_UNSET"), "{p:?}");
}

#[test]
fn an_empty_config_has_nothing_to_listen_on() {
    let p = problems("");
    assert!(p[0].message.contains("endpoints"), "{p:?}");
}

#[test]
fn token_tenants_need_a_tokens_section() {
    let text = good().replace("scram_verifier = \"", "token = true\nscram_verifier = \"");
    let p = problems(&text);
    assert!(p.iter().any(|p| p.message.contains("[tokens]")), "{p:?}");
}

#[test]
fn password_endpoints_need_tls_or_explicit_plaintext() {
    let text = good().replace(
        "role = \"read_write\"",
        "role = \"read_write\"\nclient_auth = \"password\"",
    );
    let p = problems(&text);
    assert!(p.iter().any(|p| p.message.contains("needs [endpoints.tls]")), "{p:?}");
    let allowed = text.replace(
        "client_auth = \"password\"",
        "client_auth = \"password\"\nallow_plaintext_tokens = true",
    );
    let s = parse(&allowed, Path::new(".")).unwrap();
    assert_eq!(s.endpoints[0].client_auth, ClientAuth::Password);
    let bad = good().replace(
        "role = \"read_write\"",
        "role = \"read_write\"\nclient_auth = \"kerberos\"",
    );
    assert!(problems(&bad).iter().any(|p| p.message.contains("unknown client_auth")));
}

#[test]
fn tokens_section_loads_keys_and_token_only_tenants() {
    let dir = std::env::temp_dir().join(format!("gatehouse-config-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hs.secret"), b"0123456789abcdef0123456789abcdef").unwrap();
    let text = format!(
        "{}\n[tokens]\nissuer = \"me\"\nhs256_secret_file = \"hs.secret\"\n\n[[tenants]]\nname = \"t\"\ndatabases = [\"t\"]\nsecret = \"admin\"\ntoken = true\n",
        good()
    );
    let s = parse(&text, &dir).unwrap();
    assert!(s.tokens.is_some());
    let t = &s.tenants["t"];
    assert!(t.token && t.auth.is_none());
    let missing = text.replace("hs.secret", "nope.secret");
    assert!(parse(&missing, &dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn secrets_store_entries_join_the_secrets_without_showing_them() {
    use gatehouse_secrets::{MasterKey, SecretsFile};
    let dir = std::env::temp_dir().join(format!("gatehouse-config-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = MasterKey::generate().unwrap();
    std::fs::write(dir.join("master.key"), key.to_text().as_bytes()).unwrap();
    let mut file = SecretsFile::new();
    file.set(&key, "stored", "app_owner", "very-secret-pw").unwrap();
    file.save(dir.join("secrets.toml")).unwrap();
    let text = format!(
        "{}\n[secrets_store]\nfile = \"secrets.toml\"\nkey_file = \"master.key\"\n",
        good().replace("secret = \"admin\"", "secret = \"stored\"")
    );
    let s = parse(&text, &dir).unwrap();
    let stored = &s.secrets["stored"];
    assert_eq!(stored.user, "app_owner");
    assert_eq!(stored.password.expose(), "very-secret-pw");
    assert!(!format!("{s:?}").contains("very-secret-pw"));
    // A wrong key is a configuration problem that shows no secret.
    std::fs::write(
        dir.join("master.key"),
        MasterKey::generate().unwrap().to_text().as_bytes(),
    )
    .unwrap();
    let p = parse(&text, &dir).unwrap_err();
    assert!(p.to_string().contains("secrets_store"), "{p}");
    assert!(!p.to_string().contains("very-secret-pw"));
    // The same name in [[secrets]] and in the store is refused.
    std::fs::write(dir.join("master.key"), key.to_text().as_bytes()).unwrap();
    let dup = text.replace("name = \"admin\"\nuser", "name = \"stored\"\nuser");
    assert!(parse(&dup, &dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tenant_directory_lines_are_checked_with_their_line() {
    let dir = std::env::temp_dir().join(format!("gatehouse-config-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lines = [
        format!(r#"{{"name":"d1","databases":["d1"],"secret":"admin","scram_verifier":"{VERIFIER}"}}"#),
        String::new(),
        r#"{"name":"d2","databases":["d2"],"secret":"nope","md5_hash":"md5nothex"}"#.to_owned(),
        r#"{"name":"app","databases":["x"],"secret":"admin","scram_verifier":"SCRAM-SHA-256$broken"}"#.to_owned(),
        r#"{"name":"d4", "databases": "not a list", "secret":"SCRAM-SHA-256$4096:secretish"}"#.to_owned(),
    ];
    std::fs::write(dir.join("tenants.jsonl"), lines.join("\n")).unwrap();
    let text = good().replace("[proxy]\n", "[proxy]\ntenant_directory = \"tenants.jsonl\"\n");
    let p = match parse(&text, &dir) {
        Ok(_) => panic!("expected problems"),
        Err(p) => p.0,
    };
    let all: Vec<&str> = p.iter().map(|p| p.message.as_str()).collect();
    assert!(
        all.iter()
            .any(|m| m.contains("tenants.jsonl:3: unknown secret \"nope\"")),
        "{all:?}"
    );
    assert!(all.iter().any(|m| m.contains("tenants.jsonl:3: md5_hash")), "{all:?}");
    assert!(
        all.iter().any(|m| m.contains("tenants.jsonl:4: tenant name \"app\"")),
        "{all:?}"
    );
    assert!(
        all.iter().any(|m| m.contains("tenants.jsonl:5: not a tenant object")),
        "{all:?}"
    );
    assert!(!all.iter().any(|m| m.contains("secretish")), "{all:?}");
    // The good line alone loads.
    std::fs::write(dir.join("tenants.jsonl"), &lines[0]).unwrap();
    let s = parse(&text, &dir).unwrap();
    assert!(s.tenants.contains_key("d1") && s.tenants.contains_key("app"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn abuse_limits_have_defaults_and_take_their_keys() {
    let s = parse(&good(), Path::new(".")).unwrap();
    assert_eq!(
        s.proxy.auth_failures_per_minute_per_address.get(),
        crate::limits::DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_ADDRESS
    );
    assert_eq!(
        s.proxy.auth_failures_per_minute_per_user.get(),
        crate::limits::DEFAULT_AUTH_FAILURES_PER_MINUTE_PER_USER
    );
    assert_eq!(s.tenants["app"].connection_rate, None);
    let text = good()
        .replace(
            "[proxy]\n",
            "[proxy]\nauth_failures_per_minute_per_address = 100\nauth_failures_per_minute_per_user = 3\n",
        )
        .replace(
            "secret = \"admin\"\nscram",
            "secret = \"admin\"\nconnection_rate = 5\nscram",
        );
    let s = parse(&text, Path::new(".")).unwrap();
    assert_eq!(s.proxy.auth_failures_per_minute_per_address.get(), 100);
    assert_eq!(s.proxy.auth_failures_per_minute_per_user.get(), 3);
    let rate = s.tenants["app"].connection_rate.unwrap();
    assert_eq!(
        (rate.per_second.get(), rate.burst.get()),
        (5, 5),
        "burst defaults to the rate"
    );
    let text = text.replace("connection_rate = 5\n", "connection_rate = 5\nconnection_burst = 20\n");
    let rate = parse(&text, Path::new(".")).unwrap().tenants["app"]
        .connection_rate
        .unwrap();
    assert_eq!((rate.per_second.get(), rate.burst.get()), (5, 20));
}

#[test]
fn abuse_limits_must_be_positive() {
    let text = good().replace(
        "[proxy]\n",
        "[proxy]\nauth_failures_per_minute_per_address = 0\nauth_failures_per_minute_per_user = 0\n",
    );
    let p = problems(&text);
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(
        p[0].message
            .contains("auth_failures_per_minute_per_address must be at least 1"),
        "{p:?}"
    );
    assert_eq!(p[0].line, Some(3));
    assert!(
        p[1].message
            .contains("auth_failures_per_minute_per_user must be at least 1"),
        "{p:?}"
    );
    for (tenant_keys, expected) in [
        ("connection_rate = 0\n", "connection_rate must be at least 1"),
        (
            "connection_rate = 2\nconnection_burst = 0\n",
            "connection_burst must be at least 1",
        ),
        ("connection_burst = 4\n", "connection_burst needs a connection_rate"),
    ] {
        let text = good().replace(
            "secret = \"admin\"\nscram",
            &format!("secret = \"admin\"\n{tenant_keys}scram"),
        );
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].message.contains(expected), "{p:?}");
        let key = tenant_keys.lines().last().unwrap();
        let line = text.lines().position(|l| l == key).unwrap() + 1;
        assert_eq!(p[0].line, Some(line), "{p:?}");
    }
    let p = problems(&good().replace(
        "secret = \"admin\"\nscram",
        "secret = \"admin\"\nconnection_rate = -1\nscram",
    ));
    assert_eq!(p.len(), 1, "{p:?}");
}

#[test]
fn tenant_directory_lines_take_a_connection_rate() {
    let dir = std::env::temp_dir().join(format!("gatehouse-config-rate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lines = [
        format!(
            r#"{{"name":"d1","databases":["d1"],"secret":"admin","scram_verifier":"{VERIFIER}","connection_rate":3,"connection_burst":9}}"#
        ),
        format!(
            r#"{{"name":"d2","databases":["d2"],"secret":"admin","scram_verifier":"{VERIFIER}","connection_rate":0}}"#
        ),
        format!(
            r#"{{"name":"d3","databases":["d3"],"secret":"admin","scram_verifier":"{VERIFIER}","connection_burst":2}}"#
        ),
    ];
    std::fs::write(dir.join("tenants.jsonl"), lines.join("\n")).unwrap();
    let text = good().replace("[proxy]\n", "[proxy]\ntenant_directory = \"tenants.jsonl\"\n");
    let p = match parse(&text, &dir) {
        Ok(_) => panic!("expected problems"),
        Err(p) => p.0,
    };
    let all: Vec<&str> = p.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(
        all[0].contains("tenants.jsonl:2: connection_rate must be at least 1"),
        "{all:?}"
    );
    assert!(
        all[1].contains("tenants.jsonl:3: connection_burst needs a connection_rate"),
        "{all:?}"
    );
    std::fs::write(dir.join("tenants.jsonl"), &lines[0]).unwrap();
    let s = parse(&text, &dir).unwrap();
    let rate = s.tenants["d1"].connection_rate.unwrap();
    assert_eq!((rate.per_second.get(), rate.burst.get()), (3, 9));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn max_backend_connections_is_checked() {
    let text = good().replace("name = \"app\"\n", "name = \"app\"\nmax_backend_connections = 3\n");
    let s = parse(&text, Path::new(".")).unwrap();
    assert_eq!(s.tenants["app"].max_backend_connections, Some(3));
    let zero = good().replace("name = \"app\"\n", "name = \"app\"\nmax_backend_connections = 0\n");
    assert!(
        problems(&zero)
            .iter()
            .any(|p| p.message.contains("max_backend_connections"))
    );
}

#[test]
fn mysql_native_password_hash_alone_is_enough_and_is_checked() {
    // "*" + hex(SHA1(SHA1("secret"))), as MySQL's PASSWORD('secret') shows it.
    let hash = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7";
    let text = good().replace(
        &format!("scram_verifier = \"{VERIFIER}\""),
        &format!("mysql_native_password = \"{hash}\""),
    );
    let s = parse(&text, Path::new(".")).unwrap();
    let t = &s.tenants["app"];
    assert!(t.auth.is_none());
    let stored = t.mysql_native.expect("the hash");
    assert_eq!(stored[0], 0x14);
    assert_eq!(stored[19], 0xE7);
    for bad in [
        "14E65567ABDB5135D0CFD9A70B3032C179A49EE7",
        "*14E6",
        "*ZZE65567ABDB5135D0CFD9A70B3032C179A49EE7",
    ] {
        let text = good().replace(
            &format!("scram_verifier = \"{VERIFIER}\""),
            &format!("mysql_native_password = \"{bad}\""),
        );
        let p = problems(&text);
        assert!(p.iter().any(|p| p.message.contains("40 hex digits")), "{bad}: {p:?}");
        let line = text
            .lines()
            .position(|l| l.starts_with("mysql_native_password"))
            .unwrap()
            + 1;
        assert!(p.iter().any(|p| p.line == Some(line)), "{p:?}");
    }
}

#[test]
fn mysql_auth_keys_are_checked() {
    // Only MySQL endpoints take them.
    let p = problems(&good().replace(
        "role = \"read_write\"",
        "role = \"read_write\"\nmysql_default_auth = \"caching_sha2_password\"",
    ));
    assert!(p[0].message.contains("MySQL clusters only"), "{p:?}");
    let mysql = good().replace("engine = \"postgres\"", "engine = \"mysql\"");
    let s = parse(
        &mysql.replace(
            "role = \"read_write\"",
            "role = \"read_write\"\nmysql_default_auth = \"caching_sha2_password\"",
        ),
        Path::new("."),
    )
    .unwrap();
    assert_eq!(s.endpoints[0].mysql_default_auth, MysqlDefaultAuth::CachingSha2);
    assert!(s.endpoints[0].mysql_rsa_key.is_none());
    let p = problems(&mysql.replace(
        "role = \"read_write\"",
        "role = \"read_write\"\nmysql_default_auth = \"sha256_password\"",
    ));
    assert!(p[0].message.contains("unknown mysql_default_auth"), "{p:?}");
    let p = problems(&mysql.replace(
        "role = \"read_write\"",
        "role = \"read_write\"\nmysql_rsa_key = \"/nonexistent-rsa.pem\"",
    ));
    assert!(p[0].message.contains("cannot read mysql_rsa_key"), "{p:?}");
    let dir = std::env::temp_dir().join(format!("gatehouse-config-rsa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("k.pem"),
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let p = match parse(
        &mysql.replace(
            "role = \"read_write\"",
            "role = \"read_write\"\nmysql_rsa_key = \"k.pem\"",
        ),
        &dir,
    ) {
        Ok(_) => panic!("a broken key was accepted"),
        Err(p) => p.0,
    };
    assert!(p[0].message.contains("not an RSA key"), "{p:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mysql_ed25519_keys_are_checked() {
    let mysql = good().replace("engine = \"postgres\"", "engine = \"mysql\"");
    let with_key = |key: &str| {
        mysql.replace(
            &format!("scram_verifier = \"{VERIFIER}\""),
            &format!("mysql_ed25519 = \"{key}\""),
        )
    };
    // MariaDB's stored form for 'secret', with or without padding.
    for key in [
        "ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY",
        "ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY=",
    ] {
        let s = parse(&with_key(key), Path::new(".")).unwrap();
        assert!(s.tenants["app"].mysql_ed25519.is_some());
    }
    for bad in ["not base64!", "ZIgUREUg5PVgQ6Lskh"] {
        let p = problems(&with_key(bad));
        assert!(p[0].message.contains("mysql_ed25519 must be"), "{p:?}");
        assert!(!p[0].message.contains(bad), "the bad key is echoed: {p:?}");
    }
}

#[test]
fn split_endpoints_read_their_writes_unless_told_not_to() {
    let split = good().replace("role = \"read_write\"", "role = \"split\"");
    let s = parse(&split, Path::new(".")).unwrap();
    assert_eq!(s.endpoints[0].role, crate::config::EndpointRole::Split);
    assert!(s.endpoints[0].read_your_writes, "on by default");
    let off = good().replace(
        "role = \"read_write\"",
        "role = \"split\"\nread_your_writes = false\nread_only_functions = [\"price_of\"]\nmax_replica_lag = \"2s\"",
    );
    let s = parse(&off, Path::new(".")).unwrap();
    assert!(!s.endpoints[0].read_your_writes);
    assert_eq!(s.endpoints[0].read_only_functions, vec!["price_of".to_string()]);
    // Split keys on other roles, and a read-only endpoint's fallback on a
    // split one, are mistakes.
    let misplaced = good().replace(
        "role = \"read_write\"",
        "role = \"read_write\"\nread_your_writes = true",
    );
    assert!(
        problems(&misplaced)
            .iter()
            .any(|p| p.message.contains("split endpoints only"))
    );
    let fallback = good().replace("role = \"read_write\"", "role = \"split\"\nreader_fallback = \"error\"");
    assert!(
        problems(&fallback)
            .iter()
            .any(|p| p.message.contains("read_only endpoints only"))
    );
}

#[test]
fn the_writer_reads_only_where_the_endpoint_says_so_and_only_on_reading_endpoints() {
    let split = good().replace("role = \"read_write\"", "role = \"split\"");
    let s = parse(&split, Path::new(".")).unwrap();
    assert!(!s.endpoints[0].writer_reads, "off by default");
    let on = good().replace("role = \"read_write\"", "role = \"read_only\"\nwriter_reads = true");
    let s = parse(&on, Path::new(".")).unwrap();
    assert!(s.endpoints[0].writer_reads);
    let misplaced = good().replace("role = \"read_write\"", "role = \"read_write\"\nwriter_reads = true");
    assert!(problems(&misplaced).iter().any(|p| {
        p.message
            .contains("writer_reads applies to read_only and split endpoints only")
    }));
}

mod backend_tls;
mod changes;
mod console;
mod rules;
