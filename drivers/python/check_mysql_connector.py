"""drivers/run python mysql_connector default|prepared: MySQL
Connector/Python (its C extension, autocommit off as the driver defaults to)
through the proxy; the steps of drivers/README.md. `default` sends text
queries (step 4 uses prepared cursors all the same); `prepared` sends every
statement through `cursor(prepared=True)` (COM_STMT_PREPARE, _RESET,
_EXECUTE, _CLOSE). The driver has no way to cancel a running query (step 7)."""

import time

import mysql.connector

from common import MY_SQL_MODES, MY_TIME_ZONES, Env, my_epoch_text, run_threads, finish, watchdog

env = Env()
env.need("mysql", ["default", "prepared"])
T = env.table
PREPARED = env.mode == "prepared"


def code(e):
    return getattr(e, "errno", None) if isinstance(e, mysql.connector.Error) else None


class Db:
    """A connection and the cursor every statement goes through (prepared
    in `prepared` mode: it re-prepares whenever the SQL changes)."""

    def __init__(self, pure=False):
        self.conn = mysql.connector.connect(
            host=env.host,
            port=env.port,
            user=env.user,
            password=env.password,
            database=env.database,
            connection_timeout=30,
            use_pure=pure,
        )
        self.cur = self.conn.cursor(prepared=True) if PREPARED else None
        self.lastrowid = None
        self.rowcount = None

    def _run(self, cur, sql, args, many):
        if many:
            cur.executemany(sql, args)
        else:
            cur.execute(sql, args or ())
        rows = cur.fetchall() if cur.description is not None else []
        self.lastrowid, self.rowcount = cur.lastrowid, cur.rowcount
        return rows

    def q(self, sql, args=None, many=False):
        if PREPARED:
            return self._run(self.cur, sql, args, many)
        with self.conn.cursor() as cur:
            return self._run(cur, sql, args, many)

    def one(self, sql, args=None):
        rows = self.q(sql, args)
        return rows[0] if len(rows) == 1 else rows

    def autocommit(self, on):
        self.conn.autocommit = on

    def close(self):
        if self.cur is not None:
            self.cur.close()
        self.conn.close()


STATE_SQL = ("SELECT @@session.time_zone, @@session.sql_mode, CAST(FROM_UNIXTIME(0) AS CHAR), "
             "'a' || 'b', @@autocommit, @@in_transaction")


def setup():
    db = Db()
    db.q(f"DROP TABLE IF EXISTS {T}")
    db.q(f"CREATE TABLE {T} (id BIGINT AUTO_INCREMENT PRIMARY KEY, worker INT NOT NULL, "
         "n INT NOT NULL, note VARCHAR(64), KEY (worker, n), KEY (note))")
    db.conn.commit()
    db.close()
    db = Db()  # what a fresh session of this driver starts with
    d = db.one(STATE_SQL)
    db.close()
    return tuple(d)


def worker(wk):
    db = Db()
    state = DEFAULT
    for i in range(env.iterations):
        wk.i = i
        step_prepared(wk, db)
        rid = step_insert(wk, db)
        step_transactions(wk, db)
        step_error(wk, db, rid)
        state = step_state(wk, db, state)
        step_batch(wk, db)
        if wk.every(5, phase=2):
            db.close()
            step_churn(wk)
            db = Db()
            state = DEFAULT
            wk.check("a new connection's session state", DEFAULT, db.one(STATE_SQL))
    db.close()


def step_insert(wk, db):
    """1. INSERT, then SELECT LAST_INSERT_ID() equals the OK packet's id;
    with autocommit on every other iteration (the lease ends with the
    INSERT, and the id moves with the client) and off (the driver's
    default) otherwise."""
    wk.begin("1 insert id")
    autocommit = (wk.i + wk.w) % 2 == 0
    db.autocommit(autocommit)
    db.q(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'insert')", (wk.w, wk.i))
    rid = db.lastrowid
    wk.check("rows inserted", 1, db.rowcount)
    wk.ok("insert id from the OK packet is positive", isinstance(rid, int) and rid > 0, f"got {rid!r}")
    wk.check(f"SELECT LAST_INSERT_ID() after the INSERT (autocommit={autocommit})", (rid,),
             db.one("SELECT LAST_INSERT_ID()"))
    wk.check(f"row {rid} read back", (wk.w, wk.i, "insert"),
             db.one(f"SELECT worker, n, note FROM {T} WHERE id = %s", (rid,)))
    if not autocommit:
        db.conn.commit()
    db.autocommit(False)
    return rid


def step_transactions(wk, db):
    """2. START TRANSACTION ... COMMIT and an autocommit-off transaction that
    starts with a table-less SELECT CONNECTION_ID() stay on one backend."""
    wk.begin("2 explicit transaction")
    db.autocommit(True)
    db.conn.start_transaction()
    a = db.one("SELECT CONNECTION_ID()")
    db.q(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'txn')", (wk.w, wk.i))
    rid = db.lastrowid
    wk.check("row read back inside the transaction", (wk.w, wk.i, "txn"),
             db.one(f"SELECT worker, n, note FROM {T} WHERE id = %s", (rid,)))
    b = db.one("SELECT CONNECTION_ID()")
    wk.check("CONNECTION_ID() at the end of START TRANSACTION ... COMMIT (first value: its start)", a, b)
    db.conn.commit()
    wk.check("committed row", (1,), db.one(f"SELECT COUNT(*) FROM {T} WHERE id = %s", (rid,)))

    wk.begin("2 autocommit off")
    db.autocommit(False)
    a = db.one("SELECT CONNECTION_ID()")
    db.q(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'ac0')", (wk.w, wk.i))
    rid = db.lastrowid
    wk.check("row read back inside the transaction", (wk.w, wk.i, "ac0"),
             db.one(f"SELECT worker, n, note FROM {T} WHERE id = %s", (rid,)))
    b = db.one("SELECT CONNECTION_ID()")
    wk.check("CONNECTION_ID() at the end of an autocommit-off transaction that began with "
             "SELECT CONNECTION_ID() (first value: its start)", a, b)
    wk.check("@@in_transaction before COMMIT", (1,), db.one("SELECT @@in_transaction"))
    db.conn.commit()
    wk.check("committed row", (1,), db.one(f"SELECT COUNT(*) FROM {T} WHERE id = %s", (rid,)))
    db.conn.commit()


def step_error(wk, db, dup_id):
    """3. A duplicate key inside a transaction, ROLLBACK: the row is gone."""
    wk.begin("3 error in transaction")
    if wk.i % 2 == 0:
        db.conn.start_transaction()
    db.q(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'rb')", (wk.w, wk.i))
    rid = db.lastrowid
    wk.expect_error("INSERT of a duplicate id", lambda: db.q(
        f"INSERT INTO {T} (id, worker, n, note) VALUES (%s, 0, 0, 'dup')", (dup_id,)), 1062, code)
    wk.check("own row still there before ROLLBACK", (1,), db.one(f"SELECT COUNT(*) FROM {T} WHERE id = %s", (rid,)))
    db.conn.rollback()
    wk.check("rolled-back row", (0,), db.one(
        f"SELECT COUNT(*) FROM {T} WHERE worker = %s AND n = %s AND note = 'rb'", (wk.w, wk.i)))
    wk.check("SELECT 1 after the rollback", (1,), db.one("SELECT 1"))
    db.conn.commit()


# Step 4's two statements: a worker prepares them in an order set by its
# parity, so the statement ids the proxy hands out mean different SQL in
# different workers.
PREP_A = "SELECT ? * 2, 'a'"
PREP_B = "SELECT CONCAT(?, '-b'), 'b', ? + 1"


def prep_expect(sql, x):
    return ((x * 2, "a"), (x, )) if sql == PREP_A else ((f"{x}-b", "b", x + 1), (x, x))


def step_prepared(wk, db):
    """4. Two prepared cursors, prepared in an order set by the worker's
    parity, executed twice each (the second time in the other order)."""
    wk.begin("4 prepared statements")
    order = (PREP_A, PREP_B) if wk.w % 2 == 0 else (PREP_B, PREP_A)
    cursors = {}
    x = wk.w * 1000 + wk.i
    for sql in order:
        cur = db.conn.cursor(prepared=True)
        cursors[sql] = cur
        want, args = prep_expect(sql, x)
        cur.execute(sql, args)
        wk.check(f"prepared {sql!r} with {args}", [want], [tuple(r) for r in cur.fetchall()])
    for sql in reversed(order):
        want, args = prep_expect(sql, x + 500)
        cursors[sql].execute(sql, args)
        wk.check(f"prepared {sql!r} again with {args}", [want], [tuple(r) for r in cursors[sql].fetchall()])
    for cur in cursors.values():
        cur.close()
    db.conn.commit()


def step_state(wk, db, state):
    """5. time_zone and sql_mode, changed every few iterations, read back in
    later transactions (on whatever backend serves them)."""
    wk.begin("5 session state")
    if wk.every(3):
        tz = MY_TIME_ZONES[(wk.w + wk.i) % len(MY_TIME_ZONES)]
        mode, concat = MY_SQL_MODES[(wk.w + wk.i) % len(MY_SQL_MODES)]
        db.q("SET time_zone = %s", (tz,))
        db.q("SET SESSION sql_mode = %s", (mode,))
        db.conn.commit()
        state = (tz, mode, my_epoch_text(tz), concat, 0, 0)
    if wk.i % 2:
        db.conn.start_transaction()
        db.q(f"SELECT COUNT(*) FROM {T} WHERE worker = %s", (wk.w,))
        got = db.one(STATE_SQL)
        want = state[:5] + (1,)
    else:
        got = db.one(STATE_SQL)
        want = state
    db.conn.commit()
    wk.check("time_zone, sql_mode, FROM_UNIXTIME(0), 'a' || 'b', @@autocommit, @@in_transaction", want, got)
    return state


def step_batch(wk, db):
    """6. executemany: one multi-row INSERT in `default` mode, one execution
    of the prepared INSERT per row in `prepared` mode."""
    wk.begin("6 executemany")
    rows = [(wk.w, wk.i, f"batch{k}") for k in range(5)]
    db.q(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, %s)", rows, many=True)
    if not PREPARED:
        # (The C extension's prepared cursor sums -1 per execution here.)
        wk.check("executemany rowcount", 5, db.rowcount)
    last = db.lastrowid
    wk.check("SELECT LAST_INSERT_ID() after executemany", (last,), db.one("SELECT LAST_INSERT_ID()"))
    got = db.q(f"SELECT id, note FROM {T} WHERE worker = %s AND n = %s AND note LIKE 'batch%' ORDER BY id",
               (wk.w, wk.i))
    db.conn.commit()
    wk.check("batch rows", tuple(f"batch{k}" for k in range(5)), tuple(r[1] for r in got))
    # The OK packet's id: the multi-row INSERT's first row, or the last
    # execution's row.
    wk.check("insert id after executemany", got[-1 if PREPARED else 0][0], last)


def step_churn(wk):
    """8. A session leaves a temporary table, a user variable, a tracked
    variable and an open transaction behind and disconnects (COM_QUIT, or
    the pure-Python connection's shutdown() without it); the next fresh
    session sees none of it."""
    wk.begin("8 churn")
    tmp = f"tmp_{env.tag}_w{wk.w}"
    abrupt = wk.i % 2 == 0
    c = Db(pure=abrupt)
    c.q(f"CREATE TEMPORARY TABLE {tmp} (x INT)")
    c.q(f"INSERT INTO {tmp} VALUES (1)")
    c.q("SET @leak = %s", (wk.w,))
    c.q("SET time_zone = '+09:00'")
    c.q(f"INSERT INTO {T} (worker, n, note) VALUES (%s, %s, 'leaked')", (wk.w, wk.i))
    wk.check("the churned session's state", ((wk.w,), (1,), (1,)),
             (c.one("SELECT @leak"), c.one("SELECT @@in_transaction"), c.one(f"SELECT COUNT(*) FROM {tmp}")))
    if abrupt:
        c.conn.shutdown()  # closes the socket without COM_QUIT
    else:
        c.close()
    c = Db()
    wk.check("@leak, @@in_transaction, time_zone in a fresh session", (1, 0, DEFAULT[0]),
             c.one("SELECT @leak IS NULL, @@in_transaction, @@session.time_zone"))
    wk.expect_error("the previous session's temporary table", lambda: c.q(f"SELECT COUNT(*) FROM {tmp}"), 1146, code)
    wk.check("uncommitted rows of disconnected sessions", (0,),
             c.one(f"SELECT COUNT(*) FROM {T} WHERE note = 'leaked'"))
    c.conn.commit()
    c.close()


if __name__ == "__main__":
    watchdog()
    started = time.monotonic()
    DEFAULT = setup()
    workers = run_threads(env, worker)
    db = Db()
    db.q(f"DROP TABLE {T}")
    db.close()
    finish(env, workers, started)
