// Command mysql: drivers/run go mysql MODE. GH_WORKERS workers share a
// database/sql pool of go-sql-driver/mysql connections (as many as there
// are workers); each iteration a worker takes one connection (db.Conn),
// runs the scenario of drivers/README.md on it and gives it back. MODE
// `default` interpolates parameters into the text protocol
// (interpolateParams=true, multiStatements=true); `prepared` sends every
// statement with parameters as a server-side prepared statement
// (interpolateParams=false: prepare, execute, close) and uses statements
// prepared once with db.Prepare inside transactions (tx.StmtContext).
//
// Steps: 1 LastInsertId() vs SELECT LAST_INSERT_ID() on the same
// connection; 2 BEGIN ... COMMIT and autocommit=0 transactions stay on one
// backend (CONNECTION_ID()); 3 a duplicate key inside a transaction,
// ROLLBACK; 4 two statements prepared on the connection in an order set by
// the worker's parity; 5 time_zone / sql_mode set every third iteration on
// whichever pool connection the worker has, read back from that
// connection later (whichever worker has it then); 6 a multi-row INSERT
// and a multi-statement query (default) or a statement prepared in a
// transaction executed five times (prepared); 7 cancel: a context deadline
// during SELECT SLEEP(2) (the driver closes that connection), then the
// pool goes on; 8 churn: a connection leaves a temporary table, a user
// variable and an uncommitted insert behind and disconnects (COM_QUIT or
// just closing the socket); the next sees none of it.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"gatehouse/drivers/go/internal/harness"
)

var (
	env      harness.Env
	tbl, tmp string
	db       *sql.DB
	// prepared mode: statements prepared once on the pool (db.Prepare).
	stTx, stRead *sql.Stmt
	// The server's time_zone and sql_mode for a new session.
	defaults [2]string
	// What each pool connection's time_zone and sql_mode were set to, by
	// driver connection (kept as the key, so never reused).
	states sync.Map
)

var timeZones = []string{"+00:00", "+01:00", "-03:00", "+05:30", "+09:00", "-11:00", "+13:00"}
var sqlModes = []string{
	"STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION",
	"STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION",
	"ONLY_FULL_GROUP_BY,NO_ENGINE_SUBSTITUTION",
	"NO_ENGINE_SUBSTITUTION",
}

// Step 4's statements: different SQL, parameter and column counts.
const (
	stmtA = "SELECT CAST(? AS SIGNED) + 1"
	stmtB = "SELECT CONCAT('b-', ?), CAST(? AS SIGNED) * 2"
)

func config() *mysql.Config {
	c := mysql.NewConfig()
	c.User = env.User
	c.Passwd = env.Password
	c.Net = "tcp"
	c.Addr = net.JoinHostPort(env.Host, env.Port)
	c.DBName = env.Database
	c.InterpolateParams = !env.Prepared()
	c.MultiStatements = !env.Prepared()
	c.Timeout = 30 * time.Second
	return c
}

func errno(err error) any {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return int(me.Number)
	}
	if err == nil {
		return "no error"
	}
	return err.Error()
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// one scans a one-row result.
func one(w *harness.W, q querier, what string, query string, args []any, dest ...any) {
	w.Must(q.QueryRowContext(context.Background(), query, args...).Scan(dest...), what)
}

func count(w *harness.W, q querier, query string, args ...any) int64 {
	var n int64
	one(w, q, query, query, args, &n)
	return n
}

func main() {
	env = harness.Load()
	harness.Setup(env)
	tbl = "t_" + env.Tag
	tmp = "tmp_" + env.Tag
	ctx := context.Background()
	connector, err := mysql.NewConnector(config())
	if err != nil {
		harness.Fail("setup", "%v", err)
	}
	db = sql.OpenDB(connector)
	db.SetMaxOpenConns(env.Workers)
	db.SetMaxIdleConns(env.Workers)
	defer db.Close()
	setup := &harness.W{}
	for _, s := range []string{
		"DROP TABLE IF EXISTS " + tbl,
		"CREATE TABLE " + tbl + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, worker INT NOT NULL, n INT NOT NULL, note VARCHAR(64) NOT NULL) ENGINE=InnoDB",
	} {
		_, err := db.ExecContext(ctx, s)
		setup.Must(err, s)
	}
	{
		fresh := sql.OpenDB(connector)
		one(setup, fresh, "defaults", "SELECT @@time_zone, @@sql_mode", nil, &defaults[0], &defaults[1])
		fresh.Close()
	}
	if env.Prepared() {
		stTx, err = db.PrepareContext(ctx, "INSERT INTO "+tbl+" (worker, n, note) VALUES (?, ?, 'tx')")
		setup.Must(err, "db.Prepare")
		stRead, err = db.PrepareContext(ctx, "SELECT worker, n, note FROM "+tbl+" WHERE id = ?")
		setup.Must(err, "db.Prepare")
	}
	took := harness.Run(env, worker)
	harness.Check("end", "rows left by churn", int64(0), count(setup, db, "SELECT COUNT(*) FROM "+tbl+" WHERE note = 'leaked'"))
	if stTx != nil {
		stTx.Close()
		stRead.Close()
	}
	_, err = db.ExecContext(ctx, "DROP TABLE "+tbl)
	setup.Must(err, "DROP TABLE")
	harness.Finish(env, took)
}

type row struct {
	Worker, N int
	Note      string
}

func readRow(w *harness.W, q querier, id int64) row {
	var r row
	one(w, q, "read back", "SELECT worker, n, note FROM "+tbl+" WHERE id = ?", []any{id}, &r.Worker, &r.N, &r.Note)
	return r
}

func worker(w *harness.W) {
	ctx := context.Background()
	for i := 0; i < env.Iterations; i++ {
		conn, err := db.Conn(ctx)
		w.Must(err, "db.Conn")
		iteration(w, i, conn)
		conn.Close()
		if (i+w.ID)%3 == 0 {
			churn(w, i)
		}
	}
}

func iteration(w *harness.W, i int, conn *sql.Conn) {
	ctx := context.Background()
	id := w.ID

	// 1. Insert, then the generated id from the OK packet vs LAST_INSERT_ID().
	//    Prepared mode: one statement prepared on the connection, executed
	//    twice (the second execute comes with no prepare before it).
	where := w.At(i, "1 insert id")
	const insert = "INSERT INTO " + "%s (worker, n, note) VALUES (?, ?, 'ins')"
	var st *sql.Stmt
	var err error
	runs := 1
	if env.Prepared() {
		st, err = conn.PrepareContext(ctx, fmt.Sprintf(insert, tbl))
		w.Must(err, "Prepare INSERT")
		runs = 2
	}
	var insertID int64
	for run := 0; run < runs; run++ {
		var res sql.Result
		if st != nil {
			res, err = st.ExecContext(ctx, id, i)
		} else {
			res, err = conn.ExecContext(ctx, fmt.Sprintf(insert, tbl), id, i)
		}
		w.Must(err, "INSERT")
		insertID, err = res.LastInsertId()
		w.Must(err, "LastInsertId")
		affected, err := res.RowsAffected()
		w.Must(err, "RowsAffected")
		harness.Check(where, "RowsAffected of the INSERT", int64(1), affected)
		var lid int64
		one(w, conn, "LAST_INSERT_ID", "SELECT LAST_INSERT_ID()", nil, &lid)
		harness.Check(where, fmt.Sprintf("SELECT LAST_INSERT_ID() after the INSERT (execution %d) whose OK packet said %d", run+1, insertID), insertID, lid)
		harness.Check(where, fmt.Sprintf("row %d", insertID), row{id, i, "ins"}, readRow(w, conn, insertID))
	}
	if st != nil {
		w.Must(st.Close(), "close statement")
	}

	// 2a. An explicit transaction stays on one backend.
	where = w.At(i, "2 BEGIN/COMMIT")
	tx, err := conn.BeginTx(ctx, nil)
	w.Must(err, "BEGIN")
	var res sql.Result
	var b1, b2 int64
	one(w, tx, "CONNECTION_ID", "SELECT CONNECTION_ID()", nil, &b1)
	if env.Prepared() {
		res, err = tx.StmtContext(ctx, stTx).ExecContext(ctx, id, i)
	} else {
		res, err = tx.ExecContext(ctx, "INSERT INTO "+tbl+" (worker, n, note) VALUES (?, ?, 'tx')", id, i)
	}
	w.Must(err, "INSERT in a transaction")
	txID, err := res.LastInsertId()
	w.Must(err, "LastInsertId")
	var got row
	if env.Prepared() {
		w.Must(tx.StmtContext(ctx, stRead).QueryRowContext(ctx, txID).Scan(&got.Worker, &got.N, &got.Note), "read back")
	} else {
		got = readRow(w, tx, txID)
	}
	harness.Check(where, "row inserted in the transaction", row{id, i, "tx"}, got)
	one(w, tx, "CONNECTION_ID", "SELECT CONNECTION_ID()", nil, &b2)
	harness.Check(where, "CONNECTION_ID() at the end of the transaction (same backend as at its start)", b1, b2)
	harness.Check(where, "@@in_transaction inside BEGIN", int64(1), count(w, tx, "SELECT @@in_transaction"))
	w.Must(tx.Commit(), "COMMIT")
	harness.Check(where, "committed rows", int64(1), count(w, conn, "SELECT COUNT(*) FROM "+tbl+" WHERE id = ? AND note = 'tx'", txID))

	// 2b. autocommit off, starting with a table-less SELECT.
	where = w.At(i, "2 autocommit=0")
	exec(w, conn, "SET autocommit = 0")
	one(w, conn, "CONNECTION_ID", "SELECT CONNECTION_ID()", nil, &b1)
	_, err = conn.ExecContext(ctx, "INSERT INTO "+tbl+" (worker, n, note) VALUES (?, ?, 'ac0')", id, i)
	w.Must(err, "INSERT with autocommit off")
	harness.Check(where, "rows inserted with autocommit off", int64(1), count(w, conn, "SELECT COUNT(*) FROM "+tbl+" WHERE worker = ? AND n = ? AND note = 'ac0'", id, i))
	one(w, conn, "CONNECTION_ID", "SELECT CONNECTION_ID()", nil, &b2)
	harness.Check(where, "CONNECTION_ID() at the end of the autocommit=0 transaction (same backend as its first, table-less SELECT)", b1, b2)
	exec(w, conn, "COMMIT")
	exec(w, conn, "SET autocommit = 1")
	var ac, inTx int64
	one(w, conn, "@@autocommit", "SELECT @@autocommit, @@in_transaction", nil, &ac, &inTx)
	harness.Check(where, "@@autocommit, @@in_transaction after COMMIT and SET autocommit = 1", [2]int64{1, 0}, [2]int64{ac, inTx})

	// 3. A failing statement inside a transaction, then ROLLBACK.
	where = w.At(i, "3 error in transaction")
	tx, err = conn.BeginTx(ctx, nil)
	w.Must(err, "BEGIN")
	_, err = tx.ExecContext(ctx, "INSERT INTO "+tbl+" (worker, n, note) VALUES (?, ?, 'rb')", id, i)
	w.Must(err, "INSERT")
	_, err = tx.ExecContext(ctx, "INSERT INTO "+tbl+" (id, worker, n, note) VALUES (?, ?, ?, 'dup')", insertID, id, i)
	harness.Check(where, fmt.Sprintf("error of an INSERT of the existing id %d", insertID), 1062, errno(err))
	harness.Check(where, "own insert visible before ROLLBACK", int64(1), count(w, tx, "SELECT COUNT(*) FROM "+tbl+" WHERE worker = ? AND n = ? AND note = 'rb'", id, i))
	w.Must(tx.Rollback(), "ROLLBACK")
	harness.Check(where, "rolled-back rows", int64(0), count(w, conn, "SELECT COUNT(*) FROM "+tbl+" WHERE worker = ? AND n = ? AND note = 'rb'", id, i))
	harness.Check(where, "@@in_transaction after ROLLBACK", int64(0), count(w, conn, "SELECT @@in_transaction"))

	// 4. Two statements prepared in an order set by the worker's parity, so
	//    the same statement id is different SQL on different connections.
	where = w.At(i, "4 prepared statements")
	first, second := stmtA, stmtB
	if id%2 == 1 {
		first, second = stmtB, stmtA
	}
	s1, err := conn.PrepareContext(ctx, first)
	w.Must(err, "Prepare")
	s2, err := conn.PrepareContext(ctx, second)
	w.Must(err, "Prepare")
	sa, sb := s1, s2
	if first == stmtB {
		sa, sb = s2, s1
	}
	var a int64
	var b string
	var c int64
	w.Must(sb.QueryRowContext(ctx, fmt.Sprint(id), i).Scan(&b, &c), "statement B")
	harness.Check(where, "statement B", []any{fmt.Sprintf("b-%d", id), int64(2 * i)}, []any{b, c})
	w.Must(sa.QueryRowContext(ctx, id*1000+i).Scan(&a), "statement A")
	harness.Check(where, "statement A", int64(id*1000+i+1), a)
	tx, err = conn.BeginTx(ctx, nil)
	w.Must(err, "BEGIN")
	w.Must(tx.StmtContext(ctx, sa).QueryRowContext(ctx, id).Scan(&a), "statement A in a transaction")
	harness.Check(where, "statement A in a transaction", int64(id+1), a)
	w.Must(tx.StmtContext(ctx, sb).QueryRowContext(ctx, fmt.Sprint(i), id).Scan(&b, &c), "statement B in a transaction")
	harness.Check(where, "statement B in a transaction", []any{fmt.Sprintf("b-%d", i), int64(2 * id)}, []any{b, c})
	w.Must(tx.Commit(), "COMMIT")
	w.Must(s1.Close(), "close statement")
	w.Must(s2.Close(), "close statement")

	// 5. Tracked session variables, per pool connection: set every third
	//    iteration, read back whenever a worker has that connection.
	where = w.At(i, "5 session variables")
	var key any
	w.Must(conn.Raw(func(dc any) error { key = dc; return nil }), "Raw")
	want := defaults
	if v, ok := states.Load(key); ok {
		want = v.([2]string)
	}
	if i%3 == 0 {
		want = [2]string{timeZones[(id+i)%len(timeZones)], sqlModes[(id+i/3)%len(sqlModes)]}
		exec(w, conn, "SET time_zone = '"+want[0]+"'")
		exec(w, conn, "SET SESSION sql_mode = '"+want[1]+"'")
		states.Store(key, want)
	}
	var vars [2]string
	one(w, conn, "session variables", "SELECT @@time_zone, @@sql_mode", nil, &vars[0], &vars[1])
	harness.Check(where, "@@time_zone, @@sql_mode of this pool connection", want, vars)
	tx, err = conn.BeginTx(ctx, nil)
	w.Must(err, "BEGIN")
	count(w, tx, "SELECT COUNT(*) FROM "+tbl+" WHERE worker = ?", id)
	one(w, tx, "session variables", "SELECT @@time_zone, @@sql_mode", nil, &vars[0], &vars[1])
	harness.Check(where, "@@time_zone, @@sql_mode in a transaction", want, vars)
	w.Must(tx.Commit(), "COMMIT")

	// 6. Batches.
	where = w.At(i, "6 batch")
	values := strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", 5), ", ")
	var args []any
	for k := 0; k < 5; k++ {
		args = append(args, id, i, fmt.Sprintf("batch%d", k))
	}
	res, err = conn.ExecContext(ctx, "INSERT INTO "+tbl+" (worker, n, note) VALUES "+values, args...)
	w.Must(err, "5-row INSERT")
	first5, err := res.LastInsertId()
	w.Must(err, "LastInsertId")
	affected, err := res.RowsAffected()
	w.Must(err, "RowsAffected")
	harness.Check(where, "RowsAffected of a 5-row INSERT", int64(5), affected)
	var wantIDs, gotIDs []string
	for k := int64(0); k < 5; k++ {
		wantIDs = append(wantIDs, fmt.Sprintf("%d:batch%d", first5+k, k))
	}
	gotIDs = idsAndNotes(w, conn, "SELECT id, note FROM "+tbl+" WHERE worker = ? AND n = ? AND note LIKE 'batch%' ORDER BY id", id, i)
	harness.Check(where, "rows of the 5-row INSERT (consecutive ids from its LastInsertId)", wantIDs, gotIDs)
	if !env.Prepared() {
		// A multi-statement query: its INSERT, LAST_INSERT_ID() and the row.
		rows, err := conn.QueryContext(ctx, "INSERT INTO "+tbl+" (worker, n, note) VALUES (?, ?, 'multi'); SELECT LAST_INSERT_ID(), CONNECTION_ID(); SELECT worker, n, note FROM "+tbl+" WHERE id = LAST_INSERT_ID()", id, i)
		w.Must(err, "multi-statement query")
		var results []any
		var lid int64
		for {
			cols, err := rows.Columns()
			w.Must(err, "Columns")
			for rows.Next() {
				if len(cols) == 2 {
					var l, cid int64
					w.Must(rows.Scan(&l, &cid), "scan")
					results = append(results, "id")
					lid = l
				} else {
					var r row
					w.Must(rows.Scan(&r.Worker, &r.N, &r.Note), "scan")
					results = append(results, r)
				}
			}
			w.Must(rows.Err(), "multi-statement query")
			if !rows.NextResultSet() {
				break
			}
		}
		w.Must(rows.Err(), "multi-statement query")
		rows.Close()
		harness.Check(where, "result sets of INSERT; SELECT LAST_INSERT_ID(); SELECT the row", []any{"id", row{id, i, "multi"}}, results)
		harness.Check(where, "the multi-statement query's row by id", row{id, i, "multi"}, readRow(w, conn, lid))
	} else {
		// A statement prepared in a transaction, executed five times.
		tx, err = conn.BeginTx(ctx, nil)
		w.Must(err, "BEGIN")
		one(w, tx, "CONNECTION_ID", "SELECT CONNECTION_ID()", nil, &b1)
		st, err := tx.PrepareContext(ctx, "INSERT INTO "+tbl+" (worker, n, note) VALUES (?, ?, ?)")
		w.Must(err, "Prepare in a transaction")
		wantIDs = nil
		for k := 0; k < 5; k++ {
			r, err := st.ExecContext(ctx, id, i, fmt.Sprintf("p%d", k))
			w.Must(err, "execute")
			x, err := r.LastInsertId()
			w.Must(err, "LastInsertId")
			wantIDs = append(wantIDs, fmt.Sprintf("%d:p%d", x, k))
		}
		w.Must(st.Close(), "close statement")
		gotIDs = idsAndNotes(w, tx, "SELECT id, note FROM "+tbl+" WHERE worker = ? AND n = ? AND note LIKE 'p_' ORDER BY id", id, i)
		harness.Check(where, "rows of 5 executions of a prepared INSERT", wantIDs, gotIDs)
		one(w, tx, "CONNECTION_ID", "SELECT CONNECTION_ID()", nil, &b2)
		harness.Check(where, "CONNECTION_ID() at both ends of the transaction", b1, b2)
		w.Must(tx.Commit(), "COMMIT")
	}

	// 7. Cancel: a context deadline during SLEEP(2). The driver closes the
	//    connection; the pool goes on with others. (The server, and so the
	//    proxy, keeps running a query whose client has gone: each of these
	//    holds a backend connection for the rest of the SLEEP, hence twice
	//    per worker and not longer.)
	if (i+id)%15 == 0 {
		where = w.At(i, "7 cancel")
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		started := time.Now()
		var slept int64
		err := conn.QueryRowContext(tctx, "SELECT SLEEP(2)").Scan(&slept)
		cancel()
		took := time.Since(started)
		if !errors.Is(err, context.DeadlineExceeded) {
			harness.Fail(where, "SELECT SLEEP(2) under a 300 ms context deadline: expected %v, got %v (slept %d; after %v)", context.DeadlineExceeded, err, slept, took.Round(time.Millisecond))
		}
		harness.Counted()
		if took > 1500*time.Millisecond {
			harness.Fail(where, "the cancelled SLEEP(2) returned after %v", took)
		}
		conn.Close()
		fresh, err := db.Conn(ctx)
		w.Must(err, "db.Conn after the cancel")
		var x, inTx int64
		one(w, fresh, "after the cancel", "SELECT ?, @@in_transaction", []any{id}, &x, &inTx)
		harness.Check(where, "a query on a pool connection after the cancel", [2]int64{int64(id), 0}, [2]int64{x, inTx})
		fresh.Close()
	}
}

type quiet struct{}

func (quiet) Print(...any) {}

func exec(w *harness.W, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, s string) {
	_, err := q.ExecContext(context.Background(), s)
	w.Must(err, s)
}

func idsAndNotes(w *harness.W, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) []string {
	rows, err := q.QueryContext(context.Background(), query, args...)
	w.Must(err, query)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id int64
		var note string
		w.Must(rows.Scan(&id, &note), "scan")
		out = append(out, fmt.Sprintf("%d:%s", id, note))
	}
	w.Must(rows.Err(), query)
	return out
}

// 8. Churn: a fresh connection (outside the pool) leaves state behind and
// disconnects; the next fresh one sees none of it and the server's
// defaults. The worker holds no other connection meanwhile.
func churn(w *harness.W, i int) {
	ctx := context.Background()
	where := w.At(i, "8 churn")
	var sock net.Conn
	c := config()
	c.Logger = quiet{} // the socket closed under the driver is meant
	c.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		s, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		sock = s
		return s, err
	}
	connector, err := mysql.NewConnector(c)
	w.Must(err, "connector")
	d := sql.OpenDB(connector)
	d.SetMaxOpenConns(1)
	dc, err := d.Conn(ctx)
	w.Must(err, "fresh connection")
	exec(w, dc, "CREATE TEMPORARY TABLE "+tmp+" (x INT)")
	_, err = dc.ExecContext(ctx, "INSERT INTO "+tmp+" VALUES (?)", w.ID)
	w.Must(err, "INSERT into the temporary table")
	exec(w, dc, fmt.Sprintf("SET @leak = %d", w.ID))
	if i%2 == 0 {
		exec(w, dc, "START TRANSACTION")
	} else {
		exec(w, dc, "SET autocommit = 0")
	}
	_, err = dc.ExecContext(ctx, "INSERT INTO "+tbl+" (worker, n, note) VALUES (?, ?, 'leaked')", w.ID, i)
	w.Must(err, "INSERT")
	harness.Check(where, "the leaking connection sees its own row", int64(1), count(w, dc, "SELECT COUNT(*) FROM "+tbl+" WHERE worker = ? AND n = ? AND note = 'leaked'", w.ID, i))
	if i%4 >= 2 {
		sock.Close() // gone without COM_QUIT
	}
	dc.Close()
	d.Close()

	e := sql.OpenDB(connector)
	defer e.Close()
	ec, err := e.Conn(ctx)
	w.Must(err, "fresh connection")
	defer ec.Close()
	var leakNull, inTx, ac, leaked int64
	one(w, ec, "state", "SELECT @leak IS NULL, @@in_transaction, @@autocommit, (SELECT COUNT(*) FROM "+tbl+" WHERE note = 'leaked')", nil, &leakNull, &inTx, &ac, &leaked)
	harness.Check(where, "@leak IS NULL, @@in_transaction, @@autocommit, uncommitted rows on a fresh connection", [4]int64{1, 0, 1, 0}, [4]int64{leakNull, inTx, ac, leaked})
	var x int64
	err = ec.QueryRowContext(ctx, "SELECT x FROM "+tmp+" WHERE x = ?", w.ID).Scan(&x)
	harness.Check(where, "error of a SELECT from the previous connection's temporary table", 1146, errno(err))
	var vars [2]string
	one(w, ec, "session variables", "SELECT @@time_zone, @@sql_mode", nil, &vars[0], &vars[1])
	harness.Check(where, "@@time_zone, @@sql_mode on a fresh connection", defaults, vars)
}
