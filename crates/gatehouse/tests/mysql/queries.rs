//! Commands through the proxy: multiple result sets, USE / COM_INIT_DB
//! limited to the tenant's databases, LOAD DATA LOCAL refused, the
//! read-only endpoint on the replica, and bad input answered with the
//! proper error number while the proxy keeps serving others.

use anyhow::{Result, ensure};
use mysql_async::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Ctx;

pub fn cases() -> Vec<(&'static str, crate::Case)> {
    vec![
        ("queries::multiple_result_sets", multi_results),
        ("queries::use_and_init_db_only_own_databases", use_database),
        ("queries::load_data_local_relays_the_clients_file", load_data_local),
        ("queries::read_only_endpoint_reaches_the_replica", read_only),
        ("queries::bad_packets_get_error_numbers", bad_packets),
        ("queries::handshake_collation_is_replayed", handshake_collation),
        // Named as it was when it lived among the transaction-mode cases.
        ("txn::explain_shows_last_insert_id_as_written", explain_last_insert_id),
        (
            "queries::stored_views_and_routines_keep_their_information_functions",
            stored_code,
        ),
    ]
}

/// A client greeting with a collation outside the common few (koi8r, id
/// 7): the proxy names it from the server's own collation table and
/// replays it on whichever pooled connection serves the client.
fn handshake_collation(ctx: &Ctx) -> Result<()> {
    for charset in ["koi8r", "cp1250", "latin1"] {
        let option = format!("--default-character-set={charset}");
        let sql = "SELECT @@character_set_client, @@character_set_results; SELECT @@character_set_connection";
        let r = crate::mysql_cli(ctx, "small", "alice", "alice-pw", false, &[&option], sql)?;
        ensure!(r.ok, "{charset}: {}", r.stderr);
        let lines: Vec<&str> = r.stdout.lines().collect();
        ensure!(
            lines == [format!("{charset}\t{charset}").as_str(), charset],
            "{charset}: {}",
            r.stdout
        );
    }
    Ok(())
}

fn multi_results(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut c = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let mut result = c
            .query_iter("SELECT 1; SELECT id FROM t ORDER BY id; SELECT 'x'")
            .await?;
        let first: Vec<i64> = result.collect().await?;
        let second: Vec<i64> = result.collect().await?;
        let third: Vec<String> = result.collect().await?;
        drop(result);
        ensure!(first == vec![1] && second == vec![1, 2, 3] && third == vec!["x".to_owned()]);
        Ok(())
    })
}

fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

fn use_database(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut c = ctx.conn("rw", "multi", "multi-pw", "app1").await?;
        c.query_drop("USE app2").await?;
        let db: Option<String> = c.query_first("SELECT DATABASE()").await?;
        ensure!(db.as_deref() == Some("app2"), "{db:?}");
        let e = c.query_drop("USE other").await.err();
        ensure!(e.as_ref().and_then(server_code) == Some(1044), "{e:?}");
        // Still usable afterwards.
        let one: Option<i64> = c.query_first("SELECT 1").await?;
        ensure!(one == Some(1));
        Ok(())
    })?;
    // COM_INIT_DB: the `mysql` client's `use` command sends it.
    let a = ctx.addr("rw");
    let cli = |script: &str| {
        std::process::Command::new("mysql")
            .args([
                "--no-defaults",
                "--skip-ssl",
                "-h",
                &a.ip().to_string(),
                "-P",
                &a.port().to_string(),
            ])
            .args(["-u", "multi", "-pmulti-pw", "-N", "-B", "app1", "-e", script])
            .output()
    };
    let out = cli("use app2\nSELECT DATABASE()")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.trim() == "app2",
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli("use mysql\nSELECT DATABASE()")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(!out.status.success() && stderr.contains("1044"), "{stderr}");
    Ok(())
}

/// `LOAD DATA LOCAL INFILE`: the server's request for the file reaches a
/// client that offered `CLIENT_LOCAL_FILES` (`mysql --local-infile=1`),
/// whose file (many packets, or none) goes to the server; a client that
/// did not offer it gets the server's own refusal (1148), as direct.
fn load_data_local(ctx: &Ctx) -> Result<()> {
    let dir = ctx.dir.join("load_data_local");
    std::fs::create_dir_all(&dir)?;
    let big = dir.join("rows.tsv");
    let rows = 5000u64;
    let text: String = (1..=rows)
        .map(|i| format!("{i}\trow number {i} of the file\n"))
        .collect();
    std::fs::write(&big, text)?;
    let empty = dir.join("empty.tsv");
    std::fs::write(&empty, "")?;
    let load = |file: &std::path::Path, allowed: &str| {
        let sql = format!(
            "LOAD DATA LOCAL INFILE '{}' INTO TABLE ld; SELECT COUNT(*), SUM(a) FROM ld",
            file.display()
        );
        crate::mysql_cli(ctx, "rw", "alice", "alice-pw", false, &[allowed], &sql)
    };
    ctx.rt.block_on(async {
        let mut c = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        c.query_drop("CREATE OR REPLACE TABLE ld (a INT, b TEXT)").await?;
        anyhow::Ok(())
    })?;
    let r = load(&big, "--local-infile=1")?;
    ensure!(r.ok, "{}", r.stderr);
    ensure!(
        r.stdout.trim() == format!("{rows}\t{}", rows * (rows + 1) / 2),
        "{}",
        r.stdout
    );
    let r = load(&empty, "--local-infile=1")?;
    ensure!(
        r.ok && r.stdout.trim().starts_with(&format!("{rows}\t")),
        "{} {}",
        r.stdout,
        r.stderr
    );
    let r = load(&big, "--local-infile=0")?;
    ensure!(!r.ok && r.stderr.contains("1148"), "{} {}", r.stdout, r.stderr);
    ctx.rt.block_on(async {
        let mut c = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM ld").await?;
        ensure!(n == Some(rows as i64), "{n:?}");
        c.query_drop("DROP TABLE ld").await?;
        Ok(())
    })
}

fn read_only(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut c = ctx.conn("ro", "alice", "alice-pw", "app1").await?;
        let ro: Option<i64> = c.query_first("SELECT @@read_only").await?;
        ensure!(ro == Some(1), "{ro:?}");
        let mut w = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let rw: Option<i64> = w.query_first("SELECT @@read_only").await?;
        ensure!(rw == Some(0), "{rw:?}");
        Ok(())
    })
}

/// Reads one packet's payload from a raw socket.
pub(crate) async fn read_raw(s: &mut tokio::net::TcpStream) -> Result<Vec<u8>> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).await?;
    let len = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).await?;
    Ok(p)
}

/// Logs in as alice with a hand-made handshake response (native password).
async fn raw_login(ctx: &Ctx) -> Result<tokio::net::TcpStream> {
    Ok(raw_login_id(ctx).await?.0)
}

/// [`raw_login`], with the connection id the proxy announced.
pub(crate) async fn raw_login_id(ctx: &Ctx) -> Result<(tokio::net::TcpStream, u32)> {
    raw_login_at(ctx.addr("rw")).await
}

/// [`raw_login_id`] at any proxy address.
pub(crate) async fn raw_login_at(addr: std::net::SocketAddr) -> Result<(tokio::net::TcpStream, u32)> {
    use gatehouse_proto_mysql::auth::native_password;
    use gatehouse_proto_mysql::consts::*;
    use gatehouse_proto_mysql::handshake::{HandshakeResponse41, HandshakeV10};
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let greeting = HandshakeV10::decode(&read_raw(&mut s).await?)?;
    let response = HandshakeResponse41 {
        capabilities: CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_WITH_DB,
        max_packet_size: 1 << 24,
        charset: 45,
        username: "alice".into(),
        auth_response: native_password::client_response(b"alice-pw", &greeting.scramble),
        database: Some("app1".into()),
        auth_plugin: Some("mysql_native_password".into()),
        ..HandshakeResponse41::default()
    };
    let mut payload = bytes::BytesMut::new();
    response.encode(&mut payload);
    let len = payload.len();
    let mut packet = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, 1];
    packet.extend_from_slice(&payload);
    s.write_all(&packet).await?;
    let ok = read_raw(&mut s).await?;
    ensure!(<[u8]>::first(&ok) == Some(&0), "login: {ok:?}");
    Ok((s, greeting.connection_id))
}

pub(crate) fn err_code(p: &[u8]) -> Option<u16> {
    (p.first() == Some(&0xFF) && p.len() >= 3).then(|| u16::from_le_bytes([p[1], p[2]]))
}

fn bad_packets(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let a = ctx.addr("rw");
        // A handshake response that is garbage: ER_HANDSHAKE_ERROR.
        let mut s = tokio::net::TcpStream::connect(a).await?;
        let greeting = read_raw(&mut s).await?;
        ensure!(<[u8]>::first(&greeting) == Some(&10), "not a v10 greeting");
        s.write_all(&[3, 0, 0, 1, 0xde, 0xad, 0xbe]).await?;
        let p = read_raw(&mut s).await?;
        ensure!(err_code(&p) == Some(1043), "{p:?}");
        // A packet announced larger than allowed: ER_NET_PACKET_TOO_LARGE.
        let mut s = tokio::net::TcpStream::connect(a).await?;
        read_raw(&mut s).await?;
        s.write_all(&[0xff, 0xff, 0xff, 1]).await?;
        let p = read_raw(&mut s).await?;
        ensure!(err_code(&p) == Some(1043) || err_code(&p) == Some(1153), "{p:?}");
        // After a login: a command with a wrong sequence id (1156), an empty
        // command packet (1835), a command left half sent (1159 after the
        // client message timeout), an unknown command (1047, session goes on).
        let mut s = raw_login(ctx).await?;
        s.write_all(&[9, 0, 0, 5, 3, b'S', b'E', b'L', b'E', b'C', b'T', b' ', b'1'])
            .await?;
        let p = read_raw(&mut s).await?;
        ensure!(err_code(&p) == Some(1156), "{p:?}");
        let mut s = raw_login(ctx).await?;
        s.write_all(&[0, 0, 0, 0]).await?;
        let p = read_raw(&mut s).await?;
        ensure!(err_code(&p) == Some(1835), "{p:?}");
        let mut s = raw_login(ctx).await?;
        s.write_all(&[100, 0, 0, 0, 3, b'S']).await?;
        let started = std::time::Instant::now();
        let p = read_raw(&mut s).await?;
        ensure!(err_code(&p) == Some(1159), "{p:?}");
        ensure!(started.elapsed() < std::time::Duration::from_secs(10));
        let mut s = raw_login(ctx).await?;
        s.write_all(&[1, 0, 0, 0, 0x1d]).await?;
        let p = read_raw(&mut s).await?;
        ensure!(err_code(&p) == Some(1047), "{p:?}");
        s.write_all(&[1, 0, 0, 0, 0x0e]).await?; // COM_PING
        let p = read_raw(&mut s).await?;
        ensure!(<[u8]>::first(&p) == Some(&0), "ping after an unknown command: {p:?}");
        // Others are unaffected.
        let mut c = ctx.conn("rw", "alice", "alice-pw", "app1").await?;
        let one: Option<i64> = c.query_first("SELECT 1").await?;
        ensure!(one == Some(1));
        Ok(())
    })
}

/// `CONNECTION_ID()`, `LAST_INSERT_ID()`, `ROW_COUNT()` in a view or a
/// routine are stored as written, never as the values of the session that
/// created them (which the proxy writes into statements that run now), and
/// answer for the session that reads them.
fn stored_code(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut c = ctx.conn("small", "alice", "alice-pw", "app1").await?;
        c.query_drop("CREATE OR REPLACE VIEW stored_info AS SELECT CONNECTION_ID() AS c, LAST_INSERT_ID() AS l, ROW_COUNT() AS r")
            .await?;
        c.query_drop("CREATE OR REPLACE PROCEDURE stored_info_p() SELECT CONNECTION_ID()")
            .await?;
        let view: String = c
            .query_first("SELECT VIEW_DEFINITION FROM information_schema.VIEWS WHERE TABLE_SCHEMA = 'app1' AND TABLE_NAME = 'stored_info'")
            .await?
            .unwrap_or_default();
        let routine: String = c
            .query_first("SELECT ROUTINE_DEFINITION FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'app1' AND ROUTINE_NAME = 'stored_info_p'")
            .await?
            .unwrap_or_default();
        c.query_drop("DROP VIEW stored_info").await?;
        c.query_drop("DROP PROCEDURE stored_info_p").await?;
        let view = view.to_ascii_lowercase();
        ensure!(
            view.contains("connection_id()") && view.contains("last_insert_id()") && view.contains("row_count()"),
            "the view was stored with values written in: {view}"
        );
        ensure!(
            routine.to_ascii_lowercase().contains("connection_id()"),
            "the procedure was stored with a value written in: {routine}"
        );
        Ok(())
    })
}

/// `EXPLAIN EXTENDED` shows the statement as the server parsed it (the
/// note `SHOW WARNINGS` reads): `LAST_INSERT_ID()` there is the call the
/// client wrote, its value set on the connection, not written in; the
/// session's own id still answers after it, with other clients on the
/// same two connections in between.
fn explain_last_insert_id(ctx: &Ctx) -> Result<()> {
    ctx.rt.block_on(async {
        let mut c = ctx.conn("small", "alice", "alice-pw", "app1").await?;
        let mut other = ctx.conn("small", "alice", "alice-pw", "app1").await?;
        c.query_drop("CREATE TABLE IF NOT EXISTS eids (id INT AUTO_INCREMENT PRIMARY KEY)")
            .await?;
        for round in 0..4 {
            c.query_drop("INSERT INTO eids VALUES (NULL)").await?;
            let id: Option<i64> = c.query_first("SELECT LAST_INSERT_ID()").await?;
            other.query_drop("INSERT INTO eids VALUES (NULL)").await?;
            c.query_drop("EXPLAIN EXTENDED SELECT LAST_INSERT_ID() + 0").await?;
            let notes: Vec<(String, u32, String)> = c.query("SHOW WARNINGS").await?;
            let note = notes.first().map(|n| n.2.to_ascii_lowercase()).unwrap_or_default();
            ensure!(
                note.contains("last_insert_id() + 0"),
                "round {round}: EXPLAIN's note shows {note:?}, not the call as written"
            );
            let again: Option<i64> = c.query_first("SELECT LAST_INSERT_ID()").await?;
            ensure!(
                again == id,
                "round {round}: LAST_INSERT_ID() {again:?} after EXPLAIN, was {id:?}"
            );
        }
        Ok(())
    })
}
