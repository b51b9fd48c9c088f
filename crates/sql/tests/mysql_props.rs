//! Property tests for the MySQL classifier: no input panics, split pieces
//! are slices of the input, and splitting then joining keeps the content.

#![forbid(unsafe_code)]

use gatehouse_sql::mysql::{Dialect, classify, classify_all, classify_with, split_statements};
use proptest::prelude::*;

const DIALECTS: [Dialect; 3] = [
    Dialect::DEFAULT,
    Dialect {
        ansi_quotes: true,
        no_backslash_escapes: false,
    },
    Dialect {
        ansi_quotes: false,
        no_backslash_escapes: true,
    },
];

/// Strings biased towards the characters the tokenizer cares about.
fn sqlish() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("'"),
        Just("\""),
        Just("`"),
        Just("\\"),
        Just(";"),
        Just("-- "),
        Just("--"),
        Just("#"),
        Just("/*"),
        Just("/*!40101 "),
        Just("/*M!"),
        Just("*/"),
        Just("\n"),
        Just("("),
        Just(")"),
        Just("@"),
        Just("@@session."),
        Just("@`"),
        Just(":="),
        Just("="),
        Just(","),
        Just(" SET "),
        Just(" select "),
        Just(" NAMES "),
        Just(" STATEMENT "),
        Just(" FOR "),
        Just(" TRANSACTION "),
        Just("GET_LOCK("),
        Just("LAST_INSERT_ID("),
        Just("CREATE PROCEDURE p() BEGIN "),
        Just(" END "),
        Just(" CASE "),
        Just("BEGIN NOT ATOMIC "),
        Just("é"),
        Just("1e+"),
        Just(" USE "),
        Just(" x"),
    ];
    let atom = prop_oneof![atoms.prop_map(str::to_owned), "\\PC{0,4}"];
    prop::collection::vec(atom, 0..24).prop_map(|v| v.concat())
}

/// A statement whose text has at least one token and no top-level `;`.
fn statement() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("SELECT 1"),
        Just("'a;b'"),
        Just("\"c;d\""),
        Just("`e;f`"),
        Just("/* g;h */ x"),
        Just("-- i;j\n y"),
        Just("# k;l\n z"),
        Just("@v"),
        Just("SET a = 1"),
        Just("'it\\'s;'"),
        Just(" , "),
        Just("w"),
    ];
    prop::collection::vec(atoms, 1..6).prop_map(|v| format!("x {}", v.concat()))
}

fn is_subslice(outer: &str, inner: &str) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    i >= o && i + inner.len() <= o + outer.len()
}

fn non_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        for d in DIALECTS {
            for piece in split_statements(&s, d) {
                prop_assert!(is_subslice(&s, piece));
                prop_assert!(!piece.is_empty());
                let _ = classify(piece, d);
            }
            let _ = classify_with(&s, d, &["profiling"]);
        }
    }

    #[test]
    fn sqlish_strings_never_panic(s in sqlish()) {
        for d in DIALECTS {
            let pieces = split_statements(&s, d);
            for piece in &pieces {
                prop_assert!(is_subslice(&s, piece));
                // MySQL's whitespace is ASCII: a no-break space is a statement.
                prop_assert_eq!(piece.trim_matches(|c: char| c.is_ascii_whitespace()), *piece);
            }
            prop_assert_eq!(classify_all(&s, d).len(), pieces.len());
            let _ = classify(&s, d);
        }
    }

    #[test]
    fn split_then_join_keeps_content(stmts in prop::collection::vec(statement(), 0..6), ws in "[ \t\n]{0,3}") {
        let sql = stmts.join(&format!("{ws};{ws}"));
        let pieces = split_statements(&sql, Dialect::DEFAULT);
        prop_assert_eq!(pieces.len(), stmts.len());
        prop_assert_eq!(non_space(&pieces.join(";")), non_space(&sql));
        for (piece, stmt) in pieces.iter().zip(&stmts) {
            prop_assert_eq!(non_space(piece), non_space(stmt));
        }
    }
}
