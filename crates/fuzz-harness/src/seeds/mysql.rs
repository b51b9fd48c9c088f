//! The seeds of the MySQL codec's targets (packets, handshakes, replies,
//! commands, session tracking, authentication) and of the reply tracker.

use bytes::BufMut;
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

use super::{Seed, cat, chunk, encoded as my};
use crate::mysql::{encode_changes, rsa_key};

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

pub(super) fn mysql_seeds() -> Vec<Seed> {
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

pub(super) fn tracker_seeds() -> Vec<Seed> {
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
