//! The `gatehouse` command line: check-config reports every problem with its
//! line (a bad log filter or format too) and accepts every example once
//! filled in, hash-password produces verifiers the config accepts,
//! `secrets` manages the encrypted store without leaking passwords, and
//! `token` mints tokens the verifier accepts. What `run` logs is in
//! `logs.rs`.

use std::io::Write;
use std::process::{Command, Stdio};

fn gatehouse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gatehouse"))
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("gatehouse-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

fn hash(password: &str, extra: &[&str]) -> String {
    let mut child = gatehouse()
        .arg("hash-password")
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(password.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn check_config_lists_problems_with_line_numbers() {
    let text = r#"[[clusters]]
name = "main"
engine = "postgres"
backends = ["127.0.0.1:5432"]

[[endpoints]]
name = "rw"
listen = "127.0.0.1:6432"
cluster = "mian"
role = "read_write"
"#;
    let path = temp_file("bad.toml", text);
    let out = gatehouse().arg("check-config").arg(&path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!("{}:9: unknown cluster \"mian\"", path.display())),
        "{err}"
    );

    let typo = temp_file("typo.toml", &text.replace("role = ", "rol = "));
    let out = gatehouse().arg("check-config").arg(&typo).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(":10: unknown field `rol`"), "{err}");
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(typo);
}

#[test]
fn hashed_passwords_make_a_valid_config() {
    let scram = hash("s3cret\n", &[]);
    assert!(scram.starts_with("SCRAM-SHA-256$4096:"), "{scram}");
    assert!(!scram.contains("s3cret"));
    let md5 = hash("s3cret", &["--md5", "--user", "bob"]);
    assert_eq!(md5, gatehouse_proto_pg::auth::md5::md5_stored("bob", "s3cret"));
    // MySQL's own PASSWORD('secret').
    let mysql = hash("secret\n", &["--mysql"]);
    assert_eq!(mysql, "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7");
    // What MariaDB 10.11 stores for IDENTIFIED VIA ed25519 USING PASSWORD('secret').
    let ed = hash("secret\n", &["--mysql-ed25519"]);
    assert_eq!(ed, "ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY");
    let text = format!(
        r#"[[clusters]]
name = "main"
engine = "postgres"
backends = ["127.0.0.1:5432"]

[[endpoints]]
name = "rw"
listen = "127.0.0.1:6432"
cluster = "main"
role = "read_write"

[[secrets]]
name = "s"
user = "u"
password = "p"

[[tenants]]
name = "alice"
databases = ["a"]
secret = "s"
scram_verifier = "{scram}"

[[tenants]]
name = "bob"
databases = ["b"]
secret = "s"
md5_hash = "{md5}"

[[tenants]]
name = "carol"
databases = ["c"]
secret = "s"
mysql_native_password = "{mysql}"
"#
    );
    let path = temp_file("good.toml", &text);
    let out = gatehouse().arg("check-config").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8(out.stdout).unwrap().contains("3 tenants"));
    let _ = std::fs::remove_file(path);
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!("gatehouse-cli-{}-{label}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn join(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `cmd` with `stdin` on standard input.
fn run_with_stdin(cmd: &mut Command, stdin: &str) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command that fails before reading its input (a wrong key) may exit
    // first: the pipe is then closed, which is not the test's concern.
    if let Err(e) = child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    child.wait_with_output().unwrap()
}

fn run_ok(cmd: &mut Command, stdin: &str) -> String {
    let out = run_with_stdin(cmd, stdin);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// `gatehouse secrets SUB --file FILE --key-file KEY ARGS...`
fn secrets(sub: &str, file: &std::path::Path, key: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = gatehouse();
    cmd.args(["secrets", sub, "--file"])
        .arg(file)
        .arg("--key-file")
        .arg(key)
        .args(args);
    cmd
}

#[test]
fn secrets_lifecycle_never_leaks_the_password() {
    const PASSWORD: &str = "Sup3r-s3cret-backend-pw";
    const ROTATED: &str = "An0ther-s3cret-after-rotation";
    let dir = TempDir::new("secrets");
    let key = dir.join("master.key");
    let file = dir.join("secrets.toml");

    let out = run_ok(gatehouse().args(["secrets", "keygen", "--out"]).arg(&key), "");
    assert!(out.contains("master.key"), "{out}");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // keygen never overwrites.
    let before = std::fs::read(&key).unwrap();
    let out = gatehouse()
        .args(["secrets", "keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(std::fs::read(&key).unwrap(), before);

    let out = run_ok(
        &mut secrets("set", &file, &key, &["--name", "demo_backend", "--user", "demo_owner"]),
        &format!("{PASSWORD}\r\n"),
    );
    assert_eq!(out.trim(), "set demo_backend (version 1)");

    let out = run_ok(&mut secrets("list", &file, &key, &[]), "");
    assert!(out.starts_with("demo_backend demo_owner 1 "), "{out}");
    assert_eq!(out.lines().count(), 1);
    assert!(!out.contains(PASSWORD));

    let out = run_ok(&mut secrets("get", &file, &key, &["--name", "demo_backend"]), "");
    assert!(out.starts_with("demo_backend demo_owner 1 "), "{out}");
    assert_eq!(out.lines().count(), 1);
    assert!(!out.contains(PASSWORD));

    let out = run_ok(
        &mut secrets("get", &file, &key, &["--name", "demo_backend", "--show-password"]),
        "",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("demo_backend demo_owner 1 "), "{out}");
    assert_eq!(lines[1], PASSWORD);

    let out = run_ok(
        &mut secrets("rotate", &file, &key, &["--name", "demo_backend"]),
        &format!("{ROTATED}\n"),
    );
    assert_eq!(out.trim(), "rotated demo_backend (version 2)");
    let out = run_ok(
        &mut secrets("get", &file, &key, &["--name", "demo_backend", "--show-password"]),
        "",
    );
    assert!(out.starts_with("demo_backend demo_owner 2 "), "{out}");
    assert_eq!(out.lines().nth(1), Some(ROTATED));

    // A wrong key fails, says why, and shows no password; nor does writing
    // with it change the file.
    let wrong = dir.join("wrong.key");
    run_ok(gatehouse().args(["secrets", "keygen", "--out"]).arg(&wrong), "");
    let on_disk = std::fs::read_to_string(&file).unwrap();
    for (sub, args, stdin) in [
        ("get", vec!["--name", "demo_backend", "--show-password"], ""),
        ("set", vec!["--name", "other", "--user", "u"], "x\n"),
        ("rotate", vec!["--name", "demo_backend"], "x\n"),
        ("remove", vec!["--name", "demo_backend"], ""),
    ] {
        let out = run_with_stdin(&mut secrets(sub, &file, &wrong, &args), stdin);
        assert!(!out.status.success(), "{sub} with a wrong key succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("decryption failed"), "{sub}: {err}");
        let shown = format!("{err}{}", String::from_utf8_lossy(&out.stdout));
        assert!(!shown.contains(PASSWORD) && !shown.contains(ROTATED), "{sub}: {shown}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            on_disk,
            "{sub} changed the file"
        );
    }

    assert!(!on_disk.contains(PASSWORD) && !on_disk.contains(ROTATED), "{on_disk}");
    assert!(on_disk.contains("demo_owner"));

    // Unknown names, then removal.
    let out = run_with_stdin(&mut secrets("rotate", &file, &key, &["--name", "nope"]), "x\n");
    assert!(!out.status.success());
    let out = run_ok(&mut secrets("remove", &file, &key, &["--name", "demo_backend"]), "");
    assert_eq!(out.trim(), "removed demo_backend");
    assert_eq!(run_ok(&mut secrets("list", &file, &key, &[]), ""), "");
}

#[test]
fn secrets_set_refuses_empty_input_and_reads_the_key_from_the_environment() {
    const VAR: &str = "GATEHOUSE_CLI_TEST_MASTER_KEY";
    let dir = TempDir::new("secrets-env");
    let file = dir.join("secrets.toml");
    let key_text = run_ok(gatehouse().args(["secrets", "keygen"]), "");
    let key_text = key_text.trim().to_string();
    assert_eq!(key_text.len(), 44, "{key_text}");

    let with_env = |sub: &str, args: &[&str]| {
        let mut cmd = gatehouse();
        cmd.args(["secrets", sub, "--file"])
            .arg(&file)
            .args(["--key-env", VAR])
            .args(args)
            .env(VAR, &key_text);
        cmd
    };
    for empty in ["", "\n", "\r\n"] {
        let out = run_with_stdin(&mut with_env("set", &["--name", "s", "--user", "u"]), empty);
        assert!(!out.status.success(), "{empty:?} accepted");
        assert!(String::from_utf8_lossy(&out.stderr).contains("no password"));
        assert!(!file.exists());
    }

    let out = run_ok(
        &mut with_env("set", &["--name", "s", "--user", "u"]),
        "pw-from-env-key\n",
    );
    assert_eq!(out.trim(), "set s (version 1)");
    let out = run_ok(&mut with_env("get", &["--name", "s", "--show-password"]), "");
    assert_eq!(out.lines().nth(1), Some("pw-from-env-key"));
    // list needs no key.
    let out = run_ok(gatehouse().args(["secrets", "list", "--file"]).arg(&file), "");
    assert!(out.starts_with("s u 1 "), "{out}");

    // Key arguments: exactly one is required, and an unset variable fails.
    let out = gatehouse()
        .args(["secrets", "get", "--name", "s", "--file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = gatehouse()
        .args(["secrets", "get", "--name", "s", "--key-env", VAR, "--file"])
        .arg(&file)
        .env_remove(VAR)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(VAR));
}

fn issue_token(key: &std::path::Path, extra: &[&str]) -> std::process::Output {
    gatehouse()
        .args([
            "token",
            "issue",
            "--tenant",
            "alice",
            "--database",
            "app",
            "--ttl",
            "15m",
        ])
        .args(["--issuer", "https://issuer.test", "--audience", "rw", "--key"])
        .arg(key)
        .args(extra)
        .output()
        .unwrap()
}

fn check_token(verifier: &gatehouse_token::Verifier, out: &std::process::Output) {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout.clone()).unwrap();
    let token = token.trim();
    let now = gatehouse_token::unix_seconds(std::time::SystemTime::now());
    let claims = verifier.verify(token, "rw", now).unwrap();
    assert_eq!(claims.tenant, "alice");
    assert_eq!(claims.database, "app");
    assert!(
        claims.expires_at.abs_diff(now + 15 * 60) <= 5,
        "exp {} vs now {now}",
        claims.expires_at
    );
    // Not for another endpoint.
    assert!(verifier.verify(token, "ro", now).is_err());
}

#[test]
fn token_issue_makes_tokens_the_verifier_accepts() {
    use gatehouse_token::{KeySet, Verifier, VerifierConfig};
    let dir = TempDir::new("token");

    // EC P-256 from a PEM, verified through the JWKS `token jwks` prints.
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let private = dir.join("ec.pem");
    let public = dir.join("ec.pub.pem");
    std::fs::write(&private, pair.serialize_pem()).unwrap();
    std::fs::write(&public, pair.public_key_pem()).unwrap();
    let jwks_out = gatehouse()
        .args(["token", "jwks", "--kid", "k1", "--public-key"])
        .arg(&public)
        .output()
        .unwrap();
    assert!(
        jwks_out.status.success(),
        "{}",
        String::from_utf8_lossy(&jwks_out.stderr)
    );
    let jwks = String::from_utf8(jwks_out.stdout).unwrap();
    assert!(jwks.contains("\"ES256\"") && jwks.contains("\"k1\""), "{jwks}");
    let mut keys = KeySet::new();
    assert_eq!(keys.add_jwks_json(&jwks).unwrap(), 1);
    let verifier = Verifier::new(VerifierConfig::new("https://issuer.test", keys)).unwrap();
    check_token(&verifier, &issue_token(&private, &["--kid", "k1"]));

    // HS256 from a shared secret file.
    let secret = "an HS256 shared secret of at least 32 bytes";
    let secret_file = dir.join("hs256.secret");
    std::fs::write(&secret_file, format!("{secret}\n")).unwrap();
    let mut keys = KeySet::new();
    keys.add_hs256_secret(secret.as_bytes(), None).unwrap();
    let verifier = Verifier::new(VerifierConfig::new("https://issuer.test", keys)).unwrap();
    check_token(&verifier, &issue_token(&secret_file, &["--hs256"]));

    // Refused: a short HS256 secret, a public key as the signing key, a
    // ttl that is not a duration, and a private key given to `token jwks`.
    std::fs::write(dir.join("short.secret"), "short").unwrap();
    let out = issue_token(&dir.join("short.secret"), &["--hs256"]);
    assert!(!out.status.success());
    let out = issue_token(&public, &[]);
    assert!(!out.status.success());
    for ttl in ["garbage", "15 parsecs", "", "-5m"] {
        let out = gatehouse()
            .args(["token", "issue", "--tenant", "alice", "--database", "app", "--ttl", ttl])
            .args(["--issuer", "i", "--audience", "rw", "--key"])
            .arg(&private)
            .output()
            .unwrap();
        assert!(!out.status.success(), "ttl {ttl:?} accepted");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--ttl"), "{ttl:?}");
    }
    let out = gatehouse()
        .args(["token", "jwks", "--public-key"])
        .arg(&private)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a private key made a JWKS");
}

#[test]
fn check_config_refuses_a_bad_log_filter_or_format_with_their_lines() {
    let text = r#"[proxy]
log_filter = "gatehouse=loud"
log_format = "xml"

[[clusters]]
name = "main"
engine = "postgres"
backends = ["127.0.0.1:5432"]

[[endpoints]]
name = "rw"
listen = "127.0.0.1:6432"
cluster = "main"
role = "read_write"
"#;
    let path = temp_file("bad-logging.toml", text);
    let out = gatehouse().arg("check-config").arg(&path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(":2: log_filter: invalid log filter"), "{err}");
    assert!(err.contains(":3: log_format must be \"text\" or \"json\""), "{err}");
    let _ = std::fs::remove_file(path);
}

/// The example configurations, as a user would fill them in: every
/// `${...}` placeholder given a value, the files under /etc/gatehouse made
/// (a TLS certificate, a JWKS, an encrypted secrets store, a tenant
/// directory, the admin token) in a directory of the test's, the
/// environment variables set. `check-config` must accept each.
#[test]
fn every_example_configuration_passes_check_config_once_filled_in() {
    let dir = TempDir::new("examples");
    let etc = dir.join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(etc.join("server.pem"), cert.cert.pem()).unwrap();
    std::fs::write(etc.join("server.key"), cert.key_pair.serialize_pem()).unwrap();
    std::fs::write(etc.join("admin.token"), "an-admin-token\n").unwrap();
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    std::fs::write(etc.join("jwt.pub.pem"), pair.public_key_pem()).unwrap();
    let jwks = gatehouse()
        .args(["token", "jwks", "--public-key"])
        .arg(etc.join("jwt.pub.pem"))
        .output()
        .unwrap();
    assert!(jwks.status.success());
    std::fs::write(etc.join("jwks.json"), jwks.stdout).unwrap();
    let key = etc.join("secrets.key");
    run_ok(gatehouse().args(["secrets", "keygen", "--out"]).arg(&key), "");
    let store = etc.join("secrets.enc");
    for (name, user) in [
        ("accounts_app", "accounts"),
        ("catalog_app", "catalog"),
        ("pg_monitor", "monitor"),
        ("my_monitor", "monitor"),
    ] {
        run_ok(
            &mut secrets("set", &store, &key, &["--name", name, "--user", user]),
            "a-backend-password\n",
        );
    }
    std::fs::write(
        etc.join("tenants.jsonl"),
        "{\"name\":\"reports\",\"databases\":[\"accounts\"],\"secret\":\"accounts_app\",\"token\":true}\n",
    )
    .unwrap();
    let key_text = std::fs::read_to_string(&key).unwrap();
    let values = [
        ("GH_DEMO_VERIFIER", hash("demo-pw", &[])),
        ("BILLING_SCRAM_VERIFIER", hash("billing-pw", &[])),
        ("STOREFRONT_NATIVE_HASH", hash("storefront-pw", &["--mysql"])),
    ];
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let mut text = std::fs::read_to_string(&path).unwrap();
        for (name, value) in &values {
            text = text.replace(&format!("${{{name}}}"), value);
        }
        // Hosts and ports: any placeholder left is an address part (each
        // port its own).
        let mut port = 15000;
        while let Some(start) = text.find("${") {
            let end = start + text[start..].find('}').unwrap();
            let value = if text[start + 2..end].ends_with("_PORT") {
                port += 1;
                port.to_string()
            } else {
                "127.0.0.1".to_string()
            };
            text.replace_range(start..=end, &value);
        }
        let text = text.replace("/etc/gatehouse", etc.to_str().unwrap());
        let filled = dir.join(path.file_name().unwrap().to_str().unwrap());
        std::fs::write(&filled, text).unwrap();
        let out = gatehouse()
            .arg("check-config")
            .arg(&filled)
            .env("GH_DEMO_BACKEND_PASSWORD", "pw")
            .env("GH_PG_PASSWORD", "pw")
            .env("SHOP_APP_PASSWORD", "pw")
            .env("GATEHOUSE_MONITOR_PASSWORD", "pw")
            .env("GATEHOUSE_SECRETS_KEY", key_text.trim())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} examples found in {}", examples.display());
}
