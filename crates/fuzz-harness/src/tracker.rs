//! The harness of `ResponseTracker::feed`: arbitrary packets, where the
//! tracker's answers must stay consistent, and well-formed replies built
//! from the fuzz input by a model of the protocol, where the tracker must
//! report Done on the last packet, not one earlier, with the summary the
//! model expects.

use bytes::{BufMut, BytesMut};
use gatehouse_proto_mysql::consts::{
    COM_CHANGE_USER, SERVER_MORE_RESULTS_EXISTS, SERVER_SESSION_STATE_CHANGED, SERVER_STATUS_CURSOR_EXISTS,
};
use gatehouse_proto_mysql::lenenc::{put_lenenc_bytes, put_lenenc_int};
use gatehouse_proto_mysql::packets::{EOF_HEADER, ERR_HEADER, LOCAL_INFILE_HEADER, OK_HEADER};
use gatehouse_proto_mysql::prepare::StmtPrepareOk;
use gatehouse_proto_mysql::response::{Done, OkSummary, ResponseError, ResponseKind, ResponseTracker, Step};

use crate::input::Input;

/// First byte: bit 0 `CLIENT_DEPRECATE_EOF`, bit 1 the model (else
/// arbitrary packets); for the model the other bits pick the reply shape,
/// for arbitrary packets the next byte is the command. Packets are
/// one-byte-length-prefixed chunks.
pub fn my_response_tracker(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let deprecate_eof = mode & 1 != 0;
    if mode & 2 == 0 {
        let cmd = input.u8();
        arbitrary(ResponseKind::for_command(cmd), deprecate_eof, &mut input);
    } else {
        model(mode >> 2, deprecate_eof, &mut input);
    }
}

fn is_finished_error(e: &ResponseError) -> bool {
    matches!(
        e,
        ResponseError::AlreadyDone | ResponseError::NoReplyExpected | ResponseError::Unsupported(_)
    )
}

fn arbitrary(kind: ResponseKind, deprecate_eof: bool, input: &mut Input<'_>) {
    let mut t = ResponseTracker::new(kind, deprecate_eof);
    assert_eq!(t.kind(), kind);
    assert_eq!(
        t.is_done(),
        matches!(kind, ResponseKind::NoReply | ResponseKind::Unsupported(_))
    );
    while !input.is_empty() {
        let p = input.chunk();
        let was_done = t.is_done();
        match t.feed(p) {
            Ok(Step::Done(d)) => {
                assert!(!was_done && t.is_done());
                if let Some(code) = d.error {
                    assert!(p[0] == ERR_HEADER && u16::from_le_bytes([p[1], p[2]]) == code);
                    assert!(d.ok.is_none() && d.last_rows.is_none());
                }
                if d.prepare_ok.is_some() {
                    assert_eq!(kind, ResponseKind::StmtPrepare);
                }
                if d.cursor_opened {
                    assert_eq!(kind, ResponseKind::StmtExecute);
                }
                let after = t.feed(&[OK_HEADER, 0, 0, 0, 0, 0, 0]);
                assert!(after.as_ref().is_err_and(is_finished_error), "{after:?}");
                return;
            }
            Ok(step) => {
                assert!(!was_done && !t.is_done());
                match step {
                    Step::LocalInfile => assert!(kind == ResponseKind::ResultSets && p[0] == LOCAL_INFILE_HEADER),
                    Step::AuthContinue => assert!(kind == ResponseKind::ChangeUser && matches!(p[0], 0x01 | 0xFE)),
                    _ => {}
                }
            }
            Err(e) => {
                if p.is_empty() {
                    assert_eq!(e, ResponseError::Empty);
                } else {
                    assert_eq!(is_finished_error(&e), was_done, "{e}");
                }
                return;
            }
        }
    }
}

/// What feeding one packet of a modelled reply must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    More,
    LocalInfile,
    AuthContinue,
    Done,
}

fn want(more: bool) -> Want {
    if more { Want::More } else { Want::Done }
}

/// A well-formed reply being built, with the summary it must end in.
struct Model<'i, 'a> {
    g: &'i mut Input<'a>,
    deprecate_eof: bool,
    /// Interleave MariaDB progress reports (ERR 0xFFFF), which are skipped.
    progress: bool,
    packets: Vec<(Vec<u8>, Want)>,
    done: Done,
}

fn model(sel: u8, deprecate_eof: bool, g: &mut Input<'_>) {
    const KINDS: [ResponseKind; 8] = [
        ResponseKind::ResultSets,
        ResponseKind::StmtExecute,
        ResponseKind::StmtFetch,
        ResponseKind::StmtPrepare,
        ResponseKind::FieldList,
        ResponseKind::OkOrErr,
        ResponseKind::Statistics,
        ResponseKind::ChangeUser,
    ];
    let kind = KINDS[usize::from(sel % 8)];
    let mut m = Model {
        g,
        deprecate_eof,
        progress: sel & 8 != 0 && kind != ResponseKind::Statistics,
        packets: Vec::new(),
        done: Done::default(),
    };
    match kind {
        ResponseKind::ResultSets | ResponseKind::StmtExecute => m.results(kind),
        ResponseKind::StmtFetch => m.fetch(),
        ResponseKind::StmtPrepare => m.prepare(),
        ResponseKind::FieldList => m.field_list(),
        ResponseKind::OkOrErr => m.ok_or_err(),
        ResponseKind::Statistics => {
            let text = m.g.chunk();
            let text = if text.is_empty() { &b"Uptime: 1"[..] } else { text };
            m.push(text.to_vec(), Want::Done);
        }
        _ => m.change_user(),
    }
    let Model { packets, done, .. } = m;
    check(kind, deprecate_eof, &packets, &done);
}

fn check(kind: ResponseKind, deprecate_eof: bool, packets: &[(Vec<u8>, Want)], expected: &Done) {
    let mut t = ResponseTracker::new(kind, deprecate_eof);
    let last = packets.len() - 1;
    for (i, (p, w)) in packets.iter().enumerate() {
        let step = t
            .feed(p)
            .unwrap_or_else(|e| panic!("packet {i} of a well-formed {kind:?} reply was refused: {e}"));
        match (w, step) {
            (Want::Done, Step::Done(got)) => {
                assert_eq!(i, last, "Done before the reply was complete");
                assert_eq!(&got, expected, "{kind:?} reply, deprecate_eof {deprecate_eof}");
                assert!(t.is_done());
                return;
            }
            (Want::More, Step::More)
            | (Want::LocalInfile, Step::LocalInfile)
            | (Want::AuthContinue, Step::AuthContinue) => {
                assert!(!t.is_done());
            }
            (w, s) => panic!("packet {i} of a {kind:?} reply: wanted {w:?}, got {s:?}"),
        }
    }
    panic!("a complete {kind:?} reply did not end in Done");
}

impl Model<'_, '_> {
    fn push(&mut self, p: Vec<u8>, w: Want) {
        if self.progress && self.g.one_in(4) {
            // MariaDB progress report: ERR with code 0xFFFF, stage, max stage, progress, info.
            self.packets
                .push((vec![ERR_HEADER, 0xFF, 0xFF, 1, 1, 0, 0, 0, 0], Want::More));
        }
        self.packets.push((p, w));
    }

    /// Turns the last packet into the reply's end.
    fn end_here(&mut self) {
        if let Some(last) = self.packets.last_mut() {
            last.1 = Want::Done;
        }
    }

    /// Status flags without the two that change the reply's shape, plus
    /// SERVER_MORE_RESULTS_EXISTS when `more`.
    fn status(&mut self, more: bool) -> u16 {
        let s = self.g.u16() & !(SERVER_MORE_RESULTS_EXISTS | SERVER_STATUS_CURSOR_EXISTS);
        if more { s | SERVER_MORE_RESULTS_EXISTS } else { s }
    }

    fn number(&mut self) -> u64 {
        match self.g.u8() % 4 {
            0 => 0,
            1 => u64::from(self.g.u8()),
            2 => u64::from(self.g.u32()),
            _ => self.g.u64(),
        }
    }

    /// An OK (4.1 layout, info as the rest) that the tracker records.
    fn ok_packet(&mut self, header: u8, status: u16) -> Vec<u8> {
        let affected_rows = self.number();
        let last_insert_id = self.number();
        let warnings = self.g.u16();
        let mut p = BytesMut::new();
        p.put_u8(header);
        put_lenenc_int(&mut p, affected_rows);
        put_lenenc_int(&mut p, last_insert_id);
        p.put_u16_le(status);
        p.put_u16_le(warnings);
        p.extend_from_slice(self.g.chunk());
        self.done.status = Some(status);
        self.done.warnings = warnings;
        self.done.session_state_changed |= status & SERVER_SESSION_STATE_CHANGED != 0;
        self.done.insert_id_seen |= last_insert_id != 0;
        self.done.ok = Some(OkSummary {
            affected_rows,
            last_insert_id,
            warnings,
        });
        p.to_vec()
    }

    /// An OK that is a whole result (0x00): no rows.
    fn ok_result(&mut self, more: bool) -> Vec<u8> {
        let status = self.status(more);
        let p = self.ok_packet(OK_HEADER, status);
        self.done.last_rows = None;
        p
    }

    /// The end of a row or column stream: EOF, or an OK with 0xFE under
    /// CLIENT_DEPRECATE_EOF.
    fn terminator(&mut self, status: u16) -> Vec<u8> {
        if self.deprecate_eof {
            return self.ok_packet(EOF_HEADER, status);
        }
        let warnings = self.g.u16();
        self.done.status = Some(status);
        self.done.warnings = warnings;
        // The reply did not end in an OK.
        self.done.ok = None;
        let mut p = vec![EOF_HEADER];
        p.extend_from_slice(&warnings.to_le_bytes());
        p.extend_from_slice(&status.to_le_bytes());
        p
    }

    /// An EOF that closes a definition list: only its status is kept.
    fn definitions_eof(&mut self, status: u16) -> Vec<u8> {
        self.done.status = Some(status);
        let mut p = vec![EOF_HEADER];
        p.extend_from_slice(&self.g.u16().to_le_bytes());
        p.extend_from_slice(&status.to_le_bytes());
        p
    }

    fn err(&mut self) -> Vec<u8> {
        let code = self.g.u16().min(0xFFFE);
        self.done.error = Some(code);
        self.done.ok = None;
        self.done.last_rows = None;
        let mut p = vec![ERR_HEADER];
        p.extend_from_slice(&code.to_le_bytes());
        if self.g.bool() {
            p.push(b'#');
            p.extend_from_slice(b"HY000");
        }
        p.extend_from_slice(self.g.chunk());
        p
    }

    fn definition(&mut self) -> Vec<u8> {
        let mut p = BytesMut::new();
        put_lenenc_bytes(&mut p, b"def");
        p.extend_from_slice(self.g.chunk());
        p.to_vec()
    }

    fn text_row(&mut self, columns: u64) -> Vec<u8> {
        let mut p = BytesMut::new();
        for _ in 0..columns {
            if self.g.one_in(4) {
                p.put_u8(0xFB);
            } else {
                let len = usize::from(self.g.u16() % 300);
                put_lenenc_bytes(&mut p, self.g.bytes(len));
            }
        }
        p.to_vec()
    }

    fn binary_row(&mut self) -> Vec<u8> {
        let mut p = vec![OK_HEADER];
        p.extend_from_slice(self.g.chunk());
        p
    }

    /// Column count and definitions (and their EOF without
    /// CLIENT_DEPRECATE_EOF); returns the column count.
    fn columns(&mut self) -> u64 {
        let n = 1 + u64::from(self.g.u8() % 4);
        let mut count = BytesMut::new();
        put_lenenc_int(&mut count, n);
        self.push(count.to_vec(), Want::More);
        for _ in 0..n {
            let d = self.definition();
            self.push(d, Want::More);
        }
        n
    }

    fn result_set(&mut self, binary: bool, more: bool) {
        self.done.result_sets += 1;
        // A new result: an OK before it is no longer the reply's last.
        self.done.ok = None;
        let n = self.columns();
        if !self.deprecate_eof {
            let status = self.status(false);
            let e = self.definitions_eof(status);
            self.push(e, Want::More);
        }
        let rows = self.g.u8() % 5;
        for _ in 0..rows {
            let r = if binary { self.binary_row() } else { self.text_row(n) };
            self.push(r, Want::More);
        }
        let status = self.status(more);
        let t = self.terminator(status);
        self.done.last_rows = Some(u64::from(rows));
        self.push(t, want(more));
    }

    /// COM_STMT_EXECUTE that opens a cursor: definitions, then the status
    /// with SERVER_STATUS_CURSOR_EXISTS ends the reply.
    fn cursor(&mut self) {
        self.done.result_sets += 1;
        self.done.cursor_opened = true;
        self.columns();
        let status = self.status(false) | SERVER_STATUS_CURSOR_EXISTS;
        if self.deprecate_eof {
            let t = self.terminator(status);
            self.done.last_rows = Some(0);
            self.push(t, Want::Done);
        } else {
            let e = self.definitions_eof(status);
            self.push(e, Want::Done);
        }
    }

    fn results(&mut self, kind: ResponseKind) {
        let n = 1 + self.g.u8() % 3;
        for i in 0..n {
            let more = i + 1 < n;
            match self.g.u8() % 5 {
                1 => self.result_set(kind == ResponseKind::StmtExecute, more),
                2 if kind == ResponseKind::ResultSets => {
                    let mut p = vec![LOCAL_INFILE_HEADER];
                    p.extend_from_slice(self.g.chunk());
                    self.push(p, Want::LocalInfile);
                    let end = if !more && self.g.bool() {
                        self.err()
                    } else {
                        self.ok_result(more)
                    };
                    self.push(end, want(more));
                }
                3 if kind == ResponseKind::StmtExecute && n == 1 => self.cursor(),
                4 if !more => {
                    let e = self.err();
                    self.push(e, Want::Done);
                }
                _ => {
                    let p = self.ok_result(more);
                    self.push(p, want(more));
                }
            }
        }
    }

    fn fetch(&mut self) {
        let rows = self.g.u8() % 6;
        for _ in 0..rows {
            let r = self.binary_row();
            self.push(r, Want::More);
        }
        if self.g.one_in(4) {
            let e = self.err();
            self.push(e, Want::Done);
        } else {
            // Any status: a fetch ends at its terminator.
            let status = self.g.u16();
            let t = self.terminator(status);
            self.done.last_rows = Some(u64::from(rows));
            self.push(t, Want::Done);
        }
    }

    fn prepare(&mut self) {
        if self.g.one_in(5) {
            let e = self.err();
            self.push(e, Want::Done);
            return;
        }
        let ok = StmtPrepareOk {
            stmt_id: self.g.u32(),
            num_columns: u16::from(self.g.u8() % 4),
            num_params: u16::from(self.g.u8() % 4),
            warnings: self.g.u16(),
        };
        self.done.prepare_ok = Some(ok);
        let mut p = BytesMut::new();
        ok.encode(&mut p);
        self.push(p.to_vec(), Want::More);
        for count in [ok.num_params, ok.num_columns] {
            if count == 0 {
                continue;
            }
            for _ in 0..count {
                let d = self.definition();
                self.push(d, Want::More);
            }
            if !self.deprecate_eof {
                let status = self.g.u16();
                let e = self.definitions_eof(status);
                self.push(e, Want::More);
            }
        }
        self.end_here();
    }

    fn field_list(&mut self) {
        if self.g.one_in(5) {
            let e = self.err();
            self.push(e, Want::Done);
            return;
        }
        for _ in 0..self.g.u8() % 4 {
            let d = self.definition();
            self.push(d, Want::More);
        }
        let status = self.g.u16();
        let t = self.terminator(status);
        self.push(t, Want::Done);
    }

    fn ok_or_err(&mut self) {
        let p = match self.g.u8() % 3 {
            0 => {
                let status = self.g.u16();
                self.ok_packet(OK_HEADER, status)
            }
            1 => self.err(),
            // COM_SET_OPTION and COM_DEBUG answer with EOF.
            _ => {
                let status = self.g.u16();
                self.terminator(status)
            }
        };
        self.push(p, Want::Done);
    }

    fn change_user(&mut self) {
        debug_assert_eq!(ResponseKind::for_command(COM_CHANGE_USER), ResponseKind::ChangeUser);
        for _ in 0..self.g.u8() % 4 {
            match self.g.u8() % 3 {
                0 => {
                    let mut p = vec![0xFE];
                    p.extend(self.g.chunk().iter().map(|&b| b.max(1)));
                    p.push(0);
                    p.extend_from_slice(self.g.chunk());
                    self.push(p, Want::AuthContinue);
                }
                1 => {
                    let data = self.g.chunk();
                    let w = if data == [3] { Want::More } else { Want::AuthContinue };
                    let mut p = vec![0x01];
                    p.extend_from_slice(data);
                    self.push(p, w);
                }
                // caching_sha2_password's fast-auth success; an OK follows.
                _ => self.push(vec![0x01, 0x03], Want::More),
            }
        }
        let end = if self.g.one_in(4) {
            self.err()
        } else {
            let status = self.g.u16();
            self.ok_packet(OK_HEADER, status)
        };
        self.push(end, Want::Done);
    }
}
