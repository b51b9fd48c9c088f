"""drivers/run python pymysql default: PyMySQL (text protocol, autocommit off
as the driver defaults to) through the proxy; the steps of drivers/README.md.
PyMySQL has no server-side prepared statements (step 4) and no way to cancel
a running query (step 7)."""

import time

import pymysql

from common import MY_SQL_MODES, MY_TIME_ZONES, Env, my_epoch_text, run_threads, finish, watchdog

env = Env()
env.need("mysql", ["default"])
T = env.table


def connect():
    return pymysql.connect(
        host=env.host,
        port=env.port,
        user=env.user,
        password=env.password,
        database=env.database,
        connect_timeout=30,
    )


def code(e):
    return e.args[0] if isinstance(e, pymysql.MySQLError) and e.args else None


def q(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def one(conn, sql, args=None):
    rows = q(conn, sql, args)
    return rows[0] if len(rows) == 1 else rows


def setup():
    conn = connect()
    q(conn, f"DROP TABLE IF EXISTS {T}")
    q(conn, f"CREATE TABLE {T} (id BIGINT AUTO_INCREMENT PRIMARY KEY, worker INT NOT NULL, "
            "n INT NOT NULL, note VARCHAR(64), KEY (worker, n), KEY (note))")
    conn.commit()
    conn.close()
    # What a fresh session of this driver starts with.
    conn = connect()
    d = one(conn, "SELECT @@session.time_zone, @@session.sql_mode, CAST(FROM_UNIXTIME(0) AS CHAR), "
                  "'a' || 'b', @@autocommit, @@in_transaction")
    conn.close()
    return tuple(d)


def session_state(conn):
    return one(conn, "SELECT @@session.time_zone, @@session.sql_mode, CAST(FROM_UNIXTIME(0) AS CHAR), "
                     "'a' || 'b', @@autocommit, @@in_transaction")


def worker(wk):
    conn = connect()
    state = DEFAULT
    for i in range(env.iterations):
        wk.i = i
        rid = step_insert(wk, conn)
        step_transactions(wk, conn)
        step_error(wk, conn, rid)
        state = step_state(wk, conn, state)
        step_batch(wk, conn)
        if wk.every(5, phase=2):
            conn.close()
            step_churn(wk)
            conn = connect()
            state = DEFAULT
            wk.check("a new connection's session state", DEFAULT, session_state(conn))
    conn.close()


def step_insert(wk, conn):
    """1. INSERT, then SELECT LAST_INSERT_ID() equals the OK packet's id;
    with autocommit on every other iteration (the lease ends with the
    INSERT, and the id moves with the client) and off (the driver's
    default) otherwise."""
    wk.begin("1 insert id")
    autocommit = (wk.i + wk.w) % 2 == 0
    conn.autocommit(autocommit)
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'insert')", (wk.w, wk.i))
        rid = cur.lastrowid
        wk.check("rows inserted", 1, cur.rowcount)
    wk.ok("insert id from the OK packet is positive", rid > 0, f"got {rid!r}")
    wk.check(f"SELECT LAST_INSERT_ID() after the INSERT (autocommit={autocommit})", (rid,),
             one(conn, "SELECT LAST_INSERT_ID()"))
    wk.check(f"row {rid} read back", (wk.w, wk.i, "insert"),
             one(conn, f"SELECT worker, n, note FROM {T} WHERE id = %s", (rid,)))
    if not autocommit:
        conn.commit()
    conn.autocommit(False)
    return rid


def step_transactions(wk, conn):
    """2. BEGIN ... COMMIT and an autocommit-off transaction that starts with
    a table-less SELECT CONNECTION_ID() stay on one backend."""
    wk.begin("2 explicit transaction")
    conn.autocommit(True)
    conn.begin()
    a = one(conn, "SELECT CONNECTION_ID()")
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'txn')", (wk.w, wk.i))
        rid = cur.lastrowid
    wk.check("row read back inside the transaction", (wk.w, wk.i, "txn"),
             one(conn, f"SELECT worker, n, note FROM {T} WHERE id = %s", (rid,)))
    b = one(conn, "SELECT CONNECTION_ID()")
    wk.check("CONNECTION_ID() at the end of BEGIN ... COMMIT (first value: its start)", a, b)
    conn.commit()
    wk.check("committed row", (1,), one(conn, f"SELECT COUNT(*) FROM {T} WHERE id = %s", (rid,)))

    wk.begin("2 autocommit off")
    conn.autocommit(False)
    a = one(conn, "SELECT CONNECTION_ID()")
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'ac0')", (wk.w, wk.i))
        rid = cur.lastrowid
    wk.check("row read back inside the transaction", (wk.w, wk.i, "ac0"),
             one(conn, f"SELECT worker, n, note FROM {T} WHERE id = %s", (rid,)))
    b = one(conn, "SELECT CONNECTION_ID()")
    wk.check("CONNECTION_ID() at the end of an autocommit-off transaction that began with "
             "SELECT CONNECTION_ID() (first value: its start)", a, b)
    wk.check("@@in_transaction before COMMIT", (1,), one(conn, "SELECT @@in_transaction"))
    conn.commit()
    wk.check("committed row", (1,), one(conn, f"SELECT COUNT(*) FROM {T} WHERE id = %s", (rid,)))
    conn.commit()


def step_error(wk, conn, dup_id):
    """3. A duplicate key inside a transaction, ROLLBACK: the row is gone."""
    wk.begin("3 error in transaction")
    explicit = wk.i % 2 == 0
    if explicit:
        conn.begin()
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'rb')", (wk.w, wk.i))
        rid = cur.lastrowid
    wk.expect_error("INSERT of a duplicate id", lambda: q(
        conn, f"INSERT INTO {T} (id, worker, n, note) VALUES (%s, 0, 0, 'dup')", (dup_id,)), 1062, code)
    wk.check("own row still there before ROLLBACK", (1,), one(conn, f"SELECT COUNT(*) FROM {T} WHERE id = %s", (rid,)))
    conn.rollback()
    wk.check("rolled-back row", (0,), one(
        conn, f"SELECT COUNT(*) FROM {T} WHERE worker = %s AND n = %s AND note = 'rb'", (wk.w, wk.i)))
    wk.check("SELECT 1 after the rollback", (1,), one(conn, "SELECT 1"))
    conn.commit()


def step_state(wk, conn, state):
    """5. time_zone and sql_mode, changed every few iterations, read back in
    later transactions (on whatever backend serves them)."""
    wk.begin("5 session state")
    if wk.every(3):
        tz = MY_TIME_ZONES[(wk.w + wk.i) % len(MY_TIME_ZONES)]
        mode, concat = MY_SQL_MODES[(wk.w + wk.i) % len(MY_SQL_MODES)]
        q(conn, "SET time_zone = %s", (tz,))
        q(conn, "SET SESSION sql_mode = %s", (mode,))
        conn.commit()
        state = (tz, mode, my_epoch_text(tz), concat, 0, 0)
    if wk.i % 2:
        conn.begin()
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {T} WHERE worker = %s", (wk.w,))
        got = session_state(conn)
        want = state[:5] + (1,)
    else:
        got = session_state(conn)
        want = state
    conn.commit()
    wk.check("time_zone, sql_mode, FROM_UNIXTIME(0), 'a' || 'b', @@autocommit, @@in_transaction", want, got)
    return state


def step_batch(wk, conn):
    """6. executemany (one multi-row INSERT): rowcount, the first id, the rows."""
    wk.begin("6 executemany")
    rows = [(wk.w, wk.i, f"batch{k}") for k in range(5)]
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, %s)", rows)
        wk.check("executemany rowcount", 5, cur.rowcount)
        first = cur.lastrowid
    wk.check("SELECT LAST_INSERT_ID() after executemany", (first,), one(conn, "SELECT LAST_INSERT_ID()"))
    got = q(conn, f"SELECT id, note FROM {T} WHERE worker = %s AND n = %s AND note LIKE 'batch%%' ORDER BY id",
            (wk.w, wk.i))
    conn.commit()
    wk.check("batch rows", tuple(f"batch{k}" for k in range(5)), tuple(r[1] for r in got))
    wk.check("first id of the batch", first, got[0][0])


def step_churn(wk):
    """8. A session leaves a temporary table, a user variable, a tracked
    variable and an open transaction behind and disconnects (COM_QUIT or a
    bare close of the socket); the next fresh session sees none of it."""
    wk.begin("8 churn")
    tmp = f"tmp_{env.tag}_w{wk.w}"
    c = connect()
    q(c, f"CREATE TEMPORARY TABLE {tmp} (x INT)")
    q(c, f"INSERT INTO {tmp} VALUES (1)")
    q(c, "SET @leak = %s", (wk.w,))
    q(c, "SET time_zone = '+09:00'")
    q(c, f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'leaked')", (wk.w, wk.i))
    wk.check("the churned session's state", ((wk.w,), (1,), (1,)),
             (one(c, "SELECT @leak"), one(c, "SELECT @@in_transaction"), one(c, f"SELECT COUNT(*) FROM {tmp}")))
    if wk.i % 2:
        c.close()
    else:
        c._force_close()  # no COM_QUIT: the socket just closes
    c = connect()
    wk.check("@leak, @@in_transaction, time_zone in a fresh session", (1, 0, DEFAULT[0]),
             one(c, "SELECT @leak IS NULL, @@in_transaction, @@session.time_zone"))
    wk.expect_error("the previous session's temporary table", lambda: q(c, f"SELECT COUNT(*) FROM {tmp}"), 1146, code)
    wk.check("uncommitted rows of disconnected sessions", (0,),
             one(c, f"SELECT COUNT(*) FROM {T} WHERE note = 'leaked'"))
    c.commit()
    c.close()


if __name__ == "__main__":
    watchdog()
    started = time.monotonic()
    DEFAULT = setup()
    workers = run_threads(env, worker)
    conn = connect()
    q(conn, f"DROP TABLE {T}")
    conn.close()
    finish(env, workers, started)
