//! Harnesses of the statement classifiers (`gatehouse-sql`), both
//! dialects: splitting, classification, the statement kind, routing,
//! digests and the substitution of previous results.

use std::ops::Range;

use gatehouse_sql::mysql::{self as my, Dialect, MyEffect, PreviousResults};
use gatehouse_sql::{
    Digest, Effect, MAX_DIGEST_TEXT, Route, classify, classify_all, digest, route, route_with, split_statements,
    statement_kind_at,
};

use crate::input::Input;

/// Functions declared read-only in the routing checks.
const READ_ONLY_FUNCTIONS: [&str; 3] = ["f", "public.g", "my_func"];

fn is_subslice(outer: &str, inner: &str) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    i >= o && i + inner.len() <= o + outer.len()
}

/// A statement kind is a word of `text`: a letter, then letters, digits
/// and `_`.
fn check_kind(text: &str, range: Option<Range<usize>>) {
    let Some(r) = range else { return };
    let word = text.as_bytes().get(r.clone()).expect("the kind lies within the text");
    assert!(!word.is_empty() && word[0].is_ascii_alphabetic());
    assert!(word.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_'));
}

/// Declaring functions read-only can only turn writes into reads.
fn check_route(r: Route, with_read_only: Route) {
    if r == Route::Read {
        assert_eq!(
            with_read_only,
            Route::Read,
            "declaring functions read-only made a read a write"
        );
    }
}

/// 64-bit FNV-1a, the digest id as documented.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A digest is deterministic, capped, and (below the cap) its id is the
/// FNV-1a of its text.
fn check_digest(text: &str, f: impl Fn(&str) -> Digest) -> Digest {
    let d = f(text);
    assert_eq!(f(text), d, "the digest of one text changed");
    assert!(d.text.len() <= MAX_DIGEST_TEXT + 3);
    if d.text.len() < MAX_DIGEST_TEXT {
        assert_eq!(d.id, fnv1a64(d.text.as_bytes()));
    }
    d
}

/// The PostgreSQL splitter and classifier on any text: pieces are
/// non-empty trimmed slices of the text, `classify_all` classifies exactly
/// them, and each piece's kind and route are consistent.
pub fn sql_pg_classify(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let pieces = split_statements(&text);
    for piece in &pieces {
        assert!(is_subslice(&text, piece) && !piece.is_empty());
        assert_eq!(piece.trim_ascii_start(), *piece);
    }
    let all = classify_all(&text);
    assert_eq!(all.len(), pieces.len());
    let mut cases: Vec<(&str, Option<&Effect>)> = pieces.iter().copied().zip(all.iter().map(Some)).collect();
    cases.push((&text, None));
    for (piece, effect) in cases {
        let e = classify(piece);
        if let Some(effect) = effect {
            assert_eq!(&e, effect);
        }
        check_kind(piece, statement_kind_at(piece));
        let r = route(piece);
        assert_eq!(route(piece), r);
        check_route(r, route_with(piece, &READ_ONLY_FUNCTIONS));
    }
}

/// A value in a templated statement, for the digest's literal checks.
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(i64),
    Str(u8),
    Param(u8),
    Float,
    Other,
}

impl Value {
    fn new(g: &mut Input<'_>) -> Self {
        match g.u8() % 5 {
            0 => Value::Int(g.u64() as i64),
            1 => Value::Str(g.u8()),
            2 => Value::Param(g.u8()),
            3 => Value::Float,
            _ => Value::Other,
        }
    }

    /// Another literal than this one, of another form.
    fn other(self) -> Self {
        match self {
            Value::Int(i) => Value::Str(i as u8),
            Value::Str(s) => Value::Param(s),
            Value::Param(_) => Value::Float,
            Value::Float => Value::Other,
            Value::Other => Value::Int(-5),
        }
    }
}

/// `[a-z]` letters and spaces, from the bits of `seed`.
fn letters(seed: u8) -> String {
    (0..seed % 7)
        .map(|i| char::from(b"ab cdefgh"[usize::from((seed >> i) % 9)]))
        .collect()
}

/// A name: `t_` and a few letters and digits, or quoted with `q`.
fn name(g: &mut Input<'_>, q: char) -> String {
    let n = g.u8();
    let body: String = (0..n % 6)
        .map(|_| char::from(b"abcxyz019_"[usize::from(g.u8() % 10)]))
        .collect();
    if n & 0x80 != 0 {
        format!("{q}A{body}{q}")
    } else {
        format!("t_{body}")
    }
}

/// The shape ORMs send, with `value` writing each literal.
fn template(g: &mut Input<'_>, q: char) -> impl Fn(&dyn Fn(Value) -> String) -> String {
    let t = name(g, q);
    let c = name(g, q);
    let v = Value::new(g);
    let n = 1 + usize::from(g.u8() % 4);
    let list: Vec<Value> = (0..n).map(|_| Value::new(g)).collect();
    let rows = 1 + usize::from(g.u8() % 3);
    let mysql = q == '`';
    move |value: &dyn Fn(Value) -> String| {
        let vs: Vec<String> = list.iter().map(|&x| value(x)).collect();
        let row = format!("({})", vs.join(","));
        let rows = vec![row; rows].join(", ");
        let v = value(v);
        let list = vs.join(", ");
        if mysql {
            format!(
                "SELECT {c}, count(*) FROM {t} WHERE {c} = {v} AND {c} IN ({list}) LIMIT 21; \
                 INSERT INTO {t} VALUES {rows} ON DUPLICATE KEY UPDATE {c}=VALUES({c})"
            )
        } else {
            format!(
                "SELECT {c}, count(*) FROM {t} WHERE {c} = {v} AND {c} IN ({list}) GROUP BY 1; \
                 INSERT INTO {t} VALUES {rows} RETURNING {c}"
            )
        }
    }
}

fn pg_literal(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Str(s) => format!("'{}'", letters(s)),
        Value::Param(n) => format!("${}", 1 + n % 9),
        Value::Float => "1.5e-3".to_owned(),
        Value::Other => "E'it\\'s'".to_owned(),
    }
}

fn my_literal(v: Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Str(s) => format!("'{}'", letters(s)),
        Value::Param(n) if n % 2 == 0 => "?".to_owned(),
        Value::Param(_) => "_utf8mb4'x'".to_owned(),
        Value::Float => "0x1F".to_owned(),
        Value::Other => ".5".to_owned(),
    }
}

/// PostgreSQL digests. First byte even: any text (deterministic, capped,
/// id of the text). Odd: a statement in the shapes ORMs send, whose digest
/// is idempotent and does not change when every literal is replaced by
/// another of another form.
pub fn sql_pg_digest(data: &[u8]) {
    let mut g = Input::new(data);
    if g.one_in(2) {
        check_digest(&String::from_utf8_lossy(g.rest()), digest);
        return;
    }
    let stmt = template(&mut g, '"');
    let written = stmt(&pg_literal);
    let d = check_digest(&written, digest);
    assert_eq!(digest(&d.text), d, "digest is not idempotent on {written:?}");
    let other = stmt(&|v| pg_literal(v.other()));
    assert_eq!(
        digest(&other),
        d,
        "literals changed the digest: {written:?} and {other:?}"
    );
}

fn dialect(flags: u8) -> Dialect {
    Dialect {
        ansi_quotes: flags & 1 != 0,
        no_backslash_escapes: flags & 2 != 0,
    }
}

/// The MySQL splitter and classifier on any text (first byte: the
/// dialect): pieces are non-empty trimmed slices, `classify_all`
/// classifies exactly them, no extra tracked variable changes a statement
/// that names none, and kinds and transaction boundaries are consistent.
pub fn sql_mysql_classify(data: &[u8]) {
    let mut g = Input::new(data);
    let d = dialect(g.u8());
    let text = String::from_utf8_lossy(g.rest());
    let pieces = my::split_statements(&text, d);
    for piece in &pieces {
        assert!(is_subslice(&text, piece) && !piece.is_empty());
        assert_eq!(piece.trim_matches(|c: char| c.is_ascii_whitespace()), *piece);
    }
    let all = my::classify_all(&text, d);
    assert_eq!(all.len(), pieces.len());
    let mut cases: Vec<(&str, Option<&MyEffect>)> = pieces.iter().copied().zip(all.iter().map(Some)).collect();
    cases.push((&text, None));
    for (piece, effect) in cases {
        let e = my::classify(piece, d);
        if let Some(effect) = effect {
            assert_eq!(&e, effect);
        }
        assert_eq!(my::classify_with(piece, d, &[]), e);
        let _ = my::classify_with(piece, d, &["profiling", "my_var"]);
        let _ = my::tx_boundary(piece, &e, d);
        check_kind(piece, my::statement_kind_at(piece));
    }
    let _ = Dialect::from_sql_mode(&text);
}

/// MySQL digests, routes and the substitution of previous results (first
/// byte: bits 0-1 the dialect, bit 2 the templated statement of
/// [`sql_pg_digest`]'s kind). A substitution with no values changes
/// nothing, and a substituted statement has nothing left to substitute.
pub fn sql_mysql_digest_route(data: &[u8]) {
    let mut g = Input::new(data);
    let flags = g.u8();
    let d = dialect(flags);
    if flags & 4 != 0 {
        let stmt = template(&mut g, '`');
        let written = stmt(&my_literal);
        let dg = check_digest(&written, |s| my::digest(s, d));
        assert_eq!(my::digest(&dg.text, d), dg, "digest is not idempotent on {written:?}");
        let other = stmt(&|v| my_literal(v.other()));
        assert_eq!(
            my::digest(&other, d),
            dg,
            "literals changed the digest: {written:?} and {other:?}"
        );
        return;
    }
    let row_count = g.u64() as i64;
    let found = g.u64();
    let text = String::from_utf8_lossy(g.rest());
    check_digest(&text, |s| my::digest(s, d));
    for piece in my::split_statements(&text, d).into_iter().chain([&*text]) {
        let r = my::route(piece, d);
        assert_eq!(my::route(piece, d), r);
        check_route(r, my::route_with(piece, d, &READ_ONLY_FUNCTIONS));
    }

    let nothing = PreviousResults {
        row_count: None,
        found_rows: None,
        last_insert_id: None,
        connection_id: None,
    };
    assert_eq!(my::substitute_previous_results(&text, d, nothing), None);
    let prev = PreviousResults {
        row_count: Some(row_count),
        found_rows: Some(found),
        last_insert_id: Some(found ^ 1),
        connection_id: None,
    };
    if let Some(out) = my::substitute_previous_results(&text, d, prev) {
        assert_ne!(out, *text);
        assert_eq!(
            my::substitute_previous_results(&out, d, prev),
            None,
            "something was left to substitute in {out:?}"
        );
        let _ = my::classify(&out, d);
        let _ = my::digest(&out, d);
    }
    let with_id = PreviousResults {
        connection_id: Some(found),
        ..prev
    };
    let _ = my::substitute_previous_results(&text, d, with_id);
}
