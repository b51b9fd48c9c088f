//! Decoders and the reply tracker against bytes captured from a real MariaDB 10.11
//! (see `fixtures/mariadb_10_11.rs` for how they were captured).

#[path = "fixtures/mariadb_10_11.rs"]
mod fx;

use bytes::BytesMut;
use fx::hex;
use gatehouse_proto_mysql::auth::native_password;
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::handshake::{AuthSwitchRequest, HandshakeResponse41, HandshakeV10};
use gatehouse_proto_mysql::packets::{ErrPacket, OkPacket};
use gatehouse_proto_mysql::prepare::StmtPrepareOk;
use gatehouse_proto_mysql::response::{Done, ResponseKind, ResponseTracker, Step};
use gatehouse_proto_mysql::session_track::{SessionChange, changes};

const SESSION_CAPS: u32 = CLIENT_PROTOCOL_41 | CLIENT_SESSION_TRACK;

#[test]
fn greeting_decodes_and_reencodes_byte_for_byte() {
    for raw in [fx::EOF_GREETING, fx::DEOF_GREETING] {
        let bytes = hex(raw);
        let g = HandshakeV10::decode(&bytes).unwrap();
        assert_eq!(g.server_version, "5.5.5-10.11.19-MariaDB-0+deb12u1");
        assert!(g.is_mariadb());
        assert_eq!(g.real_version(), "10.11.19-MariaDB-0+deb12u1");
        assert_eq!(g.capabilities, 0x81ff_f7fe);
        assert_eq!(g.capabilities & CLIENT_MYSQL, 0);
        assert_eq!(
            g.mariadb_ext_caps,
            MARIADB_CLIENT_PROGRESS
                | MARIADB_CLIENT_STMT_BULK_OPERATIONS
                | MARIADB_CLIENT_EXTENDED_TYPE_INFO
                | MARIADB_CLIENT_CACHE_METADATA
        );
        assert_eq!(g.charset, CHARSET_LATIN1_SWEDISH_CI);
        assert_eq!(g.status, SERVER_STATUS_AUTOCOMMIT);
        assert_eq!(g.auth_plugin, MYSQL_NATIVE_PASSWORD);
        assert!(g.scramble.iter().all(|&b| b != 0));
        let mut out = BytesMut::new();
        g.encode(&mut out);
        assert_eq!(&out[..], &bytes[..]);
    }
}

#[test]
fn native_password_matches_what_mariadb_accepted() {
    let g = HandshakeV10::decode(&hex(fx::EOF_GREETING)).unwrap();
    let resp = HandshakeResponse41::decode(&hex(fx::EOF_HANDSHAKE_RESPONSE)).unwrap();
    assert_eq!(resp.username, "gh");
    assert_eq!(resp.database.as_deref(), Some("t"));
    assert_eq!(resp.auth_plugin.as_deref(), Some(CACHING_SHA2_PASSWORD));
    assert_eq!(
        resp.attributes,
        vec![("_client_name".into(), "capture".into()), ("_pid".into(), "1".into())]
    );
    // The server switched to mysql_native_password with the same nonce and accepted
    // this very response (auth_reply2 is an OK).
    let switch = AuthSwitchRequest::decode(&hex(fx::EOF_AUTH_REPLY1)).unwrap();
    assert_eq!(switch.plugin, MYSQL_NATIVE_PASSWORD);
    assert_eq!(switch.nonce(), Some(g.scramble));
    assert_eq!(
        resp.auth_response,
        native_password::scramble(b"secret", &g.scramble).to_vec()
    );
    assert!(OkPacket::decode(&hex(fx::EOF_AUTH_REPLY2), SESSION_CAPS).is_ok());
    // `SELECT PASSWORD('secret')` on the same server printed this.
    let stored = native_password::stored_hash(b"secret");
    assert_eq!(
        native_password::format_stored(&stored),
        "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"
    );
    assert!(native_password::verify(&stored, &g.scramble, &resp.auth_response));
}

#[test]
fn ok_packets_with_session_state() {
    let ok = OkPacket::decode(&hex(fx::EOF_AUTH_REPLY2), SESSION_CAPS).unwrap();
    assert_eq!(ok.status, SERVER_STATUS_AUTOCOMMIT | SERVER_SESSION_STATE_CHANGED);
    let state = ok.session_state.unwrap();
    let got: Vec<_> = changes(&state).collect::<Result<_, _>>().unwrap();
    assert_eq!(got, vec![SessionChange::Schema(b"t")]);

    let set = OkPacket::decode(&hex(fx::EOF_OK_SET[0]), SESSION_CAPS).unwrap();
    assert_eq!(set.status, SERVER_SESSION_STATE_CHANGED);
    let state = set.session_state.clone().unwrap();
    let got: Vec<_> = changes(&state).collect::<Result<_, _>>().unwrap();
    assert_eq!(
        got,
        vec![SessionChange::SystemVariable {
            name: b"autocommit",
            value: b"OFF"
        }]
    );
    let mut out = BytesMut::new();
    set.encode(&mut out, SESSION_CAPS, 0x00);
    assert_eq!(&out[..], &hex(fx::EOF_OK_SET[0])[..]);

    // BEGIN: no info string at all on the wire.
    let begin = OkPacket::decode(&hex(fx::EOF_OK_BEGIN[0]), SESSION_CAPS).unwrap();
    assert_eq!(begin.status, SERVER_STATUS_IN_TRANS);
    assert!(begin.info.is_empty() && begin.session_state.is_none());
    let mut out = BytesMut::new();
    begin.encode(&mut out, SESSION_CAPS, 0x00);
    assert_eq!(&out[..], &hex(fx::EOF_OK_BEGIN[0])[..]);
}

#[test]
fn err_packet() {
    let bytes = hex(fx::EOF_ERR_NOSUCH[0]);
    let e = ErrPacket::decode(&bytes).unwrap();
    assert_eq!(e.code, 1146);
    assert_eq!(e.sqlstate_str(), "42S02");
    assert_eq!(e.message, "Table 't.nope' doesn't exist");
    let mut out = BytesMut::new();
    e.encode(&mut out);
    assert_eq!(&out[..], &bytes[..]);
}

#[test]
fn prepare_ok() {
    let p = StmtPrepareOk::decode(&hex(fx::EOF_PREPARE[0])).unwrap();
    assert_eq!((p.num_columns, p.num_params, p.warnings), (1, 1, 0));
    let mut out = BytesMut::new();
    p.encode(&mut out);
    assert_eq!(&out[..], &hex(fx::EOF_PREPARE[0])[..]);
}

/// Feeds a captured reply; every packet but the last must be `More`.
fn track(cmd: u8, deprecate_eof: bool, packets: &[&str]) -> Done {
    let mut t = ResponseTracker::new(ResponseKind::for_command(cmd), deprecate_eof);
    let (last, init) = packets.split_last().unwrap();
    for (i, p) in init.iter().enumerate() {
        assert_eq!(t.feed(&hex(p)).unwrap(), Step::More, "packet {i} of {packets:?}");
    }
    match t.feed(&hex(last)).unwrap() {
        Step::Done(d) => d,
        other => panic!("last packet gave {other:?}"),
    }
}

#[test]
fn tracker_follows_real_replies() {
    for (de, f) in [(false, EOF), (true, DEOF)] {
        let d = track(COM_QUERY, de, f.ok_set);
        assert_eq!(d.in_transaction(), Some(false));
        assert!(d.session_state_changed);
        let d = track(COM_QUERY, de, f.ok_begin);
        assert_eq!(d.in_transaction(), Some(true));
        let d = track(COM_QUERY, de, f.err_nosuch);
        assert_eq!(d.error, Some(1146));
        let d = track(COM_QUERY, de, f.select);
        assert_eq!((d.result_sets, d.in_transaction()), (1, Some(true)));
        let d = track(COM_QUERY, de, f.multi);
        assert_eq!(d.result_sets, 2);
        assert_eq!(d.status.unwrap() & SERVER_MORE_RESULTS_EXISTS, 0);
        let d = track(COM_STMT_PREPARE, de, f.prepare);
        let ok = d.prepare_ok.unwrap();
        assert_eq!((ok.num_params, ok.num_columns), (1, 1));
        let d = track(COM_STMT_EXECUTE, de, f.execute);
        assert!(!d.cursor_opened && d.error.is_none());
        let d = track(COM_STMT_EXECUTE, de, f.execute_cursor);
        assert!(d.cursor_opened);
        let d = track(COM_STMT_FETCH, de, f.fetch);
        assert_ne!(d.status.unwrap() & SERVER_STATUS_LAST_ROW_SENT, 0);
        let d = track(COM_FIELD_LIST, de, f.field_list);
        assert!(d.error.is_none());
        let d = track(COM_STATISTICS, de, f.statistics);
        assert_eq!(d.status, None);
        track(COM_PING, de, f.ping);
        let d = track(COM_QUERY, de, f.commit);
        assert_eq!(d.in_transaction(), Some(false));
    }
}

struct Replies {
    ok_set: &'static [&'static str],
    ok_begin: &'static [&'static str],
    err_nosuch: &'static [&'static str],
    select: &'static [&'static str],
    multi: &'static [&'static str],
    prepare: &'static [&'static str],
    execute: &'static [&'static str],
    execute_cursor: &'static [&'static str],
    fetch: &'static [&'static str],
    field_list: &'static [&'static str],
    statistics: &'static [&'static str],
    ping: &'static [&'static str],
    commit: &'static [&'static str],
}

macro_rules! replies {
    ($($f:ident: $c:ident),*) => { Replies { $($f: fx::$c),* } };
}

const EOF: Replies = replies!(ok_set: EOF_OK_SET, ok_begin: EOF_OK_BEGIN, err_nosuch: EOF_ERR_NOSUCH,
    select: EOF_SELECT, multi: EOF_MULTI, prepare: EOF_PREPARE, execute: EOF_EXECUTE,
    execute_cursor: EOF_EXECUTE_CURSOR, fetch: EOF_FETCH, field_list: EOF_FIELD_LIST,
    statistics: EOF_STATISTICS, ping: EOF_PING, commit: EOF_COMMIT);
const DEOF: Replies = replies!(ok_set: DEOF_OK_SET, ok_begin: DEOF_OK_BEGIN, err_nosuch: DEOF_ERR_NOSUCH,
    select: DEOF_SELECT, multi: DEOF_MULTI, prepare: DEOF_PREPARE, execute: DEOF_EXECUTE,
    execute_cursor: DEOF_EXECUTE_CURSOR, fetch: DEOF_FETCH, field_list: DEOF_FIELD_LIST,
    statistics: DEOF_STATISTICS, ping: DEOF_PING, commit: DEOF_COMMIT);
