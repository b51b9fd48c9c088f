//! The `gatehouse` command line: check-config reports every problem with its
//! line, hash-password produces verifiers the config accepts.

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
"#
    );
    let path = temp_file("good.toml", &text);
    let out = gatehouse().arg("check-config").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8(out.stdout).unwrap().contains("2 tenants"));
    let _ = std::fs::remove_file(path);
}
