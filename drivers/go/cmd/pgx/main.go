// Command pgx: drivers/run go pgx MODE. GH_WORKERS workers share a pgxpool
// (as many connections as workers); each iteration a worker acquires one
// connection, runs the scenario of drivers/README.md on it and releases it.
// MODE `default` runs pgx with default_query_exec_mode=simple_protocol
// (client-side interpolation, what PgBouncer users are told to use);
// `prepared` with pgx's own default, the statement cache
// (cache_statement: every statement parsed once per connection under a
// stmtcache_ name, then only bound), and batches sent as one pipeline.
//
// Steps: 1 INSERT ... RETURNING id, read back; 2 BEGIN ... COMMIT stays on
// one backend (pg_backend_pid()); 3 a duplicate key inside a transaction
// (then 25P02), ROLLBACK; 4 explicitly prepared statements whose names mean
// different SQL by the worker's parity, deallocated after use; 5
// application_name / search_path / TimeZone set every third iteration on
// whichever pool connection the worker has (and a SET in a rolled-back
// transaction), read back from that connection later; 6 pgx.Batch: in an
// implicit transaction, with an error half-way, and inside an explicit
// transaction; 7 cancel: a context deadline during pg_sleep(10) inside a
// transaction (pgx's CancelRequestContextWatcherHandler sends a
// CancelRequest: 57014, and the connection goes on), and statement_timeout
// by SET LOCAL; 8 churn: a connection leaves a temporary table, untracked
// parameters, a prepared statement and an open transaction behind and
// disconnects (Terminate or just closing the socket); the next sees none.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"gatehouse/drivers/go/internal/harness"
)

var (
	env      harness.Env
	tbl, tmp string
	pool     *pgxpool.Pool
	connCfg  *pgx.ConnConfig
	defaults settings
	// What each pool connection's parameters were set to, by connection
	// (kept as the key, so never reused).
	states sync.Map
)

type settings struct {
	ApplicationName, SearchPath, TimeZone string
}

var searchPaths = []string{"public", "pg_catalog, public", `"$user", public`}
var timeZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Adelaide"}

// Step 4's statements: different SQL, parameter and column counts.
const (
	stmtA = "SELECT $1::int + 1"
	stmtB = "SELECT $1::text || '-b', $2::int * 2"
)

func quote(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	if err == nil {
		return "no error"
	}
	return err.Error()
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func one(w *harness.W, q querier, query string, args []any, dest ...any) {
	w.Must(q.QueryRow(context.Background(), query, args...).Scan(dest...), query)
}

func count(w *harness.W, q querier, query string, args ...any) int64 {
	var n int64
	one(w, q, query, args, &n)
	return n
}

func exec(w *harness.W, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, s string, args ...any) pgconn.CommandTag {
	tag, err := q.Exec(context.Background(), s, args...)
	w.Must(err, s)
	return tag
}

func main() {
	env = harness.Load()
	harness.Setup(env)
	tbl = "t_" + env.Tag
	tmp = "tmp_" + env.Tag
	ctx := context.Background()
	setup := &harness.W{}
	dsn := fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s connect_timeout=30",
		quote(env.Host), quote(env.Port), quote(env.User), quote(env.Password), quote(env.Database))
	pcfg, err := pgxpool.ParseConfig(dsn)
	setup.Must(err, "config")
	if env.Prepared() {
		pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	} else {
		pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	// On a context's end, send a CancelRequest (and close the connection
	// only if nothing comes back for 5 s).
	pcfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: 5 * time.Second}
	}
	pcfg.MaxConns = int32(env.Workers)
	pcfg.MinConns = 0
	connCfg = pcfg.ConnConfig
	pool, err = pgxpool.NewWithConfig(ctx, pcfg)
	setup.Must(err, "pool")
	defer pool.Close()

	{
		c, err := pgx.ConnectConfig(ctx, connCfg.Copy())
		setup.Must(err, "connect")
		one(setup, c, "SELECT current_setting('application_name'), current_setting('search_path'), current_setting('TimeZone')", nil,
			&defaults.ApplicationName, &defaults.SearchPath, &defaults.TimeZone)
		one(setup, c, "SELECT current_setting('work_mem'), current_setting('statement_timeout')", nil, &defaultWorkMem, &defaultStatementTimeout)
		exec(setup, c, "DROP TABLE IF EXISTS "+tbl)
		exec(setup, c, "CREATE TABLE "+tbl+" (id bigserial PRIMARY KEY, worker int NOT NULL, n int NOT NULL, note text NOT NULL DEFAULT '')")
		c.Close(ctx)
	}
	took := harness.Run(env, worker)
	harness.Check("end", "rows left by churn", int64(0), count(setup, pool, "SELECT count(*) FROM "+tbl+" WHERE note = 'leaked'"))
	_, err = pool.Exec(ctx, "DROP TABLE "+tbl)
	setup.Must(err, "DROP TABLE")
	harness.Finish(env, took)
}

var defaultWorkMem, defaultStatementTimeout string

type row struct {
	Worker, N int
	Note      string
}

func readRow(w *harness.W, q querier, id int64) row {
	var r row
	one(w, q, "SELECT worker, n, note FROM "+tbl+" WHERE id = $1", []any{id}, &r.Worker, &r.N, &r.Note)
	return r
}

func worker(w *harness.W) {
	ctx := context.Background()
	for i := 0; i < env.Iterations; i++ {
		c, err := pool.Acquire(ctx)
		w.Must(err, "pool.Acquire")
		iteration(w, i, c.Conn())
		c.Release()
		if (i+w.ID)%3 == 0 {
			churn(w, i)
		}
	}
}

func iteration(w *harness.W, i int, conn *pgx.Conn) {
	ctx := context.Background()
	id := w.ID
	txStatus := func(where, what string, want byte) {
		harness.Check(where, "transaction status (ReadyForQuery) "+what, string(want), string(conn.PgConn().TxStatus()))
	}

	// 1. INSERT ... RETURNING id, read back.
	where := w.At(i, "1 insert id")
	var insertID int64
	one(w, conn, "INSERT INTO "+tbl+" (worker, n, note) VALUES ($1, $2, 'ins') RETURNING id", []any{id, i}, &insertID)
	harness.Check(where, fmt.Sprintf("row %d", insertID), row{id, i, "ins"}, readRow(w, conn, insertID))

	// 2. An explicit transaction stays on one backend.
	where = w.At(i, "2 BEGIN/COMMIT")
	tx, err := conn.Begin(ctx)
	w.Must(err, "BEGIN")
	txStatus(where, "after BEGIN", 'T')
	var p1, p2 int32
	one(w, tx, "SELECT pg_backend_pid()", nil, &p1)
	var txID int64
	one(w, tx, "INSERT INTO "+tbl+" (worker, n, note) VALUES ($1, $2, 'tx') RETURNING id", []any{id, i}, &txID)
	harness.Check(where, "row inserted in the transaction", row{id, i, "tx"}, readRow(w, tx, txID))
	one(w, tx, "SELECT pg_backend_pid()", nil, &p2)
	harness.Check(where, "pg_backend_pid() at the end of the transaction (same backend as at its start)", p1, p2)
	w.Must(tx.Commit(ctx), "COMMIT")
	txStatus(where, "after COMMIT", 'I')
	harness.Check(where, "committed rows", int64(1), count(w, conn, "SELECT count(*) FROM "+tbl+" WHERE id = $1 AND note = 'tx'", txID))

	// 3. A failing statement inside a transaction, then ROLLBACK.
	where = w.At(i, "3 error in transaction")
	tx, err = conn.Begin(ctx)
	w.Must(err, "BEGIN")
	exec(w, tx, "INSERT INTO "+tbl+" (worker, n, note) VALUES ($1, $2, 'rb')", id, i)
	_, err = tx.Exec(ctx, "INSERT INTO "+tbl+" (id, worker, n, note) VALUES ($1, $2, $3, 'dup')", insertID, id, i)
	harness.Check(where, fmt.Sprintf("SQLSTATE of an INSERT of the existing id %d", insertID), "23505", sqlstate(err))
	txStatus(where, "after the error", 'E')
	var x int
	err = tx.QueryRow(ctx, "SELECT $1::int", id).Scan(&x)
	harness.Check(where, "SQLSTATE of a statement in the failed transaction", "25P02", sqlstate(err))
	w.Must(tx.Rollback(ctx), "ROLLBACK")
	txStatus(where, "after ROLLBACK", 'I')
	harness.Check(where, "rolled-back rows", int64(0), count(w, conn, "SELECT count(*) FROM "+tbl+" WHERE worker = $1 AND n = $2 AND note = 'rb'", id, i))

	// 4. Statements prepared under names that mean different SQL by parity.
	where = w.At(i, "4 named statements")
	nameA, nameB := "gh_s1", "gh_s2"
	if id%2 == 1 {
		nameA, nameB = "gh_s2", "gh_s1"
	}
	if id%2 == 0 {
		_, err = conn.Prepare(ctx, nameA, stmtA)
		w.Must(err, "Prepare A")
		_, err = conn.Prepare(ctx, nameB, stmtB)
		w.Must(err, "Prepare B")
	} else {
		_, err = conn.Prepare(ctx, nameB, stmtB)
		w.Must(err, "Prepare B")
		_, err = conn.Prepare(ctx, nameA, stmtA)
		w.Must(err, "Prepare A")
	}
	var a, c int32
	var b string
	one(w, conn, nameB, []any{fmt.Sprint(id), i}, &b, &c)
	harness.Check(where, "statement B (named "+nameB+")", []any{fmt.Sprintf("%d-b", id), int32(2 * i)}, []any{b, c})
	one(w, conn, nameA, []any{id*1000 + i}, &a)
	harness.Check(where, "statement A (named "+nameA+")", int32(id*1000+i+1), a)
	tx, err = conn.Begin(ctx)
	w.Must(err, "BEGIN")
	one(w, tx, nameA, []any{id}, &a)
	harness.Check(where, "statement A in a transaction", int32(id+1), a)
	one(w, tx, nameB, []any{fmt.Sprint(i), id}, &b, &c)
	harness.Check(where, "statement B in a transaction", []any{fmt.Sprintf("%d-b", i), int32(2 * id)}, []any{b, c})
	w.Must(tx.Commit(ctx), "COMMIT")
	w.Must(conn.Deallocate(ctx, "gh_s1"), "Deallocate")
	w.Must(conn.Deallocate(ctx, "gh_s2"), "Deallocate")

	// 5. Tracked parameters, per pool connection: set every third
	//    iteration, read back whenever a worker has that connection.
	where = w.At(i, "5 session parameters")
	want := defaults
	if v, ok := states.Load(conn); ok {
		want = v.(settings)
	}
	if i%3 == 0 {
		want = settings{fmt.Sprintf("gh_%d_%d", id, i), searchPaths[(id+i)%len(searchPaths)], timeZones[(id+i/3)%len(timeZones)]}
		exec(w, conn, "SET application_name = "+quote(want.ApplicationName))
		exec(w, conn, "SET search_path TO "+want.SearchPath)
		exec(w, conn, "SET TimeZone = "+quote(want.TimeZone))
		states.Store(conn, want)
		// A SET inside a rolled-back transaction does not stick.
		tx, err = conn.Begin(ctx)
		w.Must(err, "BEGIN")
		exec(w, tx, "SET application_name = 'rolled_back'")
		exec(w, tx, "SET TimeZone = 'Pacific/Chatham'")
		w.Must(tx.Rollback(ctx), "ROLLBACK")
	}
	const params = "SELECT current_setting('application_name'), current_setting('search_path'), current_setting('TimeZone')"
	var got settings
	one(w, conn, params, nil, &got.ApplicationName, &got.SearchPath, &got.TimeZone)
	harness.Check(where, "application_name, search_path, TimeZone of this pool connection", want, got)
	tx, err = conn.Begin(ctx)
	w.Must(err, "BEGIN")
	count(w, tx, "SELECT count(*) FROM "+tbl+" WHERE worker = $1", id)
	one(w, tx, params, nil, &got.ApplicationName, &got.SearchPath, &got.TimeZone)
	harness.Check(where, "application_name, search_path, TimeZone in a transaction", want, got)
	w.Must(tx.Commit(ctx), "COMMIT")

	// 6. Batches: one implicit transaction (one backend), one with an error
	//    half-way (all of it rolled back), one inside BEGIN ... COMMIT.
	where = w.At(i, "6 batch")
	ins := "INSERT INTO " + tbl + " (worker, n, note) VALUES ($1, $2, $3) RETURNING id"
	batch := &pgx.Batch{}
	batch.Queue("SELECT pg_backend_pid()")
	for k := 0; k < 4; k++ {
		batch.Queue(ins, id, i, fmt.Sprintf("b%d", k))
	}
	batch.Queue("SELECT note FROM "+tbl+" WHERE worker = $1 AND n = $2 AND note LIKE 'b_' ORDER BY id", id, i)
	batch.Queue("SELECT pg_backend_pid()")
	br := conn.SendBatch(ctx, batch)
	w.Must(br.QueryRow().Scan(&p1), "batch: pg_backend_pid")
	var ids []int64
	for k := 0; k < 4; k++ {
		var bid int64
		w.Must(br.QueryRow().Scan(&bid), "batch: INSERT")
		ids = append(ids, bid)
	}
	rows, err := br.Query()
	w.Must(err, "batch: SELECT")
	notes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	w.Must(err, "batch: SELECT")
	w.Must(br.QueryRow().Scan(&p2), "batch: pg_backend_pid")
	w.Must(br.Close(), "batch")
	harness.Check(where, "rows read back in a batch", []string{"b0", "b1", "b2", "b3"}, notes)
	harness.Check(where, "pg_backend_pid() at both ends of a batch", p1, p2)
	harness.Check(where, "ids of 4 INSERTs in a batch increase", true, ids[0] < ids[1] && ids[1] < ids[2] && ids[2] < ids[3])

	batch = &pgx.Batch{}
	batch.Queue(ins, id, i, "be")
	batch.Queue("INSERT INTO "+tbl+" (id, worker, n, note) VALUES ($1, $2, $3, 'dup')", insertID, id, i)
	batch.Queue("SELECT $1::int", id)
	br = conn.SendBatch(ctx, batch)
	var bid int64
	w.Must(br.QueryRow().Scan(&bid), "batch: INSERT")
	_, err = br.Exec()
	harness.Check(where, "SQLSTATE of the duplicate INSERT in a batch", "23505", sqlstate(err))
	_, err = br.Exec()
	if err == nil {
		harness.Fail(where, "the statement after a failed one in a batch succeeded")
	}
	harness.Counted()
	br.Close()
	txStatus(where, "after the failed batch", 'I')
	harness.Check(where, "rows of the failed batch (its implicit transaction rolled back)", int64(0), count(w, conn, "SELECT count(*) FROM "+tbl+" WHERE worker = $1 AND n = $2 AND note = 'be'", id, i))

	tx, err = conn.Begin(ctx)
	w.Must(err, "BEGIN")
	one(w, tx, "SELECT pg_backend_pid()", nil, &p1)
	batch = &pgx.Batch{}
	for k := 0; k < 3; k++ {
		batch.Queue(ins, id, i, fmt.Sprintf("q%d", k))
	}
	batch.Queue("SELECT count(*), pg_backend_pid() FROM "+tbl+" WHERE worker = $1 AND n = $2 AND note LIKE 'q_'", id, i)
	br = tx.SendBatch(ctx, batch)
	for k := 0; k < 3; k++ {
		w.Must(br.QueryRow().Scan(&bid), "batch: INSERT")
	}
	var n int64
	w.Must(br.QueryRow().Scan(&n, &p2), "batch: count")
	w.Must(br.Close(), "batch")
	harness.Check(where, "count and pg_backend_pid() at the end of a batch in a transaction", []any{int64(3), p1}, []any{n, p2})
	w.Must(tx.Commit(ctx), "COMMIT")

	// 7. Cancel. (a) A context deadline during pg_sleep(10) inside a
	//    transaction: pgx sends a CancelRequest, the server answers 57014,
	//    the connection goes on.
	if (i+id)%10 == 0 {
		where = w.At(i, "7 context cancel")
		tx, err = conn.Begin(ctx)
		w.Must(err, "BEGIN")
		one(w, tx, "SELECT pg_backend_pid()", nil, &p1)
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		started := time.Now()
		_, err = tx.Exec(tctx, "SELECT pg_sleep(10)")
		cancel()
		took := time.Since(started)
		harness.Check(where, fmt.Sprintf("SQLSTATE of pg_sleep(10) under a 300 ms context deadline (backend %d; returned after %v)", p1, took.Round(time.Millisecond)), "57014", sqlstate(err))
		harness.Check(where, "the connection is open after the cancel", false, conn.IsClosed())
		w.Must(tx.Rollback(ctx), "ROLLBACK")
		one(w, conn, "SELECT $1::int", []any{id}, &x)
		harness.Check(where, "a query after the cancel", id, x)
	}
	// (b) statement_timeout by SET LOCAL: 57014, gone after the transaction.
	if i%3 == 1 {
		where = w.At(i, "7 statement_timeout")
		tx, err = conn.Begin(ctx)
		w.Must(err, "BEGIN")
		exec(w, tx, "SET LOCAL statement_timeout = '200ms'")
		_, err = tx.Exec(ctx, "SELECT pg_sleep($1)", 5)
		harness.Check(where, "SQLSTATE of pg_sleep(5) under SET LOCAL statement_timeout = 200ms", "57014", sqlstate(err))
		w.Must(tx.Rollback(ctx), "ROLLBACK")
		var st string
		one(w, conn, "SELECT current_setting('statement_timeout')", nil, &st)
		harness.Check(where, "statement_timeout after the transaction", defaultStatementTimeout, st)
	}
}

// 8. Churn: a fresh connection (outside the pool) leaves state behind and
// disconnects; the next fresh one sees none of it. The worker holds no
// other connection meanwhile.
func churn(w *harness.W, i int) {
	ctx := context.Background()
	where := w.At(i, "8 churn")
	d, err := pgx.ConnectConfig(ctx, connCfg.Copy())
	w.Must(err, "connect")
	exec(w, d, "CREATE TEMPORARY TABLE "+tmp+" (x int)")
	exec(w, d, "INSERT INTO "+tmp+" VALUES ($1)", w.ID)
	exec(w, d, "SET work_mem = '7777kB'")
	exec(w, d, fmt.Sprintf("SET gh.leak = 'w%d'", w.ID))
	_, err = d.Prepare(ctx, "gh_leak", "SELECT 'leaked statement'")
	w.Must(err, "Prepare")
	exec(w, d, "BEGIN")
	exec(w, d, "INSERT INTO "+tbl+" (worker, n, note) VALUES ($1, $2, 'leaked')", w.ID, i)
	harness.Check(where, "the leaking connection sees its own row", int64(1), count(w, d, "SELECT count(*) FROM "+tbl+" WHERE worker = $1 AND n = $2 AND note = 'leaked'", w.ID, i))
	if i%4 >= 2 {
		d.PgConn().Conn().Close() // gone without Terminate
	}
	d.Close(ctx)

	e, err := pgx.ConnectConfig(ctx, connCfg.Copy())
	w.Must(err, "connect")
	defer e.Close(ctx)
	harness.Check(where, "transaction status of a fresh connection", "I", string(e.PgConn().TxStatus()))
	var workMem, leak string
	var got settings
	var leaked int64
	one(w, e, "SELECT current_setting('work_mem'), coalesce(current_setting('gh.leak', true), ''), current_setting('application_name'), current_setting('search_path'), current_setting('TimeZone'), (SELECT count(*) FROM "+tbl+" WHERE note = 'leaked')", nil,
		&workMem, &leak, &got.ApplicationName, &got.SearchPath, &got.TimeZone, &leaked)
	harness.Check(where, "work_mem, gh.leak, application_name, search_path, TimeZone and uncommitted rows on a fresh connection",
		[]any{defaultWorkMem, "", defaults, int64(0)}, []any{workMem, leak, got, leaked})
	var x int
	err = e.QueryRow(ctx, "SELECT x FROM "+tmp+" WHERE x = $1", w.ID).Scan(&x)
	harness.Check(where, "SQLSTATE of a SELECT from the previous connection's temporary table", "42P01", sqlstate(err))
	_, err = e.Prepare(ctx, "gh_leak", "SELECT $1::int * 3")
	w.Must(err, "Prepare under the previous connection's statement name")
	one(w, e, "gh_leak", []any{w.ID}, &x)
	harness.Check(where, "a statement named like the previous connection's", 3*w.ID, x)
}
