'use strict';
// Shared by the node driver programs (see drivers/README.md): the
// environment, the check counter, the workers and the closing line.

const util = require('node:util');

function env(name, fallback) {
  const v = process.env[name];
  if (v === undefined || v === '') {
    if (fallback === undefined) {
      console.error(`${name} is not set`);
      process.exit(2);
    }
    return fallback;
  }
  return v;
}

const cfg = {
  engine: env('GH_ENGINE', ''),
  host: env('GH_HOST'),
  port: Number(env('GH_PORT')),
  user: env('GH_USER'),
  password: env('GH_PASSWORD'),
  database: env('GH_DATABASE'),
  workers: Number(env('GH_WORKERS', '20')),
  iterations: Number(env('GH_ITERATIONS', '30')),
  poolSize: env('GH_POOL_SIZE', '?'),
  tag: env('GH_TAG').replace(/[^A-Za-z0-9_]/g, '_'),
};

let checks = 0;
let failed = false;

function show(v) {
  return util.inspect(v, { depth: 6, breakLength: Infinity });
}

// Stops the program at the first wrong result.
function fail(where, message) {
  if (failed) return;
  failed = true;
  console.error(`FAILED ${where}: ${message}`);
  console.error(`(${cfg.workers} workers through a pool of ${cfg.poolSize}; ${checks} checks had passed)`);
  process.exit(1);
}

// Compares what came with what must come, exactly (deep equality of
// values and types: numbers stay numbers, strings strings).
function check(where, what, expected, got) {
  if (!util.isDeepStrictEqual(expected, got)) {
    fail(where, `${what}: expected ${show(expected)}, got ${show(got)}`);
  }
  checks++;
}

// Like check, for a result that may be any of `alternatives`.
function checkOneOf(where, what, alternatives, got) {
  if (!alternatives.some((a) => util.isDeepStrictEqual(a, got))) {
    fail(where, `${what}: expected one of ${alternatives.map(show).join(' or ')}, got ${show(got)}`);
  }
  checks++;
}

// Runs `promise` and expects it to fail with an error for which
// `code(err)` is `expected`.
async function expectError(where, what, expected, code, promise) {
  let got;
  try {
    const r = await promise;
    fail(where, `${what}: expected error ${show(expected)}, got success ${show(r && r.rows !== undefined ? r.rows : r)}`);
  } catch (err) {
    got = code(err);
    if (got !== expected) {
      fail(where, `${what}: expected error ${show(expected)}, got ${show(got)}: ${err && err.stack}`);
    }
  }
  checks++;
  return got;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Seconds before the watchdog names the stuck workers and fails the run
// (GH_WATCHDOG; the test harness sets more when every program runs at once).
const WATCHDOG_SECONDS = Number(process.env.GH_WATCHDOG || 240);

// Runs `body(w, state)` for workers 1..GH_WORKERS concurrently; each
// worker's `state.where` says what it is doing, for the watchdog and for
// errors that escape.
async function runWorkers(body) {
  const started = Date.now();
  const states = [];
  const watchdog = setTimeout(() => {
    const stuck = states.filter((s) => !s.done).map((s) => `worker ${s.w}: ${s.where}`);
    fail('watchdog', `still running after ${WATCHDOG_SECONDS} s:\n  ${stuck.join('\n  ')}`);
  }, WATCHDOG_SECONDS * 1000);
  watchdog.unref();
  const runs = [];
  for (let w = 1; w <= cfg.workers; w++) {
    const state = { w, where: 'starting', done: false };
    states.push(state);
    runs.push(
      (async () => {
        try {
          await body(w, state);
        } catch (err) {
          fail(`worker ${w} (${state.where})`, `unexpected error: ${err && err.stack ? err.stack : show(err)}${err && err.code ? ` [code ${err.code}]` : ''}`);
        }
        state.done = true;
      })(),
    );
  }
  await Promise.all(runs);
  clearTimeout(watchdog);
  return (Date.now() - started) / 1000;
}

function finish(seconds) {
  if (seconds !== undefined) {
    console.log(`${cfg.tag}: workers done in ${seconds.toFixed(1)} s`);
  }
  console.log(`${cfg.tag}: ${cfg.workers} workers x ${cfg.iterations} iterations, ${checks} checks passed`);
}

process.on('unhandledRejection', (err) => fail('unhandled rejection', err && err.stack ? err.stack : show(err)));

module.exports = { cfg, check, checkOneOf, expectError, fail, finish, runWorkers, show, sleep };
