//! Read/write routing of PostgreSQL statements: a corpus in the shapes ORMs
//! and drivers send, each with the route it must get (the property tests are in
//! `route_props.rs`).

#![forbid(unsafe_code)]

#[path = "route_support/corpus.rs"]
mod corpus_table;

use corpus_table::corpus;

use gatehouse_sql::{Route, WriteReason, route, route_with, split_statements};

/// `expected | statement`. A line starting with two spaces continues the
/// previous statement (after a newline); `#` starts a comment line.
/// Expected: `read`, `begin ro`, `begin rw`, or a [`WriteReason::name`].
const CORPUS: &str = r##"
# Driver connect-time queries and introspection (pgjdbc, libpq, psycopg, asyncpg, npgsql)
read | SELECT version()
read | select pg_catalog.version()
read | SHOW TRANSACTION ISOLATION LEVEL
read | show standard_conforming_strings
read | SHOW server_version
read | SHOW search_path
read | show "search_path"
read | SHOW ALL
read | SHOW TIME ZONE
read | select current_schema()
read | SELECT current_database()
read | SELECT current_setting('server_version_num')::integer
read | select current_schemas(false)
read | SELECT oid, typname FROM pg_type WHERE typname IN ('hstore', 'citext')
read | SELECT t.oid, typarray FROM pg_type t JOIN pg_namespace ns ON typnamespace = ns.oid WHERE typname = 'hstore'
read | SELECT n.nspname = ANY(current_schemas(true)), n.nspname, t.typname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid WHERE t.oid = $1
read | SELECT e.typdelim FROM pg_catalog.pg_type t, pg_catalog.pg_type e WHERE t.oid = $1 and t.typelem = e.oid
read | SELECT t.typname, t.oid FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON (t.typnamespace = n.oid) WHERE n.nspname != 'pg_toast' AND (t.typrelid = 0 OR (SELECT c.relkind = 'c' FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid))
read | SELECT typinput='pg_catalog.array_in'::regproc as is_array, typtype, typname, pg_type.oid FROM pg_catalog.pg_type
  LEFT JOIN (select ns.oid as nspoid, ns.nspname, r.r from pg_namespace as ns
  join ( select s.r, (current_schemas(false))[s.r] as nspname from generate_series(1, array_upper(current_schemas(false), 1)) as s(r) ) as r
  using ( nspname ) ) as sp ON sp.nspoid = typnamespace WHERE pg_type.oid = $1 ORDER BY sp.r, pg_type.oid DESC
read | SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, ct.relname AS TABLE_NAME, a.attname AS COLUMN_NAME,
  (information_schema._pg_expandarray(i.indkey)).n AS KEY_SEQ, ci.relname AS PK_NAME,
  information_schema._pg_expandarray(i.indkey) AS KEYS, a.attnum AS A_ATTNUM
  FROM pg_catalog.pg_class ct JOIN pg_catalog.pg_attribute a ON (ct.oid = a.attrelid)
  JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid) JOIN pg_catalog.pg_index i ON ( a.attrelid = i.indrelid)
  JOIN pg_catalog.pg_class ci ON (ci.oid = i.indexrelid) WHERE true AND ct.relname = E'users' AND i.indisprimary
read | SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,
  row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,
  pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype
  FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)
  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)
  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')
  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped AND c.relname LIKE E'users'
read | SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,
  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema' WHEN true THEN CASE WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN 'SYSTEM TABLE' ELSE NULL END ELSE NULL END AS TABLE_TYPE,
  d.description AS REMARKS, '' as TYPE_CAT FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c
  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0 and d.classoid = 'pg_class'::regclass)
  WHERE c.relnamespace = n.oid AND c.relname LIKE 'users' ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME
read | WITH RECURSIVE typeinfo_tree(oid, ns, name, kind, basetype, elemtype, elemdelim, range_subtype, attrtypoids, attrnames, depth) AS (
  SELECT ti.oid, ti.ns, ti.name, ti.kind, ti.basetype, ti.elemtype, ti.elemdelim, ti.range_subtype, ti.attrtypoids, ti.attrnames, 0
  FROM (SELECT t.oid AS oid, ns.nspname AS ns, t.typname AS name, t.typtype AS kind,
  (CASE WHEN t.typtype = 'd' THEN (WITH RECURSIVE typebases(oid, depth) AS (SELECT t2.typbasetype AS oid, 0 AS depth FROM pg_type t2 WHERE t2.oid = t.oid
  UNION ALL SELECT t2.typbasetype AS oid, tb.depth + 1 AS depth FROM pg_type t2, typebases tb WHERE tb.oid = t2.oid AND t2.typbasetype != 0)
  SELECT oid FROM typebases ORDER BY depth DESC LIMIT 1) ELSE NULL END) AS basetype, t.typelem AS elemtype, elem_t.typdelim AS elemdelim,
  range_t.rngsubtype AS range_subtype,
  (CASE WHEN t.typtype = 'c' THEN (SELECT array_agg(ia.atttypid ORDER BY ia.attnum) FROM pg_attribute ia INNER JOIN pg_class c ON (ia.attrelid = c.oid)
  WHERE ia.attnum > 0 AND NOT ia.attisdropped AND c.reltype = t.oid) ELSE NULL END) AS attrtypoids,
  (CASE WHEN t.typtype = 'c' THEN (SELECT array_agg(ia.attname::text ORDER BY ia.attnum) FROM pg_attribute ia INNER JOIN pg_class c ON (ia.attrelid = c.oid)
  WHERE ia.attnum > 0 AND NOT ia.attisdropped AND c.reltype = t.oid) ELSE NULL END) AS attrnames
  FROM pg_catalog.pg_type AS t INNER JOIN pg_catalog.pg_namespace ns ON (ns.oid = t.typnamespace)
  LEFT JOIN pg_type elem_t ON (t.typlen = -1 AND t.typelem != 0 AND t.typelem = elem_t.oid)
  LEFT JOIN pg_range range_t ON (t.oid = range_t.rngtypid)) AS ti WHERE ti.oid = any($1::oid[])
  UNION ALL SELECT ti.oid, ti.ns, ti.name, ti.kind, ti.basetype, ti.elemtype, ti.elemdelim, ti.range_subtype, ti.attrtypoids, ti.attrnames, tt.depth + 1
  FROM typeinfo_tree tt, pg_type ti WHERE ti.oid = tt.elemtype)
  SELECT DISTINCT *, basetype::regtype::text AS basetype_name, elemtype::regtype::text AS elemtype_name FROM typeinfo_tree ORDER BY depth DESC
read | SELECT t.typname AS name, t.oid AS oid, t.typarray AS array_oid, t.oid::regtype::text AS regtype, coalesce(a.typdelim, ',') AS delimiter
  FROM pg_type t LEFT JOIN pg_type a ON a.oid = t.typarray WHERE t.oid = %(name)s::regtype
read | SELECT ns.nspname, typ.oid, typ.typname, typ.typtype, typ.typrelid, typ.typnotnull, typ.relkind, elemtyp.oid AS elemtypoid,
  CASE WHEN proc.proname='array_recv' THEN 'a' ELSE elemtyp.typtype END AS elemtyptype
  FROM (SELECT typ.oid, typnamespace, typname, typrelid, typnotnull, relkind, typelem AS elemoid,
  CASE WHEN proc.proname='array_recv' THEN typ.typelem WHEN typ.typtype='r' THEN rngsubtype WHEN typ.typtype='d' THEN typ.typbasetype END AS elemtypoid
  FROM pg_type AS typ LEFT JOIN pg_class AS cls ON (cls.oid = typ.typrelid) LEFT JOIN pg_proc AS proc ON proc.oid = typ.typreceive
  LEFT JOIN pg_range ON (pg_range.rngtypid = typ.oid)) AS typ LEFT JOIN pg_namespace AS ns ON (ns.oid = typnamespace)
  WHERE typ.typtype IN ('b', 'r', 'm', 'e', 'd') OR (typ.typtype = 'c' AND typ.relkind='c') ORDER BY ord
writer_only | SHOW transaction_read_only
writer_only | show TRANSACTION_READ_ONLY
writer_only | SHOW in_hot_standby
writer_only | SELECT pg_catalog.pg_is_in_recovery()
writer_only | select pg_is_in_recovery()
writer_only | SELECT current_setting('transaction_read_only')
session_bound | SELECT pg_backend_pid()
session_state | SET extra_float_digits = 3
session_state | SET application_name = 'PostgreSQL JDBC Driver'
session_state | SET DateStyle = 'ISO'
session_state | SET TIME ZONE 'UTC'
session_state | set client_encoding to 'UTF8'
session_state | SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY
session_state | SET TRANSACTION ISOLATION LEVEL SERIALIZABLE
session_state | RESET ALL
session_state | DISCARD ALL
# Django
read | SELECT "auth_user"."id", "auth_user"."password", "auth_user"."last_login" FROM "auth_user" WHERE "auth_user"."username" = 'alice' LIMIT 21
read | SELECT COUNT(*) AS "__count" FROM "blog_post" WHERE "blog_post"."published" IS NOT NULL
read | SELECT (1) AS "a" FROM "django_session" WHERE "django_session"."session_key" = 'abc' LIMIT 1
read | SELECT "django_migrations"."id", "django_migrations"."app", "django_migrations"."name", "django_migrations"."applied" FROM "django_migrations"
read | SELECT c.relname, CASE WHEN c.relispartition THEN 'p' WHEN c.relkind IN ('m', 'v') THEN 'v' ELSE 't' END, obj_description(c.oid, 'pg_class')
  FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('f', 'm', 'p', 'r', 'v') AND n.nspname NOT IN ('pg_catalog', 'pg_toast') AND pg_catalog.pg_table_is_visible(c.oid)
read | SELECT "blog_post"."id" FROM "blog_post" WHERE UPPER("blog_post"."title"::text) LIKE UPPER('%foo%')
read | SELECT DATE_TRUNC('day', "blog_post"."created" AT TIME ZONE 'UTC') AS "day", COUNT("blog_post"."id") AS "n" FROM "blog_post" GROUP BY 1 ORDER BY 1
read | SELECT "a"."id", EXISTS(SELECT 1 AS "a" FROM "b" U0 WHERE U0."a_id" = ("a"."id") LIMIT 1) AS "has_b" FROM "a"
read | SELECT "blog_post"."id", "blog_post"."tags" FROM "blog_post" WHERE "blog_post"."tags" @> ARRAY['x']::varchar(20)[]
read | SELECT "blog_post"."data" -> 'author' ->> 'name' AS "author" FROM "blog_post" WHERE ("blog_post"."data" -> 'n') = '1'::jsonb
locks | SELECT "shop_order"."id", "shop_order"."status" FROM "shop_order" WHERE "shop_order"."id" = 42 FOR UPDATE
locks | SELECT "shop_order"."id" FROM "shop_order" WHERE "shop_order"."status" = 'new' FOR UPDATE SKIP LOCKED
locks | SELECT "shop_order"."id" FROM "shop_order" WHERE "shop_order"."id" = 1 FOR UPDATE NOWAIT
locks | SELECT "shop_order"."id" FROM "shop_order" INNER JOIN "shop_customer" ON ("shop_order"."customer_id" = "shop_customer"."id") FOR UPDATE OF "shop_order"
locks | SELECT "shop_order"."id" FROM "shop_order" FOR NO KEY UPDATE
modifies | INSERT INTO "blog_post" ("title", "body") VALUES ('hi', 'there') RETURNING "blog_post"."id"
modifies | UPDATE "blog_post" SET "title" = 'x' WHERE "blog_post"."id" = 1
modifies | DELETE FROM "django_session" WHERE "django_session"."expire_date" < '2024-01-01'
side_effect_function | SELECT setval(pg_get_serial_sequence('"blog_post"','id'), coalesce(max("id"), 1), max("id") IS NOT null) FROM "blog_post"
# Rails / ActiveRecord
read | SELECT "users".* FROM "users" WHERE "users"."id" = $1 LIMIT $2
read | SELECT 1 AS one FROM "users" WHERE "users"."email" = $1 LIMIT $2
read | SELECT "schema_migrations"."version" FROM "schema_migrations" ORDER BY "schema_migrations"."version" ASC
read | SELECT "ar_internal_metadata"."value" FROM "ar_internal_metadata" WHERE "ar_internal_metadata"."key" = $1 LIMIT $2
read | SELECT a.attname, format_type(a.atttypid, a.atttypmod), pg_get_expr(d.adbin, d.adrelid), a.attnotnull, a.atttypid, a.atttypmod,
  c.collname, col_description(a.attrelid, a.attnum) AS comment, attidentity AS identity, attgenerated as attgenerated
  FROM pg_attribute a LEFT JOIN pg_attrdef d ON a.attrelid = d.adrelid AND a.attnum = d.adnum
  LEFT JOIN pg_type t ON a.atttypid = t.oid LEFT JOIN pg_collation c ON a.attcollation = c.oid AND a.attcollation <> t.typcollation
  WHERE a.attrelid = '"users"'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
read | SELECT t.oid, t.typname FROM pg_type as t WHERE t.typname IN ('int2', 'int4', 'int8', 'oid', 'float4', 'float8', 'numeric', 'bool')
read | SELECT t.oid, t.typname, t.typelem, t.typdelim, t.typinput, r.rngsubtype, t.typtype, t.typbasetype FROM pg_type as t LEFT JOIN pg_range as r ON oid = rngtypid WHERE t.typtype IN ('r', 'e', 'd')
read | SELECT c.relname FROM pg_class c LEFT JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ANY (current_schemas(false)) AND c.relkind IN ('r','p')
read | SELECT "posts".* FROM "posts" INNER JOIN "users" ON "users"."id" = "posts"."user_id" WHERE "users"."active" = $1 ORDER BY "posts"."created_at" DESC LIMIT $2 OFFSET $3
read | SELECT COUNT(*) FROM "users" WHERE "users"."deleted_at" IS NULL
read | SELECT "users"."id" FROM "users" WHERE "users"."id" IN (SELECT "memberships"."user_id" FROM "memberships" WHERE "memberships"."team_id" = $1)
read | SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'users' AND schemaname = ANY (current_schemas(false))
locks | SELECT pg_try_advisory_lock(5551110519432462435)
locks | SELECT pg_advisory_unlock(5551110519432462435)
locks | SELECT "users".* FROM "users" WHERE "users"."id" = $1 LIMIT $2 FOR UPDATE
modifies | INSERT INTO "users" ("email", "created_at", "updated_at") VALUES ($1, $2, $3) RETURNING "id"
modifies | UPDATE "users" SET "sign_in_count" = COALESCE("sign_in_count", 0) + $1 WHERE "users"."id" = $2
# Hibernate
side_effect_function | select nextval('hibernate_sequence')
side_effect_function | select nextval('users_seq')
read | select u1_0.id,u1_0.email,u1_0.name from users u1_0 where u1_0.id=$1
read | select count(u1_0.id) from users u1_0
read | select o1_0.id,o1_0.total from orders o1_0 join users u1_0 on u1_0.id=o1_0.user_id where lower(u1_0.email) like $1 escape '\' order by o1_0.id offset $2 rows fetch first $3 rows only
read | select u1_0.id from users u1_0 where u1_0.created between $1 and $2 and u1_0.name is not null and upper(u1_0.name) in ($3,$4)
locks | select u1_0.id,u1_0.version from users u1_0 where u1_0.id=$1 for update
locks | select u1_0.id from users u1_0 where u1_0.id=$1 for no key update of u1_0
locks | select u1_0.id from users u1_0 where u1_0.id=$1 for share nowait
locks | select u1_0.id from users u1_0 for update skip locked
modifies | insert into users (email,name,id) values ($1,$2,$3)
modifies | update users set version=$1 where id=$2 and version=$3
modifies | delete from users where id=$1
# SQLAlchemy
read | SELECT CAST('test plain returns' AS VARCHAR(60)) AS anon_1
read | SELECT CAST('test unicode returns' AS VARCHAR(60)) AS anon_1
read | SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace
  WHERE pg_catalog.pg_class.relname = %(table_name)s AND pg_catalog.pg_class.relkind = ANY (ARRAY[%(param_1)s, %(param_2)s, %(param_3)s])
  AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != %(nspname_1)s
read | SELECT pg_catalog.pg_attribute.attname AS name, pg_catalog.format_type(pg_catalog.pg_attribute.atttypid, pg_catalog.pg_attribute.atttypmod) AS format_type,
  (SELECT pg_catalog.pg_get_expr(pg_catalog.pg_attrdef.adbin, pg_catalog.pg_attrdef.adrelid) FROM pg_catalog.pg_attrdef
  WHERE pg_catalog.pg_attrdef.adrelid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attrdef.adnum = pg_catalog.pg_attribute.attnum
  AND pg_catalog.pg_attribute.atthasdef) AS "default", pg_catalog.pg_attribute.attnotnull AS not_null
  FROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_class.oid = pg_catalog.pg_attribute.attrelid
  WHERE pg_catalog.pg_class.relkind = ANY (ARRAY[%(param_1)s]) ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_attribute.attnum
read | SELECT users.id, users.name FROM users WHERE users.id = %(pk_1)s
read | SELECT anon_1.users_id FROM (SELECT users.id AS users_id, row_number() OVER (PARTITION BY users.team_id ORDER BY users.score DESC) AS anon_2 FROM users) AS anon_1 WHERE anon_1.anon_2 <= %(param_1)s
read | SELECT count(*) AS count_1 FROM (SELECT users.id AS users_id FROM users) AS anon_1
read | SELECT users.id FROM users WHERE lower(users.name) LIKE lower(%(name_1)s) || '%%'
locks | SELECT users.id FROM users WHERE users.id = %(id_1)s FOR UPDATE
locks | SELECT users.id FROM users WHERE users.id = %(id_1)s FOR UPDATE OF users SKIP LOCKED
modifies | INSERT INTO users (name) VALUES (%(name)s) RETURNING users.id
# Prisma
read | SELECT "public"."User"."id", "public"."User"."email" FROM "public"."User" WHERE ("public"."User"."email" = $1 AND 1=1) LIMIT $2 OFFSET $3
read | SELECT EXISTS(SELECT 1 FROM pg_namespace WHERE nspname = $1), version(), current_setting('server_version_num')::integer as numeric_version
read | SELECT COUNT(*) FROM (SELECT "public"."Post"."id" FROM "public"."Post" WHERE 1=1 OFFSET $1) AS "sub"
read | SELECT "t1"."id", COALESCE("aggr_selection_0_Post"."_aggr_count_posts", 0) AS "_aggr_count_posts" FROM "public"."User" AS "t1"
  LEFT JOIN (SELECT "public"."Post"."authorId", COUNT(*) AS "_aggr_count_posts" FROM "public"."Post" WHERE 1=1 GROUP BY "public"."Post"."authorId") AS "aggr_selection_0_Post"
  ON ("t1"."id" = "aggr_selection_0_Post"."authorId") WHERE 1=1
read | SELECT "public"."Post"."id", "public"."Post"."title" FROM "public"."Post" WHERE "public"."Post"."authorId" IN ($1,$2,$3) OFFSET $4
locks | SELECT pg_advisory_lock(72707369)
locks | SELECT pg_advisory_unlock(72707369)
modifies | INSERT INTO "public"."User" ("email","name") VALUES ($1,$2) RETURNING "public"."User"."id"
modifies | DELETE FROM "public"."Post" WHERE ("public"."Post"."id" = $1 AND 1=1)
# Sequelize
read | SELECT "id", "name", "createdAt", "updatedAt" FROM "Users" AS "User" WHERE "User"."id" = 1;
read | SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type LIKE '%TABLE' AND table_name != 'spatial_ref_sys';
read | SELECT t.typname enum_name, array_agg(e.enumlabel ORDER BY enumsortorder) enum_value FROM pg_type t JOIN pg_enum e ON t.oid = e.enumtypid
  JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public' GROUP BY 1
read | SELECT count(*) AS "count" FROM "Users" AS "User";
read | SELECT pk.constraint_type as "Constraint",c.column_name as "Field", c.column_default as "Default",c.is_nullable as "Null",
  (CASE WHEN c.udt_name = 'hstore' THEN c.udt_name ELSE c.data_type END) || (CASE WHEN c.character_maximum_length IS NOT NULL THEN '(' || c.character_maximum_length || ')' ELSE '' END) as "Type",
  (SELECT array_agg(e.enumlabel) FROM pg_catalog.pg_type t JOIN pg_catalog.pg_enum e ON t.oid=e.enumtypid WHERE t.typname=c.udt_name) AS "special"
  FROM information_schema.columns c LEFT JOIN (SELECT tc.table_schema, tc.table_name, cu.column_name, tc.constraint_type FROM information_schema.TABLE_CONSTRAINTS tc
  JOIN information_schema.KEY_COLUMN_USAGE cu ON tc.table_schema=cu.table_schema and tc.table_name=cu.table_name and tc.constraint_name=cu.constraint_name and tc.constraint_type='PRIMARY KEY') pk
  ON pk.table_schema=c.table_schema AND pk.table_name=c.table_name AND pk.column_name=c.column_name WHERE c.table_name = 'Users' AND c.table_schema = 'public'
modifies | INSERT INTO "Users" ("id","name","createdAt","updatedAt") VALUES (DEFAULT,$1,$2,$3) RETURNING "id","name","createdAt","updatedAt";
modifies | UPDATE "Users" SET "name"=$1,"updatedAt"=$2 WHERE "id" = $3
locks | SELECT "id" FROM "Users" AS "User" WHERE "User"."id" = 1 FOR UPDATE;
# GORM
read | SELECT * FROM "users" WHERE "users"."deleted_at" IS NULL ORDER BY "users"."id" LIMIT 1
read | SELECT count(*) FROM information_schema.tables WHERE table_schema = CURRENT_SCHEMA() AND table_name = $1 AND table_type = $2
read | SELECT CURRENT_DATABASE()
read | SELECT * FROM "users" WHERE name = $1 AND "users"."deleted_at" IS NULL
read | SELECT description FROM pg_catalog.pg_description WHERE objsubid = (SELECT ordinal_position FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 AND column_name = $3)
  AND objoid = (SELECT oid FROM pg_catalog.pg_class WHERE relname = $4 AND relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $5))
locks | SELECT * FROM "users" WHERE "users"."id" = $1 AND "users"."deleted_at" IS NULL ORDER BY "users"."id" LIMIT 1 FOR UPDATE
modifies | UPDATE "users" SET "name"=$1,"updated_at"=$2 WHERE "users"."deleted_at" IS NULL AND "id" = $3
modifies | INSERT INTO "users" ("created_at","updated_at","deleted_at","name") VALUES ($1,$2,$3,$4) RETURNING "id"
# Transactions
begin rw | BEGIN
begin rw | begin
begin rw | BEGIN TRANSACTION
begin rw | BEGIN WORK;
begin rw | START TRANSACTION
begin rw | BEGIN ISOLATION LEVEL SERIALIZABLE
begin rw | BEGIN ISOLATION LEVEL READ COMMITTED
begin rw | start transaction isolation level read uncommitted
begin rw | BEGIN READ WRITE
begin rw | BEGIN READ ONLY, READ WRITE
begin ro | BEGIN READ ONLY
begin ro | begin read only
begin ro | BEGIN TRANSACTION READ ONLY
begin ro | START TRANSACTION READ ONLY
begin ro | START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY
begin ro | BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE
begin ro | BEGIN ISOLATION LEVEL SERIALIZABLE, READ ONLY, DEFERRABLE
begin ro | BEGIN READ ONLY, NOT DEFERRABLE;
begin ro | /* pgbouncer-friendly */ BEGIN /* x */ READ -- mode
  ONLY
unknown | BEGIN READ ONLY; DELETE FROM t
unknown | BEGIN READ SOMETIMES
transaction_control | COMMIT
transaction_control | END
transaction_control | ROLLBACK
transaction_control | ABORT
transaction_control | SAVEPOINT sp1
transaction_control | RELEASE SAVEPOINT sp1
transaction_control | ROLLBACK TO SAVEPOINT sp1
transaction_control | PREPARE TRANSACTION 'gid1'
transaction_control | COMMIT PREPARED 'gid1'
# Locking clauses anywhere in a query
locks | SELECT * FROM jobs WHERE state = 'ready' ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED
locks | SELECT * FROM accounts a JOIN owners o ON o.id = a.owner_id WHERE a.id = 1 FOR UPDATE OF a NOWAIT
locks | SELECT * FROM t FOR KEY SHARE OF t SKIP LOCKED
locks | select * from t for share of t, u
locks | SELECT * FROM (SELECT * FROM t FOR UPDATE) s
locks | WITH x AS (SELECT id FROM t FOR UPDATE) SELECT * FROM x
locks | (SELECT 1 FROM t FOR UPDATE)
locks | SELECT a FROM t WHERE b IN (SELECT c FROM u FOR SHARE)
locks | SELECT 1 FROM t
  FOR /* comment */
  UPDATE
locks | LOCK TABLE t IN ACCESS EXCLUSIVE MODE
# Data-modifying CTEs and SELECT INTO
modifies | WITH moved AS (DELETE FROM queue WHERE id = 1 RETURNING *) SELECT * FROM moved
modifies | WITH ins AS (INSERT INTO log (msg) VALUES ('x') RETURNING id) SELECT id FROM ins
modifies | WITH u AS (UPDATE t SET n = n + 1 RETURNING n) SELECT n FROM u
modifies | WITH m AS MATERIALIZED (MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE RETURNING t.id) SELECT * FROM m
modifies | WITH a AS (SELECT 1), b AS NOT MATERIALIZED (DELETE FROM t RETURNING id) SELECT * FROM a, b
modifies | WITH src AS (SELECT * FROM staging) INSERT INTO target SELECT * FROM src
modifies | WITH old AS (SELECT id FROM t WHERE stale) DELETE FROM t USING old WHERE t.id = old.id
modifies | WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) UPDATE t SET x = 1 WHERE id IN (SELECT n FROM r)
modifies | (WITH d AS (DELETE FROM t RETURNING 1) SELECT count(*) FROM d)
modifies | SELECT * INTO new_table FROM old_table
modifies | SELECT id, name INTO TEMP tmp_users FROM users
modifies | SELECT 1 AS x INTO UNLOGGED t2
modifies | WITH x AS (SELECT 1) SELECT * INTO t3 FROM x
# Functions with side effects, session-bound or writer-only results
side_effect_function | SELECT nextval('orders_id_seq'::regclass)
side_effect_function | SELECT setval('s', 42, true)
side_effect_function | SELECT "nextval"('s')
side_effect_function | SELECT pg_catalog.nextval('s')
side_effect_function | SELECT NEXTVAL('s')
side_effect_function | SELECT id, nextval('s') FROM generate_series(1, 3) AS id
side_effect_function | VALUES (nextval('s'))
side_effect_function | SELECT pg_notify('chan', 'payload')
side_effect_function | SELECT set_config('search_path', 'app', false)
side_effect_function | SELECT * FROM dblink('dbname=other', 'SELECT 1') AS t(a int)
side_effect_function | SELECT dblink_exec('dbname=other', 'DELETE FROM t')
side_effect_function | SELECT lo_unlink(12345)
side_effect_function | SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'x'
side_effect_function | SELECT my_app_audit(42)
side_effect_function | SELECT public.refresh_cache()
side_effect_function | SELECT * FROM get_report($1)
side_effect_function | SELECT * FROM t x(a, b)
side_effect_function | SELECT query_to_xml('delete from t returning 1', true, false, '')
side_effect_function | SELECT "LOWER"('A')
session_bound | SELECT currval('s')
session_bound | SELECT lastval()
locks | SELECT pg_advisory_lock(1)
locks | SELECT pg_advisory_xact_lock(hashtext('job'))
locks | SELECT pg_try_advisory_lock_shared(1, 2)
locks | SELECT pg_advisory_unlock_all()
writer_only | SELECT txid_current()
writer_only | SELECT pg_current_xact_id()
writer_only | SELECT pg_current_wal_lsn()
writer_only | SELECT pg_current_wal_insert_lsn()
writer_only | SELECT pg_last_wal_replay_lsn()
# Pure built-ins
read | SELECT pg_sleep(0.1)
read | SELECT now(), current_timestamp, CURRENT_TIMESTAMP(3), clock_timestamp(), localtimestamp
read | SELECT date_trunc('month', created_at), extract(epoch from created_at), to_char(created_at, 'YYYY-MM') FROM t
read | SELECT coalesce(a, b), nullif(c, ''), greatest(1, 2), least(3, 4), abs(-1), round(2.5), lower(x), upper(y), length(z) FROM t
read | SELECT substring(name from 1 for 3), position('a' in name), trim(both ' ' from name), overlay(name placing 'x' from 1 for 1) FROM t
read | SELECT string_agg(name, ',' ORDER BY name), array_agg(DISTINCT id), jsonb_agg(t), json_build_object('id', id) FROM t GROUP BY g
read | SELECT row_number() OVER (PARTITION BY g ORDER BY id), rank() OVER w, dense_rank() OVER w FROM t WINDOW w AS (ORDER BY id)
read | SELECT count(*) FILTER (WHERE active), percentile_cont(0.5) WITHIN GROUP (ORDER BY score) FROM t
read | SELECT data->>'name', data #>> '{a,b}', jsonb_path_query(data, '$.items[*]') FROM docs WHERE data @> '{"a":1}'
read | SELECT jsonb_set(doc, '{a}', '1'), to_jsonb(t), jsonb_build_array(1, 2) FROM t
read | SELECT CAST(x AS numeric(10,2)), x::varchar(20), '1'::character varying(5), now()::timestamp(0) with time zone FROM t
read | SELECT * FROM generate_series(1, 10) AS g(i)
read | SELECT * FROM generate_series(1, 10) g(i)
read | SELECT * FROM unnest(ARRAY[1,2]) WITH ORDINALITY AS u(v, n)
read | SELECT * FROM (VALUES (1, 'a'), (2, 'b')) v(id, name)
read | SELECT gen_random_uuid(), md5('x'), random()
read | SELECT * FROM t TABLESAMPLE SYSTEM (10) REPEATABLE (42)
read | SELECT a FROM t WHERE a = ANY($1) AND b IN (SELECT b FROM u) AND NOT EXISTS (SELECT 1 FROM v WHERE v.a = t.a)
read | SELECT pg_size_pretty(pg_total_relation_size('users'))
read | SELECT ARRAY(SELECT id FROM t), ROW(1, 2), (SELECT max(id) FROM t)
read | SELECT x FROM t GROUP BY GROUPING SETS ((a), (b)), ROLLUP (c), CUBE (d)
read | SELECT a OPERATOR(pg_catalog.+) b FROM t
read | SELECT xmlelement(name foo, xmlattributes(1 as bar))
read | SELECT * FROM ROWS FROM (generate_series(1,3), unnest(ARRAY['a','b'])) AS x(n, s)
read | SELECT * FROM t1 JOIN LATERAL (SELECT * FROM t2 WHERE t2.a = t1.a LIMIT 1) s ON true
read | SELECT COLLATION FOR (name) FROM t
read | SELECT "lower"('A'), pg_catalog.upper('a'), information_schema._pg_char_max_length(1, 2)
read | SELECT has_table_privilege('users', 'SELECT'), pg_get_indexdef(indexrelid) FROM pg_index
read | SELECT unaccent(name), similarity(name, 'x'), ST_AsText(geom), ST_DWithin(geom, $1, 100) FROM places
side_effect_function | SELECT public.unaccent(name) FROM places
# Decoys: strings, quoted identifiers, comments
read | SELECT 'FOR UPDATE' AS s
read | SELECT 'nextval(''s'')' AS q
read | SELECT "nextval" FROM seqs
read | SELECT nextval FROM seqs
read | SELECT "update", "delete", "insert", "into" FROM audit
read | SELECT t."update" FROM t
read | SELECT t.update, t.delete FROM t
read | SELECT $$ DELETE FROM t $$ AS body
read | SELECT $tag$ FOR UPDATE $tag$, E'\' INTO x' FROM t
read | SELECT 1 -- FOR UPDATE
read | SELECT 1 /* ; DELETE FROM t */
read | SELECT 1 /* nested /* FOR UPDATE */ still comment; DROP TABLE t */
read | /* leading comment */ SELECT 1
read | -- leading line comment
  SELECT 1
read |    SELECT 1   
read | SELECT t.updated_at, t.deleted, t.inserted_by, t.into_date FROM t
read | SELECT c.relname AS "FOR UPDATE" FROM pg_class c
read | SELECT * FROM t WHERE note = 'select into; delete'
read | SELECT 'a'';DELETE FROM t;--' AS x
# Queries of other shapes
read | VALUES (1, 'one'), (2, 'two')
read | TABLE users
read | (SELECT 1) UNION ALL (SELECT 2)
read | ((SELECT a FROM t)) ORDER BY 1
read | SELECT 1;
read | SELECT 1;;
read | WITH x AS (SELECT 1 AS a) SELECT a FROM x
read | WITH RECURSIVE t(n) AS (VALUES (1) UNION ALL SELECT n+1 FROM t WHERE n < 100) SELECT sum(n) FROM t
read | WITH a AS NOT MATERIALIZED (SELECT 1), b(x) AS (SELECT 2) SELECT * FROM a, b
unknown | SELECT 1; DELETE FROM t
unknown | SELECT 1; SELECT 2
unknown | SHOW search_path; DELETE FROM t
# EXPLAIN
read | EXPLAIN SELECT * FROM t
read | EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM t WHERE id = 1
read | EXPLAIN ANALYZE VERBOSE SELECT 1
modifies | EXPLAIN ANALYZE DELETE FROM t
modifies | EXPLAIN (ANALYZE) UPDATE t SET a = 1
modifies | EXPLAIN INSERT INTO t VALUES (1)
locks | EXPLAIN SELECT * FROM t FOR UPDATE
side_effect_function | EXPLAIN ANALYZE SELECT nextval('s')
session_state | EXPLAIN EXECUTE q1
unknown | EXPLAIN
unknown | EXPLAIN EXPLAIN SELECT 1
# Other statements
modifies | INSERT INTO t (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = t.n + 1
modifies | MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET a = s.a WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.a)
modifies | CREATE TABLE t (id int)
modifies | CREATE TEMP TABLE tmp (id int)
modifies | CREATE INDEX CONCURRENTLY t_a ON t (a)
modifies | ALTER TABLE t ADD COLUMN c int
modifies | DROP TABLE IF EXISTS t
modifies | TRUNCATE t
modifies | VACUUM ANALYZE t
modifies | ANALYZE t
modifies | REFRESH MATERIALIZED VIEW mv
modifies | GRANT SELECT ON t TO r
modifies | COMMENT ON TABLE t IS 'x'
modifies | COPY t FROM STDIN WITH (FORMAT csv)
modifies | COPY t (a, b) FROM '/tmp/x.csv'
modifies | NOTIFY chan, 'x'
unknown | COPY t TO STDOUT
unknown | COPY (SELECT * FROM t WHERE a IN (SELECT a FROM u)) TO STDOUT WITH CSV HEADER
session_state | LISTEN chan
session_state | UNLISTEN *
session_state | PREPARE q1 AS SELECT 1
session_state | EXECUTE q1
session_state | DEALLOCATE ALL
session_state | DECLARE c CURSOR FOR SELECT * FROM t
session_state | FETCH 10 FROM c
session_state | CLOSE c
unknown | CALL do_stuff(1)
unknown | DO $$ BEGIN PERFORM 1; END $$
unknown | CHECKPOINT
unknown |
unknown | ;
unknown | /* only a comment */
unknown | hello world
unknown | (INSERT INTO t VALUES (1))
unknown | 'SELECT 1'
unknown | "select" 1
"##;

#[test]
fn corpus_statements_route_as_expected() {
    let cases = corpus(CORPUS);
    assert!(cases.len() >= 250, "corpus has only {} statements", cases.len());
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|(sql, want, line)| {
            let got = route(sql);
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
            for piece in split_statements(&sql) {
                assert_eq!(route(piece), Route::Read, "line {line}: {piece}");
            }
        }
    }
}

#[test]
fn operator_listed_functions_are_reads() {
    let ro = ["my_fn", "app.report", "  spaced  "];
    assert_eq!(route_with("SELECT my_fn(1)", &ro), Route::Read);
    assert_eq!(route_with("SELECT My_Fn(1)", &ro), Route::Read);
    assert_eq!(route_with("SELECT spaced()", &ro), Route::Read);
    assert_eq!(route_with("SELECT * FROM app.report($1)", &ro), Route::Read);
    assert_eq!(route_with("SELECT * FROM \"app\".\"report\"($1)", &ro), Route::Read);
    let effect = Route::Write(WriteReason::SideEffectFunction);
    assert_eq!(route_with("SELECT \"My_Fn\"(1)", &ro), effect);
    assert_eq!(route_with("SELECT other.my_fn(1)", &ro), effect);
    assert_eq!(route_with("SELECT report($1)", &ro), effect);
    assert_eq!(route_with("SELECT nextval('s')", &["nextval"]), effect);
    assert_eq!(
        route_with("SELECT my_fn(1) FOR UPDATE", &ro),
        Route::Write(WriteReason::Locks)
    );
}

#[test]
fn reason_names_are_unique_snake_case() {
    let names: Vec<&str> = WriteReason::ALL.iter().map(|r| r.name()).collect();
    for (i, n) in names.iter().enumerate() {
        assert!(n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{n}");
        assert!(!names[..i].contains(n), "duplicate {n}");
    }
}
