//! The seeds of the SQL targets: PostgreSQL's and MySQL's classifiers,
//! digests and routing.

use super::{Seed, cat};

pub(super) fn sql_seeds() -> Vec<Seed> {
    let text = |t: &str| t.as_bytes().to_vec();
    let with = |first: u8, t: &str| cat(&[&[first], t.as_bytes()]);
    let template: Vec<u8> = (0u8..48).map(|i| i.wrapping_mul(53) ^ 0x2a).collect();
    vec![
        (
            "sql_pg_classify",
            "transaction",
            text("BEGIN; SET search_path = a, public; SELECT set_config('x.y', 'z', false); COMMIT"),
        ),
        ("sql_pg_classify", "temp-table", text("CREATE TEMP TABLE t (a int)")),
        (
            "sql_pg_classify",
            "cursor",
            text("DECLARE c CURSOR WITH HOLD FOR SELECT 1"),
        ),
        ("sql_pg_classify", "advisory-lock", text("SELECT pg_advisory_lock(1)")),
        (
            "sql_pg_classify",
            "prepare",
            text("PREPARE p (int) AS SELECT $1; EXECUTE p(1); DEALLOCATE p"),
        ),
        (
            "sql_pg_classify",
            "do-block",
            text("DO $$ BEGIN PERFORM pg_advisory_lock(1); END $$"),
        ),
        (
            "sql_pg_classify",
            "cte",
            text("/* c */ WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x"),
        ),
        (
            "sql_pg_classify",
            "read-only-begin",
            text("BEGIN READ ONLY; SELECT f(1), now()"),
        ),
        (
            "sql_pg_digest",
            "statement",
            with(
                0,
                "SELECT a, b FROM t WHERE c = -5 AND d IN (1, 2, 3) AND e = E'x\\'y' LIMIT $1",
            ),
        ),
        (
            "sql_pg_digest",
            "values",
            with(0, "INSERT INTO \"T\" VALUES (1, 'a'), (2, 'b'), (3, NULL)"),
        ),
        ("sql_pg_digest", "template", cat(&[&[1], &template])),
        (
            "sql_mysql_classify",
            "transaction",
            with(
                0,
                "SET autocommit=0; START TRANSACTION READ ONLY; SELECT GET_LOCK('x', 1); USE db; COMMIT",
            ),
        ),
        (
            "sql_mysql_classify",
            "ansi-quotes",
            with(1, "SET sql_mode = 'ANSI_QUOTES'; SELECT \"a\" FROM t"),
        ),
        (
            "sql_mysql_classify",
            "procedure",
            with(0, "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END; CALL p()"),
        ),
        (
            "sql_mysql_classify",
            "executable-comment",
            with(2, "/*!40101 SET NAMES utf8mb4 */"),
        ),
        (
            "sql_mysql_classify",
            "load-data",
            with(0, "LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE t"),
        ),
        (
            "sql_mysql_digest_route",
            "previous-results",
            cat(&[
                &[0],
                &[3, 0, 0, 0, 0, 0, 0, 0],
                &[7, 0, 0, 0, 0, 0, 0, 0],
                b"SELECT ROW_COUNT(), FOUND_ROWS(), LAST_INSERT_ID(), @@identity FROM dual",
            ]),
        ),
        (
            "sql_mysql_digest_route",
            "upsert",
            cat(&[
                &[0],
                &[0; 16],
                b"INSERT INTO t VALUES (1,'a'),(2,'b') ON DUPLICATE KEY UPDATE a=VALUES(a)",
            ]),
        ),
        (
            "sql_mysql_digest_route",
            "locking-read",
            cat(&[&[0], &[0; 16], b"SELECT * FROM t WHERE id = ? FOR UPDATE"]),
        ),
        ("sql_mysql_digest_route", "template", cat(&[&[4], &template])),
    ]
}
