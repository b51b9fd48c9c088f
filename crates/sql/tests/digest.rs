//! PostgreSQL query digests: a table of statements (in the shapes ORMs
//! send) and their digest text, pairs that must share or must not share a
//! digest, the id, the length cap, and property tests.

#![forbid(unsafe_code)]

use gatehouse_sql::{MAX_DIGEST_TEXT, digest};
use proptest::prelude::*;

fn fnv1a64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[track_caller]
fn check(table: &[(&str, &str)]) {
    for &(input, want) in table {
        assert_eq!(digest(input).text, want, "input: {input:?}");
    }
}

#[test]
fn orm_statements_normalize_to_their_shape() {
    check(&[
        // Django
        (
            r#"SELECT "polls_question"."id", "polls_question"."question_text" FROM "polls_question" WHERE "polls_question"."id" = 1 LIMIT 21"#,
            r#"select "polls_question"."id", "polls_question"."question_text" from "polls_question" where "polls_question"."id" = ? limit ?"#,
        ),
        (
            r#"SELECT "auth_user"."id" FROM "auth_user" WHERE "auth_user"."id" IN (1, 2, 3) ORDER BY "auth_user"."id" ASC"#,
            r#"select "auth_user"."id" from "auth_user" where "auth_user"."id" in (...) order by "auth_user"."id" asc"#,
        ),
        // Rails
        (
            r#"SELECT "users".* FROM "users" WHERE "users"."email" = $1 LIMIT $2"#,
            r#"select "users".* from "users" where "users"."email" = ? limit ?"#,
        ),
        // Hibernate
        (
            "select u1_0.id,u1_0.name from users u1_0 where u1_0.id=$1 and u1_0.age>=-18",
            "select u1_0.id, u1_0.name from users u1_0 where u1_0.id = ? and u1_0.age >= ?",
        ),
        // SQLAlchemy (psycopg2 inlines parameters client-side)
        (
            "INSERT INTO users (name, fullname) VALUES ('spongebob', 'Spongebob Squarepants') RETURNING users.id",
            "insert into users (name, fullname) values (?, ?) returning users.id",
        ),
        // Prisma
        (
            r#"SELECT "public"."User"."id", "public"."User"."email" FROM "public"."User" WHERE "public"."User"."id" IN ($1,$2,$3) OFFSET $4"#,
            r#"select "public"."User"."id", "public"."User"."email" from "public"."User" where "public"."User"."id" in (...) offset ?"#,
        ),
        // GORM
        (
            r#"INSERT INTO "users" ("created_at","name") VALUES ('2024-01-01 00:00:00','jinzhu'),('2024-01-02 00:00:00',NULL) RETURNING "id""#,
            r#"insert into "users" ("created_at", "name") values (?, ?), ... returning "id""#,
        ),
        (
            r#"INSERT INTO "kv" ("k","v") VALUES ($1,$2) ON CONFLICT ("k") DO UPDATE SET "v"=EXCLUDED."v""#,
            r#"insert into "kv" ("k", "v") values (?, ?) on conflict ("k") do update set "v" = excluded."v""#,
        ),
    ]);
}

#[test]
fn literals_of_every_form_become_one_placeholder() {
    check(&[
        (
            "SELECT 1, 1.5, .5, 5., 1.5e-3, 2E+10, 0x1F, 1_000",
            "select ?, ?, ?, ?, ?, ?, ?, ?",
        ),
        (r"SELECT 'it''s', E'a\'b', U&'d\0061t', N'n'", "select ?, ?, ?, ?"),
        (
            "SELECT $$a;b$$, $tag$ x $tag$, B'101', b'1', X'1F', x'ff'",
            "select ?, ?, ?, ?, ?, ?",
        ),
        ("SELECT TRUE, false, NULL", "select true, false, null"),
        (
            "SELECT '{}'::jsonb, interval '1 day', date '2024-01-01'",
            "select ?::jsonb, interval ?, date ?",
        ),
        (
            "SELECT * FROM t WHERE a = $1 AND b = $12",
            "select * from t where a = ? and b = ?",
        ),
    ]);
}

#[test]
fn sign_before_a_number_in_operand_position_is_part_of_the_literal() {
    check(&[
        ("SELECT * FROM t WHERE a = -5", "select * from t where a = ?"),
        (
            "SELECT * FROM t WHERE a=-5 AND b<>+1.5",
            "select * from t where a = ? and b <> ?",
        ),
        ("SELECT -1, - 2, (-3)", "select ?, ?, (?)"),
        (
            "SELECT a - 5, a-5, 1 - -2, (1)-2",
            "select a - ?, a - ?, ? - ?, (?) - ?",
        ),
        ("SELECT -x, - -5 LIMIT -1", "select - x, - ? limit ?"),
    ]);
}

#[test]
fn in_lists_of_literals_collapse() {
    check(&[
        ("SELECT * FROM t WHERE id IN (1)", "select * from t where id in (...)"),
        (
            "SELECT * FROM t WHERE id IN (1,2,3)",
            "select * from t where id in (...)",
        ),
        (
            "SELECT * FROM t WHERE id NOT IN ('a', -1, $3)",
            "select * from t where id not in (...)",
        ),
        (
            "SELECT * FROM t WHERE id IN (a, 1)",
            "select * from t where id in (a, ?)",
        ),
        (
            "SELECT * FROM t WHERE id IN (SELECT 1)",
            "select * from t where id in (select ?)",
        ),
        ("SELECT * FROM t WHERE id IN ()", "select * from t where id in ()"),
        (
            "SELECT * FROM t WHERE (a, b) IN ((1, 2))",
            "select * from t where (a, b) in ((?, ?))",
        ),
        (
            "SELECT * FROM t WHERE id = ANY($1)",
            "select * from t where id = any (?)",
        ),
    ]);
}

#[test]
fn values_rows_after_the_first_collapse() {
    check(&[
        ("INSERT INTO t VALUES (1, 'a')", "insert into t values (?, ?)"),
        (
            "INSERT INTO t VALUES (1, 'a'), (2, 'b')",
            "insert into t values (?, ?), ...",
        ),
        (
            "INSERT INTO t VALUES (1, 'a'), (2, NULL), (3, DEFAULT), (-4, TRUE)",
            "insert into t values (?, ?), ...",
        ),
        (
            "INSERT INTO t VALUES (1, now()), (2, now())",
            "insert into t values (?, now()), (?, now())",
        ),
        (
            "INSERT INTO t VALUES (1), (2), (now()), (3)",
            "insert into t values (?), ..., (now()), (?)",
        ),
        (
            "SELECT * FROM (VALUES (1), (2)) AS v(x)",
            "select * from (values (?), ...) as v(x)",
        ),
    ]);
}

#[test]
fn comments_whitespace_and_case_are_canonical() {
    check(&[
        (
            "SELECT  a ,b\n\tFROM t -- note\n WHERE x = 1;",
            "select a, b from t where x = ?",
        ),
        ("/* app:web */ SELECT /* a /* nested */ b */ 1;;", "select ?"),
        ("SELECT COUNT( * ) FROM T", "select count(*) from t"),
        (
            "SELECT lower (name) FROM t WHERE EXISTS(SELECT 1)",
            "select lower(name) from t where exists (select ?)",
        ),
        (
            "SELECT a.b . c, x :: int, arr [ 1 ], ARRAY[1,2]",
            "select a.b.c, x::int, arr[?], array[?, ?]",
        ),
        ("INSERT INTO s.t(a) VALUES(1)", "insert into s.t (a) values (?)"),
        ("SELECT a FROM t; SELECT b FROM u", "select a from t; select b from u"),
    ]);
}

#[test]
fn quoted_identifiers_and_operators_are_kept() {
    check(&[
        (
            r#"SELECT "Mixed""Case", U&"d\0061t" FROM "T""#,
            r#"select "Mixed""Case", U&"d\0061t" from "T""#,
        ),
        (
            "SELECT a<=b, a!=b, a||b, j->>'k', j#>'{a}', j @> '{}'",
            "select a <= b, a != b, a || b, j ->> ?, j #> ?, j @> ?",
        ),
        (
            "SELECT * FROM t WHERE a=-b AND c*-1 > 0",
            "select * from t where a = - b and c * ? > ?",
        ),
        ("SELECT j ? 'k', j ?| array['a']", "select j ? ?, j ?| array[?]"),
    ]);
}

#[test]
fn unterminated_input_runs_to_the_end() {
    check(&[
        ("SELECT 'abc", "select ?"),
        ("SELECT $q$abc", "select ?"),
        ("SELECT 1 /* open", "select ?"),
        (r#"SELECT "abc"#, r#"select "abc"#),
        ("SELECT (1, (2", "select (?, (?"),
        ("", ""),
    ]);
}

#[track_caller]
fn same(a: &str, b: &str) {
    assert_eq!(digest(a), digest(b), "{a:?} vs {b:?}");
}

#[track_caller]
fn differ(a: &str, b: &str) {
    let (da, db) = (digest(a), digest(b));
    assert_ne!(da.text, db.text, "{a:?} vs {b:?}");
    assert_ne!(da.id, db.id, "{a:?} vs {b:?}");
}

#[test]
fn statements_differing_only_in_values_share_a_digest() {
    same("SELECT * FROM t WHERE id = 1", "SELECT * FROM t WHERE id = 987654321");
    same(
        "SELECT * FROM t WHERE name = 'a'",
        "select * from T where NAME = E'b' -- x",
    );
    same("SELECT * FROM t WHERE id = $1", "SELECT * FROM t WHERE id = 5");
    same(
        "SELECT * FROM t WHERE id IN (1)",
        "SELECT * FROM t WHERE id IN (1, 2, 3, 4)",
    );
    same("INSERT INTO t VALUES (1), (2)", "INSERT INTO t VALUES (3), (4), (5)");
    same("SELECT 1", "SELECT 2;");
    same("SELECT * FROM t WHERE a = -1", "SELECT * FROM t WHERE a = 1");
}

#[test]
fn statements_differing_in_shape_do_not() {
    differ("SELECT * FROM t WHERE id = 1", "SELECT * FROM u WHERE id = 1");
    differ("SELECT a FROM t", "SELECT b FROM t");
    differ(r#"SELECT * FROM "Users""#, "SELECT * FROM Users");
    differ("SELECT * FROM t WHERE a = 1", "SELECT * FROM t WHERE a <> 1");
    differ("SELECT * FROM t WHERE a = 1", "SELECT * FROM t WHERE a IN (1)");
    differ("INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (1), (2)");
    differ("SELECT * FROM t WHERE a = true", "SELECT * FROM t WHERE a = 1");
    differ("SELECT * FROM t WHERE a IS NULL", "SELECT * FROM t WHERE a IS NOT NULL");
}

#[test]
fn id_is_fnv1a_64_of_the_text() {
    assert_eq!(digest("").id, 0xcbf2_9ce4_8422_2325);
    for s in [
        "SELECT 1",
        r#"SELECT "a" FROM t WHERE b IN (1, 2)"#,
        "INSERT INTO t VALUES (1), (2)",
    ] {
        let d = digest(s);
        assert_eq!(d.id, fnv1a64(&d.text), "{s:?}");
    }
}

#[test]
fn long_text_is_capped_at_a_char_boundary() {
    let cols: Vec<String> = (0..400).map(|i| format!("col_é_{i}")).collect();
    let stmt = format!("SELECT {} FROM t", cols.join(", "));
    let d = digest(&stmt);
    assert!(d.text.len() <= MAX_DIGEST_TEXT + 3);
    assert!(d.text.ends_with("..."));
    assert!(d.text.starts_with("select col_é_0, col_é_1"));
    // The id covers the whole text, so a difference past the cap shows.
    let other = digest(&stmt.replace("col_é_399", "col_é_x"));
    assert_eq!(d.text, other.text);
    assert_ne!(d.id, other.id);
}

/// Strings biased towards the characters the normalizer cares about.
fn sqlish() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("'".to_owned()),
        Just("\"".to_owned()),
        Just("$".to_owned()),
        Just("$$".to_owned()),
        Just("$t$".to_owned()),
        Just("$1".to_owned()),
        Just("E'".to_owned()),
        Just("U&".to_owned()),
        Just("x'".to_owned()),
        Just("\\".to_owned()),
        Just(";".to_owned()),
        Just("--".to_owned()),
        Just("/*".to_owned()),
        Just("*/".to_owned()),
        Just("(".to_owned()),
        Just(")".to_owned()),
        Just(",".to_owned()),
        Just("...".to_owned()),
        Just(".".to_owned()),
        Just("::".to_owned()),
        Just("-".to_owned()),
        Just("=-".to_owned()),
        Just("?".to_owned()),
        Just(" IN ".to_owned()),
        Just(" VALUES ".to_owned()),
        Just(" select ".to_owned()),
        Just(" NULL ".to_owned()),
        Just("1.5e-3".to_owned()),
        Just("é".to_owned()),
        Just(" ".to_owned()),
        "[a-z]{1,3}".boxed(),
        "[0-9]{1,3}".boxed(),
    ];
    prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat())
}

/// Statements in the shapes ORMs send, with random names and values.
fn statement() -> impl Strategy<Value = String> {
    let name = prop_oneof!["[a-z_][a-z0-9_]{0,6}", "\"[A-Za-z ]{1,6}\""];
    let value = prop_oneof![
        any::<i64>().prop_map(|i| i.to_string()),
        "'[a-z ]{0,6}'",
        Just("E'it\\'s'".to_owned()),
        (1u32..9).prop_map(|n| format!("${n}")),
        Just("NULL".to_owned()),
        Just("1.5e-3".to_owned()),
    ];
    let values = prop::collection::vec(value.clone(), 1..5);
    (name.clone(), name, value, values, 1usize..4).prop_map(|(t, c, v, vs, rows)| {
        let row = format!("({})", vs.join(","));
        let rows = vec![row; rows].join(", ");
        format!(
            "SELECT {c}, count(*) FROM {t} WHERE {c} = {v} AND {c} IN ({}) GROUP BY 1; INSERT INTO {t} VALUES {rows} RETURNING {c}",
            vs.join(", ")
        )
    })
}

/// Statements around and above the cap, with multi-byte characters.
fn long_statement() -> impl Strategy<Value = String> {
    const ATOMS: [&str; 7] = ["é", "ab", ", ", "'x'", "(", " IN (1)", "\"€\""];
    prop::collection::vec(0..ATOMS.len(), 0..1200).prop_map(|v| v.into_iter().map(|i| ATOMS[i]).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn never_panics_and_is_deterministic(s in any::<String>()) {
        let d = digest(&s);
        prop_assert_eq!(&d, &digest(&s));
        prop_assert!(d.text.len() <= MAX_DIGEST_TEXT + 3);
    }

    #[test]
    fn sqlish_input_never_panics_and_is_deterministic(s in sqlish()) {
        let d = digest(&s);
        prop_assert_eq!(&d, &digest(&s));
    }

    #[test]
    fn text_is_capped(s in long_statement()) {
        let d = digest(&s);
        prop_assert!(d.text.len() <= MAX_DIGEST_TEXT + 3, "{} bytes", d.text.len());
    }

    /// Without `.`: a qualifier dot glued to a `...` (`....`) re-lexes
    /// differently, which only junk input produces.
    #[test]
    fn digest_is_idempotent_on_sqlish_input_without_dots(s in sqlish().prop_map(|s| s.replace('.', " "))) {
        let d = digest(&s);
        prop_assert_eq!(&digest(&d.text).text, &d.text, "{:?}", s);
    }

    #[test]
    fn digest_is_idempotent_on_statements(s in statement()) {
        let d = digest(&s);
        prop_assert_eq!(&digest(&d.text), &d, "{}", s);
    }

    #[test]
    fn integer_literals_do_not_change_the_id(
        table in "[a-z_][a-z0-9_]{0,8}",
        col in "[a-z_][a-z0-9_]{0,8}",
        a in any::<i64>(),
        b in any::<i64>(),
    ) {
        let q = |n: i64| digest(&format!("SELECT {col}, x FROM {table} WHERE {col} = {n} LIMIT 21"));
        prop_assert_eq!(q(a), q(b));
    }
}
