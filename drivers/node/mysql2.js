'use strict';
// drivers/run node mysql2 MODE: GH_WORKERS concurrent mysql2 connections
// through the proxy, each running GH_ITERATIONS iterations of the scenario
// in drivers/README.md. MODE `default` sends every statement with query()
// (text protocol, values escaped by the driver); `prepared` with execute()
// (binary protocol: mysql2 prepares each SQL text once per connection and
// keeps the statement, so the proxy must serve its ids on whichever
// backend connection it picks).
//
// Steps: 1 insert id vs LAST_INSERT_ID(); 2 BEGIN ... COMMIT and
// autocommit=0 transactions stay on one backend (CONNECTION_ID()); 3 a
// duplicate key inside a transaction, ROLLBACK; 4 explicit prepare() of two
// statements in an order set by the worker's parity; 5 time_zone and
// sql_mode set every third iteration, read back every iteration; 6 a
// multi-row insert and a multi-statement query (default) or five execute()
// calls queued at once in a transaction (prepared); 7 cancel: KILL QUERY
// from a second connection on the worker's SLEEP (mysql2 has no cancel of
// its own); 8 churn: a connection leaves a temporary table, a user variable
// and an uncommitted insert behind, the next sees none of them.

const mysql = require('mysql2/promise');
const { cfg, check, checkOneOf, expectError, fail, finish, runWorkers, sleep } = require('./common');

const mode = process.argv[2] || 'default';
if (mode !== 'default' && mode !== 'prepared') {
  console.error(`mysql2: unknown mode '${mode}' (default, prepared)`);
  process.exit(2);
}
const prepared = mode === 'prepared';
const T = `t_${cfg.tag}`;
const TMP = `tmp_${cfg.tag}`;

function connect() {
  return mysql.createConnection({
    host: cfg.host,
    port: cfg.port,
    user: cfg.user,
    password: cfg.password,
    database: cfg.database,
    rowsAsArray: true,
    supportBigNumbers: true,
    multipleStatements: true,
    connectTimeout: 30000,
  });
}

// One statement the way this mode sends it.
function q(c, sql, values) {
  return prepared ? c.execute(sql, values) : c.query(sql, values);
}

async function rows(c, sql, values) {
  const [r] = await q(c, sql, values);
  return r;
}

async function value(c, sql, values) {
  const r = await rows(c, sql, values);
  if (r.length !== 1 || r[0].length !== 1) {
    throw new Error(`${sql}: expected one value, got ${JSON.stringify(r)}`);
  }
  return r[0][0];
}

const errno = (e) => e.errno;

const TIME_ZONES = ['+00:00', '+01:00', '-03:00', '+05:30', '+09:00', '-11:00', '+13:00'];
const SQL_MODES = [
  'STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION',
  'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION',
  'ONLY_FULL_GROUP_BY,NO_ENGINE_SUBSTITUTION',
  'NO_ENGINE_SUBSTITUTION',
];

// Step 4's statements: different SQL, parameter and column counts.
const STMT_A = 'SELECT CAST(? AS SIGNED) + 1 AS a';
const STMT_B = "SELECT CONCAT('b-', ?) AS b, CAST(? AS SIGNED) * 2 AS c";

async function worker(w, st) {
  let c = await connect();
  c.on('error', (e) => fail(`worker ${w}`, `connection error: ${e.stack}`));
  let session = null; // step 5: what this connection's time_zone / sql_mode are set to
  for (let i = 0; i < cfg.iterations; i++) {
    const at = (step) => {
      st.where = `iteration ${i} step ${step}`;
      return `worker ${w} iteration ${i} step ${step}`;
    };

    // 1. Insert: the driver's insertId (from the OK packet) is what
    //    LAST_INSERT_ID() says on the same connection, and the row is ours.
    let where = at('1 insert id');
    const [ins] = await q(c, `INSERT INTO ${T} (worker, n, note) VALUES (?, ?, 'ins')`, [w, i]);
    check(where, 'affectedRows of the INSERT', 1, ins.affectedRows);
    const id = ins.insertId;
    check(where, `SELECT LAST_INSERT_ID() after the INSERT whose OK packet said insertId ${id}`, id, await value(c, 'SELECT LAST_INSERT_ID()'));
    check(where, `row ${id}`, [[w, i, 'ins']], await rows(c, `SELECT worker, n, note FROM ${T} WHERE id = ?`, [id]));

    // 2a. An explicit transaction stays on one backend.
    where = at('2 BEGIN/COMMIT');
    await c.beginTransaction();
    const b1 = await value(c, 'SELECT CONNECTION_ID()');
    const [tx] = await q(c, `INSERT INTO ${T} (worker, n, note) VALUES (?, ?, 'tx')`, [w, i]);
    check(where, 'row inserted in the transaction', [[w, i, 'tx']], await rows(c, `SELECT worker, n, note FROM ${T} WHERE id = ?`, [tx.insertId]));
    check(where, 'CONNECTION_ID() at the end of the transaction (same backend as at its start)', b1, await value(c, 'SELECT CONNECTION_ID()'));
    check(where, '@@in_transaction inside BEGIN', 1, await value(c, 'SELECT @@in_transaction'));
    await c.commit();
    check(where, 'committed row', [[tx.insertId]], await rows(c, `SELECT id FROM ${T} WHERE id = ? AND note = 'tx'`, [tx.insertId]));

    // 2b. autocommit off, starting with a table-less SELECT.
    where = at('2 autocommit=0');
    await c.query('SET autocommit = 0');
    const a1 = await value(c, 'SELECT CONNECTION_ID()');
    await q(c, `INSERT INTO ${T} (worker, n, note) VALUES (?, ?, 'ac0')`, [w, i]);
    check(where, 'rows inserted with autocommit off', 1, await value(c, `SELECT COUNT(*) FROM ${T} WHERE worker = ? AND n = ? AND note = 'ac0'`, [w, i]));
    check(where, 'CONNECTION_ID() at the end of the autocommit=0 transaction (same backend as its first, table-less SELECT)', a1, await value(c, 'SELECT CONNECTION_ID()'));
    await c.commit();
    await c.query('SET autocommit = 1');
    check(where, '@@autocommit, @@in_transaction after COMMIT and SET autocommit = 1', [[1, 0]], await rows(c, 'SELECT @@autocommit, @@in_transaction'));

    // 3. A failing statement inside a transaction, then ROLLBACK.
    where = at('3 error in transaction');
    await c.beginTransaction();
    await q(c, `INSERT INTO ${T} (worker, n, note) VALUES (?, ?, 'rb')`, [w, i]);
    await expectError(where, `INSERT of the existing id ${id}`, 1062, errno, q(c, `INSERT INTO ${T} (id, worker, n, note) VALUES (?, ?, ?, 'dup')`, [id, w, i]));
    check(where, 'own insert visible before ROLLBACK', 1, await value(c, `SELECT COUNT(*) FROM ${T} WHERE worker = ? AND n = ? AND note = 'rb'`, [w, i]));
    await c.rollback();
    check(where, 'rolled-back rows', 0, await value(c, `SELECT COUNT(*) FROM ${T} WHERE worker = ? AND n = ? AND note = 'rb'`, [w, i]));
    check(where, '@@in_transaction after ROLLBACK', 0, await value(c, 'SELECT @@in_transaction'));

    // 4. Two statements prepared in an order set by the worker's parity, so
    //    the same statement id is different SQL on different connections.
    where = at('4 prepared statements');
    const [first, second] = w % 2 === 0 ? [STMT_A, STMT_B] : [STMT_B, STMT_A];
    const s1 = await c.prepare(first);
    const s2 = await c.prepare(second);
    if (s1.statement.id === s2.statement.id) fail(where, `two statements got the same id ${s1.statement.id}`);
    const sa = first === STMT_A ? s1 : s2;
    const sb = first === STMT_A ? s2 : s1;
    check(where, `statement B (id ${sb.statement.id})`, [[`b-${w}`, 2 * i]], (await sb.execute([String(w), i]))[0]);
    check(where, `statement A (id ${sa.statement.id})`, [[w * 1000 + i + 1]], (await sa.execute([w * 1000 + i]))[0]);
    await c.beginTransaction();
    check(where, `statement A in a transaction (id ${sa.statement.id})`, [[w + 1]], (await sa.execute([w]))[0]);
    check(where, `statement B in a transaction (id ${sb.statement.id})`, [[`b-${i}`, 2 * w]], (await sb.execute([String(i), w]))[0]);
    await c.commit();
    c.unprepare(first);
    c.unprepare(second);

    // 5. Tracked session variables: set every third iteration, read back
    //    every iteration, in and out of transactions.
    where = at('5 session variables');
    if (i % 3 === 0 || session === null) {
      session = [TIME_ZONES[(w + i) % TIME_ZONES.length], SQL_MODES[(w + Math.floor(i / 3)) % SQL_MODES.length]];
      await c.query(`SET time_zone = '${session[0]}'`);
      await c.query(`SET SESSION sql_mode = '${session[1]}'`);
    }
    check(where, '@@time_zone, @@sql_mode', [session], await rows(c, 'SELECT @@time_zone, @@sql_mode'));
    await c.beginTransaction();
    await q(c, `SELECT COUNT(*) FROM ${T} WHERE worker = ?`, [w]);
    check(where, '@@time_zone, @@sql_mode in a transaction', [session], await rows(c, 'SELECT @@time_zone, @@sql_mode'));
    await c.commit();

    // 6. Batches.
    where = at('6 batch');
    if (!prepared) {
      const batch = [0, 1, 2, 3, 4].map((k) => [w, i, `batch${k}`]);
      const [bulk] = await c.query(`INSERT INTO ${T} (worker, n, note) VALUES ?`, [batch]);
      check(where, 'affectedRows of a 5-row INSERT', 5, bulk.affectedRows);
      const ids = await rows(c, `SELECT id, note FROM ${T} WHERE worker = ? AND n = ? AND note LIKE 'batch%' ORDER BY id`, [w, i]);
      check(where, 'rows of the 5-row INSERT (consecutive ids from its insertId)', batch.map((b, k) => [bulk.insertId + k, b[2]]), ids);
      const multi = mysql.format(
        `INSERT INTO ${T} (worker, n, note) VALUES (?, ?, 'multi'); SELECT LAST_INSERT_ID(); SELECT worker, n FROM ${T} WHERE id = LAST_INSERT_ID(); SELECT CONNECTION_ID(), @@time_zone`,
        [w, i],
      );
      const [res] = await c.query(multi);
      if (!Array.isArray(res) || res.length !== 4) fail(where, `a 4-statement query returned ${JSON.stringify(res)}`);
      check(where, 'LAST_INSERT_ID() in the multi-statement query', [[res[0].insertId]], res[1]);
      check(where, 'row read back in the multi-statement query', [[w, i]], res[2]);
      check(where, '@@time_zone in the multi-statement query', session[0], res[3][0][1]);
    } else {
      await c.beginTransaction();
      const b1 = await value(c, 'SELECT CONNECTION_ID()');
      const sql = `INSERT INTO ${T} (worker, n, note) VALUES (?, ?, ?)`;
      const results = await Promise.all([0, 1, 2, 3, 4].map((k) => c.execute(sql, [w, i, `batch${k}`])));
      const inserted = results.map(([r]) => r.insertId);
      check(where, 'affectedRows of 5 queued executes', [1, 1, 1, 1, 1], results.map(([r]) => r.affectedRows));
      const ids = await rows(c, `SELECT id, note FROM ${T} WHERE worker = ? AND n = ? AND note LIKE 'batch%' ORDER BY id`, [w, i]);
      check(where, 'rows of 5 queued executes', inserted.map((x, k) => [x, `batch${k}`]), ids);
      check(where, 'CONNECTION_ID() after the queued executes', b1, await value(c, 'SELECT CONNECTION_ID()'));
      await c.commit();
    }

    // 7. Cancel: KILL QUERY <the handshake's thread id> from another
    //    connection while this one sleeps inside a transaction (so the query
    //    is surely on a backend when the KILL comes).
    if ((i + w) % 10 === 0) {
      where = at('7 KILL QUERY');
      await c.beginTransaction();
      const k1 = await value(c, 'SELECT CONNECTION_ID()');
      const started = Date.now();
      const sleeping = q(c, 'SELECT SLEEP(10)').then(
        ([r]) => ({ ok: r, ms: Date.now() - started }),
        (e) => ({ err: e.errno, ms: Date.now() - started }),
      );
      await sleep(300);
      const killer = await connect();
      await killer.query(`KILL QUERY ${c.threadId}`);
      await killer.end();
      const out = await sleeping;
      // The server answers a SLEEP() that KILL QUERY interrupts with
      // ER_QUERY_INTERRUPTED, or (MySQL's documented behaviour for a query
      // that is only SLEEP(), which MariaDB shows under load) with 1.
      checkOneOf(
        where,
        `SELECT SLEEP(10) (thread ${c.threadId}, backend ${k1}) after KILL QUERY at 300 ms: the outcome (it took ${out.ms} ms)`,
        [{ err: 1317 }, { ok: [[1]] }],
        out.ok ? { ok: out.ok } : { err: out.err },
      );
      if (out.ms > 8000) fail(where, `the killed SLEEP(10) took ${out.ms} ms`);
      check(where, 'CONNECTION_ID() after the killed query (same transaction)', k1, await value(c, 'SELECT CONNECTION_ID()'));
      await c.rollback();
      check(where, 'a query after the KILL', [[w, 0]], await rows(c, 'SELECT ?, @@in_transaction', [w]));
    }

    // 8. Churn: the worker's connection goes; a fresh one leaves state
    //    behind and disconnects; the next fresh one, which the worker keeps,
    //    sees none of it (and the server's defaults, not the old session's
    //    time_zone and sql_mode). One connection at a time.
    if ((i + w) % 3 === 0) {
      where = at('8 churn');
      await c.end();
      const d = await connect();
      d.on('error', () => {});
      await d.query(`CREATE TEMPORARY TABLE ${TMP} (x INT)`);
      await q(d, `INSERT INTO ${TMP} VALUES (?)`, [w]);
      await d.query(`SET @leak = ${w}`);
      if (i % 2 === 0) await d.beginTransaction();
      else await d.query('SET autocommit = 0');
      await q(d, `INSERT INTO ${T} (worker, n, note) VALUES (?, ?, 'leaked')`, [w, i]);
      check(where, 'the leaking connection sees its own row', 1, await value(d, `SELECT COUNT(*) FROM ${T} WHERE worker = ? AND n = ? AND note = 'leaked'`, [w, i]));
      if (i % 4 < 2) await d.end();
      else d.destroy();
      c = await connect();
      c.on('error', (e) => fail(`worker ${w}`, `connection error: ${e.stack}`));
      check(
        where,
        '@leak IS NULL, @@in_transaction, @@autocommit, uncommitted rows on a fresh connection',
        [[1, 0, 1, 0]],
        await rows(c, `SELECT @leak IS NULL, @@in_transaction, @@autocommit, (SELECT COUNT(*) FROM ${T} WHERE note = 'leaked')`),
      );
      await expectError(where, `the previous connection's temporary table ${TMP}`, 1146, errno, q(c, `SELECT x FROM ${TMP}`));
      check(where, '@@time_zone, @@sql_mode on a fresh connection', [defaults], await rows(c, 'SELECT @@time_zone, @@sql_mode'));
      session = null;
    }
  }
  await c.end();
}

let defaults; // the server's time_zone and sql_mode for a new session

async function main() {
  const admin = await connect();
  [defaults] = (await admin.query('SELECT @@time_zone, @@sql_mode'))[0];
  await admin.query(`DROP TABLE IF EXISTS ${T}`);
  await admin.query(`CREATE TABLE ${T} (id BIGINT AUTO_INCREMENT PRIMARY KEY, worker INT NOT NULL, n INT NOT NULL, note VARCHAR(64) NOT NULL) ENGINE=InnoDB`);
  await admin.end();
  const seconds = await runWorkers(worker);
  const last = await connect();
  check('end', 'rows left by churn', 0, (await last.query(`SELECT COUNT(*) FROM ${T} WHERE note = 'leaked'`))[0][0][0]);
  await last.query(`DROP TABLE ${T}`);
  await last.end();
  finish(seconds);
}

main().catch((err) => fail('main', err && err.stack ? err.stack : String(err)));
