//! Query digests: the *digest text* of a statement (its shape, with the
//! literal values taken out) and a stable 64-bit id of it, for per-shape
//! statistics and query rules. This module owns the [`Digest`] type, the
//! dialect-neutral writer both dialects share, and the PostgreSQL front end
//! ([`digest`]); the MySQL/MariaDB front end is [`crate::mysql::digest`].
//!
//! Sans-I/O and cheap, but not free: the caller runs it only where a digest
//! is wanted, never on the plain pooling path. One pass over the tokens of
//! the crate's lexer (PostgreSQL docs §4.1 "Lexical Structure"), no regex,
//! one output `String` sized from the input. Never panics: unterminated
//! strings, quoted identifiers and comments run to the end of the input.
//!
//! Normalization (the canonical form, identical for both dialects):
//! * Literals become `?`: numeric constants (§4.1.2.6, also `0x..` and
//!   `1_000`), string constants of every form (`'..'`, `E'..'`, `U&'..'`,
//!   `N'..'`, `$tag$..$tag$`, bit strings `B'..'` and `X'..'`, §4.1.2.1-5).
//!   `TRUE`, `FALSE` and `NULL` are key words, not literals, and stay.
//!   A `-` or `+` directly before a number where an operand is expected
//!   (after an operator, `(`, `,`, or a key word such as `WHERE`, `AND`,
//!   `SELECT`, `LIMIT`) is part of the literal: `= -5` is `= ?`, while
//!   `a - 5` is `a - ?`.
//! * Bind parameters `$1`, `$2`, ... also become `?`, so the extended-query
//!   form of a statement and its simple-query form with the values inlined
//!   share a digest. A bare `?` (only in text that is already a digest)
//!   is kept as a literal, which makes [`digest`] idempotent on its output.
//! * `IN (..)` with only literals (at least one) becomes `in (...)`, whatever
//!   the count. `VALUES` keeps its first row; every following row of
//!   constants (literals, `NULL`, `TRUE`, `FALSE`, `DEFAULT`) is folded into
//!   one `, ...`, provided the first row is constants too: `VALUES (1, 'a'),
//!   (2, 'b'), (3, NULL)` is `values (?, ?), ...`, while a single row stays
//!   `values (?, ?)`. A row that is not all constants is kept as written and
//!   ends the folding for the rows after it.
//! * Comments are dropped. Whitespace is canonical, not copied: tokens are
//!   separated by one space, except none after `(` and `[`, before `)`,
//!   `]`, `,` and `;`, around `.` and `::`, before `[`, and before a `(`
//!   that follows an unquoted non-key word (a function call: `count(*)`,
//!   while `in (`, `values (` and `"t" (` keep the space). Operators are
//!   grouped as the server lexes them (§4.1.3: `<=`, `->>`, and `=-`
//!   is `=` then `-`). Trailing `;` are dropped.
//! * Unquoted words (key words and identifiers) are lower-cased, as
//!   PostgreSQL folds unquoted identifiers (§4.1.1); quoted identifiers
//!   (`"Users"`, `U&"..."`) are kept byte for byte, quotes included.
//!
//! The text is capped at [`MAX_DIGEST_TEXT`] bytes (see there). The id is
//! the 64-bit FNV-1a hash of the full normalized text, written out here
//! because `std`'s `DefaultHasher` is not stable across Rust releases and
//! ids may be stored, compared across restarts, or named in query rules.

use crate::lexer::{Kind, Lexer, Token};

/// Cap on [`Digest::text`] in bytes. A longer text is cut at the last char
/// boundary at or below the cap and ends with `...`, so a text is at most
/// `MAX_DIGEST_TEXT + 3` bytes: a top-K store of digests then needs bounded
/// memory per entry, however long the statements (bulk inserts with huge
/// non-literal rows, generated SQL). The id still hashes the whole text.
pub const MAX_DIGEST_TEXT: usize = 1024;

/// A statement's digest: normalized text and its stable 64-bit id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest {
    /// The normalized statement text, at most [`MAX_DIGEST_TEXT`] + 3 bytes.
    pub text: String,
    /// FNV-1a 64 of the normalized text before truncation; for a text that
    /// was not truncated, the FNV-1a 64 of `text`.
    pub id: u64,
}

/// The digest of one PostgreSQL statement (see the module docs for the
/// canonical form). Never panics.
pub fn digest(stmt: &str) -> Digest {
    let mut w = Writer::new(stmt.len());
    let mut lx = Lexer::new(stmt);
    while let Some(t) = lx.next() {
        let text = &stmt[t.start..t.end];
        match t.kind {
            Kind::String | Kind::Number | Kind::Param => w.push(Tok::Literal),
            Kind::QuotedIdent => w.push(Tok::Ident(text)),
            Kind::Word => pg_word(&mut w, &mut lx, t),
            Kind::Punct => pg_punct(&mut w, &mut lx, t),
        }
    }
    w.finish()
}

/// The next token, if it starts right at `at` (nothing in between).
fn adjacent(lx: &Lexer<'_>, at: usize) -> Option<Token> {
    lx.clone().next().filter(|t| t.start == at)
}

/// A word, or the prefix of `B'..'`, `X'..'`, `N'..'`, `U&'..'`, `U&".."`.
fn pg_word(w: &mut Writer, lx: &mut Lexer<'_>, t: Token) {
    let src = lx.src();
    let (text, rest) = (&src[t.start..t.end], &src[t.end..]);
    if matches!(text, "b" | "B" | "x" | "X" | "n" | "N") && rest.starts_with('\'') {
        lx.next();
        return w.push(Tok::Literal);
    }
    if matches!(text, "u" | "U") && (rest.starts_with("&'") || rest.starts_with("&\"")) {
        lx.next();
        return match lx.next() {
            Some(q) if q.kind == Kind::QuotedIdent => w.push(Tok::Ident(&src[t.start..q.end])),
            _ => w.push(Tok::Literal),
        };
    }
    w.push(Tok::Word(text));
}

/// PostgreSQL operator characters (§4.1.3).
fn is_pg_op(c: u8) -> bool {
    b"+-*/<>=~!@#%^&|`?".contains(&c)
}

fn pg_punct(w: &mut Writer, lx: &mut Lexer<'_>, t: Token) {
    let src = lx.src();
    let b = src.as_bytes();
    let c = b[t.start];
    match c {
        b'(' | b'[' => w.push(Tok::Open(c)),
        b')' | b']' => w.push(Tok::Close(c)),
        b',' => w.push(Tok::Comma),
        b';' => w.push(Tok::Semi),
        b'.' if is_ellipsis(src, t.start) => {
            lx.next();
            lx.next();
            w.push(Tok::Ellipsis);
        }
        b'.' => w.push(Tok::Dot),
        b':' if b.get(t.end) == Some(&b':') => {
            lx.next();
            w.push(Tok::Cast);
        }
        c if is_pg_op(c) => {
            let mut end = t.end;
            while let Some(n) = adjacent(lx, end).filter(|n| n.kind == Kind::Punct && is_pg_op(b[n.start])) {
                lx.next();
                end = n.end;
            }
            let op = &src[t.start..end];
            // §4.1.3: a multi-character operator cannot end in `+` or `-`
            // unless it contains one of `~ ! @ # % ^ & | ` ?`.
            let mut keep = op.len();
            if !op.bytes().any(|c| b"~!@#%^&|`?".contains(&c)) {
                while keep > 1 && matches!(op.as_bytes()[keep - 1], b'+' | b'-') {
                    keep -= 1;
                }
            }
            if &op[..keep] == "?" {
                w.push(Tok::Literal);
            } else {
                pg_op(w, lx, &op[..keep], keep == op.len());
            }
            for i in keep..op.len() {
                pg_op(w, lx, &op[i..=i], i + 1 == op.len());
            }
        }
        _ => w.push(Tok::Op(&src[t.start..t.end])),
    }
}

/// Pushes operator `op`, or, if it is a sign in operand position and
/// `number` says the next token is a number, consumes that number and
/// pushes one literal for both (`= -5` is `= ?`).
pub(crate) fn signed_op(w: &mut Writer, op: &str, number: impl FnOnce() -> bool, consume: impl FnOnce()) {
    if matches!(op, "-" | "+") && w.operand_expected() && number() {
        consume();
        w.push(Tok::Literal);
    } else {
        w.push(Tok::Op(op));
    }
}

/// Pushes a PostgreSQL operator, folding a sign before a number.
fn pg_op(w: &mut Writer, lx: &mut Lexer<'_>, op: &str, last: bool) {
    let mut peek = lx.clone();
    let number = || last && peek.next().is_some_and(|n| n.kind == Kind::Number);
    signed_op(w, op, number, || {
        lx.next();
    });
}

/// True if a `...` (in text that is already a digest) starts at `at`.
pub(crate) fn is_ellipsis(src: &str, at: usize) -> bool {
    src.get(at..).is_some_and(|r| r.starts_with("...")) && !src.as_bytes().get(at + 3).is_some_and(u8::is_ascii_digit)
}

/// One normalized token, as the dialect front ends hand them to [`Writer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok<'a> {
    /// Unquoted word: written lower-cased; may be a key word.
    Word(&'a str),
    /// Quoted identifier or other name kept byte for byte.
    Ident(&'a str),
    /// A literal, written `?`.
    Literal,
    /// `...` (only in text that is already a digest); counts as a literal.
    Ellipsis,
    /// `(` or `[`.
    Open(u8),
    /// `)` or `]`.
    Close(u8),
    Comma,
    Semi,
    /// Qualifier `.`.
    Dot,
    /// PostgreSQL `::`.
    Cast,
    /// Any other operator or punctuation, written as is.
    Op(&'a str),
}

/// Class of the previously written token, for spacing and context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    Start,
    Word(Kw),
    Ident,
    Literal,
    Open,
    Close,
    Comma,
    Semi,
    Dot,
    Cast,
    Op,
}

/// What the writer needs to know about a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Kw {
    /// A key word after which `(` is not a call (`in (`, `exists (`).
    paren: bool,
    /// An operand follows (`where -1`, `limit -1`): a sign is unary.
    operand: bool,
    /// `IN`.
    is_in: bool,
    /// `VALUES` (or MySQL's synonym `VALUE`).
    is_values: bool,
    /// `NULL`, `TRUE`, `FALSE`, `DEFAULT`: constants in a `VALUES` row.
    constant: bool,
    /// `INTO`, `TABLE`, `REFERENCES`, `EXISTS`: a table name may follow, and a `(` after
    /// it opens a column list, not a call (`into t (a)`).
    names_table: bool,
}

fn keyword(w: &str) -> Kw {
    let mut buf = [0u8; 12];
    let Some(dst) = buf.get_mut(..w.len()) else {
        return Kw::default();
    };
    dst.copy_from_slice(w.as_bytes());
    dst.make_ascii_lowercase();
    let (paren, operand) = match &*dst {
        b"in" | b"values" | b"value" | b"and" | b"or" | b"not" | b"select" | b"where" | b"on" | b"set" | b"any"
        | b"all" | b"some" | b"between" | b"like" | b"ilike" | b"having" | b"by" | b"distinct" | b"when" | b"then"
        | b"else" | b"case" | b"returning" | b"return" | b"limit" | b"offset" | b"xor" | b"regexp" | b"rlike" => {
            (true, true)
        }
        b"div" | b"mod" | b"interval" => (false, true),
        b"exists" | b"as" | b"from" | b"join" | b"using" | b"union" | b"intersect" | b"except" | b"with" | b"over"
        | b"filter" | b"within" | b"group" | b"conflict" | b"key" | b"unique" | b"check" | b"references"
        | b"lateral" | b"into" | b"table" | b"recursive" | b"window" | b"is" | b"only" | b"partition" | b"default"
        | b"null" | b"true" | b"false" => (true, false),
        _ => (false, false),
    };
    Kw {
        paren,
        operand,
        is_in: &*dst == b"in",
        is_values: matches!(&*dst, b"values" | b"value"),
        constant: matches!(&*dst, b"null" | b"true" | b"false" | b"default"),
        names_table: matches!(&*dst, b"into" | b"table" | b"references" | b"exists"),
    }
}

/// An `IN (` list that may still fold to `in (...)`.
#[derive(Debug, Clone, Copy)]
struct InList {
    depth: usize,
    /// Output length just after its `(`.
    after_open: usize,
    literals_only: bool,
    any: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowState {
    /// Just after `VALUES`.
    AwaitFirst,
    InRow,
    AfterRow,
    AfterComma,
}

/// A `VALUES (..), (..)` run whose later rows may fold to `, ...`.
#[derive(Debug, Clone, Copy)]
struct Rows {
    state: RowState,
    first: bool,
    depth: usize,
    row_constant: bool,
    /// The first row and every later one so far are constants.
    all_constant: bool,
    /// Output length just after the first row's `)`.
    first_end: usize,
}

impl Rows {
    const AFTER_VALUES: Rows = Rows {
        state: RowState::AwaitFirst,
        first: true,
        depth: 0,
        row_constant: true,
        all_constant: true,
        first_end: 0,
    };
}

/// Builds digest text from normalized tokens: canonical spacing, `IN` and
/// `VALUES` folding, truncation and the id.
#[derive(Debug)]
pub(crate) struct Writer {
    out: String,
    prev: Prev,
    depth: usize,
    in_list: Option<InList>,
    rows: Option<Rows>,
    /// Within a (qualified) table name after `INTO`, `TABLE`, `REFERENCES`.
    table_name: bool,
}

impl Writer {
    pub(crate) fn new(input_len: usize) -> Self {
        Writer {
            out: String::with_capacity(input_len.saturating_add(16)),
            prev: Prev::Start,
            depth: 0,
            in_list: None,
            rows: None,
            table_name: false,
        }
    }

    /// True where an operand is expected, so a sign before a number is unary.
    pub(crate) fn operand_expected(&self) -> bool {
        match self.prev {
            Prev::Start | Prev::Open | Prev::Comma | Prev::Semi | Prev::Op => true,
            Prev::Word(kw) => kw.operand,
            Prev::Ident | Prev::Literal | Prev::Close | Prev::Dot | Prev::Cast => false,
        }
    }

    fn space_before(&self, tok: Tok<'_>) -> bool {
        if matches!(self.prev, Prev::Start | Prev::Open | Prev::Dot | Prev::Cast) {
            return false;
        }
        match tok {
            Tok::Close(_) | Tok::Comma | Tok::Semi | Tok::Dot | Tok::Cast | Tok::Open(b'[') => false,
            Tok::Open(_) => self.table_name || !matches!(self.prev, Prev::Word(kw) if !kw.paren),
            _ => true,
        }
    }

    /// Truncates to `len` if that is a valid cut (always, in practice).
    fn cut(&mut self, len: usize) -> bool {
        let ok = len <= self.out.len() && self.out.is_char_boundary(len);
        if ok {
            self.out.truncate(len);
        }
        ok
    }

    pub(crate) fn push(&mut self, tok: Tok<'_>) {
        let kw = match tok {
            Tok::Word(w) => keyword(w),
            _ => Kw::default(),
        };
        let literal = matches!(tok, Tok::Literal | Tok::Ellipsis);
        if let Some(l) = &mut self.in_list {
            match tok {
                Tok::Literal | Tok::Ellipsis => l.any = true,
                Tok::Comma | Tok::Close(b')') => {}
                _ => l.literals_only = false,
            }
        }
        self.rows_before(tok, kw, literal);
        if self.space_before(tok) {
            self.out.push(' ');
        }
        self.table_name = match tok {
            Tok::Word(_) if kw.names_table => true,
            Tok::Word(_) | Tok::Ident(_) | Tok::Dot => self.table_name && !kw.paren,
            _ => false,
        };
        if tok == Tok::Close(b')') {
            self.prev = self.close_paren();
            return;
        }
        let (text, prev) = match tok {
            Tok::Word(s) => (s, Prev::Word(kw)),
            Tok::Ident(s) => (s, Prev::Ident),
            Tok::Op(s) => (s, Prev::Op),
            Tok::Literal => ("?", Prev::Literal),
            Tok::Ellipsis => ("...", Prev::Literal),
            Tok::Open(b'[') => ("[", Prev::Open),
            Tok::Open(_) => ("(", Prev::Open),
            Tok::Close(_) => ("]", Prev::Close),
            Tok::Comma => (",", Prev::Comma),
            Tok::Semi => (";", Prev::Semi),
            Tok::Dot => (".", Prev::Dot),
            Tok::Cast => ("::", Prev::Cast),
        };
        let at = self.out.len();
        self.out.push_str(text);
        if let Tok::Word(_) = tok {
            self.out[at..].make_ascii_lowercase();
        }
        if kw.is_values {
            self.rows = Some(Rows::AFTER_VALUES);
        }
        if tok == Tok::Open(b'(') {
            self.open_paren();
        }
        self.prev = prev;
    }

    /// Advances the `VALUES` run for a token about to be written.
    fn rows_before(&mut self, tok: Tok<'_>, kw: Kw, literal: bool) {
        let Some(r) = &mut self.rows else { return };
        let open = tok == Tok::Open(b'(');
        match r.state {
            RowState::AwaitFirst | RowState::AfterComma if open => {
                r.state = RowState::InRow;
                r.depth = self.depth + 1;
                r.row_constant = true;
            }
            RowState::InRow => {
                let constant = literal || kw.constant || tok == Tok::Comma;
                let own_close = tok == Tok::Close(b')') && self.depth == r.depth;
                if !constant && !own_close {
                    r.row_constant = false;
                }
            }
            RowState::AfterRow if tok == Tok::Comma => r.state = RowState::AfterComma,
            _ => self.rows = None,
        }
    }

    fn open_paren(&mut self) {
        self.depth += 1;
        if matches!(self.prev, Prev::Word(kw) if kw.is_in) {
            self.in_list = Some(InList {
                depth: self.depth,
                after_open: self.out.len(),
                literals_only: true,
                any: false,
            });
        }
    }

    fn close_paren(&mut self) -> Prev {
        let depth = self.depth;
        self.depth = depth.saturating_sub(1);
        let mut prev = Prev::Close;
        match self.in_list {
            Some(l) if l.depth == depth => {
                self.in_list = None;
                if l.literals_only && l.any && self.cut(l.after_open) {
                    self.out.push_str("...");
                }
            }
            _ => {}
        }
        self.out.push(')');
        if let Some(mut r) = self.rows.filter(|r| r.state == RowState::InRow && r.depth == depth) {
            r.state = RowState::AfterRow;
            if r.first {
                r.first = false;
                r.all_constant = r.row_constant;
                r.first_end = self.out.len();
            } else if r.row_constant && r.all_constant {
                if self.cut(r.first_end) {
                    self.out.push_str(", ...");
                    prev = Prev::Literal;
                }
            } else {
                r.all_constant = false;
            }
            self.rows = Some(r);
        }
        prev
    }

    /// The digest: trailing `;` dropped, id computed, text capped.
    pub(crate) fn finish(mut self) -> Digest {
        while self.out.ends_with([';', ' ']) {
            self.out.pop();
        }
        let id = fnv1a64(self.out.as_bytes());
        if self.out.len() > MAX_DIGEST_TEXT {
            let mut at = MAX_DIGEST_TEXT;
            while !self.out.is_char_boundary(at) {
                at -= 1;
            }
            self.out.truncate(at);
            self.out.push_str("...");
        }
        Digest { text: self.out, id }
    }
}

/// 64-bit FNV-1a (Fowler, Noll, Vo): stable, simple, fast on short text.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
