//! The hand-made seed inputs of every target, written with the codecs' own
//! encoders in the layout each harness reads (see the harness docs). They
//! are committed as `fuzz/corpus/<target>/seed-<name>`; the replay test
//! checks that the files match, and its ignored `write_the_seed_corpus`
//! rewrites them.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use gatehouse_proto_mysql::auth::{caching_sha2, ed25519, native_password};
use gatehouse_proto_mysql::consts::{
    CLIENT_CONNECT_ATTRS, CLIENT_CONNECT_WITH_DB, CLIENT_DEPRECATE_EOF, CLIENT_MYSQL, CLIENT_PLUGIN_AUTH,
    CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA, CLIENT_PROTOCOL_41, CLIENT_SECURE_CONNECTION, CLIENT_SESSION_TRACK,
    CLIENT_SSL, COM_FIELD_LIST, COM_QUERY, COM_SET_OPTION, COM_STMT_CLOSE, COM_STMT_EXECUTE, COM_STMT_FETCH,
    SERVER_MORE_RESULTS_EXISTS, SERVER_SESSION_STATE_CHANGED, SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS,
};
use gatehouse_proto_mysql::frame::encode_packet;
use gatehouse_proto_mysql::handshake::{
    AuthMoreData, AuthSwitchRequest, ChangeUser, HandshakeResponse41, HandshakeV10, SslRequest,
};
use gatehouse_proto_mysql::lenenc::{put_lenenc_bytes, put_lenenc_int};
use gatehouse_proto_mysql::packets::{EofPacket, ErrPacket, LocalInfileRequest, OkPacket};
use gatehouse_proto_mysql::prepare::StmtPrepareOk;
use gatehouse_proto_mysql::session_track::SessionChange;
use gatehouse_proto_pg::auth::md5::md5_stored;
use gatehouse_proto_pg::auth::scram::ScramVerifier;
use gatehouse_proto_pg::extended::{put_bind, put_parse, put_target};
use gatehouse_proto_pg::messages::{
    put_auth_cleartext, put_auth_md5, put_auth_ok, put_auth_sasl, put_auth_sasl_data, put_backend_key, put_error,
    put_message, put_parameter_status, put_password, put_query, put_ready, put_sasl_initial,
};
use gatehouse_proto_pg::results::put_data_row;
use gatehouse_proto_pg::startup::{SSL_REQUEST_CODE, cancel_request, startup_message};
use gatehouse_token::{IssueRequest, IssuingKey, issue};
use postgres_protocol::authentication::md5_hash;

use crate::mysql::{encode_changes, rsa_key};
use crate::token::{AUDIENCE, ISSUER, JWKS, NOW, SECRET};

/// One seed: target, file name (without the `seed-` prefix), bytes.
pub type Seed = (&'static str, &'static str, Vec<u8>);

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn pg(build: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut b = BytesMut::new();
    build(&mut b);
    b.to_vec()
}

/// A one-byte-length-prefixed chunk, as [`crate::input::Input::chunk`] reads it.
fn chunk(b: &[u8]) -> Vec<u8> {
    let n = u8::try_from(b.len()).expect("seed chunks are short");
    cat(&[&[n], b])
}

fn my(build: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut b = BytesMut::new();
    build(&mut b);
    b.to_vec()
}

/// Every seed of every target.
pub fn seeds() -> Vec<Seed> {
    let mut s = Vec::new();
    s.extend(pg_seeds());
    s.extend(mysql_seeds());
    s.extend(tracker_seeds());
    s.extend(sql_seeds());
    s.extend(token_seeds());
    s
}

fn pg_seeds() -> Vec<Seed> {
    let limits = |hold: u16, max: u32| cat(&[&hold.to_le_bytes(), &max.to_le_bytes()]);
    let query = pg(|b| put_query(b, "select 1"));
    let sync = pg(|b| put_message(b, b'S', |_| {}));
    let row = pg(|b| put_data_row(b, &[Some("a"), None, Some("")]));
    let error = pg(|b| put_error(b, "FATAL", "28P01", "password authentication failed"));
    let mut with_option = startup_message([("user", "alice"), ("_pq_.compression", "on")]);
    with_option[4..8].copy_from_slice(&((3u32 << 16) | 2).to_be_bytes());
    let mut ssl = 8u32.to_be_bytes().to_vec();
    ssl.extend_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
    let verifier = ScramVerifier::from_password("pencil", b"0123456789abcdef", 4096);
    let salt = [1, 2, 3, 4];
    let md5_response = md5_hash(b"alice", b"s3cret", salt);
    vec![
        ("pg_frame", "two-messages", cat(&[&limits(1024, 1 << 20), &query, &sync])),
        ("pg_frame", "streamed-row", cat(&[&limits(4, 1 << 20), &row[..7]])),
        ("pg_frame", "bad-length", cat(&[&limits(16, 100), &[b'Q', 0, 0, 0, 3]])),
        ("pg_startup", "startup", startup_message([("user", "alice"), ("database", "db1")])),
        ("pg_startup", "protocol-option", with_option),
        ("pg_startup", "ssl-request", ssl),
        ("pg_startup", "cancel", cancel_request(7, 9).to_vec()),
        ("pg_messages", "error", error.clone()),
        ("pg_messages", "parameter-status", pg(|b| put_parameter_status(b, "TimeZone", "UTC"))),
        ("pg_messages", "backend-key", pg(|b| put_backend_key(b, 42, 7))),
        ("pg_messages", "ready", pg(|b| put_ready(b, b'T'))),
        ("pg_messages", "data-row", row),
        ("pg_messages", "auth-sasl", pg(|b| put_auth_sasl(b, &["SCRAM-SHA-256"]))),
        (
            "pg_messages",
            "sasl-initial",
            pg(|b| put_sasl_initial(b, "SCRAM-SHA-256", b"n,,n=,r=abc")),
        ),
        ("pg_messages", "password", pg(|b| put_password(b, b"secret", true))),
        ("pg_messages", "parse", pg(|b| put_parse(b, "s1", "SELECT $1", &[0, 1, 0, 0, 0, 23]))),
        ("pg_messages", "bind", pg(|b| put_bind(b, "", "s1", &[0, 0, 0, 0, 0, 0]))),
        ("pg_messages", "describe", pg(|b| put_target(b, b'D', b'S', "s1"))),
        (
            "pg_scram_server",
            "made-up",
            cat(&[
                &[0, 0],
                &chunk(b"n,,n=,r=rOprNGfwEbeRWgbNEkqO"),
                b"c=biws,r=rOprNGfwEbeRWgbNEkqOWlpaWlpaWlpaWlpaWlpaWlpaWlpa,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            ]),
        ),
        ("pg_scram_server", "genuine", cat(&[&[1, 0x20], &chunk(b"pencil"), &[0, 0, 0]])),
        ("pg_scram_server", "wrong-password", cat(&[&[1, 0x21], &chunk(b"pencil"), &[0, 0, 0]])),
        ("pg_scram_server", "channel-binding-y", cat(&[&[1, 0x02], &chunk(b"pencil"), &[0, 0, 0]])),
        ("pg_scram_server", "tampered", cat(&[&[1, 0x00], &chunk(b"pencil"), &[1, 40, 0, 7]])),
        ("pg_scram_server", "verifier", cat(&[&[2], verifier.to_string().as_bytes()])),
        (
            "pg_scram_server",
            "md5",
            cat(&[&[3], &chunk(b"alice"), &chunk(b"s3cret"), &salt, md5_response.as_bytes()]),
        ),
        (
            "pg_scram_server",
            "md5-stored",
            cat(&[&[3], &chunk(b"alice"), &chunk(b"s3cret"), &salt, md5_stored("alice", "s3cret").as_bytes()]),
        ),
        (
            "pg_backend_startup",
            "md5",
            cat(&[
                &[0],
                &pg(|b| put_auth_md5(b, salt)),
                &pg(put_auth_ok),
                &pg(|b| put_parameter_status(b, "server_version", "15")),
                &pg(|b| put_backend_key(b, 10, 20)),
                &pg(|b| put_ready(b, b'I')),
            ]),
        ),
        (
            "pg_backend_startup",
            "cleartext",
            cat(&[&[0], &pg(put_auth_cleartext), &pg(put_auth_ok), &pg(|b| put_ready(b, b'I'))]),
        ),
        (
            "pg_backend_startup",
            "scram",
            cat(&[
                &[0],
                &pg(|b| put_auth_sasl(b, &["SCRAM-SHA-256"])),
                &pg(|b| put_auth_sasl_data(b, false, b"r=abc,s=c2FsdA==,i=4096")),
            ]),
        ),
        ("pg_backend_startup", "refused", cat(&[&[1], &error])),
    ]
}

fn greeting(capabilities: u32, version: &str, plugin: &str) -> Vec<u8> {
    my(|b| {
        HandshakeV10 {
            server_version: version.to_owned(),
            connection_id: 7,
            scramble: *b"abcdefghijklmnopqrst",
            capabilities,
            mariadb_ext_caps: if capabilities & CLIENT_MYSQL == 0 { 0x1c } else { 0 },
            charset: 45,
            status: SERVER_STATUS_AUTOCOMMIT,
            auth_plugin: plugin.to_owned(),
        }
        .encode(b)
    })
}

fn mysql_seeds() -> Vec<Seed> {
    let base = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;
    let client_caps = base | CLIENT_CONNECT_WITH_DB | CLIENT_CONNECT_ATTRS | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA;
    let response = HandshakeResponse41 {
        capabilities: client_caps | CLIENT_MYSQL,
        max_packet_size: 1 << 24,
        charset: 45,
        username: "alice".to_owned(),
        auth_response: native_password::scramble(b"pw", b"abcdefghijklmnopqrst").to_vec(),
        database: Some("db1".to_owned()),
        auth_plugin: Some("mysql_native_password".to_owned()),
        attributes: vec![("_client_name".to_owned(), "libmysql".to_owned())],
        ..HandshakeResponse41::default()
    };
    let change_user = ChangeUser {
        username: "bob".to_owned(),
        auth_response: vec![1; 20],
        database: "db2".to_owned(),
        charset: Some(45),
        auth_plugin: Some("mysql_native_password".to_owned()),
        attributes: vec![("k".to_owned(), "v".to_owned())],
    };
    let ssl = SslRequest {
        capabilities: base | CLIENT_SSL,
        max_packet_size: 1 << 24,
        charset: 45,
        mariadb_ext_caps: 0,
    };
    let track = CLIENT_PROTOCOL_41 | CLIENT_SESSION_TRACK;
    let state = encode_changes(&[
        SessionChange::SystemVariable {
            name: b"autocommit",
            value: b"OFF",
        },
        SessionChange::Schema(b"db1"),
        SessionChange::StateChange(true),
        SessionChange::Other {
            kind: 5,
            data: b"\x08T_______",
        },
    ]);
    let ok = OkPacket {
        affected_rows: 3,
        last_insert_id: 300,
        status: SERVER_STATUS_IN_TRANS | SERVER_SESSION_STATE_CHANGED,
        warnings: 1,
        info: bytes::Bytes::from_static(b"Rows matched: 3"),
        session_state: Some(bytes::Bytes::copy_from_slice(&state)),
    };
    let execute = |n: u16, bound: bool| {
        let mut p = vec![COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0];
        p.resize(p.len() + usize::from(n).div_ceil(8), 0);
        p.push(u8::from(bound));
        if bound {
            for _ in 0..n {
                p.extend_from_slice(&[0x08, 0x00]);
            }
        }
        for i in 0..n {
            p.extend_from_slice(&u64::from(i).to_le_bytes());
        }
        cat(&[&n.to_le_bytes(), &p])
    };
    let nonce = *b"abcdefghijklmnopqrst";
    vec![
        (
            "my_packet",
            "two-packets",
            cat(&[
                &0x1000u16.to_le_bytes(),
                &my(|b| {
                    encode_packet(b, 0, &[&[COM_QUERY][..], b"select 1"].concat());
                }),
                &my(|b| {
                    encode_packet(b, 1, b"");
                }),
            ]),
        ),
        (
            "my_packet",
            "no-limit",
            cat(&[
                &[0xFF, 0xFF],
                &my(|b| {
                    encode_packet(b, 3, &[0u8; 300]);
                }),
            ]),
        ),
        ("my_packet", "too-large", cat(&[&[8, 0], &[20, 0, 0, 0], &[0; 20]])),
        (
            "my_handshake",
            "mysql8",
            greeting(
                base | CLIENT_MYSQL | CLIENT_DEPRECATE_EOF,
                "8.0.36",
                "caching_sha2_password",
            ),
        ),
        (
            "my_handshake",
            "mariadb",
            greeting(base, "5.5.5-10.11.6-MariaDB", "mysql_native_password"),
        ),
        (
            "my_handshake",
            "auth-switch",
            my(|b| AuthSwitchRequest::with_nonce("mysql_native_password", &nonce).encode(b)),
        ),
        (
            "my_handshake",
            "more-data",
            my(|b| AuthMoreData { data: vec![4] }.encode(b)),
        ),
        (
            "my_handshake_response",
            "response",
            cat(&[&0u32.to_le_bytes(), &my(|b| response.encode(b))]),
        ),
        (
            "my_handshake_response",
            "ssl-request",
            cat(&[&0u32.to_le_bytes(), &my(|b| ssl.encode(b))]),
        ),
        (
            "my_handshake_response",
            "change-user",
            cat(&[&client_caps.to_le_bytes(), &my(|b| change_user.encode(b, client_caps))]),
        ),
        (
            "my_ok_err_eof",
            "ok-session-state",
            cat(&[&track.to_le_bytes(), &my(|b| ok.encode(b, track, 0))]),
        ),
        (
            "my_ok_err_eof",
            "ok-classic",
            cat(&[
                &CLIENT_PROTOCOL_41.to_le_bytes(),
                &my(|b| ok.encode(b, CLIENT_PROTOCOL_41, 0)),
            ]),
        ),
        (
            "my_ok_err_eof",
            "err",
            cat(&[
                &0u32.to_le_bytes(),
                &my(|b| {
                    ErrPacket {
                        code: 1045,
                        sqlstate: Some(*b"28000"),
                        message: "Access denied".to_owned(),
                    }
                    .encode(b)
                }),
            ]),
        ),
        (
            "my_ok_err_eof",
            "eof",
            cat(&[
                &0u32.to_le_bytes(),
                &my(|b| {
                    EofPacket {
                        warnings: 0,
                        status: SERVER_MORE_RESULTS_EXISTS,
                    }
                    .encode(b)
                }),
            ]),
        ),
        (
            "my_ok_err_eof",
            "local-infile",
            cat(&[
                &0u32.to_le_bytes(),
                &my(|b| {
                    LocalInfileRequest {
                        filename: bytes::Bytes::from_static(b"/tmp/data.csv"),
                    }
                    .encode(b)
                }),
            ]),
        ),
        ("my_command", "query", cat(&[&[COM_QUERY], b"SELECT 1"])),
        ("my_command", "execute", execute(2, true)[2..].to_vec()),
        ("my_command", "close", vec![COM_STMT_CLOSE, 9, 0, 0, 0]),
        ("my_command", "fetch", vec![COM_STMT_FETCH, 9, 0, 0, 0, 100, 0, 0, 0]),
        ("my_command", "set-option", vec![COM_SET_OPTION, 1, 0]),
        ("my_command", "field-list", cat(&[&[COM_FIELD_LIST], b"t\0%"])),
        (
            "my_command",
            "prepare-ok",
            my(|b| {
                StmtPrepareOk {
                    stmt_id: 1,
                    num_columns: 2,
                    num_params: 1,
                    warnings: 0,
                }
                .encode(b)
            }),
        ),
        ("my_stmt_execute", "types-bound", execute(3, true)),
        ("my_stmt_execute", "types-not-bound", execute(3, false)),
        ("my_stmt_execute", "no-params", execute(0, false)),
        ("my_stmt_execute", "nine-params", execute(9, true)),
        ("my_session_track", "records", state),
        (
            "my_auth",
            "native",
            cat(&[&[0], &chunk(b"pw"), &nonce, &native_password::scramble(b"pw", &nonce)]),
        ),
        (
            "my_auth",
            "caching-sha2",
            cat(&[&[0], &chunk(b"pw"), &nonce, &caching_sha2::scramble(b"pw", &nonce)]),
        ),
        ("my_auth", "empty-password", cat(&[&[0], &chunk(b""), &nonce])),
        (
            "my_auth",
            "ed25519",
            cat(&[&[1, 1], &ed25519::client_response(b"pw", &[7; 32])]),
        ),
        (
            "my_auth",
            "ed25519-any-password",
            cat(&[
                &[1, 0],
                &chunk(b"other"),
                &chunk(&[9; 32]),
                &ed25519::client_response(b"other", &[9; 32]),
            ]),
        ),
        (
            "my_auth_rsa",
            "round-trip",
            cat(&[&[2], &chunk(b"s3cret"), &chunk(&nonce)]),
        ),
        (
            "my_auth_rsa",
            "ciphertext",
            cat(&[&[0], &chunk(b""), &chunk(&nonce), &[0x42; 256]]),
        ),
        (
            "my_auth_rsa",
            "server-pem",
            cat(&[
                &[1],
                &chunk(b"s3cret"),
                &chunk(&nonce),
                rsa_key().public_pem().as_bytes(),
            ]),
        ),
        (
            "my_auth",
            "stored-hash",
            cat(&[
                &[2],
                native_password::format_stored(&native_password::stored_hash(b"pw")).as_bytes(),
            ]),
        ),
    ]
}

/// Packets for the tracker's arbitrary mode, each length-prefixed.
fn packets(parts: &[&[u8]]) -> Vec<u8> {
    parts.iter().flat_map(|p| chunk(p)).collect()
}

fn tracker_seeds() -> Vec<Seed> {
    let eof = |status: u16| cat(&[&[0xFE, 0, 0], &status.to_le_bytes()]);
    let col = cat(&[&[3], b"def", &[0; 8]]);
    let ok = my(|b| {
        b.put_u8(0);
        put_lenenc_int(b, 1);
        put_lenenc_int(b, 0);
        b.put_u16_le(SERVER_STATUS_AUTOCOMMIT);
        b.put_u16_le(0);
    });
    let row = my(|b| put_lenenc_bytes(b, b"1"));
    // The model reads its choices from these bytes.
    let choices: Vec<u8> = (0u8..64).map(|i| i.wrapping_mul(37) ^ 0x15).collect();
    let mut s: Vec<Seed> = vec![
        (
            "my_response_tracker",
            "query-result-set",
            cat(&[
                &[0, COM_QUERY],
                &packets(&[&[1], &col, &eof(0), &row, &eof(SERVER_STATUS_AUTOCOMMIT)]),
            ]),
        ),
        (
            "my_response_tracker",
            "query-ok",
            cat(&[&[0, COM_QUERY], &packets(&[&ok])]),
        ),
        (
            "my_response_tracker",
            "execute-deprecate-eof",
            cat(&[
                &[1, COM_STMT_EXECUTE],
                &packets(&[&[1], &col, &[0, 0, 1], &[0xFE, 0, 0, 2, 0, 0, 0]]),
            ]),
        ),
    ];
    const NAMES: [&str; 16] = [
        "model-result-sets",
        "model-execute",
        "model-fetch",
        "model-prepare",
        "model-field-list",
        "model-ok-or-err",
        "model-statistics",
        "model-change-user",
        "model-result-sets-deprecate-eof",
        "model-execute-deprecate-eof",
        "model-fetch-deprecate-eof",
        "model-prepare-deprecate-eof",
        "model-field-list-deprecate-eof",
        "model-ok-or-err-deprecate-eof",
        "model-statistics-deprecate-eof",
        "model-change-user-deprecate-eof",
    ];
    for (i, name) in NAMES.iter().enumerate() {
        let (kind, deprecate) = (i as u8 % 8, u8::from(i >= 8));
        // Bit 1: the model; bits 2-4: the reply shape; bit 5: progress reports.
        let mode = 2 | deprecate | kind << 2 | if i % 3 == 0 { 0x20 } else { 0 };
        s.push(("my_response_tracker", name, cat(&[&[mode], &choices])));
    }
    s
}

fn sql_seeds() -> Vec<Seed> {
    let text = |t: &str| t.as_bytes().to_vec();
    let with = |first: u8, t: &str| cat(&[&[first], t.as_bytes()]);
    let template: Vec<u8> = (0u8..48).map(|i| i.wrapping_mul(53) ^ 0x2a).collect();
    vec![
        (
            "sql_pg_classify",
            "transaction",
            text("BEGIN; SET search_path = a, public; SELECT set_config('x.y', 'z', false); COMMIT"),
        ),
        ("sql_pg_classify", "temp-table", text("CREATE TEMP TABLE t (a int)")),
        (
            "sql_pg_classify",
            "cursor",
            text("DECLARE c CURSOR WITH HOLD FOR SELECT 1"),
        ),
        ("sql_pg_classify", "advisory-lock", text("SELECT pg_advisory_lock(1)")),
        (
            "sql_pg_classify",
            "prepare",
            text("PREPARE p (int) AS SELECT $1; EXECUTE p(1); DEALLOCATE p"),
        ),
        (
            "sql_pg_classify",
            "do-block",
            text("DO $$ BEGIN PERFORM pg_advisory_lock(1); END $$"),
        ),
        (
            "sql_pg_classify",
            "cte",
            text("/* c */ WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x"),
        ),
        (
            "sql_pg_classify",
            "read-only-begin",
            text("BEGIN READ ONLY; SELECT f(1), now()"),
        ),
        (
            "sql_pg_digest",
            "statement",
            with(
                0,
                "SELECT a, b FROM t WHERE c = -5 AND d IN (1, 2, 3) AND e = E'x\\'y' LIMIT $1",
            ),
        ),
        (
            "sql_pg_digest",
            "values",
            with(0, "INSERT INTO \"T\" VALUES (1, 'a'), (2, 'b'), (3, NULL)"),
        ),
        ("sql_pg_digest", "template", cat(&[&[1], &template])),
        (
            "sql_mysql_classify",
            "transaction",
            with(
                0,
                "SET autocommit=0; START TRANSACTION READ ONLY; SELECT GET_LOCK('x', 1); USE db; COMMIT",
            ),
        ),
        (
            "sql_mysql_classify",
            "ansi-quotes",
            with(1, "SET sql_mode = 'ANSI_QUOTES'; SELECT \"a\" FROM t"),
        ),
        (
            "sql_mysql_classify",
            "procedure",
            with(0, "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END; CALL p()"),
        ),
        (
            "sql_mysql_classify",
            "executable-comment",
            with(2, "/*!40101 SET NAMES utf8mb4 */"),
        ),
        (
            "sql_mysql_classify",
            "load-data",
            with(0, "LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE t"),
        ),
        (
            "sql_mysql_digest_route",
            "previous-results",
            cat(&[
                &[0],
                &[3, 0, 0, 0, 0, 0, 0, 0],
                &[7, 0, 0, 0, 0, 0, 0, 0],
                b"SELECT ROW_COUNT(), FOUND_ROWS(), LAST_INSERT_ID(), @@identity FROM dual",
            ]),
        ),
        (
            "sql_mysql_digest_route",
            "upsert",
            cat(&[
                &[0],
                &[0; 16],
                b"INSERT INTO t VALUES (1,'a'),(2,'b') ON DUPLICATE KEY UPDATE a=VALUES(a)",
            ]),
        ),
        (
            "sql_mysql_digest_route",
            "locking-read",
            cat(&[&[0], &[0; 16], b"SELECT * FROM t WHERE id = ? FOR UPDATE"]),
        ),
        ("sql_mysql_digest_route", "template", cat(&[&[4], &template])),
    ]
}

fn token_seeds() -> Vec<Seed> {
    let key = IssuingKey::hs256(SECRET, Some("hs".to_owned())).expect("the secret is long enough");
    let token = issue(
        &key,
        &IssueRequest {
            issuer: ISSUER.to_owned(),
            audience: AUDIENCE.to_owned(),
            tenant: "acme".to_owned(),
            database: "acme_db".to_owned(),
            ttl: Duration::from_secs(3600),
            now: NOW - 60,
        },
    )
    .expect("the token is issued");
    let claims = format!(
        r#"{{"iss":"{ISSUER}","aud":["{AUDIENCE}"],"sub":"acme","db":"acme_db","exp":{},"nbf":{}}}"#,
        NOW + 60,
        NOW - 1
    );
    // RFC 8410 §10.1: an Ed25519 SubjectPublicKeyInfo.
    let spki = [
        &[0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00][..],
        &[
            0x19, 0xbf, 0x44, 0x09, 0x69, 0x84, 0xcd, 0xfe, 0x85, 0x41, 0xba, 0xc1, 0x67, 0xdc, 0x3b, 0x96, 0xc8, 0x50,
            0x86, 0xaa, 0x30, 0xb6, 0xb6, 0xcb, 0x0c, 0x5c, 0x38, 0xad, 0x70, 0x31, 0x66, 0xe1,
        ],
    ]
    .concat();
    vec![
        ("token_verify", "issued", cat(&[&[0], token.as_bytes()])),
        ("token_verify", "alg-none", text_token(r#"{"alg":"none"}"#)),
        (
            "token_verify",
            "signed-claims",
            cat(&[
                &[1],
                &chunk(br#"{"alg":"HS256","kid":"hs","typ":"JWT"}"#),
                claims.as_bytes(),
            ]),
        ),
        (
            "token_verify",
            "signed-far-future",
            cat(&[
                &[1],
                &chunk(br#"{"alg":"HS256"}"#),
                format!(r#"{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"a","db":"b","exp":1e300}}"#).as_bytes(),
            ]),
        ),
        (
            "token_verify",
            "signed-expired",
            cat(&[&[1], &chunk(br#"{"alg":"HS256"}"#), br#"{"iss":"x","exp":5}"#]),
        ),
        ("token_verify", "public-key-der", cat(&[&[2, 1], &spki])),
        ("token_verify", "jwks", cat(&[&[2, 4], JWKS.as_bytes()])),
    ]
}

fn text_token(header: &str) -> Vec<u8> {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!("\0{}.{}.", b64(header), b64(r#"{"sub":"x"}"#)).into_bytes()
}
