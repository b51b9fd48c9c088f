//! Read/write routing of MySQL/MariaDB statements: a corpus in the shapes
//! ORMs and drivers send, each with the route it must get (the property
//! tests are in `mysql_route_props.rs`).

#![forbid(unsafe_code)]

#[path = "route_support/corpus.rs"]
mod corpus_table;

use corpus_table::corpus;

use gatehouse_sql::mysql::{Dialect, route, route_with, split_statements};
use gatehouse_sql::{Route, WriteReason};

/// `expected | statement`. A line starting with two spaces continues the
/// previous statement (after a newline); `#` at the start of a line starts
/// a comment line. Expected: `read`, `begin ro`, `begin rw`, or a
/// [`WriteReason::name`]. Statements are lexed with [`Dialect::DEFAULT`].
const CORPUS: &str = r##"
# Driver connect-time queries (Connector/J, MariaDB Connector, mysqlclient, mysql2, PyMySQL, go-sql-driver, mysql CLI)
read | /* mysql-connector-j-8.0.33 (Revision: 7d6b0800528b6b25c68b52dc10d6c1c8429c100c) */SELECT @@session.auto_increment_increment AS auto_increment_increment,
  @@character_set_client AS character_set_client, @@character_set_connection AS character_set_connection, @@character_set_results AS character_set_results,
  @@character_set_server AS character_set_server, @@collation_server AS collation_server, @@collation_connection AS collation_connection,
  @@init_connect AS init_connect, @@interactive_timeout AS interactive_timeout, @@license AS license, @@lower_case_table_names AS lower_case_table_names,
  @@max_allowed_packet AS max_allowed_packet, @@net_write_timeout AS net_write_timeout, @@performance_schema AS performance_schema,
  @@sql_mode AS sql_mode, @@system_time_zone AS system_time_zone, @@time_zone AS time_zone, @@transaction_isolation AS transaction_isolation, @@wait_timeout AS wait_timeout
read | SELECT @@max_allowed_packet
read | select @@version_comment limit 1
read | SELECT @@tx_isolation
read | SELECT @@session.transaction_isolation
read | SELECT @@session.transaction_read_only
read | SELECT @@SQL_AUTO_IS_NULL
read | SELECT @@FOREIGN_KEY_CHECKS
read | SELECT @@version, @@GLOBAL.version
read | SELECT @@global.max_connections
read | SELECT @@session.autocommit, @@global.time_zone, @@time_zone
read | SELECT @@session.`sql_mode`
read | SELECT DATABASE()
read | SELECT VERSION()
read | select version(), database(), user(), current_user()
read | SELECT DATABASE(), @@session.character_set_database
read | SHOW VARIABLES LIKE 'sql_mode'
read | SHOW SESSION VARIABLES LIKE 'lower_case_table_names'
read | SHOW VARIABLES WHERE Variable_name IN ('max_allowed_packet', 'system_time_zone', 'time_zone', 'auto_increment_increment')
read | SHOW GLOBAL STATUS LIKE 'Threads_connected'
read | SHOW COLLATION
read | SHOW CHARACTER SET
read | SHOW DATABASES
read | SHOW FULL TABLES FROM `app` LIKE 'users'
read | SHOW TABLES
read | SHOW FULL COLUMNS FROM `users`
read | SHOW FULL FIELDS FROM `users`
read | SHOW KEYS FROM `users`
read | SHOW INDEX FROM `users` FROM `app`
read | SHOW CREATE TABLE `users`
read | SHOW TABLE STATUS LIKE 'users'
read | SHOW PROCESSLIST
read | SHOW ENGINE INNODB STATUS
read | SHOW GRANTS FOR CURRENT_USER()
read | SHOW CREATE DATABASE app
read | SHOW GRANTS FOR 'app'@'%'
locks | SHOW VARIABLES WHERE GET_LOCK('x', 1)
side_effect_function | SHOW TABLES WHERE Tables_in_app = my_fn()
writer_only | SHOW VARIABLES WHERE Variable_name = 'read_only'
writer_only | select @@innodb_read_only
writer_only | SELECT @@global.read_only
writer_only | SELECT @@read_only, @@super_read_only
writer_only | SELECT @@server_id
writer_only | select @@hostname, @@port
writer_only | SHOW VARIABLES LIKE 'read_only'
writer_only | SHOW GLOBAL VARIABLES LIKE 'innodb_read_only'
writer_only | SHOW MASTER STATUS
writer_only | SHOW BINARY LOG STATUS
writer_only | SHOW SLAVE STATUS
writer_only | SHOW REPLICA STATUS
writer_only | SHOW ALL SLAVES STATUS
writer_only | SHOW BINARY LOGS
writer_only | SHOW BINLOG EVENTS IN 'mysql-bin.000001'
session_bound | SHOW WARNINGS
session_bound | SHOW COUNT(*) WARNINGS
session_bound | SHOW ERRORS LIMIT 10
session_bound | SHOW STATUS LIKE 'Ssl_cipher'
session_bound | SHOW SESSION STATUS LIKE 'Last_query_cost'
session_bound | SHOW PROFILES
session_bound | SELECT CONNECTION_ID()
session_state | SET NAMES utf8mb4
session_state | SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci
session_state | SET character_set_results = NULL
session_state | SET autocommit=1
session_state | SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED
session_state | SET @@SESSION.sql_mode = CONCAT(CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), ',NO_AUTO_VALUE_ON_ZERO')
session_state | /*!40101 SET NAMES utf8 */
session_state | SET @x = 1
session_state | SET sql_mode='STRICT_TRANS_TABLES', time_zone='+00:00'
session_state | SET TRANSACTION READ ONLY
session_state | USE `app`
# Django (mysqlclient)
read | SELECT `auth_user`.`id`, `auth_user`.`password`, `auth_user`.`username` FROM `auth_user` WHERE `auth_user`.`username` = 'alice' LIMIT 21
read | SELECT COUNT(*) AS `__count` FROM `blog_post`
read | SELECT (1) AS `a` FROM `django_session` WHERE `django_session`.`session_key` = 'x' LIMIT 1
read | SELECT engine FROM information_schema.tables WHERE table_name = 'blog_post'
read | SELECT table_name, table_type, table_comment FROM information_schema.tables WHERE table_schema = DATABASE()
read | SELECT column_name, data_type, character_maximum_length, numeric_precision, numeric_scale, extra, column_default,
  CASE WHEN collation_name = 'x' THEN NULL ELSE collation_name END AS collation_name,
  CASE WHEN column_type LIKE '%% unsigned' THEN 1 ELSE 0 END AS is_unsigned
  FROM information_schema.columns WHERE table_name = 'blog_post' AND table_schema = DATABASE()
read | SELECT `blog_post`.`id` FROM `blog_post` WHERE `blog_post`.`title` LIKE BINARY '%foo%'
read | SELECT DATE_FORMAT(CONVERT_TZ(`blog_post`.`created`, 'UTC', 'Europe/Paris'), '%Y-%m-01 00:00:00') AS `month`, COUNT(`blog_post`.`id`) AS `n` FROM `blog_post` GROUP BY 1 ORDER BY NULL
read | SELECT JSON_UNQUOTE(JSON_EXTRACT(`blog_post`.`data`, '$."author"')) AS `author` FROM `blog_post`
locks | SELECT `shop_order`.`id` FROM `shop_order` WHERE `shop_order`.`id` = 42 FOR UPDATE
locks | SELECT `shop_order`.`id` FROM `shop_order` WHERE `shop_order`.`status` = 'new' FOR UPDATE SKIP LOCKED
locks | SELECT `shop_order`.`id` FROM `shop_order` WHERE `shop_order`.`id` = 1 FOR UPDATE NOWAIT
locks | SELECT `shop_order`.`id` FROM `shop_order` INNER JOIN `shop_customer` ON (`shop_order`.`customer_id` = `shop_customer`.`id`) FOR UPDATE OF `shop_order`
locks | SELECT `shop_order`.`id` FROM `shop_order` FOR SHARE
modifies | INSERT INTO `blog_post` (`title`) VALUES ('x')
modifies | UPDATE `blog_post` SET `title` = 'y' WHERE `blog_post`.`id` = 1
modifies | DELETE FROM `django_session` WHERE `django_session`.`expire_date` < '2024-01-01 00:00:00'
session_bound | SELECT LAST_INSERT_ID()
# Rails (mysql2)
read | SELECT `users`.* FROM `users` WHERE `users`.`id` = 1 LIMIT 1
read | SELECT 1 AS one FROM `users` WHERE `users`.`email` = BINARY 'a@b.c' LIMIT 1
read | SELECT `schema_migrations`.`version` FROM `schema_migrations` ORDER BY `schema_migrations`.`version` ASC
read | SELECT column_name FROM information_schema.statistics WHERE index_name = 'PRIMARY' AND table_schema = database() AND table_name = 'users' ORDER BY seq_in_index
read | SELECT table_name FROM information_schema.tables WHERE table_schema = database() AND table_name = 'users' AND table_type = 'BASE TABLE'
read | SELECT COUNT(*) FROM `users` WHERE `users`.`deleted_at` IS NULL
read | SELECT `posts`.* FROM `posts` INNER JOIN `users` ON `users`.`id` = `posts`.`user_id` WHERE `users`.`active` = TRUE ORDER BY `posts`.`created_at` DESC LIMIT 10 OFFSET 20
locks | SELECT GET_LOCK('6b1f3d6d1a3c2c5e', 0)
locks | SELECT RELEASE_LOCK('6b1f3d6d1a3c2c5e')
locks | SELECT IS_FREE_LOCK('x')
locks | SELECT `users`.* FROM `users` WHERE `users`.`id` = 1 LIMIT 1 FOR UPDATE
modifies | INSERT INTO `users` (`email`, `created_at`, `updated_at`) VALUES ('a@b.c', '2024-01-01 00:00:00', '2024-01-01 00:00:00')
modifies | UPDATE `users` SET `users`.`sign_in_count` = COALESCE(`users`.`sign_in_count`, 0) + 1 WHERE `users`.`id` = 1
# Hibernate
locks | select next_val as id_val from hibernate_sequence for update
modifies | update hibernate_sequence set next_val= ? where next_val=?
read | select u1_0.id,u1_0.email from users u1_0 where u1_0.id=?
read | select count(*) from users u1_0 where u1_0.name like ? escape '!'
read | select o1_0.id from orders o1_0 join users u1_0 on u1_0.id=o1_0.user_id order by o1_0.id limit ?,?
locks | select u1_0.id from users u1_0 where u1_0.id=? for update
locks | select u1_0.id from users u1_0 where u1_0.id=? lock in share mode
locks | select u1_0.id from users u1_0 where u1_0.id=? for update skip locked
modifies | insert into users (email,name,id) values (?,?,?)
modifies | delete from users where id=?
# SQLAlchemy / PyMySQL
read | SELECT CAST('test plain returns' AS CHAR(60)) AS anon_1
read | SELECT CAST('test collated returns' AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_bin AS anon_1
read | SHOW VARIABLES LIKE 'lower_case_table_names'
read | SELECT users.id, users.name FROM users WHERE users.id = %(pk_1)s
read | DESCRIBE `users`
read | SELECT anon_1.id FROM (SELECT users.id AS id, row_number() OVER (PARTITION BY users.team_id ORDER BY users.score DESC) AS rn FROM users) AS anon_1 WHERE anon_1.rn <= %(param_1)s
locks | SELECT users.id FROM users WHERE users.id = %(id_1)s FOR UPDATE
modifies | INSERT INTO users (name) VALUES (%(name)s)
# Prisma
read | SELECT `app`.`User`.`id`, `app`.`User`.`email` FROM `app`.`User` WHERE (`app`.`User`.`email` = ? AND 1=1) LIMIT ? OFFSET ?
read | SELECT COUNT(*) AS `_count._all` FROM (SELECT `app`.`Post`.`id` FROM `app`.`Post` WHERE 1=1 ORDER BY `app`.`Post`.`id` ASC LIMIT ? OFFSET ?) AS `sub`
read | SELECT DISTINCT table_name AS table_name, create_options AS create_options FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE' ORDER BY Binary table_name
locks | SELECT GET_LOCK(?, 10)
modifies | INSERT INTO `app`.`User` (`email`,`name`) VALUES (?,?)
# Sequelize
read | SELECT `id`, `name` FROM `Users` AS `User` WHERE `User`.`id` = 1;
read | SELECT TABLE_NAME, TABLE_SCHEMA FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA = 'app'
read | SELECT CONSTRAINT_NAME as constraint_name, CONSTRAINT_NAME as constraintName, CONSTRAINT_SCHEMA as constraintSchema, TABLE_NAME as tableName,
  COLUMN_NAME as columnName, REFERENCED_TABLE_NAME as referencedTableName FROM INFORMATION_SCHEMA.KEY_COLUMN_USAGE
  where TABLE_NAME = 'Users' AND CONSTRAINT_NAME!='PRIMARY' AND CONSTRAINT_SCHEMA='app' AND REFERENCED_TABLE_NAME IS NOT NULL;
modifies | INSERT INTO `Users` (`id`,`name`,`createdAt`,`updatedAt`) VALUES (DEFAULT,?,?,?);
locks | SELECT `id` FROM `Users` AS `User` WHERE `User`.`id` = 1 FOR UPDATE;
# GORM
read | SELECT * FROM `users` WHERE `users`.`deleted_at` IS NULL ORDER BY `users`.`id` LIMIT 1
read | SELECT SCHEMA_NAME from Information_schema.SCHEMATA where SCHEMA_NAME LIKE ? ORDER BY SCHEMA_NAME=? DESC,SCHEMA_NAME limit 1
read | SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ? AND table_type = ?
read | SELECT column_name, column_default, is_nullable = 'YES', data_type, character_maximum_length, column_type, column_key, extra, column_comment,
  numeric_precision, numeric_scale , datetime_precision FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ORDINAL_POSITION
locks | SELECT * FROM `users` WHERE `users`.`id` = ? ORDER BY `users`.`id` LIMIT 1 FOR UPDATE
modifies | UPDATE `users` SET `name`=?,`updated_at`=? WHERE `users`.`deleted_at` IS NULL AND `id` = ?
# Laravel
read | select * from `users` where `email` = ? and `users`.`deleted_at` is null limit 1
read | select exists(select * from `users` where `email` = ?) as `exists`
read | select count(*) as aggregate from `users`
locks | select * from `jobs` where `queue` = ? and ((`reserved_at` is null and `available_at` <= ?) or (`reserved_at` <= ?)) order by `id` asc limit 1 for update skip locked
# Transactions
begin rw | BEGIN
begin rw | BEGIN WORK
begin rw | START TRANSACTION
begin rw | START TRANSACTION WITH CONSISTENT SNAPSHOT
begin rw | START TRANSACTION READ WRITE
begin rw | START TRANSACTION READ ONLY, READ WRITE
begin ro | START TRANSACTION READ ONLY
begin ro | start transaction read only;
begin ro | START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY
begin ro | START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT
begin ro | /* app */ START TRANSACTION /* x */ READ ONLY
unknown | BEGIN NOT ATOMIC SELECT 1; END
unknown | START TRANSACTION READ ONLY; DELETE FROM t
unknown | START TRANSACTION READ SOMETIMES
transaction_control | COMMIT
transaction_control | ROLLBACK
transaction_control | COMMIT AND CHAIN
transaction_control | SAVEPOINT s1
transaction_control | ROLLBACK TO SAVEPOINT s1
transaction_control | RELEASE SAVEPOINT s1
transaction_control | XA START 'x'
transaction_control | XA COMMIT 'x'
# Locking reads
locks | SELECT * FROM t WHERE id = 1 FOR UPDATE
locks | SELECT * FROM t WHERE id = 1 FOR SHARE
locks | SELECT * FROM t WHERE id = 1 LOCK IN SHARE MODE
locks | SELECT * FROM t FOR UPDATE WAIT 5
locks | SELECT * FROM t FOR SHARE OF t NOWAIT
locks | SELECT * FROM t1 JOIN t2 USING (id) FOR UPDATE OF t1 SKIP LOCKED
locks | (SELECT * FROM t FOR UPDATE)
locks | SELECT 1 FROM t # comment
  FOR UPDATE
locks | SELECT * FROM t /*!50000 FOR UPDATE */
locks | SELECT * FROM t /*M!100100 LOCK IN SHARE MODE */
locks | LOCK TABLES t WRITE
locks | UNLOCK TABLES
# INTO and user variables
session_bound | SELECT id INTO @id FROM t WHERE x = 1
session_bound | SELECT COUNT(*) FROM t INTO @n
modifies | SELECT * FROM t INTO OUTFILE '/tmp/t.csv'
modifies | SELECT * INTO DUMPFILE '/tmp/blob' FROM t LIMIT 1
modifies | SELECT a INTO OUTFILE '/tmp/x' FIELDS TERMINATED BY ',' FROM t
modifies | SELECT a INTO v_a FROM t LIMIT 1
session_bound | SELECT @x
session_bound | SELECT @rownum := @rownum + 1 AS rank, name FROM users, (SELECT @rownum := 0) r
session_bound | SELECT * FROM t WHERE id = @id
session_bound | SELECT @`my var`, @'x'
session_bound | SELECT @@identity
session_bound | SELECT @@last_insert_id
session_bound | SELECT @@warning_count, @@error_count
session_bound | SELECT @@in_transaction
session_bound | SELECT a FROM t WHERE b=c@x
# Functions and sequences
session_bound | SELECT ROW_COUNT()
session_bound | SELECT FOUND_ROWS()
session_bound | SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 10
side_effect_function | SELECT UUID_SHORT()
side_effect_function | SELECT NEXTVAL(s)
side_effect_function | SELECT NEXT VALUE FOR s
side_effect_function | SELECT nextval(`app`.`s`)
side_effect_function | SELECT SETVAL(s, 100)
side_effect_function | SELECT s.nextval
modifies | INSERT INTO t VALUES (NEXT VALUE FOR s)
session_bound | SELECT LASTVAL(s)
session_bound | SELECT PREVIOUS VALUE FOR s
session_bound | SELECT s.currval
side_effect_function | SELECT my_stored_fn(1)
side_effect_function | SELECT app.audit(1)
side_effect_function | SELECT `lower`('A')
side_effect_function | SELECT LOAD_FILE('/etc/hosts')
side_effect_function | SELECT * FROM t x (a)
locks | SELECT GET_LOCK('x', 10), RELEASE_LOCK('x')
locks | SELECT RELEASE_ALL_LOCKS()
locks | SELECT IS_USED_LOCK('x')
writer_only | SELECT MASTER_POS_WAIT('log.000001', 4)
read | SELECT SLEEP(1)
read | SELECT BENCHMARK(1000, MD5('x'))
read | SELECT UUID(), RAND(), NOW(), CURDATE(), UTC_TIMESTAMP(), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP(6)
read | SELECT IFNULL(a, 0), IF(b > 0, 'y', 'n'), COALESCE(c, d), NULLIF(e, ''), GREATEST(1, 2), LEAST(3, 4) FROM t
read | SELECT DATE_FORMAT(created_at, '%Y-%m'), DATE_ADD(created_at, INTERVAL 1 DAY), TIMESTAMPDIFF(SECOND, a, b), UNIX_TIMESTAMP(), FROM_UNIXTIME(0) FROM t
read | SELECT JSON_EXTRACT(doc, '$.a'), doc->'$.b', doc->>'$.c', JSON_OBJECT('k', 1), JSON_ARRAYAGG(id) FROM t
read | SELECT GROUP_CONCAT(DISTINCT name ORDER BY name SEPARATOR ', ') FROM t GROUP BY g
read | SELECT CONCAT(first, ' ', last), CONCAT_WS(',', a, b), SUBSTRING(name, 1, 3), LOWER(email), UPPER(code), LENGTH(x), CHAR_LENGTH(y), TRIM(z) FROM t
read | SELECT CAST(a AS DECIMAL(10,2)), CONVERT(b, CHAR(10)), CONVERT(c USING utf8mb4), CAST(d AS UNSIGNED) FROM t
read | SELECT ROW_NUMBER() OVER w, RANK() OVER (PARTITION BY g ORDER BY s DESC), LAG(x) OVER w FROM t WINDOW w AS (ORDER BY id)
read | SELECT * FROM t WHERE MATCH (title, body) AGAINST ('+foo -bar' IN BOOLEAN MODE)
read | SELECT * FROM t USE INDEX (idx_a) WHERE a = 1
read | SELECT * FROM t FORCE INDEX FOR JOIN (idx_b) JOIN u ON u.id = t.u_id
read | SELECT * FROM t PARTITION (p0, p1)
read | SELECT id FROM t WHERE id IN (SELECT id FROM u) AND EXISTS (SELECT 1 FROM v WHERE v.id = t.id)
read | SELECT 3 MEMBER OF('[1,2,3]'), INTERVAL(5, 1, 10), CHAR(77 USING utf8mb4)
read | SELECT * FROM JSON_TABLE('[{"a":1}]', '$[*]' COLUMNS (rowid FOR ORDINALITY, a INT PATH '$.a')) AS jt
read | SELECT ST_Distance_Sphere(point(0, 0), point(1, 1))
read | SELECT a DIV (b), MOD(a, 2), a XOR (b) FROM t
read | SELECT INSERT('Quadratic', 3, 4, 'What'), REPLACE('abc', 'b', 'x')
read | SELECT /*+ MAX_EXECUTION_TIME(1000) */ * FROM t
# Queries of other shapes
read | SELECT * FROM (SELECT 1, 2) AS t (a, b)
read | VALUES ROW(1, 2), ROW(3, 4)
read | TABLE t
read | TABLE t ORDER BY id LIMIT 2
read | WITH RECURSIVE cte (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM cte WHERE n < 5) SELECT * FROM cte
read | WITH a AS (SELECT 1 AS x), b (y) AS (SELECT 2) SELECT * FROM a, b
read | SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 00:00:00'
read | (SELECT a FROM t) UNION (SELECT a FROM u) ORDER BY a
read | SELECT 1;
modifies | WITH x AS (SELECT id FROM t WHERE stale) DELETE t FROM t JOIN x USING (id)
modifies | WITH x AS (SELECT 1 AS id) UPDATE t JOIN x USING (id) SET t.n = 0
unknown | SELECT 1; DELETE FROM t
unknown | SELECT 1; SELECT 2
unknown | SHOW TABLES; DROP TABLE t
# Decoys: strings, quoted identifiers, comments
read | SELECT 'FOR UPDATE', "LOCK IN SHARE MODE" FROM t
read | SELECT 'GET_LOCK(''x'', 1)' AS s
read | SELECT `get_lock`, `nextval`, `update`, `into` FROM t
read | SELECT get_lock FROM t
read | SELECT t.update, t.delete, t.insert FROM t
read | SELECT 1 -- FOR UPDATE
read | SELECT 1 # ; DELETE FROM t
read | SELECT 1 /* FOR UPDATE */
read | /* leading */ SELECT 1
read | # leading comment
  SELECT 1
read | SELECT 'it\'s FOR UPDATE' AS s
read | SELECT "a\" FOR UPDATE" AS s
read | SELECT 1 FROM t WHERE note = 'SELECT @x := 1'
read | SELECT 'user@example.com' AS email, `@x` FROM t
read | SELECT updated_at, deleted, inserted_by FROM t
# EXPLAIN, DESCRIBE, ANALYZE
read | EXPLAIN SELECT * FROM t
read | EXPLAIN FORMAT=JSON SELECT * FROM t WHERE id = 1
read | EXPLAIN ANALYZE SELECT * FROM t
read | EXPLAIN EXTENDED SELECT 1
read | DESCRIBE users
read | DESC `users`
read | DESC users email
read | EXPLAIN users
modifies | EXPLAIN UPDATE t SET a = 1
modifies | EXPLAIN ANALYZE DELETE FROM t WHERE id = 1
modifies | EXPLAIN FORMAT=TREE INSERT INTO t VALUES (1)
locks | EXPLAIN SELECT * FROM t FOR UPDATE
session_bound | EXPLAIN FOR CONNECTION 42
session_bound | EXPLAIN FORMAT=JSON INTO @plan SELECT 1
unknown | EXPLAIN
read | ANALYZE SELECT * FROM t
read | ANALYZE FORMAT=JSON SELECT * FROM t WHERE a = 1
modifies | ANALYZE UPDATE t SET a = 1
modifies | ANALYZE TABLE t
modifies | ANALYZE NO_WRITE_TO_BINLOG TABLE t
# Other statements
modifies | INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a)
modifies | REPLACE INTO t VALUES (1)
modifies | INSERT INTO t SELECT * FROM u
modifies | CREATE TABLE t (id INT PRIMARY KEY)
modifies | CREATE TEMPORARY TABLE tmp (id INT)
modifies | ALTER TABLE t ADD COLUMN c INT
modifies | DROP TABLE IF EXISTS t
modifies | TRUNCATE TABLE t
modifies | RENAME TABLE a TO b
modifies | GRANT SELECT ON app.* TO 'u'@'%'
modifies | LOAD DATA LOCAL INFILE '/tmp/x.csv' INTO TABLE t
modifies | OPTIMIZE TABLE t
modifies | FLUSH PRIVILEGES
modifies | CREATE PROCEDURE p() BEGIN SELECT 1; END
session_state | PREPARE s FROM 'SELECT 1'
session_state | EXECUTE s USING @a
session_state | DEALLOCATE PREPARE s
session_state | HANDLER t OPEN
session_bound | GET DIAGNOSTICS @n = NUMBER
unknown | CALL refresh_stats()
unknown | DO SLEEP(1)
unknown | DO GET_LOCK('x', 0)
unknown | KILL QUERY 42
unknown |
unknown | ;
unknown | /* only a comment */
unknown | -- only a comment
unknown | hello world
unknown | (DELETE FROM t)
unknown | 'SELECT 1'
"##;

/// The expected route for a corpus label.
const ANSI: Dialect = Dialect {
    ansi_quotes: true,
    no_backslash_escapes: false,
};
const NO_BACKSLASH: Dialect = Dialect {
    ansi_quotes: false,
    no_backslash_escapes: true,
};

#[test]
fn corpus_statements_route_as_expected() {
    let cases = corpus(CORPUS);
    assert!(cases.len() >= 250, "corpus has only {} statements", cases.len());
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|(sql, want, line)| {
            let got = route(sql, Dialect::DEFAULT);
            (got != *want).then(|| format!("line {line}: want {want:?}, got {got:?}: {sql}"))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} statements mismatched:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}

#[test]
fn corpus_reads_stay_reads_after_splitting() {
    for (sql, want, line) in corpus(CORPUS) {
        if want == Route::Read {
            for piece in split_statements(&sql, Dialect::DEFAULT) {
                assert_eq!(route(piece, Dialect::DEFAULT), Route::Read, "line {line}: {piece}");
            }
        }
    }
}

#[test]
fn dialect_decides_what_is_a_string() {
    let locks = Route::Write(WriteReason::Locks);
    assert_eq!(route("SELECT \"get_lock\" FROM t", ANSI), Route::Read);
    assert_eq!(route("SELECT \"get_lock\"('x', 1)", ANSI), locks);
    assert_eq!(route("SELECT \"a\" FROM t FOR UPDATE", ANSI), locks);
    assert_eq!(route("SELECT 'a\\' FOR UPDATE", NO_BACKSLASH), locks);
    assert_eq!(route("SELECT 'a\\' FOR UPDATE'", Dialect::DEFAULT), Route::Read);
    assert_eq!(route("SELECT \"x\\\" FOR UPDATE\"", Dialect::DEFAULT), Route::Read);
}

#[test]
fn operator_listed_functions_are_reads() {
    let ro = ["my_fn", "App.Report"];
    let d = Dialect::DEFAULT;
    assert_eq!(route_with("SELECT my_fn(1)", d, &ro), Route::Read);
    assert_eq!(route_with("SELECT MY_FN(1), `my_fn`(2)", d, &ro), Route::Read);
    assert_eq!(route_with("SELECT app.report(1)", d, &ro), Route::Read);
    assert_eq!(route_with("SELECT `app`.`report`(1)", d, &ro), Route::Read);
    let effect = Route::Write(WriteReason::SideEffectFunction);
    assert_eq!(route_with("SELECT other.my_fn(1)", d, &ro), effect);
    assert_eq!(route_with("SELECT report(1)", d, &ro), effect);
    assert_eq!(route_with("SELECT NEXTVAL(s)", d, &["nextval"]), effect);
    assert_eq!(
        route_with("SELECT my_fn(@x)", d, &ro),
        Route::Write(WriteReason::SessionBound)
    );
}
