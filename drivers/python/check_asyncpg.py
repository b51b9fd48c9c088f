"""drivers/run python asyncpg default|prepared: asyncpg through the proxy;
the steps of drivers/README.md, each worker an asyncio task.

`default` turns the statement cache off (statement_cache_size=0, as asyncpg
is set up behind transaction poolers): every query is an unnamed statement,
described in one round trip and parsed again with its Bind in the next.
`prepared` keeps asyncpg's statement cache (named statements
__asyncpg_stmt_N__, prepared once per connection) and prepares step 4's
statements with conn.prepare()."""

import asyncio
import time

import asyncpg

from common import PG_INSTANT, Env, finish, pg_state, pg_tz_text, run_tasks, watchdog

env = Env()
env.need("postgres", ["default", "prepared"])
T = env.table
PREPARED = env.mode == "prepared"


async def connect(**extra):
    kwargs = dict(host=env.host, port=env.port, user=env.user, password=env.password,
                  database=env.database, timeout=30)
    if not PREPARED:
        kwargs["statement_cache_size"] = 0
    kwargs.update(extra)
    return await asyncpg.connect(**kwargs)


def sqlstate(e):
    return getattr(e, "sqlstate", None)


STATE_SQL = ("SELECT current_setting('application_name'), current_setting('search_path'), "
             "current_setting('TimeZone'), $1::timestamptz::text")


class Defaults:
    pass


async def setup():
    conn = await connect()
    await conn.execute(f"DROP TABLE IF EXISTS {T}")
    await conn.execute(f"CREATE TABLE {T} (id bigserial PRIMARY KEY, worker int NOT NULL, n int NOT NULL, note text)")
    await conn.execute(f"CREATE INDEX ON {T} (worker, n)")
    await conn.execute(f"CREATE INDEX ON {T} (note)")
    await conn.close()
    conn = await connect()
    d = Defaults()
    row = await conn.fetchrow(STATE_SQL, PG_INSTANT)
    d.state = tuple(row[:3])
    d.tz_text = row[3]
    d.work_mem = await conn.fetchval("SELECT current_setting('work_mem')")
    await conn.close()
    return d


async def worker(wk):
    conn = await connect()
    state = DEFAULT.state
    for i in range(env.iterations):
        wk.i = i
        await step_prepared(wk, conn)
        rid = await step_insert(wk, conn)
        await step_transaction(wk, conn)
        await step_error(wk, conn, rid)
        state = await step_state(wk, conn, state)
        await step_batch(wk, conn)
        if wk.every(4, phase=1):
            await step_cancel(wk, conn)
        if wk.every(5, phase=2):
            await conn.close()
            await step_churn(wk)
            conn = await connect()
            state = DEFAULT.state
            await check_state(wk, conn, state)
    await conn.close()


async def step_insert(wk, conn):
    """1. INSERT ... RETURNING id, then the row read back."""
    wk.begin("1 insert returning")
    rid = await conn.fetchval(f"INSERT INTO {T} (worker, n, note) VALUES ($1, $2, 'insert') RETURNING id", wk.w, wk.i)
    wk.check(f"row {rid} read back", (wk.w, wk.i, "insert"),
             tuple(await conn.fetchrow(f"SELECT worker, n, note FROM {T} WHERE id = $1", rid)))
    return rid


async def step_transaction(wk, conn):
    """2. A transaction stays on one backend: pg_backend_pid() at its start
    and its end are the same (conn.transaction() on even iterations, BEGIN
    and COMMIT sent as SQL on odd ones)."""
    wk.begin("2 transaction")

    async def body():
        a = await conn.fetchval("SELECT pg_backend_pid()")
        rid = await conn.fetchval(f"INSERT INTO {T} (worker, n, note) VALUES ($1, $2, 'txn') RETURNING id", wk.w, wk.i)
        wk.check("row read back inside the transaction", (wk.w, wk.i, "txn"),
                 tuple(await conn.fetchrow(f"SELECT worker, n, note FROM {T} WHERE id = $1", rid)))
        wk.check("asyncpg sees a transaction", True, conn.is_in_transaction())
        b = await conn.fetchval("SELECT pg_backend_pid()")
        wk.check("pg_backend_pid() at the end of the transaction (first value: its start)", a, b)
        return rid

    if wk.i % 2 == 0:
        async with conn.transaction():
            rid = await body()
    else:
        await conn.execute("BEGIN")
        rid = await body()
        await conn.execute("COMMIT")
    wk.check("committed row", 1, await conn.fetchval(f"SELECT count(*) FROM {T} WHERE id = $1", rid))


async def step_error(wk, conn, dup_id):
    """3. A duplicate key inside a transaction, then a statement refused with
    25P02, ROLLBACK: the row is gone and the connection works."""
    wk.begin("3 error in transaction")
    await conn.execute("BEGIN")
    await conn.fetchval(f"INSERT INTO {T} (worker, n, note) VALUES ($1, $2, 'rb') RETURNING id", wk.w, wk.i)
    await wk.expect_error_async("INSERT of a duplicate id", conn.execute(
        f"INSERT INTO {T} (id, worker, n, note) VALUES ($1, 0, 0, 'dup')", dup_id), "23505", sqlstate)
    await wk.expect_error_async("SELECT in the failed transaction", conn.fetchval("SELECT 1"), "25P02", sqlstate)
    await conn.execute("ROLLBACK")
    wk.check("rolled-back row", 0, await conn.fetchval(
        f"SELECT count(*) FROM {T} WHERE worker = $1 AND n = $2 AND note = 'rb'", wk.w, wk.i))
    wk.check("SELECT 1 after the rollback", 1, await conn.fetchval("SELECT 1"))


# Step 4's two statements, prepared in an order set by the worker's parity.
PREP_A = "SELECT $1::int * 2 AS v, 'a' AS which"
PREP_B = "SELECT $1::text || '-b' AS v, 'b' AS which, $2::int + 1 AS n"


def prep_expect(q, x):
    return ((x * 2, "a"), (x,)) if q == PREP_A else ((f"{x}-b", "b", x + 1), (str(x), x))


async def step_prepared(wk, conn):
    """4. conn.prepare() of two statements in an order set by the worker's
    parity: in `default` mode under explicit names, gh_<iteration>_first and
    _second, which stand for different SQL in different workers; in
    `prepared` mode under asyncpg's own names (__asyncpg_stmt_N__, counted
    per connection, so the first ones after a connect collide the same
    way) and cached. Each is executed twice, the second time in the other
    order."""
    wk.begin("4 prepared statements")
    order = (PREP_A, PREP_B) if wk.w % 2 == 0 else (PREP_B, PREP_A)
    x = wk.w * 1000 + wk.i
    stmts = {}
    for k, q in enumerate(order):
        if PREPARED:
            stmts[q] = await conn.prepare(q)
        else:
            stmts[q] = await conn.prepare(q, name=f"gh_{wk.i}_{('first', 'second')[k]}")
        want, args = prep_expect(q, x)
        wk.check(f"prepared {q!r} ({stmts[q].get_name()}) with {args}", want, tuple(await stmts[q].fetchrow(*args)))
    for q in reversed(order):
        want, args = prep_expect(q, x + 500)
        wk.check(f"prepared {q!r} ({stmts[q].get_name()}) again with {args}", want,
                 tuple(await stmts[q].fetchrow(*args)))


async def check_state(wk, conn, state):
    app, sp, tz = state
    row = await conn.fetchrow(STATE_SQL, PG_INSTANT)
    wk.check("application_name, search_path, TimeZone, a timestamptz as text",
             state + (pg_tz_text(tz, DEFAULT.tz_text),), tuple(row))


async def step_state(wk, conn, state):
    """5. application_name, search_path and TimeZone set every few iterations
    (and once in a while set in a transaction rolled back, which must not
    stick), read back in later transactions."""
    wk.begin("5 session state")
    if wk.every(3):
        state = pg_state(wk.w, wk.i)
        app, sp, tz = state
        async with conn.transaction():
            await conn.execute(f"SET application_name = '{app}'")
            await conn.execute(f"SET search_path = {sp}")
            await conn.execute(f"SET TIME ZONE '{tz}'")
    if wk.every(4, phase=3):
        await conn.execute("BEGIN")
        await conn.execute("SET application_name = 'rolled_back'")
        await conn.execute("SET TIME ZONE 'Asia/Kathmandu'")
        await conn.execute("ROLLBACK")
    if wk.i % 2:
        async with conn.transaction():
            await conn.fetchval(f"SELECT count(*) FROM {T} WHERE worker = $1", wk.w)
            await check_state(wk, conn, state)
    else:
        await check_state(wk, conn, state)
    return state


async def step_batch(wk, conn):
    """6. executemany (one pipeline, one Sync), fetchmany with RETURNING, and
    on odd iterations COPY FROM STDIN (copy_records_to_table)."""
    wk.begin("6 batch")
    await conn.executemany(f"INSERT INTO {T} (worker, n, note) VALUES ($1, $2, $3)",
                           [(wk.w, wk.i, f"batch{k}") for k in range(5)])
    rows = await conn.fetchmany(f"INSERT INTO {T} (worker, n, note) VALUES ($1, $2, $3) RETURNING n, note",
                                [(wk.w, wk.i, f"ret{k}") for k in range(5)])
    wk.check("fetchmany RETURNING results", [(wk.i, f"ret{k}") for k in range(5)], [tuple(r) for r in rows])
    want = 10
    if wk.i % 2:
        res = await conn.copy_records_to_table(T, records=[(wk.w, wk.i, f"copy{k}") for k in range(5)],
                                               columns=["worker", "n", "note"])
        wk.check("COPY result", "COPY 5", res)
        want += 5
    wk.check("batch rows", want, await conn.fetchval(
        f"SELECT count(*) FROM {T} WHERE worker = $1 AND n = $2 AND "
        "(note LIKE 'batch%' OR note LIKE 'ret%' OR note LIKE 'copy%')", wk.w, wk.i))


async def step_cancel(wk, conn):
    """7. An INSERT behind pg_sleep(5) with a 0.5 s timeout (execute(timeout=)
    on even iterations, asyncio.wait_for on odd ones): asyncpg raises
    TimeoutError, sends the cancel and waits for the statement to end before
    the next one. asyncpg keeps the 57014 to itself, so the proof that the
    server's statement was cancelled, not left to run out, is that its row
    was never inserted (autocommit: it would be there once the statement
    ended). No clock is read: under load the pool's waits would blur it."""
    wk.begin("7 cancel")
    start = time.monotonic()
    sleeper = f"INSERT INTO {T} (worker, n, note) SELECT $1, $2, 'uncancelled' FROM pg_sleep(5)"
    try:
        if wk.i % 2 == 0:
            await conn.execute(sleeper, wk.w, wk.i, timeout=0.5)
        else:
            await asyncio.wait_for(conn.execute(sleeper, wk.w, wk.i), 0.5)
        wk.fail("the INSERT behind pg_sleep(5) with a 0.5 s timeout returned")
    except (asyncio.TimeoutError, TimeoutError):
        wk.checks += 1
    except asyncpg.QueryCanceledError:
        wk.fail(f"the INSERT behind pg_sleep(5) failed with 57014 {(time.monotonic() - start) * 1000:.0f} ms after "
                "it was sent, before its 500 ms timeout: another session's cancel, or the proxy's, reached it")
    wk.check("SELECT 1 after the cancel", 1, await conn.fetchval("SELECT 1"))
    wk.check("rows of the cancelled INSERT (the cancel reached it)", 0, await conn.fetchval(
        f"SELECT count(*) FROM {T} WHERE worker = $1 AND n = $2 AND note = 'uncancelled'", wk.w, wk.i))
    wk.note("cancels")
    wk.note("cancel_ms_total", int((time.monotonic() - start) * 1000))


async def step_churn(wk):
    """8. A session leaves a temporary table, an untracked parameter
    (work_mem, which pins it), tracked ones and an open transaction with an
    INSERT behind, and disconnects (Terminate, or terminate() without it on
    even iterations); the next fresh session sees none of it."""
    wk.begin("8 churn")
    tmp = f"tmp_{env.tag}_w{wk.w}"
    c = await connect()
    await c.execute(f"CREATE TEMP TABLE {tmp} (x int)")
    await c.execute(f"INSERT INTO {tmp} VALUES (1)")
    await c.execute("SET work_mem = '7MB'")
    await c.execute("SET application_name = 'leak'")
    await c.execute("SET TIME ZONE 'Asia/Kathmandu'")
    await c.execute("BEGIN")
    await c.execute(f"INSERT INTO {T} (worker, n, note) VALUES ($1, $2, 'leaked')", wk.w, wk.i)
    wk.check("the churned session's state", (1, "7MB", True), tuple(await c.fetchrow(
        f"SELECT (SELECT count(*) FROM {tmp}), current_setting('work_mem'), txid_current_if_assigned() IS NOT NULL")))
    if wk.i % 2 == 0:
        c.terminate()
    else:
        await c.close()
    c = await connect()
    wk.check("temporary table gone, work_mem, application_name, TimeZone, no transaction of its own",
             (True, DEFAULT.work_mem, DEFAULT.state[0], DEFAULT.state[2], True),
             tuple(await c.fetchrow("SELECT to_regclass($1) IS NULL, current_setting('work_mem'), "
                                    "current_setting('application_name'), current_setting('TimeZone'), "
                                    "txid_current_if_assigned() IS NULL", tmp)))
    wk.check("uncommitted rows of disconnected sessions", 0,
             await c.fetchval(f"SELECT count(*) FROM {T} WHERE note = 'leaked'"))
    await c.close()


async def teardown():
    conn = await connect()
    await conn.execute(f"DROP TABLE {T}")
    await conn.close()


if __name__ == "__main__":
    watchdog()
    started = time.monotonic()
    DEFAULT = asyncio.run(setup())
    workers = run_tasks(env, worker)
    asyncio.run(teardown())
    finish(env, workers, started)
