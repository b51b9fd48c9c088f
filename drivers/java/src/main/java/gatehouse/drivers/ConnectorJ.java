package gatehouse.drivers;

import com.mysql.cj.jdbc.JdbcConnection;
import gatehouse.drivers.Harness.Worker;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.SQLTimeoutException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import static gatehouse.drivers.Harness.longs;
import static gatehouse.drivers.Harness.rows;

/**
 * MySQL Connector/J through HikariCP (drivers/README.md, "What every program
 * checks"). `default`: the driver's defaults (client-side prepared
 * statements, text protocol). `prepared`: useServerPrepStmts=true and
 * cachePrepStmts=true (binary protocol, server statement ids cached per
 * connection).
 */
public final class ConnectorJ extends Scenario {
    /** sql_mode values step 5 rotates through, in the server's own spelling. */
    private static final String[] SQL_MODES = {
        "STRICT_TRANS_TABLES,NO_ENGINE_SUBSTITUTION",
        "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_DATE,NO_ENGINE_SUBSTITUTION",
        "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION",
    };
    /** UNIX_TIMESTAMP('2000-01-01 00:00:00') in UTC. */
    private static final long Y2K = 946_684_800L;

    private final String url;

    private ConnectorJ(Harness h) {
        super(h);
        String options = h.mode.equals("prepared") ? "?useServerPrepStmts=true&cachePrepStmts=true" : "";
        this.url = "jdbc:mysql://" + h.host + ":" + h.port + "/" + h.database + options;
    }

    public static void main(String[] args) throws Exception {
        Harness h = Harness.fromEnv("mysql", args);
        ConnectorJ p = new ConnectorJ(h);
        try (Connection c = h.fresh(p.url); Statement st = c.createStatement()) {
            st.execute("DROP TABLE IF EXISTS " + p.t);
            st.execute("CREATE TABLE " + p.t + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, worker INT NOT NULL,"
                    + " n INT NOT NULL, note VARCHAR(64) NOT NULL DEFAULT '', KEY (worker, n))");
        }
        p.run(p.url);
    }

    /** 1. An INSERT, its generated key, LAST_INSERT_ID() and the row read back. */
    @Override
    long insertId(Worker wk, Connection c) throws SQLException {
        wk.step("1 insert, getGeneratedKeys() and SELECT LAST_INSERT_ID()");
        long id;
        try (PreparedStatement ps = c.prepareStatement(insert, Statement.RETURN_GENERATED_KEYS)) {
            wk.eq("INSERT update count", 1, insertRow(ps, wk, "ins"));
            List<Long> keys = longs(ps.getGeneratedKeys());
            wk.eq("number of generated keys", 1, keys.size());
            id = keys.get(0);
        }
        try (Statement st = c.createStatement()) {
            // The INSERT ran in autocommit mode: no transaction may be left open where it ran.
            wk.eq("SELECT LAST_INSERT_ID(), @@in_transaction, @@autocommit after the autocommit INSERT whose generated"
                    + " key is " + id, id + "|0|1",
                    rows(st.executeQuery("SELECT LAST_INSERT_ID(), @@in_transaction, @@autocommit")));
        }
        try (PreparedStatement ps = c.prepareStatement("SELECT worker, n, note FROM " + t + " WHERE id = ?")) {
            ps.setLong(1, id);
            wk.eq("row " + id + " read back", wk.id + "|" + wk.iteration + "|ins", rows(ps.executeQuery()));
        }
        return id;
    }

    /** 2. BEGIN ... COMMIT and a setAutoCommit(false) transaction each stay on one backend. */
    @Override
    void transactions(Worker wk, Connection c) throws SQLException {
        try (Statement st = c.createStatement(); PreparedStatement ins = c.prepareStatement(insert)) {
            wk.step("2 BEGIN, CONNECTION_ID(), INSERT, read back, CONNECTION_ID(), COMMIT");
            st.execute("BEGIN");
            String a = rows(st.executeQuery("SELECT CONNECTION_ID()"));
            wk.eq("INSERT update count", 1, insertRow(ins, wk, "tx"));
            wk.eq("row inserted in the transaction, read back in it", "1", count(c, wk, "tx"));
            String b = rows(st.executeQuery("SELECT CONNECTION_ID()"));
            wk.eq("CONNECTION_ID() at the end of the transaction that began on backend " + a, a, b);
            st.execute("COMMIT");
            wk.eq("committed row", "1", count(c, wk, "tx"));

            wk.step("2 setAutoCommit(false): SELECT CONNECTION_ID() (table-less), INSERT, read back,"
                    + " CONNECTION_ID(), commit()");
            c.setAutoCommit(false);
            a = rows(st.executeQuery("SELECT CONNECTION_ID()"));
            wk.eq("INSERT update count", 1, insertRow(ins, wk, "ac0"));
            wk.eq("row inserted in the transaction, read back in it", "1", count(c, wk, "ac0"));
            b = rows(st.executeQuery("SELECT CONNECTION_ID()"));
            wk.eq("CONNECTION_ID() at the end of the autocommit-off transaction that began (table-less) on backend "
                    + a, a, b);
            c.commit();
            c.setAutoCommit(true);
            wk.eq("committed row", "1", count(c, wk, "ac0"));
        }
    }

    /** 3. A duplicate key inside a transaction, ROLLBACK: the row is gone, the connection works. */
    @Override
    void errorInTransaction(Worker wk, Connection c, long id) throws SQLException {
        boolean api = wk.iteration % 2 == 0;
        wk.step("3 error inside a transaction (" + (api ? "setAutoCommit(false), rollback()" : "BEGIN, ROLLBACK")
                + ")");
        try (Statement st = c.createStatement(); PreparedStatement ins = c.prepareStatement(insert);
                PreparedStatement dup = c.prepareStatement(
                        "INSERT INTO " + t + " (id, worker, n, note) VALUES (?, ?, ?, 'dup')")) {
            if (api) {
                c.setAutoCommit(false);
            } else {
                st.execute("BEGIN");
            }
            wk.eq("INSERT update count", 1, insertRow(ins, wk, "rb"));
            dup.setLong(1, id);
            dup.setInt(2, wk.id);
            dup.setInt(3, wk.iteration);
            wk.expectError("INSERT of the existing id " + id, "23000", 1062, dup::executeUpdate);
            if (api) {
                c.rollback();
                c.setAutoCommit(true);
            } else {
                st.execute("ROLLBACK");
            }
            wk.eq("row of the rolled-back transaction", "0", count(c, wk, "rb"));
            wk.eq("SELECT 1 after the rollback", "1", rows(st.executeQuery("SELECT 1")));
        }
    }

    /**
     * 4. Three prepared statements, prepared in an order that depends on the
     * worker's parity: with server-side statements the same id stands for
     * different SQL on different connections.
     */
    @Override
    void preparedInParityOrder(Worker wk, Connection c) throws SQLException {
        wk.step("4 prepared statements in parity order");
        int k = wk.iteration % 4 + 3;
        String[] sql = {
            "SELECT CAST(? AS SIGNED) + 1000, 'A'",
            "SELECT CONCAT('B', ?), CAST(? AS SIGNED) * 2",
            "SELECT CAST(? AS SIGNED) * " + k + ", 'C'",
        };
        PreparedStatement[] ps = new PreparedStatement[3];
        try {
            for (int n = 0; n < 3; n++) {
                int which = wk.id % 2 == 0 ? n : 2 - n;
                ps[which] = c.prepareStatement(sql[which]);
            }
            for (int round = 0; round < 2; round++) {
                int x = wk.iteration + round;
                ps[0].setInt(1, x);
                wk.eq("statement A", (x + 1000) + "|A", rows(ps[0].executeQuery()));
                ps[1].setString(1, "w" + wk.id);
                ps[1].setInt(2, x);
                wk.eq("statement B", "Bw" + wk.id + "|" + (2 * x), rows(ps[1].executeQuery()));
                ps[2].setInt(1, x);
                wk.eq("statement C", (x * k) + "|C", rows(ps[2].executeQuery()));
            }
        } finally {
            for (PreparedStatement p : ps) {
                if (p != null) {
                    p.close();
                }
            }
        }
    }

    private static long offsetSeconds(String tz) {
        int sign = tz.charAt(0) == '-' ? -1 : 1;
        return sign * (Long.parseLong(tz.substring(1, 3)) * 3600 + Long.parseLong(tz.substring(4, 6)) * 60);
    }

    /**
     * 5. Every few iterations: new time_zone and sql_mode, a transaction and
     * an autocommit statement, then read back (and the time zone's effect);
     * what was set is what every later borrow of this physical connection
     * must see (sessionStateStays).
     */
    @Override
    void changeSessionState(Worker wk, Connection c) throws SQLException {
        int i = wk.iteration;
        String tz = String.format("%+03d:%02d", (wk.id + i) % 13 - 6, (i % 2) * 30);
        String mode = SQL_MODES[(wk.id + i) % SQL_MODES.length];
        wk.step("5 SET time_zone = '" + tz + "', sql_mode = '" + mode + "'");
        try (Statement st = c.createStatement()) {
            if (i % 2 == 0) {
                st.execute("SET time_zone = '" + tz + "'");
                st.execute("SET SESSION sql_mode = '" + mode + "'");
            } else {
                st.execute("SET @@session.time_zone = '" + tz + "', sql_mode = '" + mode + "'");
            }
            st.execute("BEGIN");
            wk.eq("rows of this iteration in a transaction after the SET", "1", count(c, wk, "ins"));
            st.execute("COMMIT");
            wk.eq("SELECT 1 after the SET", "1", rows(st.executeQuery("SELECT 1")));
            wk.eq("time_zone and sql_mode read back", tz + "|" + mode,
                    rows(st.executeQuery("SELECT @@session.time_zone, @@session.sql_mode")));
            wk.eq("UNIX_TIMESTAMP('2000-01-01 00:00:00') in time zone " + tz, String.valueOf(Y2K - offsetSeconds(tz)),
                    rows(st.executeQuery("SELECT UNIX_TIMESTAMP('2000-01-01 00:00:00')")));
        }
        h.setSessionState(c.unwrap(JdbcConnection.class), tz + "|" + mode);
    }

    /** 5. The time_zone and sql_mode this physical connection last had, in a later transaction. */
    @Override
    void sessionStateStays(Worker wk, Connection c) throws SQLException {
        wk.step("5 time_zone and sql_mode of this connection, read back in a later borrow");
        try (Statement st = c.createStatement()) {
            // (Not the churn's user variable: reading one pins the session, as the proxy documents.)
            wk.eq("@@autocommit, @@in_transaction (outside a transaction)", "1|0",
                    rows(st.executeQuery("SELECT @@autocommit, @@in_transaction")));
            st.execute("BEGIN");
            String seen = rows(st.executeQuery("SELECT @@session.time_zone, @@session.sql_mode"));
            st.execute("COMMIT");
            String want = h.sessionState(c.unwrap(JdbcConnection.class), seen);
            wk.eq("time_zone|sql_mode this connection had when it was last used", want, seen);
        }
    }

    /** 6. executeBatch: a prepared INSERT batch with generated keys and a Statement batch. */
    @Override
    void batches(Worker wk, Connection c) throws SQLException {
        boolean inTx = wk.iteration % 2 == 1;
        wk.step("6 executeBatch" + (inTx ? " inside setAutoCommit(false)" : " in autocommit mode"));
        if (inTx) {
            c.setAutoCommit(false);
        }
        List<Long> keys;
        int rows = 5;
        try (PreparedStatement ps = c.prepareStatement(insert, Statement.RETURN_GENERATED_KEYS)) {
            for (int k = 0; k < rows; k++) {
                ps.setInt(1, wk.id);
                ps.setInt(2, wk.iteration);
                ps.setString(3, "b" + k);
                ps.addBatch();
            }
            int[] counts = ps.executeBatch();
            int[] ones = new int[rows];
            Arrays.fill(ones, 1);
            wk.eq("prepared INSERT batch update counts", Arrays.toString(ones), Arrays.toString(counts));
            keys = longs(ps.getGeneratedKeys());
        }
        // The UPDATE and DELETE find rows by primary key: a range scan on (worker, n) would take
        // REPEATABLE READ next-key locks that deadlock (1213) with other workers' INSERTs into the
        // shared table, an InnoDB outcome that says nothing about the proxy.
        try (Statement st = c.createStatement()) {
            st.addBatch("INSERT INTO " + t + " (worker, n, note) VALUES (" + wk.id + ", " + wk.iteration + ", 'sb')");
            st.addBatch("UPDATE " + t + " SET note = 'sb2' WHERE id = LAST_INSERT_ID() AND note = 'sb'");
            st.addBatch("DELETE FROM " + t + " WHERE id = -1");
            wk.eq("Statement batch update counts (INSERT; UPDATE ... WHERE id = LAST_INSERT_ID(); DELETE of no row)",
                    "[1, 1, 0]", Arrays.toString(st.executeBatch()));
        }
        if (inTx) {
            c.commit();
            c.setAutoCommit(true);
        }
        List<String> want = new ArrayList<>();
        for (int k = 0; k < keys.size(); k++) {
            want.add(keys.get(k) + "|b" + k);
        }
        wk.eq("number of generated keys of the batch", rows, keys.size());
        try (PreparedStatement ps = c.prepareStatement("SELECT id, note FROM " + t
                + " WHERE worker = ? AND n = ? AND note LIKE 'b_' ORDER BY id")) {
            ps.setInt(1, wk.id);
            ps.setInt(2, wk.iteration);
            wk.eq("rows of the batch by generated key", String.join(";", want), rows(ps.executeQuery()));
        }
        wk.eq("row inserted then updated by the Statement batch", "1", count(c, wk, "sb2"));
    }

    /** 7. setQueryTimeout: Connector/J sends KILL QUERY on a connection of its own. */
    @Override
    void cancel(Worker wk, Connection c) throws SQLException {
        wk.step("7 SELECT SLEEP(5) with setQueryTimeout(1)");
        boolean prepared = h.mode.equals("prepared");
        try (Statement st = prepared ? c.prepareStatement("SELECT SLEEP(?)") : c.createStatement()) {
            st.setQueryTimeout(1);
            long t0 = System.nanoTime();
            // Connector/J's KILL QUERY may land while the statement still
            // waits in the proxy for a pooled connection (20 workers on a
            // pool of 5): the proxy ends it there with 1317, as a server
            // ends a statement killed before it ran. The text protocol
            // reports that as the timeout. The server-prepared path checks
            // its timeout only after a successful execute (ServerPreparedQuery
            // .serverExecute), so it reports the interruption itself.
            Class<? extends SQLException> expected = prepared ? SQLException.class : SQLTimeoutException.class;
            SQLException e = wk.expectThrown("SELECT SLEEP(5) with a 1 s query timeout", expected, () -> {
                if (prepared) {
                    PreparedStatement ps = (PreparedStatement) st;
                    ps.setInt(1, 5);
                    rows(ps.executeQuery());
                } else {
                    rows(st.executeQuery("SELECT SLEEP(5)"));
                }
            });
            if (prepared) {
                wk.isTrue("the error of SELECT SLEEP(5) with a 1 s query timeout",
                        e instanceof SQLTimeoutException || e.getErrorCode() == 1317,
                        "SQLTimeoutException, or the 1317 of a statement killed before it ran",
                        e.getClass().getName() + " code " + e.getErrorCode());
            }
            double took = (System.nanoTime() - t0) / 1e9;
            wk.isTrue("time SELECT SLEEP(5) took with a 1 s timeout", took < 4.5, "under 4.5 s",
                    String.format("%.2f s", took));
            st.setQueryTimeout(0);
            wk.eq("SELECT 1 on the same connection after the timeout", "1", rows(st.executeQuery("SELECT 1")));
            wk.eq("SELECT SLEEP(0) on the same connection after the timeout", "0",
                    rows(st.executeQuery("SELECT SLEEP(0)")));
        }
    }

    /**
     * 8. A fresh connection leaves a temporary table, a user variable and an
     * open transaction with an INSERT behind (closing, or aborting the
     * socket); the next fresh connection sees none of them.
     */
    @Override
    void churn(Worker wk) throws SQLException {
        String tmp = "tmp_" + h.tag;
        String var = "@leak_" + h.tag;
        boolean abort = wk.iteration % 2 == 1;
        wk.step("8 churn: a fresh connection leaves state behind and " + (abort ? "aborts" : "closes"));
        Connection a = h.fresh(url);
        try (Statement st = a.createStatement()) {
            st.execute("CREATE TEMPORARY TABLE " + tmp + " (x INT)");
            st.execute("INSERT INTO " + tmp + " VALUES (" + wk.id + ")");
            st.execute("SET " + var + " = " + wk.id);
            a.setAutoCommit(false);
            wk.eq("uncommitted INSERT update count", 1, st.executeUpdate(
                    "INSERT INTO " + t + " (worker, n, note) VALUES (" + wk.id + ", " + wk.iteration + ", 'leaked')"));
            wk.eq("temporary table and user variable in the session that made them", "1|" + wk.id,
                    rows(st.executeQuery("SELECT COUNT(*), " + var + " FROM " + tmp)));
        } finally {
            if (abort) {
                a.abort(Runnable::run);
            } else {
                a.close();
            }
        }
        wk.step("8 churn: the next fresh connection sees nothing of the previous one");
        try (Connection b = h.fresh(url); Statement st = b.createStatement()) {
            wk.eq("user variable IS NULL, @@in_transaction, @@autocommit, uncommitted rows of any session", "1|0|1|0",
                    rows(st.executeQuery("SELECT " + var + " IS NULL, @@in_transaction, @@autocommit,"
                            + " (SELECT COUNT(*) FROM " + t + " WHERE note = 'leaked')")));
            wk.expectError("SELECT from the previous session's temporary table", "42S02", 1146,
                    () -> rows(st.executeQuery("SELECT COUNT(*) FROM " + tmp)));
            wk.eq("SELECT 1 on the fresh connection", "1", rows(st.executeQuery("SELECT 1")));
        }
    }
}
