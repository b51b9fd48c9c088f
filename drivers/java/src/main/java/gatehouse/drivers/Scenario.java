package gatehouse.drivers;

import com.zaxxer.hikari.HikariDataSource;
import gatehouse.drivers.Harness.Worker;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;

import static gatehouse.drivers.Harness.rows;

/**
 * What both JDBC programs run (drivers/README.md, "What every program
 * checks"): the order of the steps in one worker iteration, the pool they
 * run over, and the helpers the steps share. Each driver's class writes the
 * steps for its engine.
 */
abstract class Scenario {
    protected final Harness h;
    /** The program's own table (named after its tag). */
    protected final String t;
    protected final String insert;
    protected final String countNote;
    protected HikariDataSource pool;

    Scenario(Harness h) {
        this.h = h;
        this.t = h.table;
        this.insert = "INSERT INTO " + t + " (worker, n, note) VALUES (?, ?, ?)";
        this.countNote = "SELECT count(*) FROM " + t + " WHERE worker = ? AND n = ? AND note = ?";
    }

    /** Runs every worker's iterations over a HikariCP pool on `url`, then the summary. */
    final void run(String url) throws Exception {
        try (HikariDataSource p = h.pool(url)) {
            this.pool = p;
            h.runWorkers(this::iteration);
        }
        h.finish();
    }

    private void iteration(Worker wk) throws Exception {
        int w = wk.id;
        int i = wk.iteration;
        try (Connection c = pool.getConnection()) {
            sessionStateStays(wk, c);
            long id = insertId(wk, c);
            transactions(wk, c);
            errorInTransaction(wk, c, id);
            preparedInParityOrder(wk, c);
            if ((i + w) % 3 == 0) {
                changeSessionState(wk, c);
            }
            batches(wk, c);
            if ((i + w) % 10 == 5) {
                cancel(wk, c);
            }
            sessionStateStays(wk, c);
        }
        if ((i + w) % 5 == 2) {
            churn(wk);
        }
    }

    /** 1. An INSERT, its generated id, the row read back: the id. */
    abstract long insertId(Worker wk, Connection c) throws SQLException;

    /** 2. Explicit and autocommit-off transactions on one backend. */
    abstract void transactions(Worker wk, Connection c) throws SQLException;

    /** 3. A failing statement inside a transaction, rolled back. */
    abstract void errorInTransaction(Worker wk, Connection c, long id) throws SQLException;

    /** 4. Prepared statements whose names mean different SQL on different connections. */
    abstract void preparedInParityOrder(Worker wk, Connection c) throws SQLException;

    /** 5. Session state changed every few iterations. */
    abstract void changeSessionState(Worker wk, Connection c) throws SQLException;

    /** 5. The session state read back: still the worker's own. */
    abstract void sessionStateStays(Worker wk, Connection c) throws SQLException;

    /** 6. Batches. */
    abstract void batches(Worker wk, Connection c) throws SQLException;

    /** 7. A statement timeout: the driver's cancel. */
    abstract void cancel(Worker wk, Connection c) throws SQLException;

    /** 8. A session that leaves state behind and disconnects. */
    abstract void churn(Worker wk) throws SQLException;

    final int insertRow(PreparedStatement ps, Worker wk, String note) throws SQLException {
        ps.setInt(1, wk.id);
        ps.setInt(2, wk.iteration);
        ps.setString(3, note);
        return ps.executeUpdate();
    }

    final String count(Connection c, Worker wk, String note) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(countNote)) {
            ps.setInt(1, wk.id);
            ps.setInt(2, wk.iteration);
            ps.setString(3, note);
            return rows(ps.executeQuery());
        }
    }
}
