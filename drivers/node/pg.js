'use strict';
// drivers/run node pg MODE: GH_WORKERS concurrent node-postgres clients
// through the proxy, each running GH_ITERATIONS iterations of the scenario
// in drivers/README.md. MODE `default` sends plain parameterized queries
// (extended protocol, unnamed statement) and simple queries for the rest;
// `prepared` sends every parameterized query as a named query
// ({name, text, values}: node-postgres parses it once per connection and
// then only binds it, so the proxy must prepare it on whichever backend
// serves the client) on a pipelining client (`pipeline: true`).
//
// Steps: 1 INSERT ... RETURNING id, read back; 2 BEGIN ... COMMIT stays on
// one backend (pg_backend_pid()); 3 a duplicate key inside a transaction
// (then 25P02), ROLLBACK; 4 named statements whose names mean different SQL
// by the worker's parity; 5 application_name, search_path, TimeZone set
// every third iteration (and a SET in a rolled-back transaction), read back
// every iteration; 6 a multi-statement simple query, one failing half-way,
// and (prepared) pipelines of named queries in and out of a transaction,
// one with an error; 7 cancel: statement_timeout by SET LOCAL, and a
// protocol CancelRequest with the client's processID / secretKey (what
// node-postgres's internal Client#cancel sends; it has no public cancel);
// 8 churn: a connection leaves a temporary table, untracked parameters, a
// named statement and an open transaction behind; the next sees none.

const pg = require('pg');
const { cfg, check, expectError, fail, finish, runWorkers, sleep } = require('./common');

const mode = process.argv[2] || 'default';
if (mode !== 'default' && mode !== 'prepared') {
  console.error(`pg: unknown mode '${mode}' (default, prepared)`);
  process.exit(2);
}
const prepared = mode === 'prepared';
const T = `t_${cfg.tag}`;
const TMP = `tmp_${cfg.tag}`;

function clientConfig(extra) {
  return {
    host: cfg.host,
    port: cfg.port,
    user: cfg.user,
    password: cfg.password,
    database: cfg.database,
    connectionTimeoutMillis: 30000,
    ...extra,
  };
}

async function connect(where, extra) {
  const c = new pg.Client(clientConfig(extra));
  c.on('error', (e) => fail(where, `client error: ${e.stack}`));
  await c.connect();
  return c;
}

// Named queries get one name per SQL text (what a statement cache does).
const names = new Map();
function nameOf(text) {
  let n = names.get(text);
  if (n === undefined) {
    n = `gh_q${names.size}`;
    names.set(text, n);
  }
  return n;
}

// One parameterized statement the way this mode sends it; rows as arrays.
function q(c, text, values) {
  if (prepared) return c.query({ name: nameOf(text), text, values, rowMode: 'array' });
  return c.query({ text, values, rowMode: 'array' });
}

async function rows(c, text, values) {
  return (await q(c, text, values)).rows;
}

async function value(c, text, values) {
  const r = await rows(c, text, values);
  if (r.length !== 1 || r[0].length !== 1) throw new Error(`${text}: expected one value, got ${JSON.stringify(r)}`);
  return r[0][0];
}

// A simple-protocol query (no parameters), rows as arrays.
function simple(c, text) {
  return c.query({ text, rowMode: 'array' });
}

const sqlstate = (e) => e.code;

// A protocol CancelRequest for `client`'s running query, sent on a new
// connection with the key the proxy gave the client (BackendKeyData).
function sendCancel(client) {
  return new Promise((resolve, reject) => {
    const con = new pg.Connection();
    con.on('error', reject);
    con.on('end', resolve);
    con.on('connect', () => con.cancel(client.processID, client.secretKey));
    con.connect(cfg.port, cfg.host);
  });
}

const SEARCH_PATHS = ['public', 'pg_catalog, public', '"$user", public'];
const TIME_ZONES = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'Australia/Adelaide'];

// Step 4's statements: different SQL, parameter and column counts.
const STMT_A = 'SELECT $1::int + 1 AS a';
const STMT_B = "SELECT $1::text || '-b' AS b, $2::int * 2 AS c";

let defaults; // a new session's application_name, search_path, TimeZone, work_mem, statement_timeout

async function worker(w, st) {
  const wname = `worker ${w}`;
  let c = await connect(wname, prepared ? { pipeline: true } : {});
  let session = null; // step 5: [application_name, search_path, TimeZone] this connection has
  const txStatus = (where, what, want) => check(where, `transaction status (ReadyForQuery) ${what}`, want, c.getTransactionStatus());
  for (let i = 0; i < cfg.iterations; i++) {
    const at = (step) => {
      st.where = `iteration ${i} step ${step}`;
      return `worker ${w} iteration ${i} step ${step}`;
    };

    // 1. INSERT ... RETURNING id, read back.
    let where = at('1 insert id');
    const ins = await q(c, `INSERT INTO ${T} (worker, n, note) VALUES ($1, $2, 'ins') RETURNING id`, [w, i]);
    check(where, 'rowCount of INSERT ... RETURNING', 1, ins.rowCount);
    const id = ins.rows[0][0];
    check(where, `row ${id}`, [[w, i, 'ins']], await rows(c, `SELECT worker, n, note FROM ${T} WHERE id = $1`, [id]));

    // 2. An explicit transaction stays on one backend.
    where = at('2 BEGIN/COMMIT');
    await simple(c, 'BEGIN');
    txStatus(where, 'after BEGIN', 'T');
    const p1 = await value(c, 'SELECT pg_backend_pid()');
    const tx = await q(c, `INSERT INTO ${T} (worker, n, note) VALUES ($1, $2, 'tx') RETURNING id`, [w, i]);
    const txid = tx.rows[0][0];
    check(where, 'row inserted in the transaction', [[w, i, 'tx']], await rows(c, `SELECT worker, n, note FROM ${T} WHERE id = $1`, [txid]));
    check(where, 'pg_backend_pid() at the end of the transaction (same backend as at its start)', p1, await value(c, 'SELECT pg_backend_pid()'));
    await simple(c, 'COMMIT');
    txStatus(where, 'after COMMIT', 'I');
    check(where, 'committed row', [[txid]], await rows(c, `SELECT id FROM ${T} WHERE id = $1 AND note = 'tx'`, [txid]));

    // 3. A failing statement inside a transaction, then ROLLBACK.
    where = at('3 error in transaction');
    await simple(c, 'BEGIN');
    await q(c, `INSERT INTO ${T} (worker, n, note) VALUES ($1, $2, 'rb')`, [w, i]);
    await expectError(where, `INSERT of the existing id ${id}`, '23505', sqlstate, q(c, `INSERT INTO ${T} (id, worker, n, note) VALUES ($1, $2, $3, 'dup')`, [id, w, i]));
    await expectError(where, 'a statement in the failed transaction', '25P02', sqlstate, q(c, 'SELECT $1::int', [w]));
    await simple(c, 'ROLLBACK');
    txStatus(where, 'after ROLLBACK', 'I');
    check(where, 'rolled-back rows', '0', await value(c, `SELECT count(*) FROM ${T} WHERE worker = $1 AND n = $2 AND note = 'rb'`, [w, i]));

    // 4. Named statements whose names stand for different SQL by parity.
    where = at('4 named statements');
    const [s1, s2] = w % 2 === 0 ? [STMT_A, STMT_B] : [STMT_B, STMT_A];
    const named = (text, values) => c.query({ name: text === s1 ? 'gh_s1' : 'gh_s2', text, values, rowMode: 'array' });
    check(where, `statement B (named ${s1 === STMT_B ? 'gh_s1' : 'gh_s2'})`, [[`${w}-b`, 2 * i]], (await named(STMT_B, [String(w), i])).rows);
    check(where, `statement A (named ${s1 === STMT_A ? 'gh_s1' : 'gh_s2'})`, [[w * 1000 + i + 1]], (await named(STMT_A, [w * 1000 + i])).rows);
    await simple(c, 'BEGIN');
    check(where, 'statement A in a transaction', [[w + 1]], (await named(STMT_A, [w])).rows);
    check(where, 'statement B in a transaction', [[`${i}-b`, 2 * w]], (await named(STMT_B, [String(i), w])).rows);
    await simple(c, 'COMMIT');

    // 5. Tracked parameters: set every third iteration, read back every
    //    iteration, in and out of transactions.
    where = at('5 session parameters');
    if (i % 3 === 0 || session === null) {
      session = [`gh_${w}_${i}`, SEARCH_PATHS[(w + i) % SEARCH_PATHS.length], TIME_ZONES[(w + Math.floor(i / 3)) % TIME_ZONES.length]];
      await simple(c, `SET application_name = '${session[0]}'`);
      await simple(c, `SET search_path TO ${session[1]}`);
      await simple(c, `SET TimeZone = '${session[2]}'`);
      // A SET inside a rolled-back transaction does not stick.
      await simple(c, 'BEGIN');
      await simple(c, "SET application_name = 'rolled_back'; SET TimeZone = 'Pacific/Chatham'");
      await simple(c, 'ROLLBACK');
    }
    const PARAMS = "SELECT current_setting('application_name'), current_setting('search_path'), current_setting('TimeZone')";
    check(where, 'application_name, search_path, TimeZone', [session], await rows(c, PARAMS));
    await simple(c, 'BEGIN');
    await q(c, `SELECT count(*) FROM ${T} WHERE worker = $1`, [w]);
    check(where, 'application_name, search_path, TimeZone in a transaction', [session], await rows(c, PARAMS));
    await simple(c, 'COMMIT');

    // 6. Batches: a multi-statement simple query (an implicit transaction),
    //    one that fails half-way (all of it rolled back), and pipelines.
    where = at('6 batch');
    const multi = await c.query({
      text: `INSERT INTO ${T} (worker, n, note) VALUES (${w}, ${i}, 'b0'), (${w}, ${i}, 'b1'); INSERT INTO ${T} (worker, n, note) VALUES (${w}, ${i}, 'b2') RETURNING worker; SELECT count(*) FROM ${T} WHERE worker = ${w} AND n = ${i} AND note LIKE 'b_'`,
      rowMode: 'array',
    });
    check(where, 'results of a 3-statement simple query', [2, [[w]], [['3']]], [multi[0].rowCount, multi[1].rows, multi[2].rows]);
    await expectError(
      where,
      'a 2-statement simple query whose second INSERT is a duplicate',
      '23505',
      sqlstate,
      simple(c, `INSERT INTO ${T} (worker, n, note) VALUES (${w}, ${i}, 'bx'); INSERT INTO ${T} (id, worker, n) VALUES (${id}, 0, 0)`),
    );
    txStatus(where, 'after the failed multi-statement query', 'I');
    check(where, "rows of the failed multi-statement query's first INSERT", '0', await value(c, `SELECT count(*) FROM ${T} WHERE worker = $1 AND n = $2 AND note = 'bx'`, [w, i]));
    if (prepared) {
      // A pipeline inside a transaction: all on one backend.
      const ins = `INSERT INTO ${T} (worker, n, note) VALUES ($1, $2, $3) RETURNING id`;
      const pipe = await Promise.all([
        c.query('BEGIN'),
        q(c, 'SELECT pg_backend_pid()'),
        ...[0, 1, 2, 3].map((k) => q(c, ins, [w, i, `p${k}`])),
        q(c, `SELECT note FROM ${T} WHERE worker = $1 AND n = $2 AND note LIKE 'p_' ORDER BY id`, [w, i]),
        q(c, 'SELECT pg_backend_pid()'),
        c.query('COMMIT'),
      ]);
      check(where, 'pg_backend_pid() at both ends of a pipelined transaction', pipe[1].rows, pipe[7].rows);
      check(where, 'rows read back in a pipelined transaction', [['p0'], ['p1'], ['p2'], ['p3']], pipe[6].rows);
      // A pipeline of autocommit statements (one Sync each: each may run
      // on another backend).
      const auto = await Promise.all([0, 1, 2].map((k) => q(c, ins, [w, i, `a${k}`])).concat([q(c, `SELECT count(*) FROM ${T} WHERE worker = $1 AND n = $2 AND note LIKE 'a_'`, [w, i])]));
      check(where, 'rowCounts of 3 pipelined INSERTs', [1, 1, 1], auto.slice(0, 3).map((r) => r.rowCount));
      check(where, 'count after 3 pipelined INSERTs, pipelined behind them', [['3']], auto[3].rows);
      // A pipelined transaction with an error: the rest fails with 25P02.
      const failing = await Promise.allSettled([
        c.query('BEGIN'),
        q(c, ins, [w, i, 'pe']),
        q(c, `INSERT INTO ${T} (id, worker, n, note) VALUES ($1, $2, $3, 'dup')`, [id, w, i]),
        q(c, 'SELECT $1::int', [w]),
        c.query('ROLLBACK'),
      ]);
      check(
        where,
        'outcomes of a pipelined transaction with a duplicate key',
        ['fulfilled', 'fulfilled', '23505', '25P02', 'fulfilled'],
        failing.map((r) => (r.status === 'fulfilled' ? r.status : r.reason.code)),
      );
      txStatus(where, 'after the pipelined ROLLBACK', 'I');
      check(where, 'rows of the rolled-back pipeline', '0', await value(c, `SELECT count(*) FROM ${T} WHERE worker = $1 AND n = $2 AND note = 'pe'`, [w, i]));
    }

    // 7. Cancel. (a) statement_timeout by SET LOCAL: 57014, and the
    //    setting is gone after the transaction.
    if (i % 3 === 1) {
      where = at('7 statement_timeout');
      await simple(c, 'BEGIN');
      await simple(c, "SET LOCAL statement_timeout = '200ms'");
      await expectError(where, 'pg_sleep(5) under SET LOCAL statement_timeout = 200ms', '57014', sqlstate, q(c, 'SELECT pg_sleep($1)', [5]));
      await simple(c, 'ROLLBACK');
      check(where, 'statement_timeout after the transaction', [[defaults.statement_timeout, w]], await rows(c, "SELECT current_setting('statement_timeout'), $1::int", [w]));
    }
    // (b) A CancelRequest while pg_sleep runs inside a transaction (so it
    //     is surely on a backend when the cancel comes).
    if ((i + w) % 10 === 0) {
      where = at('7 CancelRequest');
      await simple(c, 'BEGIN');
      const k1 = await value(c, 'SELECT pg_backend_pid()');
      const started = Date.now();
      const sleeping = q(c, 'SELECT pg_sleep($1)', [10]).then(
        (r) => ({ ok: r.rows, ms: Date.now() - started }),
        (e) => ({ err: e.code, ms: Date.now() - started }),
      );
      await sleep(300);
      await sendCancel(c);
      const out = await sleeping;
      check(where, `pg_sleep(10) (backend ${k1}) after a CancelRequest at 300 ms: the outcome (it took ${out.ms} ms)`, { err: '57014' }, out.ok ? { ok: out.ok } : { err: out.err });
      if (out.ms > 8000) fail(where, `the cancelled pg_sleep(10) took ${out.ms} ms`);
      await simple(c, 'ROLLBACK');
      check(where, 'a query after the cancel', [[w]], await rows(c, 'SELECT $1::int', [w]));
    }

    // 8. Churn: the worker's client goes; a fresh one leaves state behind
    //    and disconnects; the next fresh one, which the worker keeps, sees
    //    none of it (and the defaults, not the old session's parameters).
    //    One connection at a time.
    if ((i + w) % 3 === 0) {
      where = at('8 churn');
      await c.end();
      const d = await connect(where, {});
      d.removeAllListeners('error');
      d.on('error', () => {});
      await simple(d, `CREATE TEMPORARY TABLE ${TMP} (x int)`);
      await d.query(`INSERT INTO ${TMP} VALUES ($1)`, [w]);
      await simple(d, "SET work_mem = '7777kB'");
      await simple(d, `SET gh.leak = 'w${w}'`);
      await d.query({ name: 'gh_leak', text: "SELECT 'leaked statement'" });
      await simple(d, 'BEGIN');
      await d.query(`INSERT INTO ${T} (worker, n, note) VALUES ($1, $2, 'leaked')`, [w, i]);
      check(where, 'the leaking connection sees its own row', '1', (await d.query({ text: `SELECT count(*) FROM ${T} WHERE worker = $1 AND n = $2 AND note = 'leaked'`, values: [w, i], rowMode: 'array' })).rows[0][0]);
      if (i % 2 === 0) await d.end();
      else d.connection.stream.destroy();
      c = await connect(wname, prepared ? { pipeline: true } : {});
      session = null;
      txStatus(where, 'of a fresh connection', 'I');
      check(
        where,
        'work_mem, gh.leak, application_name, search_path, TimeZone and uncommitted rows on a fresh connection',
        [[defaults.work_mem, '', defaults.application_name, defaults.search_path, defaults.TimeZone, '0']],
        await rows(
          c,
          `SELECT current_setting('work_mem'), coalesce(current_setting('gh.leak', true), ''), current_setting('application_name'), current_setting('search_path'), current_setting('TimeZone'), (SELECT count(*) FROM ${T} WHERE note = 'leaked')`,
        ),
      );
      await expectError(where, `the previous connection's temporary table ${TMP}`, '42P01', sqlstate, q(c, `SELECT x FROM ${TMP} WHERE x = $1`, [w]));
      check(where, "a statement named like the previous connection's", [[3 * w]], (await c.query({ name: 'gh_leak', text: 'SELECT $1::int * 3', values: [w], rowMode: 'array' })).rows);
    }
  }
  await c.end();
}

async function main() {
  const admin = await connect('setup', {});
  const d = await admin.query(
    "SELECT current_setting('application_name') AS application_name, current_setting('search_path') AS search_path, current_setting('TimeZone') AS \"TimeZone\", current_setting('work_mem') AS work_mem, current_setting('statement_timeout') AS statement_timeout",
  );
  defaults = d.rows[0];
  await admin.query(`DROP TABLE IF EXISTS ${T}`);
  await admin.query(`CREATE TABLE ${T} (id bigserial PRIMARY KEY, worker int NOT NULL, n int NOT NULL, note text NOT NULL DEFAULT '')`);
  await admin.end();
  const seconds = await runWorkers(worker);
  const last = await connect('end', {});
  check('end', 'rows left by churn', '0', (await last.query({ text: `SELECT count(*) FROM ${T} WHERE note = 'leaked'`, rowMode: 'array' })).rows[0][0]);
  await last.query(`DROP TABLE ${T}`);
  await last.end();
  finish(seconds);
}

main().catch((err) => fail('main', err && err.stack ? err.stack : String(err)));
