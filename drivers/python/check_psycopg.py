"""drivers/run python psycopg default|prepared: psycopg 3 through the proxy;
the steps of drivers/README.md.

`default` is the driver as it comes: autocommit off (psycopg opens a
transaction before the first statement; the program commits), statements
prepared after five executions (prepare_threshold=5), executemany.
`prepared` uses autocommit on, prepare_threshold=0 (every statement a named
prepared statement from its first execution) and pipeline mode for the batch
step, including a pipeline that fails in the middle."""

import os
import socket
import time

import psycopg
from psycopg import pq, sql

from common import PG_INSTANT, Env, cancel_during, finish, pg_state, pg_tz_offset, pg_tz_text, run_threads, watchdog

env = Env()
env.need("postgres", ["default", "prepared"])
T = env.table
PREPARED = env.mode == "prepared"


def connect(**extra):
    kwargs = dict(host=env.host, port=env.port, user=env.user, password=env.password,
                  dbname=env.database, connect_timeout=30)
    if PREPARED:
        kwargs.update(prepare_threshold=0, autocommit=True)
    kwargs.update(extra)
    return psycopg.connect(**kwargs)


def sqlstate(e):
    return getattr(e, "sqlstate", None)


def one(conn, query, params=None, **kw):
    return conn.execute(query, params, **kw).fetchone()


def done(conn):
    """Ends the transaction psycopg opened (autocommit off)."""
    if not conn.autocommit:
        conn.commit()


STATE_SQL = ("SELECT current_setting('application_name'), current_setting('search_path'), "
             "current_setting('TimeZone'), %s::timestamptz::text, %s::timestamptz")


class Defaults:
    """What a fresh session starts with."""

    def __init__(self, conn):
        app, sp, tz, text, instant = one(conn, STATE_SQL, (PG_INSTANT, PG_INSTANT))
        self.state = (app, sp, tz)
        self.tz_text = text
        self.offset = instant.utcoffset()
        self.work_mem = one(conn, "SELECT current_setting('work_mem')")[0]
        done(conn)


def setup():
    conn = connect()
    conn.execute(f"DROP TABLE IF EXISTS {T}")
    conn.execute(f"CREATE TABLE {T} (id bigserial PRIMARY KEY, worker int NOT NULL, n int NOT NULL, note text)")
    conn.execute(f"CREATE INDEX ON {T} (worker, n)")
    conn.execute(f"CREATE INDEX ON {T} (note)")
    done(conn)
    conn.close()
    conn = connect()
    d = Defaults(conn)
    conn.close()
    return d


def worker(wk):
    conn = connect()
    state = DEFAULT.state
    for i in range(env.iterations):
        wk.i = i
        step_prepared(wk, conn)
        rid = step_insert(wk, conn)
        step_transaction(wk, conn)
        step_error(wk, conn, rid)
        state = step_state(wk, conn, state)
        step_batch(wk, conn)
        if wk.every(4, phase=1):
            step_cancel(wk, conn)
        if wk.every(5, phase=2):
            conn.close()
            step_churn(wk)
            conn = connect()
            state = DEFAULT.state
            check_state(wk, conn, state)
    conn.close()


def step_insert(wk, conn):
    """1. INSERT ... RETURNING id, then the row read back."""
    wk.begin("1 insert returning")
    rid = one(conn, f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'insert') RETURNING id", (wk.w, wk.i))[0]
    done(conn)
    wk.check(f"row {rid} read back", (wk.w, wk.i, "insert"),
             one(conn, f"SELECT worker, n, note FROM {T} WHERE id = %s", (rid,)))
    done(conn)
    return rid


def step_transaction(wk, conn):
    """2. A transaction stays on one backend: pg_backend_pid() at its start
    and its end are the same. conn.transaction() on even iterations; on odd
    ones psycopg's own implicit BEGIN (autocommit off) or BEGIN sent as SQL."""
    wk.begin("2 transaction")

    def body():
        a = one(conn, "SELECT pg_backend_pid()")
        rid = one(conn, f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'txn') RETURNING id", (wk.w, wk.i))[0]
        wk.check("row read back inside the transaction", (wk.w, wk.i, "txn"),
                 one(conn, f"SELECT worker, n, note FROM {T} WHERE id = %s", (rid,)))
        wk.check("transaction status", pq.TransactionStatus.INTRANS, conn.info.transaction_status)
        b = one(conn, "SELECT pg_backend_pid()")
        wk.check("pg_backend_pid() at the end of the transaction (first value: its start)", a, b)
        return rid

    if wk.i % 2 == 0:
        with conn.transaction():
            rid = body()
    else:
        if conn.autocommit:
            conn.execute("BEGIN")
        rid = body()
        if conn.autocommit:
            conn.execute("COMMIT")
        else:
            conn.commit()
    wk.check("committed row", (1,), one(conn, f"SELECT count(*) FROM {T} WHERE id = %s", (rid,)))
    done(conn)


def step_error(wk, conn, dup_id):
    """3. A duplicate key inside a transaction, then a statement refused with
    25P02, ROLLBACK: the row is gone and the connection works."""
    wk.begin("3 error in transaction")
    if conn.autocommit:
        conn.execute("BEGIN")
    one(conn, f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'rb') RETURNING id", (wk.w, wk.i))
    wk.expect_error("INSERT of a duplicate id", lambda: conn.execute(
        f"INSERT INTO {T} (id, worker, n, note) VALUES (%s, 0, 0, 'dup')", (dup_id,)), "23505", sqlstate)
    wk.expect_error("SELECT in the failed transaction", lambda: conn.execute("SELECT 1"), "25P02", sqlstate)
    wk.check("transaction status", pq.TransactionStatus.INERROR, conn.info.transaction_status)
    conn.rollback()
    wk.check("rolled-back row", (0,), one(
        conn, f"SELECT count(*) FROM {T} WHERE worker = %s AND n = %s AND note = 'rb'", (wk.w, wk.i)))
    wk.check("SELECT 1 after the rollback", (1,), one(conn, "SELECT 1"))
    done(conn)


# Step 4's two statements: a worker prepares them in an order set by its
# parity, first thing on a new connection, so psycopg's names (_pg3_0,
# _pg3_1, ...) stand for different SQL in different workers.
PREP_A = "SELECT %s::int * 2 AS v, 'a' AS which"
PREP_B = "SELECT %s::text || '-b' AS v, 'b' AS which, %s::int + 1 AS n"


def prep_expect(q, x):
    return ((x * 2, "a"), (x,)) if q == PREP_A else ((f"{x}-b", "b", x + 1), (str(x), x))


def step_prepared(wk, conn):
    """4. Two statements prepared (prepare=True) in an order set by the
    worker's parity, executed again in the other order."""
    wk.begin("4 prepared statements")
    order = (PREP_A, PREP_B) if wk.w % 2 == 0 else (PREP_B, PREP_A)
    x = wk.w * 1000 + wk.i
    for q in order:
        want, args = prep_expect(q, x)
        wk.check(f"prepared {q!r} with {args}", [want], conn.execute(q, args, prepare=True).fetchall())
    for q in reversed(order):
        want, args = prep_expect(q, x + 500)
        wk.check(f"prepared {q!r} again with {args}", [want], conn.execute(q, args, prepare=True).fetchall())
    done(conn)


def check_state(wk, conn, state):
    app, sp, tz = state
    row = one(conn, STATE_SQL, (PG_INSTANT, PG_INSTANT))
    wk.check("application_name, search_path, TimeZone, a timestamptz as text", state + (pg_tz_text(tz, DEFAULT.tz_text),),
             row[:4])
    offset = pg_tz_offset(tz) if tz != DEFAULT.state[2] else DEFAULT.offset
    wk.check("a timestamptz as psycopg loads it (with the TimeZone it was told)", (PG_INSTANT, offset),
             (row[4], row[4].utcoffset()))
    wk.check("application_name and TimeZone the server reported (ParameterStatus)", (app, tz),
             (conn.info.parameter_status("application_name"), conn.info.parameter_status("TimeZone")))


def step_state(wk, conn, state):
    """5. application_name, search_path and TimeZone set every few iterations
    (and once in a while set in a transaction rolled back, which must not
    stick), read back in later transactions."""
    wk.begin("5 session state")
    if wk.every(3):
        state = pg_state(wk.w, wk.i)
        app, sp, tz = state
        with conn.transaction():
            conn.execute(sql.SQL("SET application_name = {}").format(app))
            conn.execute(f"SET search_path = {sp}")
            conn.execute(sql.SQL("SET TIME ZONE {}").format(tz))
        done(conn)
    if wk.every(4, phase=3):
        if conn.autocommit:
            conn.execute("BEGIN")
        conn.execute("SET application_name = 'rolled_back'")
        conn.execute("SET TIME ZONE 'Asia/Kathmandu'")
        conn.rollback()
    if wk.i % 2:
        with conn.transaction():
            one(conn, f"SELECT count(*) FROM {T} WHERE worker = %s", (wk.w,))
            check_state(wk, conn, state)
    else:
        check_state(wk, conn, state)
    done(conn)
    return state


def step_batch(wk, conn):
    """6. default: executemany, plain and with RETURNING; prepared: a
    pipeline inside a transaction, and every third iteration a pipeline whose
    middle statement fails."""
    wk.begin("6 batch")
    if not PREPARED:
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, %s)",
                            [(wk.w, wk.i, f"batch{k}") for k in range(5)])
            wk.check("executemany rowcount", 5, cur.rowcount)
            cur.executemany(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, %s) RETURNING n, note",
                            [(wk.w, wk.i, f"ret{k}") for k in range(5)], returning=True)
            got = []
            while True:
                got.extend(cur.fetchall())
                if not cur.nextset():
                    break
        wk.check("executemany RETURNING results", [(wk.i, f"ret{k}") for k in range(5)], got)
        done(conn)
        wk.check("batch rows", (10,), one(
            conn, f"SELECT count(*) FROM {T} WHERE worker = %s AND n = %s AND (note LIKE 'batch%%' OR note LIKE 'ret%%')",
            (wk.w, wk.i)))
        done(conn)
        return

    with conn.transaction():
        with conn.pipeline():
            p1 = conn.execute("SELECT pg_backend_pid()")
            ins = [conn.execute(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, %s) RETURNING note",
                                (wk.w, wk.i, f"pipe{k}")) for k in range(5)]
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, %s)",
                                [(wk.w, wk.i, f"pipem{k}") for k in range(5)])
            cnt = conn.execute(f"SELECT count(*) FROM {T} WHERE worker = %s AND n = %s AND note LIKE 'pipe%%'",
                               (wk.w, wk.i))
            p2 = conn.execute("SELECT pg_backend_pid()")
        wk.check("RETURNING of the pipelined INSERTs", [(f"pipe{k}",) for k in range(5)], [c.fetchone() for c in ins])
        wk.check("rows counted at the end of the pipeline", (10,), cnt.fetchone())
        wk.check("pg_backend_pid() at the end of the pipelined transaction (first value: its start)",
                 p1.fetchone(), p2.fetchone())

    if wk.every(3, phase=1):
        wk.begin("6 pipeline with an error")
        results = []
        try:
            with conn.pipeline():
                results.append(conn.execute("SELECT %s::int AS before", (wk.w,)))
                results.append(conn.execute(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'aborted') RETURNING id",
                                            (wk.w, wk.i)))
                results.append(conn.execute("SELECT 1 / (%s::int - %s::int)", (wk.i, wk.i)))
                results.append(conn.execute("SELECT %s::int AS after", (wk.i,)))
            wk.fail("a pipeline with a division by zero raised nothing")
        except psycopg.errors.DivisionByZero:
            wk.checks += 1
        wk.check("the statement before the failure", (wk.w,), results[0].fetchone())
        wk.check("SELECT 1 after the failed pipeline", (1,), one(conn, "SELECT 1"))
        wk.check("rows of the failed pipeline's implicit transaction", (0,), one(
            conn, f"SELECT count(*) FROM {T} WHERE worker = %s AND n = %s AND note = 'aborted'", (wk.w, wk.i)))


def step_cancel(wk, conn):
    """7. SELECT pg_sleep(5) cancelled from another thread (conn.cancel(),
    or cancel_safe() on odd iterations): SQLSTATE 57014, then SELECT 1 works
    on the same connection."""
    wk.begin("7 cancel")
    cancel = conn.cancel_safe if wk.i % 2 else conn.cancel
    sent, error, took = cancel_during(wk, lambda: conn.execute("SELECT pg_sleep(5)"), cancel)
    wk.check("SQLSTATE of SELECT pg_sleep(5) cancelled by the driver", "57014",
             sqlstate(error) if error is not None else f"a result after {took:.2f} s and {sent} cancels")
    wk.ok("the query was cancelled only after the program sent a cancel", sent > 0,
          f"SQLSTATE 57014 came {took * 1000:.0f} ms after the query was sent, and the first cancel "
          "goes out after 300 ms: another session's cancel, or the proxy's, reached this query")
    if not conn.autocommit:
        conn.rollback()
    wk.check("SELECT 1 after the cancel", (1,), one(conn, "SELECT 1"))
    done(conn)


def step_churn(wk):
    """8. A session leaves a temporary table, an untracked parameter
    (work_mem, which pins it), tracked ones and an open transaction with an
    INSERT behind, and disconnects (Terminate, or a shut socket on even
    iterations); the next fresh session sees none of it."""
    wk.begin("8 churn")
    tmp = f"tmp_{env.tag}_w{wk.w}"
    c = connect(autocommit=True)
    c.execute(f"CREATE TEMP TABLE {tmp} (x int)")
    c.execute(f"INSERT INTO {tmp} VALUES (1)")
    c.execute("SET work_mem = '7MB'")
    c.execute("SET application_name = 'leak'")
    c.execute("SET TIME ZONE 'Asia/Kathmandu'")
    c.execute("BEGIN")
    c.execute(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'leaked')", (wk.w, wk.i))
    wk.check("the churned session's state", (1, "7MB", True),
             one(c, f"SELECT (SELECT count(*) FROM {tmp}), current_setting('work_mem'), "
                    "txid_current_if_assigned() IS NOT NULL"))
    if wk.i % 2 == 0:
        s = socket.socket(fileno=os.dup(c.pgconn.socket))
        s.shutdown(socket.SHUT_RDWR)
        s.close()
        try:
            c.close()
        except psycopg.Error:
            pass
    else:
        c.close()
    c = connect()
    wk.check("temporary table gone, work_mem, application_name, TimeZone, no transaction of its own",
             (True, DEFAULT.work_mem) + DEFAULT.state[0:1] + DEFAULT.state[2:3] + (True,),
             one(c, "SELECT to_regclass(%s) IS NULL, current_setting('work_mem'), current_setting('application_name'), "
                    "current_setting('TimeZone'), txid_current_if_assigned() IS NULL", (tmp,)))
    wk.check("uncommitted rows of disconnected sessions", (0,),
             one(c, f"SELECT count(*) FROM {T} WHERE note = 'leaked'"))
    done(c)
    c.close()


if __name__ == "__main__":
    watchdog()
    started = time.monotonic()
    DEFAULT = setup()
    workers = run_threads(env, worker)
    conn = connect()
    conn.execute(f"DROP TABLE {T}")
    done(conn)
    conn.close()
    finish(env, workers, started)
