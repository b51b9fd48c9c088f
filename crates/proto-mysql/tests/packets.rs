//! OK/ERR/EOF and classification, LOCAL INFILE, session tracking, prepare-ok,
//! commands and the COM_STMT_EXECUTE parameter block.

use bytes::{Bytes, BytesMut};
use gatehouse_proto_mysql::DecodeError;
use gatehouse_proto_mysql::command::*;
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::errors::{self, MyError};
use gatehouse_proto_mysql::packets::*;
use gatehouse_proto_mysql::prepare::*;
use gatehouse_proto_mysql::session_track::{SessionChange, changes};
use gatehouse_proto_mysql::stmt_execute::*;
use proptest::prelude::*;

#[test]
fn classification_handles_the_0xfe_ambiguity() {
    let eof = [0xFE, 0, 0, 2, 0];
    assert!(is_eof(&eof, false) && is_eof(&eof, true));
    let mut long = vec![0xFE; 9];
    assert!(!is_eof(&long, false), "9+ bytes starting 0xFE is a row");
    assert!(is_eof(&long, true), "OK-as-EOF under CLIENT_DEPRECATE_EOF");
    long.resize(0xFF_FFFF, 0);
    assert!(!is_eof(&long, true));
    assert!(is_ok(&[0, 0, 0, 2, 0, 0, 0]) && !is_ok(&[0, 0]) && !is_ok(&[]));
    assert!(is_err(&[0xFF, 1, 2]) && !is_err(&[]));
    assert!(is_local_infile(b"\xfb/etc/passwd"));
}

#[test]
fn ok_round_trips_and_legacy_forms() {
    let ok = OkPacket {
        affected_rows: 300,
        last_insert_id: 1 << 40,
        status: 3,
        warnings: 2,
        info: Bytes::from_static(b"Rows matched: 1"),
        session_state: None,
    };
    for caps in [CLIENT_PROTOCOL_41, CLIENT_PROTOCOL_41 | CLIENT_SESSION_TRACK] {
        for header in [OK_HEADER, EOF_HEADER] {
            let mut b = BytesMut::new();
            ok.encode(&mut b, caps, header);
            assert_eq!(b[0], header);
            assert_eq!(OkPacket::decode(&b, caps).unwrap(), ok);
        }
    }
    let with_state = OkPacket {
        session_state: Some(Bytes::from_static(b"\x01\x02\x01t")),
        ..ok.clone()
    };
    let caps = CLIENT_PROTOCOL_41 | CLIENT_SESSION_TRACK;
    let mut b = BytesMut::new();
    with_state.encode(&mut b, caps, 0);
    let back = OkPacket::decode(&b, caps).unwrap();
    assert_ne!(back.status & SERVER_SESSION_STATE_CHANGED, 0, "flag set on encode");
    assert_eq!(back.session_state, with_state.session_state);
    assert!(OkPacket::decode(&[0xFF, 0, 0], caps).is_err());
    assert!(OkPacket::decode(&[0x00, 0xFF], caps).is_err());
    assert!(OkPacket::decode(&[0x00, 0, 0, 1], caps).is_err(), "truncated status");
}

#[test]
fn err_with_and_without_sqlstate() {
    let e = ErrPacket::from_error(errors::ER_ACCESS_DENIED_ERROR, "Access denied for user 'x'");
    let mut b = BytesMut::new();
    e.encode(&mut b);
    assert_eq!(&b[..9], b"\xff\x15\x04#28000");
    assert_eq!(ErrPacket::decode(&b).unwrap(), e);
    let legacy = ErrPacket::decode(b"\xff\x10\x04Too many connections").unwrap();
    assert_eq!(
        (legacy.code, legacy.sqlstate, legacy.sqlstate_str().as_str()),
        (1040, None, "HY000")
    );
    assert_eq!(legacy.message, "Too many connections");
    assert!(ErrPacket::decode(&[0xFF, 1]).is_err());
    assert!(ErrPacket::is_progress_report(&[0xFF, 0xFF, 0xFF, 1]));
}

#[test]
fn eof_and_local_infile() {
    let e = EofPacket {
        warnings: 1,
        status: SERVER_MORE_RESULTS_EXISTS,
    };
    let mut b = BytesMut::new();
    e.encode(&mut b);
    assert_eq!(&b[..], &[0xFE, 1, 0, 8, 0]);
    assert_eq!(EofPacket::decode(&b).unwrap(), e);
    assert_eq!(EofPacket::decode(&[0xFE]).unwrap(), EofPacket::default());
    assert!(EofPacket::decode(&[0xFE; 9]).is_err());
    assert!(EofPacket::decode(&[0xFE, 1]).is_err());
    let r = LocalInfileRequest::decode(b"\xfbdata.csv").unwrap();
    assert_eq!(&r.filename[..], b"data.csv");
    let mut b = BytesMut::new();
    r.encode(&mut b);
    assert_eq!(&b[..], b"\xfbdata.csv");
    assert_eq!(LocalInfileRequest::decode(&[]), Err(DecodeError::Empty));
}

#[test]
fn error_constants() {
    for e in errors::ALL {
        assert_eq!(e.sqlstate.len(), 5, "{}", e.name);
        assert_eq!(errors::by_code(e.code), Some(*e), "codes are unique");
    }
    let check: [(MyError, u16, &str); 6] = [
        (errors::ER_CON_COUNT_ERROR, 1040, "08004"),
        (errors::ER_NET_PACKET_TOO_LARGE, 1153, "08S01"),
        (errors::ER_NOT_SUPPORTED_AUTH_MODE, 1251, "08004"),
        (errors::ER_QUERY_INTERRUPTED, 1317, "70100"),
        (errors::ER_MALFORMED_PACKET, 1835, "HY000"),
        (errors::ER_CONNECTION_KILLED, 1927, "70100"),
    ];
    for (e, code, state) in check {
        assert_eq!((e.code, e.sqlstate), (code, state));
    }
    assert_eq!(errors::ER_NO_DB_ERROR.sqlstate_bytes(), *b"3D000");
}

#[test]
fn session_track_malformed_stops_with_error() {
    let items: Vec<_> = changes(b"\x00\x04\x01a\x01b\x02\x02\x011\x00\x09\x00").collect();
    assert_eq!(items.len(), 3);
    assert_eq!(
        items[0],
        Ok(SessionChange::SystemVariable {
            name: b"a",
            value: b"b"
        })
    );
    assert_eq!(items[1], Ok(SessionChange::StateChange(true)));
    assert!(items[2].is_err());
}

#[test]
fn prepare_ok_and_rewrite() {
    let p = StmtPrepareOk {
        stmt_id: 7,
        num_columns: 3,
        num_params: 2,
        warnings: 1,
    };
    let mut b = BytesMut::new();
    p.encode(&mut b);
    assert_eq!(b.len(), PREPARE_OK_LEN);
    rewrite_prepare_ok_id(&mut b, 0xAABBCCDD).unwrap();
    assert_eq!(
        StmtPrepareOk::decode(&b).unwrap(),
        StmtPrepareOk {
            stmt_id: 0xAABBCCDD,
            ..p
        }
    );
    assert_eq!(StmtPrepareOk::decode(&b[..9]).unwrap().warnings, 0);
    assert!(StmtPrepareOk::decode(&b[..8]).is_err());
    assert!(rewrite_prepare_ok_id(&mut [0, 1, 2], 1).is_err());
    assert!(rewrite_prepare_ok_id(&mut [0xFF, 1, 2, 3, 4], 1).is_err());
    assert_eq!(rewrite_prepare_ok_id(&mut [], 1), Err(DecodeError::Empty));
}

#[test]
fn commands_parse_without_copying() {
    assert_eq!(Command::parse(&[]), Err(DecodeError::Empty));
    assert_eq!(Command::parse(b"\x03SELECT 1").unwrap(), Command::Query(b"SELECT 1"));
    assert_eq!(Command::parse(b"\x02db").unwrap(), Command::InitDb(b"db"));
    assert_eq!(
        Command::parse(b"\x04t\0%").unwrap(),
        Command::FieldList {
            table: b"t",
            wildcard: b"%"
        }
    );
    assert_eq!(Command::parse(b"\x1b\x01\x00").unwrap(), Command::SetOption(1));
    assert!(Command::parse(b"\x1b\x01").is_err());
    let exec = b"\x17\x05\0\0\0\x01\x01\0\0\0\x00\x01\x03\x00\x2a\0\0\0";
    assert_eq!(
        Command::parse(exec).unwrap(),
        Command::StmtExecute {
            stmt_id: 5,
            flags: CURSOR_TYPE_READ_ONLY,
            iteration_count: 1,
            rest: &exec[10..]
        }
    );
    assert_eq!(
        Command::parse(b"\x18\x05\0\0\0\x01\0abc").unwrap(),
        Command::StmtSendLongData {
            stmt_id: 5,
            param_id: 1,
            data: b"abc"
        }
    );
    assert_eq!(Command::parse(b"\x19\x05\0\0\0").unwrap(), Command::StmtClose(5));
    assert_eq!(Command::parse(b"\x1a\x05\0\0\0").unwrap(), Command::StmtReset(5));
    assert_eq!(
        Command::parse(b"\x1c\x05\0\0\0\x0a\0\0\0").unwrap(),
        Command::StmtFetch { stmt_id: 5, rows: 10 }
    );
    assert!(Command::parse(b"\x19\x05\0").is_err());
    assert_eq!(Command::parse(b"\x12xyz").unwrap(), Command::Other(COM_BINLOG_DUMP));
    for raw in [&b"\x01"[..], b"\x09", b"\x0e", b"\x1f", b"\x11bob\0"] {
        assert_eq!(Command::parse(raw).unwrap().code(), raw[0]);
    }
}

#[test]
fn stmt_ids_in_place() {
    let mut exec = b"\x17\x05\0\0\0\x00\x01\0\0\0".to_vec();
    assert_eq!(stmt_id_at(&exec), Some(5));
    rewrite_stmt_id(&mut exec, 0x01020304).unwrap();
    assert_eq!(&exec[1..5], &[4, 3, 2, 1]);
    assert_eq!(stmt_id_at(b"\x03SELECT"), None);
    assert_eq!(stmt_id_at(b"\x19\x01"), None);
    assert!(rewrite_stmt_id(&mut b"\x03abcd".to_vec(), 1).is_err());
    assert!(rewrite_stmt_id(&mut b"\x19\x01".to_vec(), 1).is_err());
    assert_eq!(rewrite_stmt_id(&mut [], 1), Err(DecodeError::Empty));
}

#[test]
fn execute_parameter_block() {
    // 2 params, second NULL, types bound: LONG, VAR_STRING.
    let bound = b"\x17\x01\0\0\0\x00\x01\0\0\0\x02\x01\x03\x00\xfd\x00\x2a\0\0\0";
    let p = parse_params(bound, 2).unwrap();
    assert_eq!(
        (p.null_bitmap, p.new_params_bound, p.types),
        (&[2u8][..], true, Some(&b"\x03\x00\xfd\x00"[..]))
    );
    assert_eq!(p.values, b"\x2a\0\0\0");
    // Same execute relying on earlier types.
    let unbound = b"\x17\x01\0\0\0\x00\x01\0\0\0\x02\x00\x2a\0\0\0";
    assert!(!new_params_bound(unbound, 2).unwrap());
    assert_eq!(param_types(unbound, 2).unwrap(), None);
    let rebuilt = with_param_types(unbound, 2, b"\x03\x00\xfd\x00").unwrap();
    assert_eq!(&rebuilt[..], &bound[..]);
    assert_eq!(&with_param_types(bound, 2, b"").unwrap()[..], &bound[..]);
    assert!(with_param_types(unbound, 2, b"\x03").is_err());
    // No parameters: no block.
    assert!(!new_params_bound(b"\x17\x01\0\0\0\x00\x01\0\0\0", 0).unwrap());
    // Malformed: bad flag, truncated, wrong command.
    assert!(new_params_bound(b"\x17\x01\0\0\0\x00\x01\0\0\0\x00\x07", 1).is_err());
    assert!(param_types(b"\x17\x01\0\0\0\x00\x01\0\0\0\x00\x01\x03", 1).is_err());
    assert!(parse_params(b"\x16abc", 0).is_err());
    assert_eq!(null_bitmap_len(8), 1);
    assert_eq!(null_bitmap_len(9), 2);
}

proptest! {
    #[test]
    fn ok_err_eof_round_trip(aff: u64, id: u64, status: u16, warnings: u16, info in "[ -~]{0,40}", code: u16, state in "[0-9A-Z]{5}") {
        let caps = CLIENT_PROTOCOL_41 | CLIENT_SESSION_TRACK;
        let ok = OkPacket { affected_rows: aff, last_insert_id: id, status: status & !SERVER_SESSION_STATE_CHANGED, warnings, info: Bytes::from(info.clone()), session_state: None };
        let mut b = BytesMut::new();
        ok.encode(&mut b, caps, OK_HEADER);
        prop_assert_eq!(OkPacket::decode(&b, caps).unwrap(), ok);
        let mut st = [0u8; 5];
        st.copy_from_slice(state.as_bytes());
        let e = ErrPacket { code, sqlstate: Some(st), message: info };
        let mut b = BytesMut::new();
        e.encode(&mut b);
        prop_assert_eq!(ErrPacket::decode(&b).unwrap(), e);
        let eof = EofPacket { warnings, status };
        let mut b = BytesMut::new();
        eof.encode(&mut b);
        prop_assert_eq!(EofPacket::decode(&b).unwrap(), eof);
    }

    #[test]
    fn prepare_and_ids_round_trip(id: u32, cols: u16, params: u16, w: u16, new_id: u32) {
        let p = StmtPrepareOk { stmt_id: id, num_columns: cols, num_params: params, warnings: w };
        let mut b = BytesMut::new();
        p.encode(&mut b);
        prop_assert_eq!(StmtPrepareOk::decode(&b).unwrap(), p);
        let mut cmd = vec![COM_STMT_CLOSE];
        cmd.extend_from_slice(&id.to_le_bytes());
        rewrite_stmt_id(&mut cmd, new_id).unwrap();
        prop_assert_eq!(stmt_id_at(&cmd), Some(new_id));
        prop_assert_eq!(Command::parse(&cmd).unwrap(), Command::StmtClose(new_id));
    }

    #[test]
    fn decoders_never_panic(data in prop::collection::vec(any::<u8>(), 0..64), caps: u32, n: u16, id: u32) {
        let _ = OkPacket::decode(&data, caps);
        let _ = ErrPacket::decode(&data);
        let _ = EofPacket::decode(&data);
        let _ = LocalInfileRequest::decode(&data);
        let _ = StmtPrepareOk::decode(&data);
        let _ = Command::parse(&data);
        let _ = stmt_id_at(&data);
        let _ = parse_params(&data, n % 40);
        let _ = with_param_types(&data, n % 40, &data);
        let _ = changes(&data).count();
        let mut m = data.clone();
        let _ = rewrite_stmt_id(&mut m, id);
        let _ = rewrite_prepare_ok_id(&mut m, id);
    }
}
