//! Table-driven tests of the MySQL classifier: every effect variant and pin
//! reason, with the lexing traps that decide them.

#![forbid(unsafe_code)]

use gatehouse_sql::mysql::{Dialect, Info, Kill, MyEffect, PinReason, TxCommand, classify, classify_all};

const D: Dialect = Dialect::DEFAULT;
const PLAIN: MyEffect = MyEffect::PLAIN;

fn pin(r: PinReason) -> MyEffect {
    MyEffect::Pin(r)
}

fn tx(c: TxCommand) -> MyEffect {
    MyEffect::Transaction(c)
}

fn info(inserts: bool, reads_last_insert_id: bool, reads_diagnostics: bool) -> MyEffect {
    MyEffect::Plain(Info {
        inserts,
        reads_last_insert_id,
        reads_diagnostics,
        ..Info::NONE
    })
}

fn facts(f: impl FnOnce(&mut Info)) -> MyEffect {
    let mut i = Info::NONE;
    f(&mut i);
    MyEffect::Plain(i)
}

fn check(cases: &[(&str, MyEffect)]) {
    for (sql, want) in cases {
        assert_eq!(&classify(sql, D), want, "{sql}");
    }
}

#[test]
fn transaction_control() {
    let begin = |read_only, consistent_snapshot| {
        tx(TxCommand::Begin {
            read_only,
            consistent_snapshot,
        })
    };
    let commit = |chain, release| tx(TxCommand::Commit { chain, release });
    let rollback = |chain, release| tx(TxCommand::Rollback { chain, release });
    check(&[
        ("BEGIN", begin(false, false)),
        ("begin work", begin(false, false)),
        ("START TRANSACTION", begin(false, false)),
        ("START TRANSACTION READ ONLY", begin(true, false)),
        (
            "start transaction with consistent snapshot, read only",
            begin(true, true),
        ),
        ("START TRANSACTION READ WRITE", begin(false, false)),
        ("COMMIT", commit(false, false)),
        ("COMMIT WORK AND CHAIN", commit(true, false)),
        ("commit and no chain no release", commit(false, false)),
        ("COMMIT RELEASE", commit(false, true)),
        ("ROLLBACK", rollback(false, false)),
        ("ROLLBACK WORK AND CHAIN RELEASE", rollback(true, true)),
        ("ROLLBACK TO SAVEPOINT s1", tx(TxCommand::RollbackToSavepoint)),
        ("rollback work to s1", tx(TxCommand::RollbackToSavepoint)),
        ("SAVEPOINT s1", tx(TxCommand::Savepoint)),
        ("RELEASE SAVEPOINT s1", tx(TxCommand::ReleaseSavepoint)),
        ("/*!40101 BEGIN */", begin(false, false)),
        ("START SLAVE", PLAIN),
        ("XA START 'x'", pin(PinReason::Xa)),
        ("xa begin 'x'", pin(PinReason::Xa)),
        ("XA END 'x'", pin(PinReason::Xa)),
        ("XA PREPARE 'x'", pin(PinReason::Xa)),
        ("XA COMMIT 'x' ONE PHASE", pin(PinReason::Xa)),
        ("XA ROLLBACK 'x'", pin(PinReason::Xa)),
        ("XA RECOVER", PLAIN),
        ("BEGIN NOT ATOMIC SELECT 1; END", pin(PinReason::CompoundStatement)),
    ]);
}

#[test]
fn plain_statements() {
    check(&[
        ("SELECT * FROM t WHERE id = 5", PLAIN),
        ("(SELECT 1) UNION (SELECT 2)", PLAIN),
        ("UPDATE t SET a = 1 WHERE b = 2", PLAIN),
        ("DELETE FROM t", PLAIN),
        ("WITH x AS (SELECT 1) SELECT * FROM x", PLAIN),
        ("CREATE TABLE t (a int, begin int, event int)", PLAIN),
        ("ALTER TABLE t ADD COLUMN c int", PLAIN),
        ("DROP TABLE t", PLAIN),
        ("SHOW TABLES", PLAIN),
        ("EXPLAIN SELECT 1", PLAIN),
        (
            "KILL 42",
            MyEffect::Kill(Kill {
                query_only: false,
                id: 42,
            }),
        ),
        (
            "kill query 7",
            MyEffect::Kill(Kill {
                query_only: true,
                id: 7,
            }),
        ),
        (
            "KILL HARD CONNECTION 9",
            MyEffect::Kill(Kill {
                query_only: false,
                id: 9,
            }),
        ),
        (
            "KILL SOFT QUERY 11",
            MyEffect::Kill(Kill {
                query_only: true,
                id: 11,
            }),
        ),
        ("KILL USER app_owner", MyEffect::KillUnsupported),
        ("KILL QUERY ID 5", MyEffect::KillUnsupported),
        ("KILL 1 + 1", MyEffect::KillUnsupported),
        ("DO SLEEP(1)", PLAIN),
        // IS_USED_LOCK answers a thread id: the proxy writes its own id in
        // for the connection's own lock, as it does for CONNECTION_ID().
        (
            "SELECT RELEASE_LOCK('x'), IS_USED_LOCK('y')",
            facts(|i| i.reads_connection_id = true),
        ),
        ("SELECT CONNECTION_ID()", facts(|i| i.reads_connection_id = true)),
        ("SELECT RELEASE_ALL_LOCKS()", PLAIN),
        ("SET PASSWORD = 'secret'", PLAIN),
        ("SET PASSWORD FOR 'bob'@'%' = 'x'", PLAIN),
        ("SET DEFAULT ROLE r TO 'bob'@'localhost'", PLAIN),
        ("CREATE USER 'bob'@'localhost' IDENTIFIED BY 'pw'", PLAIN),
        ("GRANT SELECT ON db.* TO bob@localhost", PLAIN),
        ("CREATE DEFINER=`root`@`%` VIEW v AS SELECT 1", PLAIN),
        (
            "CREATE PROCEDURE p() BEGIN SET @x = 1; SELECT GET_LOCK('a', 1); END",
            PLAIN,
        ),
        (
            "CREATE DEFINER='u'@'h' TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET @n = 1",
            PLAIN,
        ),
        ("LOAD DATA INFILE '/tmp/x' INTO TABLE t", PLAIN),
        ("FLUSH PRIVILEGES", PLAIN),
        ("FLUSH TABLES", PLAIN),
        ("LOCK_THIS", PLAIN),
        ("", PLAIN),
        ("-- only a comment", PLAIN),
        ("'just a string'", PLAIN),
        ("FOO BAR", PLAIN),
        ("DELIMITER //", PLAIN),
    ]);
}

#[test]
fn info_flags() {
    check(&[
        ("INSERT INTO t VALUES (1)", info(true, false, false)),
        ("REPLACE INTO t VALUES (1)", info(true, false, false)),
        ("INSERT INTO t2 VALUES (LAST_INSERT_ID())", info(true, true, false)),
        ("SELECT LAST_INSERT_ID()", info(false, true, false)),
        ("select last_insert_id ( )", info(false, true, false)),
        ("SELECT @@last_insert_id", info(false, true, false)),
        ("SELECT @@IDENTITY", info(false, true, false)),
        ("SHOW WARNINGS", info(false, false, true)),
        ("show errors limit 1", info(false, false, true)),
        ("SHOW COUNT(*) WARNINGS", info(false, false, true)),
        ("GET DIAGNOSTICS CONDITION 1 x = MESSAGE_TEXT", info(false, false, true)),
        ("SELECT ROW_COUNT()", facts(|i| i.reads_row_count = true)),
        ("SELECT FOUND_ROWS()", facts(|i| i.reads_found_rows = true)),
        ("SELECT LAST_INSERT_ID(42)", facts(|i| i.sets_last_insert_id = true)),
        (
            "INSERT INTO t (id) VALUES (1) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)",
            facts(|i| {
                i.inserts = true;
                i.sets_last_insert_id = true;
            }),
        ),
        (
            "SELECT @@warning_count, @@session.error_count",
            info(false, false, true),
        ),
        ("SELECT 'LAST_INSERT_ID()'", PLAIN),
        ("SELECT row_count FROM t", PLAIN),
    ]);
}

/// A view's or a routine's body is stored, not run: the information
/// functions in it read nothing now and must never be written in as the
/// session's values (the view would return them for good).
#[test]
fn information_functions_in_stored_code_are_not_read_now() {
    check(&[
        (
            "CREATE VIEW v AS SELECT LAST_INSERT_ID() AS l, CONNECTION_ID() AS c",
            PLAIN,
        ),
        (
            "create or replace algorithm = merge sql security invoker view v as select row_count()",
            PLAIN,
        ),
        ("ALTER VIEW v AS SELECT FOUND_ROWS()", PLAIN),
        (
            "CREATE PROCEDURE p() BEGIN UPDATE t SET a = 1; SELECT ROW_COUNT(); END",
            PLAIN,
        ),
        ("CREATE FUNCTION f() RETURNS INT RETURN LAST_INSERT_ID()", PLAIN),
        (
            "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW INSERT INTO log VALUES (LAST_INSERT_ID(NEW.id))",
            PLAIN,
        ),
        (
            "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT CONNECTION_ID()",
            PLAIN,
        ),
        // Run now: the values are read now.
        (
            "CREATE TABLE t2 AS SELECT LAST_INSERT_ID() AS l",
            info(false, true, false),
        ),
    ]);
}

#[test]
fn pins() {
    use PinReason::*;
    check(&[
        ("SELECT @x", pin(UserVariable)),
        ("SELECT a FROM t WHERE b = @`weird name`", pin(UserVariable)),
        ("SELECT @'q'", pin(UserVariable)),
        ("SELECT a INTO @x FROM t", pin(UserVariable)),
        ("SELECT a FROM t INTO@x", pin(UserVariable)),
        ("SELECT (@rank := @rank + 1) FROM t", pin(UserVariable)),
        ("UPDATE t SET a = @v", pin(UserVariable)),
        ("/*!50000 SELECT @x */", pin(UserVariable)),
        ("/*M!100100 SELECT @x */", pin(UserVariable)),
        ("CREATE TEMPORARY TABLE t (a int)", pin(TemporaryTable)),
        ("create or replace temporary table t select 1", pin(TemporaryTable)),
        ("CREATE TEMPORARY TABLE IF NOT EXISTS t LIKE u", pin(TemporaryTable)),
        ("DROP TEMPORARY TABLE IF EXISTS t", pin(TemporaryTable)),
        ("SELECT GET_LOCK('lk', 10)", pin(GetLock)),
        ("DO get_lock('lk', 0)", pin(GetLock)),
        ("SELECT service_get_write_locks('ns', 'l', 0)", pin(GetLock)),
        ("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 10", pin(FoundRows)),
        ("PREPARE s FROM 'SELECT 1'", pin(Prepare)),
        ("EXECUTE s", pin(Prepare)),
        ("DEALLOCATE PREPARE s", pin(Prepare)),
        ("DROP PREPARE s", pin(Prepare)),
        ("EXECUTE IMMEDIATE 'SELECT 1'", pin(Prepare)),
        ("HANDLER t OPEN", pin(Handler)),
        ("handler t read first", pin(Handler)),
        ("CALL p(1)", pin(Call)),
        ("SET ROLE ALL", pin(SetRole)),
        ("SET ROLE NONE", pin(SetRole)),
        ("SET max_connections = 10", pin(SetUntracked)),
    ]);
    let all: Vec<_> = PinReason::ALL.iter().map(|r| r.code()).collect();
    let mut dedup = all.clone();
    dedup.sort_unstable();
    dedup.dedup();
    assert_eq!(dedup.len(), all.len());
    assert_eq!(PinReason::UserVariable.code(), "user_variable");
    assert_eq!(PinReason::TemporaryTable.code(), "temporary_table");
}

#[test]
fn locks_and_load_local() {
    use MyEffect::{LoadDataLocal, LockTables, UnlockTables};
    check(&[
        ("LOCK TABLES t READ, u WRITE", LockTables),
        ("lock table t write", LockTables),
        ("FLUSH TABLES WITH READ LOCK", LockTables),
        ("FLUSH TABLES t1, t2 WITH READ LOCK", LockTables),
        ("FLUSH LOCAL TABLES t FOR EXPORT", LockTables),
        ("LOCK INSTANCE FOR BACKUP", LockTables),
        ("BACKUP STAGE START", LockTables),
        ("BACKUP LOCK t", LockTables),
        ("UNLOCK TABLES", UnlockTables),
        ("UNLOCK INSTANCE", UnlockTables),
        ("BACKUP STAGE END", UnlockTables),
        ("BACKUP UNLOCK", UnlockTables),
        ("LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE t", LoadDataLocal),
        ("load data concurrent local infile 'x' into table t", LoadDataLocal),
        ("LOAD XML LOCAL INFILE 'x.xml' INTO TABLE t", LoadDataLocal),
    ]);
    assert_eq!(LockTables.pin_reason(), Some(PinReason::LockTables));
    assert_eq!(pin(PinReason::Call).pin_reason(), Some(PinReason::Call));
    assert_eq!(UnlockTables.pin_reason(), None);
}

#[test]
fn use_db() {
    check(&[
        ("USE shop", MyEffect::Use("shop".into())),
        ("use `my db`", MyEffect::Use("my db".into())),
        ("USE `a``b`", MyEffect::Use("a`b".into())),
        ("USE shop extra", pin(PinReason::Unrecognized)),
        ("USE", pin(PinReason::Unrecognized)),
    ]);
    let ansi = Dialect {
        ansi_quotes: true,
        ..Dialect::DEFAULT
    };
    assert_eq!(classify("USE \"x\"", ansi), MyEffect::Use("x".into()));
    assert_eq!(classify("USE \"x\"", D), pin(PinReason::Unrecognized));
}

#[test]
fn lexing_traps() {
    check(&[
        ("SELECT '@x'", PLAIN),
        ("SELECT \"@x\"", PLAIN),
        ("SELECT `@x` FROM t", PLAIN),
        ("SELECT 1 /* @x */", PLAIN),
        ("SELECT 1 # @x", PLAIN),
        ("SELECT 1 -- @x", PLAIN),
        ("SELECT 1 --@x", pin(PinReason::UserVariable)),
        ("SELECT 1 -- GET_LOCK('a', 1)\n, 2", PLAIN),
        ("SELECT 'it\\'s @x'", PLAIN),
        ("SELECT 'it''s @x'", PLAIN),
        ("SELECT \"a\\\" @x\"", PLAIN),
        ("SELECT 1 /* a /* b */ , @x", pin(PinReason::UserVariable)),
        ("SELECT get_lock FROM t", PLAIN),
        ("SELECT `GET_LOCK`", PLAIN),
    ]);
    let nbe = Dialect {
        no_backslash_escapes: true,
        ..Dialect::DEFAULT
    };
    assert_eq!(classify("SELECT 'a\\' , @x", nbe), pin(PinReason::UserVariable));
    assert_eq!(classify("SELECT 'a\\' , @x", D), PLAIN);
    let ansi = Dialect {
        ansi_quotes: true,
        ..Dialect::DEFAULT
    };
    assert_eq!(classify("SELECT \"a\\\" , @x", ansi), pin(PinReason::UserVariable));
}

#[test]
fn classify_all_splits() {
    assert_eq!(
        classify_all("SELECT 1; SET @x = 1; /* c */ ; COMMIT", D),
        vec![
            PLAIN,
            pin(PinReason::UserVariable),
            tx(TxCommand::Commit {
                chain: false,
                release: false
            })
        ]
    );
}

#[test]
fn transaction_boundaries_with_autocommit_off() {
    use gatehouse_sql::mysql::{TxBoundary, tx_boundary};
    let cases = [
        ("SELECT CONNECTION_ID()", TxBoundary::Within),
        ("INSERT INTO t VALUES (1)", TxBoundary::Within),
        ("COMMIT", TxBoundary::Ends),
        ("rollback work", TxBoundary::Ends),
        ("COMMIT AND CHAIN", TxBoundary::Within),
        ("ROLLBACK AND CHAIN", TxBoundary::Within),
        ("ROLLBACK TO SAVEPOINT a", TxBoundary::Within),
        ("SAVEPOINT a", TxBoundary::Within),
        ("BEGIN", TxBoundary::Within),
        ("START TRANSACTION READ ONLY", TxBoundary::Within),
        ("CREATE TABLE x (a INT)", TxBoundary::Ends),
        ("CREATE TEMPORARY TABLE x (a INT)", TxBoundary::Within),
        ("ALTER TABLE x ADD b INT", TxBoundary::Ends),
        ("DROP TABLE x", TxBoundary::Ends),
        ("TRUNCATE TABLE x", TxBoundary::Ends),
        ("RENAME TABLE x TO y", TxBoundary::Ends),
        ("GRANT SELECT ON x TO u", TxBoundary::Ends),
        ("ANALYZE TABLE x", TxBoundary::Ends),
        ("LOCK TABLES x WRITE", TxBoundary::Ends),
        ("SET time_zone = '+00:00'", TxBoundary::Neutral),
        ("SET autocommit = 0", TxBoundary::Neutral),
        ("USE db", TxBoundary::Neutral),
        ("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", TxBoundary::Neutral),
        ("SET PASSWORD = PASSWORD('x')", TxBoundary::Ends),
        ("XA START 'x'", TxBoundary::Within),
    ];
    for (sql, want) in cases {
        assert_eq!(tx_boundary(sql, &classify(sql, D), D), want, "{sql}");
    }
}
