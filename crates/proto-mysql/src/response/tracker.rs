//! The reply state machine behind [`ResponseTracker`].

use super::{Done, OkSummary, ResponseError, ResponseKind, Step};
use crate::auth::caching_sha2::FAST_AUTH_SUCCESS;
use crate::consts::{
    CLIENT_PROTOCOL_41, SERVER_MORE_RESULTS_EXISTS, SERVER_SESSION_STATE_CHANGED, SERVER_STATUS_CURSOR_EXISTS,
};
use crate::handshake::auth_switch::{AUTH_MORE_DATA_HEADER, AUTH_SWITCH_HEADER};
use crate::lenenc::Reader;
use crate::packets::{EOF_HEADER, ERR_HEADER, EofPacket, ErrPacket, LOCAL_INFILE_HEADER, OK_HEADER, OkPacket, is_eof};
use crate::prepare::StmtPrepareOk;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// First packet of a (next) result.
    Start,
    ColumnDefs {
        left: u64,
    },
    ColumnsEof,
    Rows,
    /// After a LOCAL INFILE request: the OK/ERR that follows the client's data.
    Infile,
    PrepareFirst,
    PrepareParams {
        left: u16,
    },
    PrepareParamsEof,
    PrepareCols {
        left: u16,
    },
    PrepareColsEof,
    FieldDefs,
    Statistics,
    Auth,
    Done,
}

/// Follows the reply to one command. Feed each logical server packet (payload
/// only) in order; never panics, and returns an error for a reply that breaks the
/// protocol (the connection should then be discarded).
#[derive(Debug, Clone)]
pub struct ResponseTracker {
    kind: ResponseKind,
    deprecate_eof: bool,
    state: State,
    done: Done,
    /// Rows of the result set being read.
    rows: u64,
}

impl ResponseTracker {
    /// `deprecate_eof`: whether `CLIENT_DEPRECATE_EOF` is in effect on this
    /// connection (negotiated by both sides).
    pub fn new(kind: ResponseKind, deprecate_eof: bool) -> Self {
        let state = match kind {
            ResponseKind::ResultSets | ResponseKind::OkOrErr | ResponseKind::StmtExecute => State::Start,
            ResponseKind::StmtPrepare => State::PrepareFirst,
            ResponseKind::StmtFetch => State::Rows,
            ResponseKind::FieldList => State::FieldDefs,
            ResponseKind::Statistics => State::Statistics,
            ResponseKind::ChangeUser => State::Auth,
            ResponseKind::NoReply | ResponseKind::Unsupported(_) => State::Done,
        };
        ResponseTracker {
            kind,
            deprecate_eof,
            state,
            done: Done::default(),
            rows: 0,
        }
    }

    pub fn kind(&self) -> ResponseKind {
        self.kind
    }

    /// Whether the reply is complete (immediately true for [`ResponseKind::NoReply`]).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes one server packet payload.
    pub fn feed(&mut self, p: &[u8]) -> Result<Step, ResponseError> {
        let &h = p.first().ok_or(ResponseError::Empty)?;
        if self.state == State::Done {
            return Err(match self.kind {
                ResponseKind::NoReply => ResponseError::NoReplyExpected,
                ResponseKind::Unsupported(c) => ResponseError::Unsupported(c),
                _ => ResponseError::AlreadyDone,
            });
        }
        if h == ERR_HEADER && self.state != State::Statistics {
            return self.on_err(p);
        }
        match self.state {
            State::Start => self.on_start(p, h),
            State::ColumnDefs { left } => {
                self.state = match left {
                    0 | 1 if self.deprecate_eof => State::Rows,
                    0 | 1 => State::ColumnsEof,
                    _ => State::ColumnDefs { left: left - 1 },
                };
                Ok(Step::More)
            }
            State::ColumnsEof => {
                if !is_eof(p, false) {
                    return Err(self.unexpected("expecting EOF after column definitions", h));
                }
                let status = EofPacket::decode(p)?.status;
                self.done.status = Some(status);
                if self.kind == ResponseKind::StmtExecute && status & SERVER_STATUS_CURSOR_EXISTS != 0 {
                    self.done.cursor_opened = true;
                    return Ok(self.finish());
                }
                self.state = State::Rows;
                Ok(Step::More)
            }
            State::Rows => self.on_row(p, h),
            State::Infile => match h {
                OK_HEADER => self.on_ok(p),
                _ => Err(self.unexpected("expecting OK after LOCAL INFILE data", h)),
            },
            State::PrepareFirst => {
                if h != OK_HEADER {
                    return Err(self.unexpected("expecting COM_STMT_PREPARE_OK", h));
                }
                let ok = StmtPrepareOk::decode(p)?;
                self.done.prepare_ok = Some(ok);
                Ok(self.prepare_next(State::PrepareFirst))
            }
            State::PrepareParams { left } => {
                let from = if left <= 1 {
                    State::PrepareParamsEof
                } else {
                    State::PrepareParams { left: left - 1 }
                };
                Ok(self.prepare_after_def(from))
            }
            State::PrepareCols { left } => {
                let from = if left <= 1 {
                    State::PrepareColsEof
                } else {
                    State::PrepareCols { left: left - 1 }
                };
                Ok(self.prepare_after_def(from))
            }
            State::PrepareParamsEof | State::PrepareColsEof => {
                if !is_eof(p, false) {
                    return Err(self.unexpected("expecting EOF after prepared definitions", h));
                }
                self.done.status = Some(EofPacket::decode(p)?.status);
                Ok(self.prepare_next(self.state))
            }
            State::FieldDefs => {
                if is_eof(p, self.deprecate_eof) {
                    self.terminator(p)?;
                    return Ok(self.finish());
                }
                Ok(Step::More)
            }
            State::Statistics => Ok(self.finish()),
            State::Auth => match h {
                OK_HEADER => self.on_ok(p),
                AUTH_SWITCH_HEADER => Ok(Step::AuthContinue),
                AUTH_MORE_DATA_HEADER if p == [AUTH_MORE_DATA_HEADER, FAST_AUTH_SUCCESS] => Ok(Step::More),
                AUTH_MORE_DATA_HEADER => Ok(Step::AuthContinue),
                _ => Err(self.unexpected("in the COM_CHANGE_USER auth exchange", h)),
            },
            State::Done => Err(ResponseError::AlreadyDone),
        }
    }

    fn on_start(&mut self, p: &[u8], h: u8) -> Result<Step, ResponseError> {
        match h {
            OK_HEADER => self.on_ok(p),
            LOCAL_INFILE_HEADER if self.kind == ResponseKind::ResultSets => {
                self.state = State::Infile;
                Ok(Step::LocalInfile)
            }
            EOF_HEADER if is_eof(p, self.deprecate_eof) => {
                // OkOrErr commands answered with EOF (COM_SET_OPTION, COM_DEBUG).
                let more = self.terminator(p)?;
                if more && self.kind != ResponseKind::OkOrErr {
                    return Ok(Step::More);
                }
                Ok(self.finish())
            }
            _ if self.kind == ResponseKind::OkOrErr => Err(self.unexpected("expecting OK, ERR or EOF", h)),
            _ => {
                let mut r = Reader::new(p, "column count");
                let n = r.lenenc_int()?;
                r.finish()?;
                if n == 0 {
                    return Err(self.unexpected("reading a zero column count", h));
                }
                self.done.result_sets += 1;
                // An OK before this result set no longer ends the reply; under
                // CLIENT_DEPRECATE_EOF the set's own terminator is the new one.
                self.done.ok = None;
                self.rows = 0;
                self.state = State::ColumnDefs { left: n };
                Ok(Step::More)
            }
        }
    }

    fn on_row(&mut self, p: &[u8], h: u8) -> Result<Step, ResponseError> {
        if is_eof(p, self.deprecate_eof) {
            let more = self.terminator(p)?;
            self.done.last_rows = Some(self.rows);
            let status = self.done.status.unwrap_or(0);
            if self.kind == ResponseKind::StmtExecute && status & SERVER_STATUS_CURSOR_EXISTS != 0 {
                self.done.cursor_opened = true;
                return Ok(self.finish());
            }
            if more && self.kind != ResponseKind::StmtFetch {
                return Ok(Step::More);
            }
            return Ok(self.finish());
        }
        let binary = matches!(self.kind, ResponseKind::StmtExecute | ResponseKind::StmtFetch);
        if binary && h != OK_HEADER {
            return Err(self.unexpected("reading binary rows", h));
        }
        self.rows += 1;
        Ok(Step::More)
    }

    fn on_ok(&mut self, p: &[u8]) -> Result<Step, ResponseError> {
        let ok = OkPacket::decode(p, CLIENT_PROTOCOL_41)?;
        self.record_ok(&ok);
        self.done.last_rows = None;
        if ok.status & SERVER_MORE_RESULTS_EXISTS != 0
            && matches!(self.kind, ResponseKind::ResultSets | ResponseKind::StmtExecute)
        {
            self.state = State::Start;
            return Ok(Step::More);
        }
        Ok(self.finish())
    }

    fn on_err(&mut self, p: &[u8]) -> Result<Step, ResponseError> {
        if ErrPacket::is_progress_report(p) {
            return Ok(Step::More);
        }
        let err = ErrPacket::decode(p)?;
        self.done.error = Some(err.code);
        self.done.ok = None;
        self.done.last_rows = None;
        Ok(self.finish())
    }

    /// Records a row/column terminator (EOF, or OK with 0xFE under deprecate_eof);
    /// returns whether more results follow. Moves to `Start` in that case.
    fn terminator(&mut self, p: &[u8]) -> Result<bool, ResponseError> {
        let status = if self.deprecate_eof {
            let ok = OkPacket::decode(p, CLIENT_PROTOCOL_41)?;
            self.record_ok(&ok);
            ok.status
        } else {
            let eof = EofPacket::decode(p)?;
            self.done.status = Some(eof.status);
            self.done.warnings = eof.warnings;
            eof.status
        };
        let more = status & SERVER_MORE_RESULTS_EXISTS != 0;
        if more {
            self.state = State::Start;
        }
        Ok(more)
    }

    fn record_ok(&mut self, ok: &OkPacket) {
        self.done.status = Some(ok.status);
        self.done.warnings = ok.warnings;
        self.done.session_state_changed |= ok.status & SERVER_SESSION_STATE_CHANGED != 0;
        self.done.insert_id_seen |= ok.last_insert_id != 0;
        self.done.ok = Some(OkSummary {
            affected_rows: ok.affected_rows,
            last_insert_id: ok.last_insert_id,
            warnings: ok.warnings,
        });
    }

    /// After one prepared-statement definition: `next` is the state to move to,
    /// resolving the EOF states when EOFs are deprecated.
    fn prepare_after_def(&mut self, next: State) -> Step {
        match next {
            State::PrepareParamsEof | State::PrepareColsEof if self.deprecate_eof => self.prepare_next(next),
            _ => {
                self.state = next;
                Step::More
            }
        }
    }

    /// Moves past a finished section (`from`: PREPARE_OK, the parameter EOF or the
    /// column EOF) to the next non-empty one, or finishes.
    fn prepare_next(&mut self, from: State) -> Step {
        let ok = self.done.prepare_ok.unwrap_or_default();
        if from == State::PrepareFirst && ok.num_params > 0 {
            self.state = State::PrepareParams { left: ok.num_params };
            return Step::More;
        }
        if matches!(from, State::PrepareFirst | State::PrepareParamsEof) && ok.num_columns > 0 {
            self.state = State::PrepareCols { left: ok.num_columns };
            return Step::More;
        }
        self.finish()
    }

    fn finish(&mut self) -> Step {
        self.state = State::Done;
        Step::Done(self.done)
    }

    fn unexpected(&self, state: &'static str, header: u8) -> ResponseError {
        ResponseError::Unexpected { state, header }
    }
}
