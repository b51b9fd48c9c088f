"""drivers/run python sqlalchemy default: SQLAlchemy 2 Core over psycopg 3
through the proxy, with the QueuePool most applications run: every worker
checks a connection out of one shared pool for each iteration, so the
session state a connection carries (step 5) moves between workers with it
and is read back by whichever worker checks it out next. The steps of
drivers/README.md; step 4 and step 7 use the psycopg connection under the
pool's (prepare=True, cancel())."""

import os
import socket
import time

from sqlalchemy import BigInteger, Column, Integer, MetaData, Table, Text, create_engine, func, insert, select, text
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool, QueuePool

from common import PG_INSTANT, Env, cancel_during, finish, pg_state, pg_tz_offset, pg_tz_text, run_threads, watchdog

env = Env()
env.need("postgres", ["default"])
URL_ = URL.create("postgresql+psycopg", username=env.user, password=env.password, host=env.host, port=env.port,
                  database=env.database)
engine = create_engine(URL_, poolclass=QueuePool, pool_size=max(env.workers // 2, 1),
                       max_overflow=env.workers, pool_timeout=120, connect_args={"connect_timeout": 30})
# Fresh sessions for the churn step's checks, outside the pool.
fresh_engine = create_engine(URL_, poolclass=NullPool, connect_args={"connect_timeout": 30})

meta = MetaData()
t = Table(env.table, meta,
          Column("id", BigInteger, primary_key=True, autoincrement=True),
          Column("worker", Integer, nullable=False, index=True),
          Column("n", Integer, nullable=False),
          Column("note", Text, index=True))


def sqlstate(e):
    return getattr(getattr(e, "orig", None), "sqlstate", None)


STATE_SQL = text("SELECT current_setting('application_name'), current_setting('search_path'), "
                 "current_setting('TimeZone'), CAST(:t AS timestamptz)::text, CAST(:t AS timestamptz)")


class Defaults:
    pass


def setup():
    meta.drop_all(engine)
    meta.create_all(engine)
    d = Defaults()
    with fresh_engine.connect() as conn:
        app, sp, tz, text_, instant = conn.execute(STATE_SQL, {"t": PG_INSTANT}).one()
        d.state, d.tz_text, d.offset = (app, sp, tz), text_, instant.utcoffset()
        d.work_mem = conn.execute(text("SELECT current_setting('work_mem')")).scalar_one()
    return d


def worker(wk):
    for i in range(env.iterations):
        wk.i = i
        with engine.connect() as conn:
            step_prepared(wk, conn)
            rid = step_insert(wk, conn)
            step_transaction(wk, conn)
            step_error(wk, conn, rid)
            step_state(wk, conn)
            step_batch(wk, conn)
            if wk.every(4, phase=1):
                step_cancel(wk, conn)
        if wk.every(5, phase=2):
            step_churn(wk)


def step_insert(wk, conn):
    """1. INSERT ... RETURNING id, then the row read back."""
    wk.begin("1 insert returning")
    rid = conn.execute(insert(t).values(worker=wk.w, n=wk.i, note="insert").returning(t.c.id)).scalar_one()
    conn.commit()
    wk.check(f"row {rid} read back", (wk.w, wk.i, "insert"),
             tuple(conn.execute(select(t.c.worker, t.c.n, t.c.note).where(t.c.id == rid)).one()))
    conn.commit()
    return rid


def step_transaction(wk, conn):
    """2. conn.begin(): pg_backend_pid() at the start and the end are the same."""
    wk.begin("2 transaction")
    pid = text("SELECT pg_backend_pid()")
    with conn.begin():
        a = conn.execute(pid).scalar_one()
        rid = conn.execute(insert(t).values(worker=wk.w, n=wk.i, note="txn").returning(t.c.id)).scalar_one()
        wk.check("row read back inside the transaction", (wk.w, wk.i, "txn"),
                 tuple(conn.execute(select(t.c.worker, t.c.n, t.c.note).where(t.c.id == rid)).one()))
        b = conn.execute(pid).scalar_one()
        wk.check("pg_backend_pid() at the end of the transaction (first value: its start)", a, b)
    wk.check("committed row", 1, conn.execute(select(func.count()).where(t.c.id == rid)).scalar_one())
    conn.commit()


def step_error(wk, conn, dup_id):
    """3. A duplicate key inside a transaction, then a statement refused with
    25P02, rollback: the row is gone and the connection works."""
    wk.begin("3 error in transaction")
    trans = conn.begin()
    conn.execute(insert(t).values(worker=wk.w, n=wk.i, note="rb"))
    wk.expect_error("INSERT of a duplicate id", lambda: conn.execute(
        insert(t).values(id=dup_id, worker=0, n=0, note="dup")), "23505", sqlstate)
    wk.expect_error("SELECT in the failed transaction", lambda: conn.execute(text("SELECT 1")), "25P02", sqlstate)
    trans.rollback()
    wk.check("rolled-back row", 0, conn.execute(
        select(func.count()).where(t.c.worker == wk.w, t.c.n == wk.i, t.c.note == "rb")).scalar_one())
    wk.check("SELECT 1 after the rollback", 1, conn.execute(text("SELECT 1")).scalar_one())
    conn.commit()


PREP_A = "SELECT %s::int * 2 AS v, 'a' AS which"
PREP_B = "SELECT %s::text || '-b' AS v, 'b' AS which, %s::int + 1 AS n"


def prep_expect(q, x):
    return ((x * 2, "a"), (x,)) if q == PREP_A else ((f"{x}-b", "b", x + 1), (str(x), x))


def step_prepared(wk, conn):
    """4. Two statements prepared (psycopg prepare=True, on the pooled
    connection's psycopg connection) in an order set by the worker's parity:
    psycopg's names (_pg3_N, counted per connection) stand for different SQL
    on different pooled connections."""
    wk.begin("4 prepared statements")
    pg = conn.connection.driver_connection
    order = (PREP_A, PREP_B) if wk.w % 2 == 0 else (PREP_B, PREP_A)
    x = wk.w * 1000 + wk.i
    for q in order + tuple(reversed(order)):
        x += 1
        want, args = prep_expect(q, x)
        wk.check(f"prepared {q!r} with {args}", [want], pg.execute(q, args, prepare=True).fetchall())
    pg.commit()


def check_state(wk, conn, state):
    app, sp, tz = state
    row = conn.execute(STATE_SQL, {"t": PG_INSTANT}).one()
    wk.check("application_name, search_path, TimeZone, a timestamptz as text (this pooled connection's)",
             state + (pg_tz_text(tz, DEFAULT.tz_text),), tuple(row[:4]))
    offset = pg_tz_offset(tz) if tz != DEFAULT.state[2] else DEFAULT.offset
    wk.check("a timestamptz as psycopg loads it", (PG_INSTANT, offset), (row[4], row[4].utcoffset()))


def step_state(wk, conn):
    """5. application_name, search_path and TimeZone of the pooled
    connection (what the last worker to use it set; kept in its info dict),
    changed every few iterations, read back."""
    wk.begin("5 session state")
    info = conn.connection.info
    state = info.get("gh_state", DEFAULT.state)
    check_state(wk, conn, state)
    conn.commit()
    if wk.every(3):
        state = pg_state(wk.w, wk.i)
        app, sp, tz = state
        conn.exec_driver_sql(f"SET application_name = '{app}'")
        conn.exec_driver_sql(f"SET search_path = {sp}")
        conn.exec_driver_sql(f"SET TIME ZONE '{tz}'")
        conn.commit()
        info["gh_state"] = state
    if wk.every(4, phase=3):
        conn.exec_driver_sql("SET application_name = 'rolled_back'")
        conn.rollback()
    with conn.begin():
        conn.execute(select(func.count()).where(t.c.worker == wk.w)).scalar_one()
        check_state(wk, conn, state)


def step_batch(wk, conn):
    """6. executemany (insert() with a list of rows), and insertmanyvalues
    (RETURNING in parameter order)."""
    wk.begin("6 batch")
    conn.execute(insert(t), [{"worker": wk.w, "n": wk.i, "note": f"batch{k}"} for k in range(5)])
    rows = conn.execute(insert(t).returning(t.c.n, t.c.note, sort_by_parameter_order=True),
                        [{"worker": wk.w, "n": wk.i, "note": f"ret{k}"} for k in range(5)]).all()
    conn.commit()
    wk.check("RETURNING of the batch, in parameter order", [(wk.i, f"ret{k}") for k in range(5)],
             [tuple(r) for r in rows])
    wk.check("batch rows", 10, conn.execute(select(func.count()).where(
        t.c.worker == wk.w, t.c.n == wk.i, t.c.note.like("batch%") | t.c.note.like("ret%"))).scalar_one())
    conn.commit()


def step_cancel(wk, conn):
    """7. SELECT pg_sleep(5) cancelled from another thread with the psycopg
    connection's cancel(): SQLSTATE 57014, then SELECT 1 works."""
    wk.begin("7 cancel")
    pg = conn.connection.driver_connection
    sent, error, took = cancel_during(wk, lambda: conn.exec_driver_sql("SELECT pg_sleep(5)"), pg.cancel)
    wk.check("SQLSTATE of SELECT pg_sleep(5) cancelled by the driver", "57014",
             sqlstate(error) if error is not None else f"a result after {took:.2f} s and {sent} cancels")
    wk.ok("the query was cancelled only after the program sent a cancel", sent > 0,
          f"SQLSTATE 57014 came {took * 1000:.0f} ms after the query was sent, and the first cancel "
          "goes out after 300 ms: another session's cancel, or the proxy's, reached this query")
    conn.rollback()
    wk.check("SELECT 1 after the cancel", 1, conn.execute(text("SELECT 1")).scalar_one())
    conn.commit()


def step_churn(wk):
    """8. A pooled connection is given a temporary table, an untracked
    parameter (work_mem), a tracked one and an open transaction with an
    INSERT, then invalidated (closed; on even iterations its socket is shut
    first); a fresh session sees none of it."""
    wk.begin("8 churn")
    tmp = f"tmp_{env.tag}_w{wk.w}"
    c = engine.connect()
    c.exec_driver_sql(f"CREATE TEMP TABLE {tmp} (x int)")
    c.exec_driver_sql(f"INSERT INTO {tmp} VALUES (1)")
    c.exec_driver_sql("SET work_mem = '7MB'")
    c.exec_driver_sql("SET application_name = 'leak'")
    c.execute(insert(t).values(worker=wk.w, n=wk.i, note="leaked"))
    wk.check("the churned session's state", (1, "7MB", True), tuple(c.exec_driver_sql(
        f"SELECT (SELECT count(*) FROM {tmp}), current_setting('work_mem'), "
        "txid_current_if_assigned() IS NOT NULL").one()))
    if wk.i % 2 == 0:
        s = socket.socket(fileno=os.dup(c.connection.driver_connection.pgconn.socket))
        s.shutdown(socket.SHUT_RDWR)
        s.close()
    c.invalidate()
    c.close()
    with fresh_engine.connect() as f:
        wk.check("temporary table gone, work_mem, application_name, no transaction of its own",
                 (True, DEFAULT.work_mem, DEFAULT.state[0], True),
                 tuple(f.execute(text("SELECT to_regclass(:t) IS NULL, current_setting('work_mem'), "
                                      "current_setting('application_name'), txid_current_if_assigned() IS NULL"),
                                 {"t": tmp}).one()))
        wk.check("uncommitted rows of disconnected sessions", 0,
                 f.execute(select(func.count()).where(t.c.note == "leaked")).scalar_one())


if __name__ == "__main__":
    watchdog()
    started = time.monotonic()
    DEFAULT = setup()
    workers = run_threads(env, worker)
    meta.drop_all(engine)
    engine.dispose()
    finish(env, workers, started)
