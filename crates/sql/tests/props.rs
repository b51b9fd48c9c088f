//! Property tests: the splitter and classifier never panic on arbitrary
//! input, and every split piece is a slice of the input.

#![forbid(unsafe_code)]

use gatehouse_sql::{classify, classify_all, split_statements};
use proptest::prelude::*;

/// Strings biased towards the characters the tokenizer cares about.
fn sqlish() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("'".to_owned()),
        Just("\"".to_owned()),
        Just("$".to_owned()),
        Just("$$".to_owned()),
        Just("$t$".to_owned()),
        Just("E'".to_owned()),
        Just("\\".to_owned()),
        Just(";".to_owned()),
        Just("--".to_owned()),
        Just("/*".to_owned()),
        Just("*/".to_owned()),
        Just("\n".to_owned()),
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just(" SET ".to_owned()),
        Just(" select ".to_owned()),
        Just("set_config(".to_owned()),
        Just("pg_advisory_lock".to_owned()),
        Just(" INTO TEMP ".to_owned()),
        Just("CREATE FUNCTION f() BEGIN ATOMIC ".to_owned()),
        Just(" end ".to_owned()),
        Just("é".to_owned()),
        Just("1e+".to_owned()),
        "\\PC{0,4}",
    ];
    prop::collection::vec(atoms, 0..24).prop_map(|v| v.concat())
}

fn is_subslice(outer: &str, inner: &str) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    i >= o && i + inner.len() <= o + outer.len()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        for piece in split_statements(&s) {
            prop_assert!(is_subslice(&s, piece));
            prop_assert!(!piece.is_empty());
            let _ = classify(piece);
        }
        let _ = classify(&s);
    }

    #[test]
    fn sqlish_strings_never_panic(s in sqlish()) {
        for piece in split_statements(&s) {
            prop_assert!(is_subslice(&s, piece));
            prop_assert!(s.contains(piece));
            prop_assert_eq!(piece.trim_ascii_start(), piece);
        }
        prop_assert_eq!(classify_all(&s).len(), split_statements(&s).len());
        let _ = classify(&s);
    }

    /// The proxy's shortcut for a query of one statement (no `;` but final
    /// ones): classifying the text whole says what splitting first says.
    #[test]
    fn one_statement_needs_no_split(s in sqlish(), semis in 0usize..3) {
        let one = s.replace(';', " ");
        let sql = format!("{one}{}", ";".repeat(semis));
        let trimmed = sql.trim_end().trim_end_matches(';');
        let all = classify_all(&sql);
        // Final `;`s inside an unterminated quote or comment end nothing:
        // such a text is a syntax error the server applies none of, so what
        // either reading says of it does not matter.
        let ends_statements = split_statements(&sql).first().is_some_and(|p| !p.ends_with(';'));
        if all.len() == 1 && ends_statements {
            prop_assert_eq!(&classify(trimmed), &all[0], "{:?}", sql);
        }
    }
}

/// The case proptest found: a final `;` inside an unterminated string is
/// part of the string, not a statement's end.
#[test]
fn a_final_semicolon_inside_an_unterminated_string_is_the_strings() {
    let pieces = split_statements(" SET a=';");
    assert_eq!(pieces, [" SET a=';".trim_ascii_start()]);
}
