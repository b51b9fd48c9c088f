//! Tests for non-pinning effects: transactions, DISCARD, prepared
//! statements, new sessions' defaults, plain statements and
//! case-insensitivity.

#![forbid(unsafe_code)]

use gatehouse_sql::{DiscardKind, Effect, PinReason, TxCommand, classify, classify_all};

fn tx(c: TxCommand) -> Effect {
    Effect::Transaction(c)
}

#[test]
fn transaction_control() {
    let cases = [
        ("BEGIN", TxCommand::Begin),
        ("begin isolation level serializable", TxCommand::Begin),
        ("START TRANSACTION READ ONLY", TxCommand::Begin),
        ("COMMIT", TxCommand::Commit),
        ("commit and chain", TxCommand::Commit),
        ("END WORK", TxCommand::Commit),
        ("ROLLBACK", TxCommand::Rollback),
        ("ABORT", TxCommand::Rollback),
        ("SAVEPOINT s1", TxCommand::Savepoint),
        ("RELEASE SAVEPOINT s1", TxCommand::Release),
        ("RELEASE s1", TxCommand::Release),
        ("ROLLBACK TO s1", TxCommand::RollbackTo),
        ("rollback work to savepoint s1", TxCommand::RollbackTo),
        ("PREPARE TRANSACTION 'g1'", TxCommand::PrepareTransaction),
        ("COMMIT PREPARED 'g1'", TxCommand::CommitPrepared),
        ("ROLLBACK PREPARED 'g1'", TxCommand::RollbackPrepared),
    ];
    for (sql, cmd) in cases {
        assert_eq!(classify(sql), tx(cmd), "{sql}");
    }
}

/// What new sessions of a role or database start with: the proxy replaces
/// the backend's pooled connections after it, as their sessions started
/// before.
#[test]
fn alter_role_or_database_set_changes_new_sessions_defaults() {
    for sql in [
        "ALTER ROLE app SET statement_timeout = '5s'",
        "alter user app in database d set search_path to a, b",
        "ALTER ROLE ALL SET work_mem = '8MB'",
        "ALTER ROLE CURRENT_USER RESET statement_timeout",
        "ALTER DATABASE d SET timezone TO 'UTC'",
        "ALTER DATABASE d RESET ALL",
    ] {
        assert_eq!(classify(sql), Effect::Defaults, "{sql}");
    }
    for sql in [
        "ALTER ROLE app WITH PASSWORD 'x'",
        "ALTER DATABASE d RENAME TO e",
        "ALTER TABLE t SET (fillfactor = 50)",
        "ALTER SYSTEM SET work_mem = '8MB'",
    ] {
        assert_eq!(classify(sql), Effect::None, "{sql}");
    }
}

#[test]
fn discard() {
    assert_eq!(classify("DISCARD ALL"), Effect::Discard(DiscardKind::All));
    assert_eq!(classify("discard plans"), Effect::Discard(DiscardKind::Plans));
    assert_eq!(classify("DISCARD SEQUENCES"), Effect::Discard(DiscardKind::Sequences));
    assert_eq!(classify("DISCARD TEMP"), Effect::Discard(DiscardKind::Temp));
    assert_eq!(classify("DISCARD TEMPORARY"), Effect::Discard(DiscardKind::Temp));
    assert_eq!(classify("DISCARD everything"), Effect::Pin(PinReason::Unrecognized));
}

#[test]
fn prepared_statements() {
    assert_eq!(
        classify("PREPARE q1 (int, text) AS SELECT $1"),
        Effect::Prepare { name: "q1".into() }
    );
    assert_eq!(
        classify("PREPARE \"Q1\" AS SELECT 1"),
        Effect::Prepare { name: "Q1".into() }
    );
    assert_eq!(
        classify("prepare transaction AS SELECT 1"),
        Effect::Prepare {
            name: "transaction".into()
        }
    );
    assert_eq!(classify("EXECUTE Q1 (1, 'a')"), Effect::Execute { name: "q1".into() });
    assert_eq!(classify("EXECUTE q1"), Effect::Execute { name: "q1".into() });
    assert_eq!(
        classify("DEALLOCATE q1"),
        Effect::Deallocate {
            name: Some("q1".into())
        }
    );
    assert_eq!(
        classify("DEALLOCATE PREPARE q1"),
        Effect::Deallocate {
            name: Some("q1".into())
        }
    );
    assert_eq!(classify("DEALLOCATE ALL"), Effect::Deallocate { name: None });
    assert_eq!(classify("deallocate prepare all"), Effect::Deallocate { name: None });
    assert_eq!(
        classify("EXPLAIN ANALYZE EXECUTE q1"),
        Effect::Execute { name: "q1".into() }
    );
    assert_eq!(classify("EXECUTE"), Effect::Pin(PinReason::Unrecognized));
}

#[test]
fn plain_statements_have_no_effect() {
    let cases = [
        "SELECT a FROM t WHERE b = 1",
        "(SELECT 1) UNION (SELECT 2)",
        "/* c */ -- d\n ((select 1))",
        "INSERT INTO temp VALUES (1)",
        "UPDATE t SET a = 1",
        "DELETE FROM t",
        "MERGE INTO t USING s ON true WHEN MATCHED THEN DO NOTHING",
        "WITH x AS (SELECT 1) SELECT * FROM x",
        "VALUES (1)",
        "TABLE t",
        "COPY t FROM STDIN",
        "SHOW search_path",
        "EXPLAIN SELECT 1",
        "ANALYZE t",
        "VACUUM t",
        "CREATE TABLE t (a int)",
        "CREATE UNLOGGED TABLE t (a int)",
        "ALTER TABLE t ADD b int",
        "DROP TABLE t",
        "TRUNCATE t",
        "GRANT SELECT ON t TO u",
        "REVOKE SELECT ON t FROM u",
        "COMMENT ON TABLE t IS 'x'",
        "LOCK TABLE t",
        "DO $$ BEGIN RAISE NOTICE 'hi'; END $$",
        "CALL p()",
        "NOTIFY ch, 'x'",
        "UNLISTEN *",
        "FETCH 1 FROM c",
        "MOVE 1 IN c",
        "CLOSE c",
        "CHECKPOINT",
        "REINDEX TABLE t",
        "CLUSTER t",
        "REFRESH MATERIALIZED VIEW v",
        "SECURITY LABEL ON TABLE t IS 'x'",
        "IMPORT FOREIGN SCHEMA s FROM SERVER f INTO l",
        "REASSIGN OWNED BY a TO b",
        "DECLARE c CURSOR FOR SELECT 1",
        "DECLARE c CURSOR WITHOUT HOLD FOR SELECT 1",
        "SELECT * INTO t2 FROM t",
        "SELECT * INTO temp FROM t",
        "SELECT pg_advisory_xact_lock(1)",
        "SELECT pg_advisory_unlock(1)",
        "SELECT 'pg_advisory_lock(1)', 'set_config'",
        "SELECT 1 AS \"pg_advisory_lock\"",
        "SELECT 1 -- pg_advisory_lock(1)",
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        "SET CONSTRAINTS ALL DEFERRED",
        "",
        "-- nothing",
    ];
    for sql in cases {
        assert_eq!(classify(sql), Effect::None, "{sql}");
    }
}

#[test]
fn keywords_are_case_insensitive() {
    assert_eq!(classify("BeGiN"), tx(TxCommand::Begin));
    assert_eq!(classify("sElEcT 1"), Effect::None);
    assert_eq!(classify("LiStEn x"), Effect::Pin(PinReason::Listen));
    assert_eq!(
        classify("Select PG_Advisory_Lock(1)"),
        Effect::Pin(PinReason::AdvisoryLock)
    );
}

#[test]
fn classify_all_splits_then_classifies() {
    assert_eq!(
        classify_all("BEGIN; SET LOCAL a = 1; SELECT ';'; COMMIT"),
        vec![
            tx(TxCommand::Begin),
            Effect::Set {
                name: "a".into(),
                value: "1".into(),
                scope: gatehouse_sql::Scope::Local
            },
            Effect::None,
            tx(TxCommand::Commit),
        ]
    );
}
