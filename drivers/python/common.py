"""Shared by the Python driver programs (drivers/README.md): the contract's
environment, exact checks that end the whole process at the first wrong
result, workers as threads or asyncio tasks, the schedule of the occasional
steps, and the session-state values the programs set and read back."""

import asyncio
import datetime
import faulthandler
import os
import sys
import threading
import time
import traceback


class Env:
    """The variables of drivers/README.md's contract."""

    def __init__(self):
        e = os.environ
        self.engine = e["GH_ENGINE"]
        self.host = e["GH_HOST"]
        self.port = int(e["GH_PORT"])
        self.user = e["GH_USER"]
        self.password = e["GH_PASSWORD"]
        self.database = e["GH_DATABASE"]
        self.workers = int(e.get("GH_WORKERS", "20"))
        self.iterations = int(e.get("GH_ITERATIONS", "30"))
        self.pool_size = e.get("GH_POOL_SIZE", "?")
        self.mode = e.get("GH_MODE", "default")
        self.tag = e["GH_TAG"]
        # The table every program makes: one per run, named after GH_TAG.
        self.table = "t_" + self.tag

    def need(self, engine, modes):
        if self.engine != engine:
            die(f"{self.tag}: this program speaks {engine}, GH_ENGINE is {self.engine}")
        if self.mode not in modes:
            die(f"{self.tag}: mode {self.mode!r} is not one of {modes}")


_out = threading.Lock()


def say(line):
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def die(message):
    """Ends the process at once with status 1, whichever thread calls it."""
    say(message)
    sys.stderr.flush()
    os._exit(1)


_workers = []


def watchdog(seconds=None):
    """If the run hangs (GH_WATCHDOG seconds, 240 by default; the test
    harness kills a program 60 s later): prints where every unfinished
    worker is, dumps every thread's stack and exits 1."""
    seconds = seconds or float(os.environ.get("GH_WATCHDOG", "240"))

    def positions():
        stuck = [w.where() for w in _workers if not w.finished]
        say(f"HUNG after {seconds - 2:.0f} s: {len(stuck)} workers unfinished:\n  " + "\n  ".join(stuck))

    timer = threading.Timer(seconds - 2, positions)
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(seconds, exit=True)


def _canon(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode()
    if isinstance(v, (list, tuple)):
        return tuple(_canon(x) for x in v)
    return v


class Worker:
    """One worker's position (for messages) and its count of passed checks."""

    def __init__(self, env, w):
        self.env = env
        self.w = w
        self.i = -1
        self.step = "setup"
        self.checks = 0
        self.notes = {}
        self.finished = False
        _workers.append(self)

    def where(self):
        return f"{self.env.tag} worker {self.w} iteration {self.i} step {self.step}"

    def fail(self, what):
        die(f"FAILED {self.where()}: {what}")

    def check(self, what, expected, got):
        """Compares exactly (bytes from a driver count as text, lists as
        tuples, on both sides); the first difference ends the process."""
        got, expected = _canon(got), _canon(expected)
        if got != expected:
            self.fail(f"{what}: expected {expected!r}, got {got!r}")
        self.checks += 1
        return got

    def ok(self, what, condition, detail=""):
        if not condition:
            self.fail(f"{what}{': ' + detail if detail else ''}")
        self.checks += 1

    def expect_error(self, what, fn, code, code_of):
        """Runs fn, which must raise an error whose code_of(e) is `code`."""
        try:
            got = fn()
        except Exception as e:  # noqa: BLE001 - the code decides
            c = code_of(e)
            if c != code:
                self.fail(f"{what}: expected error {code!r}, got {type(e).__name__} {c!r}: {e}")
            self.checks += 1
            return e
        self.fail(f"{what}: expected error {code!r}, got a result: {got!r}")

    async def expect_error_async(self, what, coro, code, code_of):
        try:
            got = await coro
        except Exception as e:  # noqa: BLE001
            c = code_of(e)
            if c != code:
                self.fail(f"{what}: expected error {code!r}, got {type(e).__name__} {c!r}: {e}")
            self.checks += 1
            return e
        self.fail(f"{what}: expected error {code!r}, got a result: {got!r}")

    def every(self, n, phase=0):
        """True one iteration in n, spread over the workers."""
        return (self.i + self.w + phase) % n == 0

    def note(self, key, amount=1):
        self.notes[key] = self.notes.get(key, 0) + amount

    def begin(self, step):
        self.step = step


def cancel_during(wk, run, cancel, first=0.3, every=0.5):
    """Runs run() while another thread calls cancel() after `first` seconds
    and again every `every` seconds until run() ends (a cancel that reaches
    the proxy while the query still waits for a backend connection stops it
    there; one that lands as the query is handed its connection can still be
    missed, so it is repeated: the repeats are counted in the notes).
    Returns (cancels sent, the exception run() raised or None, seconds run()
    took)."""
    stop = threading.Event()
    sent = []

    def canceller():
        try:
            if stop.wait(first):
                return
            while True:
                cancel()
                sent.append(time.monotonic())
                if stop.wait(every):
                    return
        except BaseException as e:  # noqa: BLE001
            die(f"FAILED {wk.where()}: the cancel raised {type(e).__name__}: {e}")

    t = threading.Thread(target=canceller, name=f"cancel-{wk.w}")
    start = time.monotonic()
    t.start()
    error = None
    try:
        run()
    except Exception as e:  # noqa: BLE001 - the caller checks it
        error = e
    finally:
        took = time.monotonic() - start
        stop.set()
        t.join()
    wk.note("cancels")
    wk.note("cancel_repeats", max(len(sent) - 1, 0))
    wk.note("cancel_ms_total", int(took * 1000))
    return len(sent), error, took


def _crash(worker):
    die(f"FAILED {worker.where()}: unexpected exception\n{traceback.format_exc().rstrip()}")


def run_threads(env, body):
    """body(worker) in GH_WORKERS threads; any exception ends the process."""
    workers = [Worker(env, w) for w in range(env.workers)]

    def main(worker):
        try:
            body(worker)
        except BaseException:  # noqa: BLE001 - any failure fails the run
            _crash(worker)
        worker.finished = True

    threads = [threading.Thread(target=main, args=(w,), name=f"worker-{w.w}") for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return workers


def run_tasks(env, body):
    """await body(worker) in GH_WORKERS asyncio tasks of one loop."""
    workers = [Worker(env, w) for w in range(env.workers)]

    async def one(worker):
        try:
            await body(worker)
        except BaseException:  # noqa: BLE001
            _crash(worker)
        worker.finished = True

    async def all_of_them():
        await asyncio.gather(*(one(w) for w in workers))

    asyncio.run(all_of_them())
    return workers


def finish(env, workers, started, setup_checks=0):
    """Prints the notes and the contract's closing line."""
    notes = {}
    for w in workers:
        for k, v in w.notes.items():
            notes[k] = notes.get(k, 0) + v
    if notes:
        say(f"{env.tag}: notes: " + ", ".join(f"{k}={v}" for k, v in sorted(notes.items())))
    say(f"{env.tag}: {time.monotonic() - started:.1f} s")
    total = setup_checks + sum(w.checks for w in workers)
    say(f"{env.tag}: {env.workers} workers x {env.iterations} iterations, {total} checks passed")


# Session state the programs set every few iterations (step 5) and read back.

# MySQL: time_zone values and what FROM_UNIXTIME(0) reads in each.
MY_TIME_ZONES = [f"+0{h}:00" for h in range(10)]


def my_epoch_text(tz):
    return f"1970-01-01 0{tz[2]}:00:00"


# MySQL sql_mode values as the server spells them back, and what 'a' || 'b'
# gives under each (PIPES_AS_CONCAT makes || concatenate, else it is OR).
MY_SQL_MODES = [
    ("PIPES_AS_CONCAT,STRICT_TRANS_TABLES", "ab"),
    ("STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION", 0),
    ("ANSI_QUOTES,STRICT_ALL_TABLES", 0),
]

# PostgreSQL TimeZone values, with the UTC offset and the text of
# '2024-01-01 00:00:00+00'::timestamptz in each.
PG_TIME_ZONES = [
    ("Asia/Tokyo", datetime.timedelta(hours=9), "2024-01-01 09:00:00+09"),
    ("America/New_York", datetime.timedelta(hours=-5), "2023-12-31 19:00:00-05"),
    ("Asia/Kolkata", datetime.timedelta(hours=5, minutes=30), "2024-01-01 05:30:00+05:30"),
    ("UTC", datetime.timedelta(0), "2024-01-01 00:00:00+00"),
]
PG_INSTANT = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def pg_state(w, i):
    """(application_name, search_path, TimeZone) a PostgreSQL worker sets."""
    tz = PG_TIME_ZONES[(w + i) % len(PG_TIME_ZONES)][0]
    return (f"gh_w{w}_i{i}", f"sp_w{w}_i{i}, public", tz)


def pg_tz_text(tz, default_text=None):
    for name, _, text in PG_TIME_ZONES:
        if name == tz:
            return text
    return default_text


def pg_tz_offset(tz):
    for name, off, _ in PG_TIME_ZONES:
        if name == tz:
            return off
    return None
