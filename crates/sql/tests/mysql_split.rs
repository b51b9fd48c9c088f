//! Tests for the MySQL `split_statements`: quoting, comments, executable
//! comments and stored-program bodies.

#![forbid(unsafe_code)]

use gatehouse_sql::mysql::{Dialect, split_statements};

const D: Dialect = Dialect::DEFAULT;

#[test]
fn splits_and_trims() {
    let cases: [(&str, &[&str]); 16] = [
        ("select 'a;b'; select 2", &["select 'a;b'", "select 2"]),
        ("  SELECT 1 ;\n select 2;;  ; ", &["SELECT 1", "select 2"]),
        ("SELECT 1", &["SELECT 1"]),
        ("", &[]),
        (" ; ;\n", &[]),
        ("/* only */ ; -- c\n;", &[]),
        ("SELECT \"a;\"\"b\"; x", &["SELECT \"a;\"\"b\"", "x"]),
        ("SELECT 'it\\';s'; x", &["SELECT 'it\\';s'", "x"]),
        ("SELECT `a;``b` FROM t; x", &["SELECT `a;``b` FROM t", "x"]),
        ("SELECT 1 -- a;b\n; x", &["SELECT 1 -- a;b", "x"]),
        ("SELECT 1 # a;b\n; x", &["SELECT 1 # a;b", "x"]),
        ("SELECT 1 /* a;b */; x", &["SELECT 1 /* a;b */", "x"]),
        ("SELECT 1 --x; y", &["SELECT 1 --x", "y"]),
        (
            "/*!40101 SET NAMES utf8 */; SELECT 1",
            &["/*!40101 SET NAMES utf8 */", "SELECT 1"],
        ),
        ("SELECT 'unterminated; x", &["SELECT 'unterminated; x"]),
        ("SELECT 1 /* unterminated; x", &["SELECT 1 /* unterminated; x"]),
    ];
    for (sql, want) in cases {
        assert_eq!(split_statements(sql, D), want, "{sql}");
    }
}

#[test]
fn dialect_changes_splitting() {
    let nbe = Dialect {
        no_backslash_escapes: true,
        ..Dialect::DEFAULT
    };
    assert_eq!(
        split_statements("SELECT 'a\\'; SELECT 2", nbe),
        ["SELECT 'a\\'", "SELECT 2"]
    );
    assert_eq!(
        split_statements("SELECT 'a\\'; SELECT 2", D),
        ["SELECT 'a\\'; SELECT 2"]
    );
}

#[test]
fn stored_program_bodies_stay_whole() {
    let proc = "CREATE PROCEDURE p() BEGIN DECLARE x INT; IF x THEN SELECT 1; END IF; \
                CASE x WHEN 1 THEN SELECT 2; END CASE; WHILE x DO SET x = 0; END WHILE; END";
    assert_eq!(split_statements(&format!("{proc}; CALL p()"), D), [proc, "CALL p()"]);
    let trig = "CREATE DEFINER=`u`@`%` TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN \
                SET NEW.a = CASE WHEN NEW.b THEN 1 ELSE 2 END; lbl: LOOP LEAVE lbl; END LOOP lbl; END";
    assert_eq!(split_statements(&format!("{trig};SELECT 1"), D), [trig, "SELECT 1"]);
    let block = "BEGIN NOT ATOMIC SELECT 1; BEGIN SELECT 2; END; END";
    assert_eq!(split_statements(&format!("{block}; SELECT 3"), D), [block, "SELECT 3"]);
    // Single-statement bodies end at the first `;`.
    assert_eq!(
        split_statements("CREATE FUNCTION f() RETURNS INT RETURN 1; SELECT f()", D),
        ["CREATE FUNCTION f() RETURNS INT RETURN 1", "SELECT f()"]
    );
    // `begin` as a column name does not open a block.
    assert_eq!(
        split_statements("CREATE TABLE t (begin INT); SELECT begin FROM t; BEGIN; COMMIT", D),
        ["CREATE TABLE t (begin INT)", "SELECT begin FROM t", "BEGIN", "COMMIT"]
    );
    assert_eq!(split_statements("BEGIN WORK; SELECT 1", D), ["BEGIN WORK", "SELECT 1"]);
}
