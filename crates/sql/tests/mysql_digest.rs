//! MySQL/MariaDB query digests: a table of statements (in the shapes ORMs
//! send) and their digest text under each dialect, pairs that must share or
//! must not share a digest, and property tests.

#![forbid(unsafe_code)]

use gatehouse_sql::MAX_DIGEST_TEXT;
use gatehouse_sql::mysql::{Dialect, digest};
use proptest::prelude::*;

const ANSI: Dialect = Dialect {
    ansi_quotes: true,
    no_backslash_escapes: false,
};
const NO_BACKSLASH: Dialect = Dialect {
    ansi_quotes: false,
    no_backslash_escapes: true,
};
const DIALECTS: [Dialect; 3] = [Dialect::DEFAULT, ANSI, NO_BACKSLASH];

#[track_caller]
fn check_in(dialect: Dialect, table: &[(&str, &str)]) {
    for &(input, want) in table {
        assert_eq!(digest(input, dialect).text, want, "input: {input:?}");
    }
}

#[track_caller]
fn check(table: &[(&str, &str)]) {
    check_in(Dialect::DEFAULT, table);
}

#[test]
fn orm_statements_normalize_to_their_shape() {
    check(&[
        // Rails (mysql2 inlines values)
        (
            "SELECT `users`.* FROM `users` WHERE `users`.`id` = 1 LIMIT 1",
            "select `users`.* from `users` where `users`.`id` = ? limit ?",
        ),
        // Django
        (
            "SELECT `app_t`.`id`, `app_t`.`name` FROM `app_t` WHERE `app_t`.`id` IN (1, 2) LIMIT 21",
            "select `app_t`.`id`, `app_t`.`name` from `app_t` where `app_t`.`id` in (...) limit ?",
        ),
        // Hibernate (server-side prepared)
        (
            "select u1_0.id,u1_0.name from users u1_0 where u1_0.name=? and u1_0.age>=-18",
            "select u1_0.id, u1_0.name from users u1_0 where u1_0.name = ? and u1_0.age >= ?",
        ),
        // GORM
        (
            "INSERT INTO `users` (`name`,`age`) VALUES ('a',1),('b',2),(\"c\",NULL) ON DUPLICATE KEY UPDATE `age`=VALUES(`age`)",
            "insert into `users` (`name`, `age`) values (?, ?), ... on duplicate key update `age` = values (`age`)",
        ),
        // SQLAlchemy (PyMySQL inlines values)
        (
            "INSERT INTO users (name, fullname) VALUES ('spongebob', 'Spongebob Squarepants')",
            "insert into users (name, fullname) values (?, ?)",
        ),
        // Prisma
        (
            "SELECT `db`.`User`.`id` FROM `db`.`User` WHERE `db`.`User`.`id` IN (?,?,?) LIMIT ? OFFSET ?",
            "select `db`.`User`.`id` from `db`.`User` where `db`.`User`.`id` in (...) limit ? offset ?",
        ),
    ]);
}

#[test]
fn literals_of_every_form_become_one_placeholder() {
    check(&[
        (
            "SELECT 1, 1.5, .5, 1., 1e-5, 2E+10, 0x1F, 0b101",
            "select ?, ?, ?, ?, ?, ?, ?, ?",
        ),
        (r#"SELECT 'it''s', 'a\'b', "dq", N'n', n'n'"#, "select ?, ?, ?, ?, ?"),
        ("SELECT X'1F', x'1f', B'101', b'1'", "select ?, ?, ?, ?"),
        (
            "SELECT _utf8mb4'x', _binary 'y', _LATIN1 X'41', _utf8mb4 0x41 COLLATE utf8mb4_bin",
            "select ?, ?, ?, ? collate utf8mb4_bin",
        ),
        ("SELECT TRUE, false, NULL", "select true, false, null"),
        (
            "SELECT 1abc, t.5col, _rowid, _mytable FROM t",
            "select 1abc, t.5col, _rowid, _mytable from t",
        ),
        (
            "SELECT * FROM t WHERE a = -5 AND b=+1.5 LIMIT -1",
            "select * from t where a = ? and b = ? limit ?",
        ),
        (
            "SELECT a - 5, a-5, 1 - -2, a--1, -x",
            "select a - ?, a - ?, ? - ?, a - ?, - x",
        ),
    ]);
}

#[test]
fn in_lists_and_values_rows_collapse() {
    check(&[
        ("SELECT * FROM t WHERE id IN (1)", "select * from t where id in (...)"),
        (
            "SELECT * FROM t WHERE id NOT IN (1, -2, 'x', ?)",
            "select * from t where id not in (...)",
        ),
        (
            "SELECT * FROM t WHERE id IN (SELECT id FROM u)",
            "select * from t where id in (select id from u)",
        ),
        ("INSERT INTO t VALUES (1, 'a')", "insert into t values (?, ?)"),
        (
            "INSERT INTO t VALUES (1, 'a'), (2, DEFAULT), (3, TRUE)",
            "insert into t values (?, ?), ...",
        ),
        (
            "INSERT INTO t VALUES (1, NOW()), (2, NOW())",
            "insert into t values (?, now()), (?, now())",
        ),
        ("REPLACE INTO t(a) VALUE (1)", "replace into t (a) value (?)"),
    ]);
}

#[test]
fn comments_dropped_but_executable_comments_kept() {
    check(&[
        ("SELECT 1 # note", "select ?"),
        ("SELECT 1 -- note\n, 2", "select ?, ?"),
        (
            "/* app */ SELECT /*+ MAX_EXECUTION_TIME(100) */ a FROM t;",
            "select a from t",
        ),
        ("/*!40101 SET NAMES utf8mb4 */", "set names utf8mb4"),
        (
            "SELECT /*!50700 SQL_NO_CACHE */ a FROM t",
            "select sql_no_cache a from t",
        ),
        ("SELECT /*M!100100 a, */ b FROM t", "select a, b from t"),
        ("SELECT  A ,B\n\tFROM T WHERE X=1;", "select a, b from t where x = ?"),
    ]);
}

#[test]
fn identifiers_variables_and_operators() {
    check(&[
        (
            "SELECT `Mixed``Case` FROM `DB`.`T`",
            "select `Mixed``Case` from `DB`.`T`",
        ),
        (
            "SELECT @X, @@SESSION.sql_mode, @`Q`, @'v'",
            "select @x, @@session.sql_mode, @`Q`, @'v'",
        ),
        ("SET @a := 1", "set @a := ?"),
        (
            "SELECT a<=>b, a<=b, a!=b, a<>b, a||b, a&&b, a<<2, j->'$.a', j->>'$.b'",
            "select a <=> b, a <= b, a != b, a <> b, a || b, a && b, a << ?, j -> ?, j ->> ?",
        ),
        (
            "SELECT COUNT(*), IFNULL(a, 0) FROM t",
            "select count(*), ifnull(a, ?) from t",
        ),
    ]);
}

#[test]
fn dialect_changes_what_is_a_string() {
    check_in(
        ANSI,
        &[(
            r#"SELECT "Col" FROM "T" WHERE a = 'x'"#,
            r#"select "Col" from "T" where a = ?"#,
        )],
    );
    check_in(Dialect::DEFAULT, &[(r#"SELECT "Col" FROM t"#, "select ? from t")]);
    // `\'` escapes the quote by default, but not under NO_BACKSLASH_ESCAPES.
    check_in(Dialect::DEFAULT, &[(r"SELECT 'a\', b FROM t", "select ?")]);
    check_in(NO_BACKSLASH, &[(r"SELECT 'a\', b FROM t", "select ?, b from t")]);
}

#[test]
fn unterminated_input_runs_to_the_end() {
    check(&[
        ("SELECT 'abc", "select ?"),
        ("SELECT \"abc", "select ?"),
        ("SELECT `abc", "select `abc"),
        ("SELECT 1 /* open", "select ?"),
        ("SELECT /*! a", "select a"),
        ("", ""),
    ]);
}

#[track_caller]
fn same(a: &str, b: &str) {
    assert_eq!(
        digest(a, Dialect::DEFAULT),
        digest(b, Dialect::DEFAULT),
        "{a:?} vs {b:?}"
    );
}

#[track_caller]
fn differ(a: &str, b: &str) {
    let (da, db) = (digest(a, Dialect::DEFAULT), digest(b, Dialect::DEFAULT));
    assert_ne!(da.text, db.text, "{a:?} vs {b:?}");
    assert_ne!(da.id, db.id, "{a:?} vs {b:?}");
}

#[test]
fn statements_differing_only_in_values_share_a_digest() {
    same("SELECT * FROM t WHERE id = 1", "select * from T where ID = 42 # x");
    same("SELECT * FROM t WHERE id = ?", "SELECT * FROM t WHERE id = -7");
    same(
        "SELECT * FROM t WHERE s = 'a'",
        "SELECT * FROM t WHERE s = _utf8mb4\"b\"",
    );
    same(
        "SELECT * FROM t WHERE id IN (1)",
        "SELECT * FROM t WHERE id IN (1, 2, 3, 4)",
    );
    same("INSERT INTO t VALUES (1), (2)", "INSERT INTO t VALUES (3), (4), (5)");
    same("SELECT 1", "SELECT 2;");
}

#[test]
fn statements_differing_in_shape_do_not() {
    differ("SELECT * FROM t WHERE id = 1", "SELECT * FROM u WHERE id = 1");
    differ("SELECT a FROM t", "SELECT b FROM t");
    differ("SELECT * FROM `Users`", "SELECT * FROM `users`");
    differ("SELECT * FROM t WHERE a = 1", "SELECT * FROM t WHERE a <=> 1");
    differ("INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (1), (2)");
    differ("SELECT * FROM t WHERE a = TRUE", "SELECT * FROM t WHERE a = 1");
    differ("SELECT @a", "SELECT @b");
}

#[test]
fn both_dialect_front_ends_agree_on_common_sql() {
    for s in [
        "SELECT a, count(*) FROM t WHERE b IN (1, 2) AND c = 'x' GROUP BY a LIMIT 10",
        "INSERT INTO t (a, b) VALUES (1, 2), (3, 4)",
        "UPDATE t SET a = -1 WHERE id = 5",
    ] {
        assert_eq!(digest(s, Dialect::DEFAULT), gatehouse_sql::digest(s), "{s:?}");
    }
}

/// Strings biased towards the characters the MySQL normalizer cares about.
fn sqlish() -> impl Strategy<Value = String> {
    const ATOMS: [&str; 34] = [
        "'",
        "\"",
        "`",
        "\\",
        ";",
        "-- ",
        "--",
        "#",
        "/*",
        "/*!40101 ",
        "/*M!",
        "*/",
        "\n",
        "(",
        ")",
        ",",
        "@",
        "@@session.",
        "?",
        "-",
        "<=>",
        "->>",
        "_utf8mb4",
        "N'",
        "x'",
        "0x1F",
        " IN ",
        " VALUES ",
        " NULL ",
        "1.5e-3",
        ".5",
        "é",
        " ",
        "a",
    ];
    prop::collection::vec(0..ATOMS.len(), 0..40).prop_map(|v| v.into_iter().map(|i| ATOMS[i]).collect())
}

/// Statements in the shapes ORMs send, with random names and values.
fn statement() -> impl Strategy<Value = String> {
    let name = prop_oneof!["[a-z_][a-z0-9_]{0,6}", "`[A-Za-z ]{1,6}`"];
    let value = prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        "'[a-z ]{0,6}'",
        Just("?".to_owned()),
        Just("NULL".to_owned()),
        Just("_utf8mb4'x'".to_owned()),
        Just("0x1F".to_owned()),
    ];
    let values = prop::collection::vec(value.clone(), 1..5);
    (name.clone(), name, value, values, 1usize..4).prop_map(|(t, c, v, vs, rows)| {
        let rows = vec![format!("({})", vs.join(",")); rows].join(",");
        format!(
            "SELECT {c}, count(*) FROM {t} WHERE {c} = {v} AND {c} IN ({}) LIMIT 21; INSERT INTO {t} VALUES {rows} ON DUPLICATE KEY UPDATE {c}=VALUES({c})",
            vs.join(", ")
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn never_panics_and_is_deterministic(s in any::<String>()) {
        for d in DIALECTS {
            let got = digest(&s, d);
            prop_assert_eq!(&got, &digest(&s, d));
            prop_assert!(got.text.len() <= MAX_DIGEST_TEXT + 3);
        }
    }

    #[test]
    fn sqlish_input_never_panics_and_is_deterministic(s in sqlish()) {
        for d in DIALECTS {
            let got = digest(&s, d);
            prop_assert_eq!(&got, &digest(&s, d));
            prop_assert!(got.text.len() <= MAX_DIGEST_TEXT + 3);
        }
    }

    #[test]
    fn digest_is_idempotent_on_statements(s in statement()) {
        let d = digest(&s, Dialect::DEFAULT);
        prop_assert_eq!(&digest(&d.text, Dialect::DEFAULT), &d, "{}", s);
    }

    #[test]
    fn integer_literals_do_not_change_the_id(
        table in "[a-z_][a-z0-9_]{0,8}",
        col in "[a-z_][a-z0-9_]{0,8}",
        a in any::<i64>(),
        b in any::<i64>(),
    ) {
        let q = |n: i64| digest(&format!("SELECT `{col}`, x FROM {table} WHERE {col} = {n} LIMIT 21"), Dialect::DEFAULT);
        prop_assert_eq!(q(a), q(b));
    }
}
