//! The reply tracker on hand-built replies of every shape, with and without
//! CLIENT_DEPRECATE_EOF.

use bytes::BytesMut;
use gatehouse_proto_mysql::consts::*;
use gatehouse_proto_mysql::packets::{EofPacket, ErrPacket, OkPacket};
use gatehouse_proto_mysql::prepare::StmtPrepareOk;
use gatehouse_proto_mysql::response::*;
use proptest::prelude::*;

const IN_TRANS: u16 = SERVER_STATUS_IN_TRANS;
const MORE: u16 = SERVER_MORE_RESULTS_EXISTS;

fn ok_with(header: u8, affected: u64, status: u16) -> Vec<u8> {
    let mut b = BytesMut::new();
    OkPacket {
        affected_rows: affected,
        status,
        ..Default::default()
    }
    .encode(&mut b, CLIENT_PROTOCOL_41, header);
    b.to_vec()
}
fn ok(status: u16) -> Vec<u8> {
    ok_with(0x00, 1, status)
}
fn eof(status: u16) -> Vec<u8> {
    let mut b = BytesMut::new();
    EofPacket { warnings: 0, status }.encode(&mut b);
    b.to_vec()
}
/// The packet that ends rows (or defs) in each mode.
fn term(de: bool, status: u16) -> Vec<u8> {
    if de { ok_with(0xFE, 0, status) } else { eof(status) }
}
fn err(code: u16) -> Vec<u8> {
    let mut b = BytesMut::new();
    ErrPacket {
        code,
        sqlstate: Some(*b"HY000"),
        message: "boom".into(),
    }
    .encode(&mut b);
    b.to_vec()
}
fn count(n: u8) -> Vec<u8> {
    vec![n]
}
fn coldef() -> Vec<u8> {
    b"\x03def\x01t\x01a\x01a\x02id\x02id\x0c\x3f\x00\x0b\x00\x00\x00\x03\x03\x50\x00\x00\x00".to_vec()
}
fn text_row() -> Vec<u8> {
    b"\x011\x01x".to_vec()
}
fn bin_row() -> Vec<u8> {
    b"\x00\x00\x01x".to_vec()
}

/// A result set: column count, n defs, EOF unless deprecated, rows, terminator.
fn result_set(de: bool, rows: &[Vec<u8>], status: u16) -> Vec<Vec<u8>> {
    let mut v = vec![count(2), coldef(), coldef()];
    if !de {
        v.push(eof(0));
    }
    v.extend(rows.iter().cloned());
    v.push(term(de, status));
    v
}

fn run(kind: ResponseKind, de: bool, packets: &[Vec<u8>]) -> Done {
    let mut t = ResponseTracker::new(kind, de);
    let (last, init) = packets.split_last().unwrap();
    for (i, p) in init.iter().enumerate() {
        assert_eq!(t.feed(p).unwrap(), Step::More, "packet {i} (deprecate_eof={de})");
    }
    let Step::Done(d) = t.feed(last).unwrap() else {
        panic!("not done at the last packet")
    };
    assert!(t.is_done());
    assert_eq!(t.feed(&ok(0)), Err(ResponseError::AlreadyDone));
    d
}

const Q: ResponseKind = ResponseKind::ResultSets;

#[test]
fn ok_and_err() {
    for de in [false, true] {
        let d = run(Q, de, &[ok(IN_TRANS)]);
        assert_eq!(
            (d.status, d.in_transaction(), d.ok.unwrap().affected_rows),
            (Some(IN_TRANS), Some(true), 1)
        );
        let d = run(Q, de, &[err(1064)]);
        assert_eq!((d.error, d.status, d.in_transaction()), (Some(1064), None, None));
    }
}

#[test]
fn text_result_sets() {
    for de in [false, true] {
        let d = run(Q, de, &result_set(de, &[text_row(), text_row()], IN_TRANS));
        assert_eq!((d.status, d.result_sets, d.error), (Some(IN_TRANS), 1, None));
        assert_eq!(d.ok.is_some(), de, "the terminator is an OK only with deprecate_eof");
        let d = run(Q, de, &result_set(de, &[], 0));
        assert_eq!(d.in_transaction(), Some(false));
        // ERR in the middle of rows ends the reply.
        let mut v = result_set(de, &[text_row()], 0);
        *v.last_mut().unwrap() = err(1317);
        let d = run(Q, de, &v);
        assert_eq!(d.error, Some(1317));
    }
}

#[test]
fn rows_starting_with_0xfe_are_not_terminators() {
    let mut row = vec![0xFE];
    row.extend_from_slice(&[0u8; 8]);
    let mut v = result_set(false, &[row], 0);
    assert_eq!(run(Q, false, &v).status, Some(0));
    // With deprecate_eof only a full 0xFFFFFF-byte (or longer) packet is a row.
    let mut big = vec![0u8; 0xFF_FFFF];
    big[0] = 0xFE;
    v = result_set(true, &[big], 0);
    assert_eq!(run(Q, true, &v).status, Some(0));
}

#[test]
fn multiple_results() {
    for de in [false, true] {
        let mut v = result_set(de, &[text_row()], MORE);
        v.push(ok(MORE | IN_TRANS));
        v.extend(result_set(de, &[text_row()], MORE | IN_TRANS));
        v.push(ok(IN_TRANS));
        let d = run(Q, de, &v);
        assert_eq!((d.result_sets, d.status), (2, Some(IN_TRANS)));
        // An error in a later statement ends the whole reply.
        let d = run(Q, de, &[ok(MORE), err(1146)]);
        assert_eq!((d.error, d.status), (Some(1146), Some(MORE)));
    }
}

#[test]
fn local_infile() {
    let mut t = ResponseTracker::new(Q, false);
    assert_eq!(t.feed(b"\xfbfile.csv").unwrap(), Step::LocalInfile);
    assert!(matches!(t.feed(&ok(MORE)).unwrap(), Step::More));
    assert!(matches!(t.feed(&ok(0)).unwrap(), Step::Done(_)));
    let mut t = ResponseTracker::new(Q, true);
    assert_eq!(t.feed(b"\xfbfile.csv").unwrap(), Step::LocalInfile);
    assert!(matches!(
        t.feed(&err(1148)).unwrap(),
        Step::Done(Done { error: Some(1148), .. })
    ));
    let mut t = ResponseTracker::new(Q, true);
    t.feed(b"\xfbf").unwrap();
    assert!(t.feed(&count(1)).is_err());
}

fn prepare_ok(params: u16, cols: u16) -> Vec<u8> {
    let mut b = BytesMut::new();
    StmtPrepareOk {
        stmt_id: 9,
        num_columns: cols,
        num_params: params,
        warnings: 0,
    }
    .encode(&mut b);
    b.to_vec()
}

#[test]
fn stmt_prepare() {
    let k = ResponseKind::StmtPrepare;
    for de in [false, true] {
        for (params, cols) in [(0u16, 0u16), (2, 0), (0, 3), (2, 3)] {
            let mut v = vec![prepare_ok(params, cols)];
            for n in [params, cols] {
                v.extend((0..n).map(|_| coldef()));
                if n > 0 && !de {
                    v.push(eof(IN_TRANS));
                }
            }
            let d = run(k, de, &v);
            let p = d.prepare_ok.unwrap();
            assert_eq!((p.stmt_id, p.num_params, p.num_columns), (9, params, cols));
            let saw_eof = !de && params + cols > 0;
            assert_eq!(d.status, saw_eof.then_some(IN_TRANS));
        }
        assert_eq!(run(k, de, &[err(1064)]).error, Some(1064));
        let mut t = ResponseTracker::new(k, de);
        assert!(t.feed(&count(1)).is_err());
    }
    // Missing EOF after the parameter definitions.
    let mut t = ResponseTracker::new(k, false);
    t.feed(&prepare_ok(1, 1)).unwrap();
    t.feed(&coldef()).unwrap();
    assert!(matches!(t.feed(&coldef()), Err(ResponseError::Unexpected { .. })));
}

#[test]
fn stmt_execute() {
    let k = ResponseKind::for_command(COM_STMT_EXECUTE);
    for de in [false, true] {
        let d = run(k, de, &result_set(de, &[bin_row(), bin_row()], 0));
        assert!(!d.cursor_opened && d.error.is_none());
        assert_eq!(run(k, de, &[ok(IN_TRANS)]).in_transaction(), Some(true));
        // Cursor: the reply ends right after the column definitions.
        let mut v = vec![count(1), coldef()];
        v.push(term(de, SERVER_STATUS_CURSOR_EXISTS | IN_TRANS));
        assert!(run(k, de, &v).cursor_opened);
        // CALL: a binary result set, then the procedure's final OK.
        let mut v = result_set(de, &[bin_row()], MORE);
        v.push(ok(0));
        assert_eq!(run(k, de, &v).result_sets, 1);
        // Binary rows start with 0x00.
        let mut t = ResponseTracker::new(k, de);
        for p in &result_set(de, &[], 0)[..if de { 3 } else { 4 }] {
            t.feed(p).unwrap();
        }
        assert!(matches!(t.feed(&text_row()), Err(ResponseError::Unexpected { .. })));
    }
}

#[test]
fn stmt_fetch_field_list_statistics() {
    for de in [false, true] {
        let d = run(
            ResponseKind::StmtFetch,
            de,
            &[bin_row(), bin_row(), term(de, SERVER_STATUS_LAST_ROW_SENT)],
        );
        assert_eq!(d.status, Some(SERVER_STATUS_LAST_ROW_SENT));
        assert_eq!(run(ResponseKind::StmtFetch, de, &[err(1243)]).error, Some(1243));
        let d = run(
            ResponseKind::for_command(COM_FIELD_LIST),
            de,
            &[coldef(), coldef(), term(de, 2)],
        );
        assert_eq!(d.status, Some(2));
        assert_eq!(run(ResponseKind::FieldList, de, &[err(1146)]).error, Some(1146));
        let d = run(
            ResponseKind::for_command(COM_STATISTICS),
            de,
            &[b"Uptime: 1  Threads: 1".to_vec()],
        );
        assert_eq!(d, Done::default());
    }
}

#[test]
fn ok_or_err_commands() {
    for cmd in [
        COM_PING,
        COM_INIT_DB,
        COM_RESET_CONNECTION,
        COM_STMT_RESET,
        COM_SET_OPTION,
        0x60,
    ] {
        assert_eq!(ResponseKind::for_command(cmd), ResponseKind::OkOrErr);
    }
    for de in [false, true] {
        let k = ResponseKind::OkOrErr;
        assert_eq!(run(k, de, &[ok(2)]).status, Some(2));
        // COM_SET_OPTION answers with EOF.
        assert_eq!(run(k, de, &[term(de, 2)]).status, Some(2));
        assert_eq!(run(k, de, &[ok(MORE)]).status, Some(MORE), "no multi-results here");
        assert!(ResponseTracker::new(k, de).feed(&count(1)).is_err());
    }
}

#[test]
fn change_user_auth_exchange() {
    let k = ResponseKind::for_command(COM_CHANGE_USER);
    let mut t = ResponseTracker::new(k, true);
    assert_eq!(
        t.feed(b"\xfecaching_sha2_password\0abcdefghijklmnopqrst\0").unwrap(),
        Step::AuthContinue
    );
    assert_eq!(
        t.feed(&[0x01, 0x03]).unwrap(),
        Step::More,
        "fast auth success: OK follows"
    );
    assert!(matches!(
        t.feed(&ok(2)).unwrap(),
        Step::Done(Done { status: Some(2), .. })
    ));
    let mut t = ResponseTracker::new(k, true);
    assert_eq!(t.feed(&[0x01, 0x04]).unwrap(), Step::AuthContinue);
    assert!(matches!(
        t.feed(&err(1045)).unwrap(),
        Step::Done(Done { error: Some(1045), .. })
    ));
    assert!(ResponseTracker::new(k, true).feed(&[0x05]).is_err());
}

#[test]
fn no_reply_unsupported_and_garbage() {
    for cmd in [COM_QUIT, COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA] {
        let mut t = ResponseTracker::new(ResponseKind::for_command(cmd), false);
        assert!(t.is_done());
        assert_eq!(t.feed(&ok(0)), Err(ResponseError::NoReplyExpected));
    }
    let mut t = ResponseTracker::new(ResponseKind::for_command(COM_BINLOG_DUMP), false);
    assert_eq!(t.feed(&ok(0)), Err(ResponseError::Unsupported(COM_BINLOG_DUMP)));
    let mut t = ResponseTracker::new(Q, false);
    assert_eq!(t.feed(&[]), Err(ResponseError::Empty));
    // A column count with trailing bytes (e.g. MariaDB metadata caching) is refused.
    assert!(t.feed(&[1, 1]).is_err());
    let mut t = ResponseTracker::new(Q, false);
    assert!(t.feed(&[0]).is_err(), "truncated OK");
    // Progress reports are skipped.
    let mut t = ResponseTracker::new(Q, false);
    assert_eq!(t.feed(b"\xff\xff\xff\x01\x01\x02\x00\x00\x00\x00").unwrap(), Step::More);
    assert!(matches!(t.feed(&ok(0)).unwrap(), Step::Done(_)));
}

fn kind() -> impl Strategy<Value = ResponseKind> {
    any::<u8>().prop_map(ResponseKind::for_command)
}

proptest! {
    #[test]
    fn never_panics(k in kind(), de: bool, packets in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..16), 0..12)) {
        let mut t = ResponseTracker::new(k, de);
        for p in &packets {
            if t.feed(p).is_err() { break; }
        }
    }

    #[test]
    fn generated_result_sets_end_exactly_at_the_last_packet(de: bool, sets in prop::collection::vec(0usize..4, 1..4), status: u16) {
        // OkPacket::encode derives SESSION_STATE_CHANGED from `session_state`.
        let status = status & !(MORE | SERVER_STATUS_CURSOR_EXISTS | SERVER_SESSION_STATE_CHANGED);
        let mut v = Vec::new();
        for (i, rows) in sets.iter().enumerate() {
            let more = if i + 1 < sets.len() { MORE } else { 0 };
            v.extend(result_set(de, &vec![text_row(); *rows], status | more));
        }
        let d = run(Q, de, &v);
        prop_assert_eq!(d.result_sets as usize, sets.len());
        prop_assert_eq!(d.status, Some(status));
    }
}

#[test]
fn a_result_sets_warnings_come_from_its_final_eof() {
    let mut packets = result_set(false, &[text_row()], 0);
    let mut last = BytesMut::new();
    EofPacket { warnings: 3, status: 0 }.encode(&mut last);
    *packets.last_mut().unwrap() = last.to_vec();
    assert_eq!(run(Q, false, &packets).warnings, 3);
    assert_eq!(run(Q, false, &result_set(false, &[text_row()], 0)).warnings, 0);
}

/// Found by the `my_response_tracker` fuzz target: an OK that started a
/// multi-result reply stayed `Done::ok` after a later result set ended the
/// reply with a classic EOF, so the proxy read that OK's affected rows and
/// warnings as the last statement's.
#[test]
fn an_ok_before_a_final_result_set_is_not_the_final_ok() {
    for (kind, row) in [(Q, text_row()), (ResponseKind::StmtExecute, bin_row())] {
        for de in [false, true] {
            let mut v = vec![ok_with(0x00, 5, MORE)];
            v.extend(result_set(de, std::slice::from_ref(&row), 0));
            let d = run(kind, de, &v);
            assert_eq!((d.result_sets, d.last_rows), (1, Some(1)));
            // Only the 0xFE OK that ends the rows under deprecate_eof counts.
            assert_eq!(
                d.ok.map(|ok| ok.affected_rows),
                de.then_some(0),
                "{kind:?}, deprecate_eof {de}"
            );
        }
    }
}
