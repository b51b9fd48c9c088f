//! End-to-end test of the testkit against real servers: one PostgreSQL
//! primary + streaming replica and one MariaDB primary + GTID replica,
//! exercising replication, cluster.env/attach, kill/restart, promote and
//! down. Servers are slow to start, so everything runs in one test.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gatehouse_testkit::ports::is_listening;
use gatehouse_testkit::{Cluster, Engine, Options, Role};

/// Removes the cluster directory when the test ends (declared before the
/// cluster, so it is dropped after the cluster has stopped the servers).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pg_and_mariadb_cluster_lifecycle() {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let tmp = TempDir(std::env::temp_dir().join(format!("gh-testkit-{}-{nanos}", std::process::id())));
    let opts = Options {
        pg_replicas: 1,
        mysql: true,
        mysql_replicas: 1,
        ..Options::default()
    };
    let mut c = Cluster::up(&tmp.0, &opts).expect("cluster up");

    // Topology.
    let names: Vec<&str> = c.servers().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["pg0", "pg1", "my0", "my1"]);
    assert_eq!(c.pg_primary().unwrap().name, "pg0");
    assert_eq!(c.pg_replicas().iter().map(|s| &s.name).collect::<Vec<_>>(), ["pg1"]);
    assert_eq!(c.mysql_primary().unwrap().name, "my0");
    assert_eq!(c.mysql_replicas().iter().map(|s| &s.name).collect::<Vec<_>>(), ["my1"]);
    for s in c.servers() {
        assert_eq!(s.host, "127.0.0.1");
        assert!((20000..32768).contains(&s.port), "{s:?}");
        assert!(c.is_up(&s.name), "{} should be up", s.name);
    }

    // PostgreSQL streaming replication.
    c.pg_sql(
        "pg0",
        "postgres",
        "CREATE TABLE kit_t (id int PRIMARY KEY, v text); INSERT INTO kit_t VALUES (1, 'hello')",
    )
    .unwrap();
    wait_until("row on pg1", || {
        c.pg_sql("pg1", "postgres", "SELECT v FROM kit_t WHERE id = 1")
            .ok()
            .as_deref()
            == Some("hello")
    });
    assert_eq!(c.pg_sql("pg1", "postgres", "SELECT pg_is_in_recovery()").unwrap(), "t");
    assert_eq!(c.pg_sql("pg0", "postgres", "SELECT pg_is_in_recovery()").unwrap(), "f");
    let err = c
        .pg_sql("pg1", "postgres", "INSERT INTO kit_t VALUES (9, 'x')")
        .unwrap_err();
    assert!(format!("{err:#}").contains("read-only"), "{err:#}");

    // MariaDB GTID replication.
    c.mysql_sql(
        "my0",
        "CREATE DATABASE kit; CREATE TABLE kit.t (id INT PRIMARY KEY, v VARCHAR(20)); \
         INSERT INTO kit.t VALUES (1, 'hello')",
    )
    .unwrap();
    wait_until("row on my1", || {
        c.mysql_sql("my1", "SELECT v FROM kit.t WHERE id = 1").ok().as_deref() == Some("hello")
    });
    assert_eq!(c.mysql_sql("my1", "SELECT @@read_only").unwrap(), "1");
    assert_eq!(c.mysql_sql("my0", "SELECT @@read_only").unwrap(), "0");
    assert_ne!(c.mysql_sql("my1", "SELECT @@gtid_slave_pos").unwrap(), "");

    // cluster.env parses back; an attached handle does not stop servers.
    let env = std::fs::read_to_string(c.env_file()).unwrap();
    assert!(env.contains(&format!("GH_PG_PASSWORD={}\n", c.pg_password())), "{env}");
    assert!(env.contains("GH_PG_SERVERS=\"pg0 pg1\"\n"), "{env}");
    assert!(env.contains("GH_MY1_ROLE=replica\n"), "{env}");
    {
        let a = Cluster::attach(&tmp.0).unwrap();
        assert_eq!(a.servers(), c.servers());
        assert_eq!(a.pg_password(), c.pg_password());
        assert_eq!(a.mysql_password(), c.mysql_password());
        assert_eq!((a.pg_user(), a.mysql_user()), ("postgres", "root"));
        assert_eq!(a.pg_sql("pg1", "postgres", "SELECT count(*) FROM kit_t").unwrap(), "1");
    }
    assert!(
        c.is_up("pg0") && c.is_up("my0"),
        "dropping an attached handle must not stop servers"
    );

    // pg_hba rules are prepended and reloaded.
    c.add_pg_hba_rule("host all kit_trust 127.0.0.1/32 trust").unwrap();
    let hba = std::fs::read_to_string(c.servers()[1].dir.join("data/pg_hba.conf")).unwrap();
    assert!(hba.starts_with("host all kit_trust 127.0.0.1/32 trust\n"), "{hba}");
    assert!(c.is_up("pg0") && c.is_up("pg1"));

    // Kill and restart the PostgreSQL replica; it streams again.
    c.kill("pg1").unwrap();
    assert!(!c.is_up("pg1"));
    c.restart("pg1").unwrap();
    assert!(c.is_up("pg1"));
    c.pg_sql("pg0", "postgres", "INSERT INTO kit_t VALUES (2, 'again')")
        .unwrap();
    wait_until("row 2 on pg1", || {
        c.pg_sql("pg1", "postgres", "SELECT v FROM kit_t WHERE id = 2")
            .ok()
            .as_deref()
            == Some("again")
    });

    // Promote the MariaDB replica: writable, recorded in cluster.env.
    c.promote("my1").unwrap();
    assert_eq!(c.mysql_primary().unwrap().name, "my1");
    assert_eq!(c.mysql_replicas().len(), 0);
    assert_eq!(c.mysql_sql("my1", "SELECT @@read_only").unwrap(), "0");
    c.mysql_sql("my1", "INSERT INTO kit.t VALUES (2, 'promoted')").unwrap();
    assert_eq!(c.mysql_sql("my1", "SELECT count(*) FROM kit.t").unwrap(), "2");
    let a = Cluster::attach(&tmp.0).unwrap();
    let my1 = a.servers().iter().find(|s| s.name == "my1").unwrap();
    assert_eq!((my1.engine, my1.role), (Engine::Mysql, Role::Primary));
    assert_eq!(a.mysql_primary().unwrap().name, "my1");

    // Down: nothing listens any more; down is idempotent.
    let ports: Vec<u16> = c.servers().iter().map(|s| s.port).collect();
    c.down().unwrap();
    for (s, port) in c.servers().iter().zip(&ports) {
        assert!(!is_listening(*port), "{} still listens on {port}", s.name);
        assert!(!c.is_up(&s.name));
    }
    c.down().unwrap();
}
