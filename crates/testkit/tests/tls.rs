//! End-to-end test of `Options::tls` against real servers: a PostgreSQL
//! primary + streaming replica and a MariaDB primary, checked with the real
//! `psql` and `mariadb` clients verifying the certificate with the kit's CA.

use std::path::PathBuf;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use gatehouse_testkit::{Cluster, Options, Server};

/// Removes the cluster directory when the test ends (declared before the
/// cluster, so it is dropped after the cluster has stopped the servers).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Run a client; its trimmed stdout, panicking with stderr on failure.
fn output(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `pg_stat_ssl.ssl` of a psql session to `s` with connection options `ssl`.
fn pg_ssl(c: &Cluster, s: &Server, ssl: &str) -> String {
    let conninfo = format!(
        "host={} port={} user={} dbname=postgres {ssl}",
        s.host,
        s.port,
        c.pg_user()
    );
    output(
        Command::new("psql")
            .env("PGPASSWORD", c.pg_password())
            .args([
                "-X",
                "-A",
                "-t",
                "-c",
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            ])
            .arg(conninfo),
    )
}

/// The session's `Ssl_cipher` of a mariadb client session to `s` with the
/// client options `ssl` (empty without TLS).
fn mysql_cipher(c: &Cluster, s: &Server, ssl: &[String]) -> String {
    let out = output(
        Command::new("mariadb")
            .arg("--no-defaults")
            .args(["-h", &s.host, "-P", &s.port.to_string(), "-u", c.mysql_user()])
            .arg(format!("-p{}", c.mysql_password()))
            .args(ssl)
            .args(["-N", "-e", "SHOW SESSION STATUS LIKE 'Ssl_cipher'"]),
    );
    let value = out.strip_prefix("Ssl_cipher").map(str::trim);
    value.unwrap_or_else(|| panic!("unexpected output {out:?}")).to_string()
}

#[test]
fn servers_accept_tls_verified_by_the_kits_ca() {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let tmp = TempDir(std::env::temp_dir().join(format!("gh-testkit-tls-{}-{nanos}", std::process::id())));
    let opts = Options {
        pg_replicas: 1,
        mysql: true,
        tls: true,
        ..Options::default()
    };
    let c = Cluster::up(&tmp.0, &opts).expect("cluster up");

    let ca = c.tls_ca().expect("TLS CA of a TLS cluster");
    assert_eq!(ca, tmp.0.canonicalize().unwrap().join("tls/ca.pem"));
    let env = std::fs::read_to_string(c.env_file()).unwrap();
    assert!(env.contains(&format!("GH_TLS_CA={}\n", ca.display())), "{env}");
    assert_eq!(Cluster::attach(&tmp.0).unwrap().tls_ca(), Some(ca.clone()));

    let verified = format!("sslmode=verify-full sslrootcert={}", ca.display());
    for s in [c.pg_primary().unwrap(), c.pg_replicas()[0]] {
        assert_eq!(pg_ssl(&c, s, &verified), "t", "{} over TLS", s.name);
        assert_eq!(pg_ssl(&c, s, "sslmode=disable"), "f", "{} in plain", s.name);
    }

    let my = c.mysql_primary().unwrap();
    let verified = [
        "--ssl".to_string(),
        format!("--ssl-ca={}", ca.display()),
        "--ssl-verify-server-cert".to_string(),
    ];
    assert_ne!(mysql_cipher(&c, my, &verified), "", "my0 over TLS");
    assert_eq!(mysql_cipher(&c, my, &["--skip-ssl".to_string()]), "", "my0 in plain");
}
