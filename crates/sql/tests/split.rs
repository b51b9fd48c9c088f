//! Tests for `split_statements`: quoting, comments and body edge cases.

#![forbid(unsafe_code)]

use gatehouse_sql::split_statements;

#[test]
fn splits_plain_statements_and_trims() {
    assert_eq!(
        split_statements("  SELECT 1 ;\n select 2;;  ; "),
        vec!["SELECT 1", "select 2"]
    );
    assert_eq!(split_statements("SELECT 1"), vec!["SELECT 1"]);
    assert!(split_statements("").is_empty());
    assert!(split_statements(" ; ;\n").is_empty());
}

#[test]
fn semicolons_inside_quotes_do_not_split() {
    assert_eq!(
        split_statements("SELECT 'a;b'; SELECT 2"),
        vec!["SELECT 'a;b'", "SELECT 2"]
    );
    assert_eq!(split_statements("SELECT 'it''s;'; x"), vec!["SELECT 'it''s;'", "x"]);
    assert_eq!(split_statements(r#"SELECT "a;""b"; x"#), vec![r#"SELECT "a;""b""#, "x"]);
    assert_eq!(split_statements("SELECT $$a;b$$; x"), vec!["SELECT $$a;b$$", "x"]);
    assert_eq!(
        split_statements("SELECT $t$a;$$;b$t$; x"),
        vec!["SELECT $t$a;$$;b$t$", "x"]
    );
    assert_eq!(split_statements(r"SELECT E'\';'; x"), vec![r"SELECT E'\';'", "x"]);
    assert_eq!(split_statements(r"SELECT e'\\'; x"), vec![r"SELECT e'\\'", "x"]);
}

#[test]
fn standard_strings_treat_backslash_literally() {
    assert_eq!(split_statements(r"SELECT 'a\'; x"), vec![r"SELECT 'a\'", "x"]);
}

#[test]
fn comments_do_not_split_and_stay_inside() {
    assert_eq!(split_statements("SELECT 1 -- a;b\n; x"), vec!["SELECT 1", "x"]);
    assert_eq!(
        split_statements("SELECT /* ; /* ; */ ; */ 1; x"),
        vec!["SELECT /* ; /* ; */ ; */ 1", "x"]
    );
    assert_eq!(
        split_statements("/* hint */ SELECT 1; -- tail"),
        vec!["/* hint */ SELECT 1"]
    );
    assert!(split_statements("-- only a comment").is_empty());
}

#[test]
fn parentheses_and_atomic_bodies_do_not_split() {
    assert_eq!(split_statements("SELECT (1; 2); x"), vec!["SELECT (1; 2)", "x"]);
    let f = "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT CASE WHEN true THEN 1 END; \
             SELECT 2; END";
    assert_eq!(split_statements(&format!("{f}; SET ROLE x")), vec![f, "SET ROLE x"]);
    // A routine named `begin` does not open a body.
    let g = "CREATE FUNCTION begin() RETURNS int AS $$ SELECT 1 $$ LANGUAGE sql";
    assert_eq!(split_statements(&format!("{g}; SET ROLE x")), vec![g, "SET ROLE x"]);
}

#[test]
fn unterminated_constructs_run_to_end() {
    assert_eq!(split_statements("SELECT 'a; b"), vec!["SELECT 'a; b"]);
    assert_eq!(split_statements("SELECT $x$ a; b"), vec!["SELECT $x$ a; b"]);
    assert_eq!(split_statements("SELECT 1 /* ; x"), vec!["SELECT 1"]);
    assert_eq!(split_statements("SELECT \"a; b"), vec!["SELECT \"a; b"]);
}

#[test]
fn non_ascii_is_preserved() {
    assert_eq!(
        split_statements("SELECT 'é;ü'; SELECT ñ"),
        vec!["SELECT 'é;ü'", "SELECT ñ"]
    );
}
