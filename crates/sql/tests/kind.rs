//! Statement kinds in both dialects (`statement_kind`,
//! `mysql::statement_kind`): the first key word, as written, past
//! whitespace, parentheses and each dialect's comments.

use gatehouse_sql::mysql::statement_kind as my_kind;
use gatehouse_sql::statement_kind as pg_kind;

/// Both dialects' kind of `text`, which must agree.
fn both(text: &str) -> Option<&str> {
    let pg = pg_kind(text);
    assert_eq!(pg, my_kind(text), "{text:?}: the dialects disagree");
    pg
}

#[test]
fn statement_kind_is_the_first_word_as_written() {
    assert_eq!(both("SELECT 1"), Some("SELECT"));
    assert_eq!(both("delete from t"), Some("delete"));
    assert_eq!(both("Update t set a = 1"), Some("Update"));
    assert_eq!(both("select_1"), Some("select_1"));
    assert_eq!(both("begin;"), Some("begin"));
}

#[test]
fn statement_kind_skips_whitespace_parentheses_and_comments() {
    assert_eq!(both(" \t\r\n\x0b\x0cselect 1"), Some("select"));
    assert_eq!(both("((select 1) union (select 2))"), Some("select"));
    assert_eq!(both("-- a comment\nselect 1"), Some("select"));
    assert_eq!(both("/* a */ /* b */insert into t values (1)"), Some("insert"));
    assert_eq!(both("( -- c\n /* d */ ( select 1))"), Some("select"));
}

#[test]
fn with_statements_have_kind_with() {
    assert_eq!(
        both("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d"),
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
        assert_eq!(both(text), None, "{text:?}");
    }
}

#[test]
fn postgres_comments_nest_and_hash_is_not_a_comment() {
    assert_eq!(pg_kind("/* a /* b */ c */ select 1"), Some("select"));
    assert_eq!(pg_kind("/* outer /* inner */ still */ delete from t"), Some("delete"));
    assert_eq!(pg_kind("# x\nselect 1"), None);
    assert_eq!(pg_kind("/*!50000 delete */ select 1"), Some("select"));
}

#[test]
fn mysql_comments_do_not_nest_and_executable_comments_are_read() {
    // The first */ ends a MySQL comment: the server runs the DELETE.
    assert_eq!(my_kind("/* /* */ DELETE FROM t"), Some("DELETE"));
    assert_eq!(my_kind("/*!50000 DELETE */ FROM t"), Some("DELETE"));
    assert_eq!(my_kind("/*!DROP TABLE t */"), Some("DROP"));
    assert_eq!(my_kind("/*M!100100 delete from t */"), Some("delete"));
    assert_eq!(my_kind("/*!*/ /*+ hint */ update t set a = 1"), Some("update"));
    assert_eq!(my_kind("# x\n-- y\nselect 1"), Some("select"));
    assert_eq!(my_kind("# mysql comment\nupdate t set a = 1"), Some("update"));
}

#[test]
fn the_kind_is_where_it_says_in_the_text() {
    let text = "/* c */ (select 1)";
    let at = gatehouse_sql::statement_kind_at(text).expect("a kind");
    assert_eq!(&text[at], "select");
    let text = "/*!50000 DELETE */ FROM t";
    let at = gatehouse_sql::mysql::statement_kind_at(text).expect("a kind");
    assert_eq!(&text[at], "DELETE");
}
