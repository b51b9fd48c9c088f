//! Unit tests for statement kinds ([`super::statement_kind`]).

use super::{statement_kind, statement_kind_for};
use crate::config::EngineKind;

#[test]
fn statement_kind_is_the_first_word_as_written() {
    assert_eq!(statement_kind("SELECT 1"), Some("SELECT"));
    assert_eq!(statement_kind("delete from t"), Some("delete"));
    assert_eq!(statement_kind("Update t set a = 1"), Some("Update"));
    assert_eq!(statement_kind("select_1"), Some("select_1"));
    assert_eq!(statement_kind("begin;"), Some("begin"));
}

#[test]
fn statement_kind_skips_whitespace_parentheses_and_comments() {
    assert_eq!(statement_kind(" \t\r\n\x0b\x0cselect 1"), Some("select"));
    assert_eq!(statement_kind("((select 1) union (select 2))"), Some("select"));
    assert_eq!(statement_kind("-- a comment\nselect 1"), Some("select"));
    assert_eq!(
        statement_kind("/* a */ /* b */insert into t values (1)"),
        Some("insert")
    );
    assert_eq!(
        statement_kind("/* outer /* inner */ still */ delete from t"),
        Some("delete")
    );
    assert_eq!(statement_kind("# mysql comment\nupdate t set a = 1"), Some("update"));
    assert_eq!(statement_kind("( -- c\n /* d */ ( select 1))"), Some("select"));
}

#[test]
fn with_statements_have_kind_with() {
    assert_eq!(
        statement_kind("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d"),
        Some("WITH")
    );
}

#[test]
fn a_statement_without_a_leading_word_has_no_kind() {
    for text in [
        "",
        "   ",
        "-- only a comment",
        "/* unterminated",
        ";",
        "$1",
        "?",
        "1",
        "'x'",
        "\"t\"",
    ] {
        assert_eq!(statement_kind(text), None, "{text:?}");
    }
}

#[test]
fn postgres_comments_nest_and_hash_is_not_a_comment() {
    let pg = Some(EngineKind::Postgres);
    assert_eq!(statement_kind_for("/* a /* b */ c */ select 1", pg), Some("select"));
    assert_eq!(statement_kind_for("# x\nselect 1", pg), None);
    assert_eq!(statement_kind_for("/*!50000 delete */ select 1", pg), Some("select"));
}

#[test]
fn mysql_comments_do_not_nest_and_executable_comments_are_read() {
    let my = Some(EngineKind::Mysql);
    // The first */ ends a MySQL comment: the server runs the DELETE.
    assert_eq!(statement_kind_for("/* /* */ DELETE FROM t", my), Some("DELETE"));
    assert_eq!(statement_kind_for("/*!50000 DELETE */ FROM t", my), Some("DELETE"));
    assert_eq!(statement_kind_for("/*!DROP TABLE t */", my), Some("DROP"));
    assert_eq!(statement_kind_for("/*M!100100 delete from t */", my), Some("delete"));
    assert_eq!(
        statement_kind_for("/*!*/ /*+ hint */ update t set a = 1", my),
        Some("update")
    );
    assert_eq!(statement_kind_for("# x\n-- y\nselect 1", my), Some("select"));
}
