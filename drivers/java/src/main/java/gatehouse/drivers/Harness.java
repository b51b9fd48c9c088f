package gatehouse.drivers;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the Java programs of the driver matrix share (see drivers/README.md):
 * the environment, the HikariCP pool, fresh connections for churn, the
 * worker threads, the checks and their counter, the failure report and the
 * final line.
 */
final class Harness {
    final String engine;
    final String mode;
    final String host;
    final int port;
    final String user;
    final String password;
    final String database;
    final int workers;
    final int iterations;
    final int poolSize;
    final String tag;
    /** The table every worker writes to. */
    final String table;

    private final AtomicLong checks = new AtomicLong();
    private final long started = System.nanoTime();
    /** What a worker last set or saw on each physical connection (step 5). */
    private final Map<Object, String> sessionState = new IdentityHashMap<>();

    private Harness(String engine, String mode) {
        this.engine = engine;
        this.mode = mode;
        this.host = env("GH_HOST", "127.0.0.1");
        this.port = Integer.parseInt(env("GH_PORT", null));
        this.user = env("GH_USER", null);
        this.password = env("GH_PASSWORD", "");
        this.database = env("GH_DATABASE", null);
        this.workers = Integer.parseInt(env("GH_WORKERS", "20"));
        this.iterations = Integer.parseInt(env("GH_ITERATIONS", "30"));
        this.poolSize = Integer.parseInt(env("GH_POOL_SIZE", "5"));
        this.tag = env("GH_TAG", "java_" + engine + "_" + mode).toLowerCase();
        if (!this.tag.matches("[a-z0-9_]+")) {
            usage("GH_TAG must be made of letters, digits and '_': " + this.tag);
        }
        this.table = "t_" + this.tag;
        String declared = System.getenv("GH_ENGINE");
        if (declared != null && !declared.isEmpty() && !declared.equals(engine)) {
            usage("GH_ENGINE is " + declared + " but this program speaks " + engine);
        }
    }

    /** Reads the environment for a program of `engine`; args[0] is the mode. */
    static Harness fromEnv(String engine, String[] args) {
        String mode = args.length > 0 ? args[0] : System.getenv().getOrDefault("GH_MODE", "default");
        if (!mode.equals("default") && !mode.equals("prepared")) {
            usage("unknown mode '" + mode + "' (default, prepared)");
        }
        return new Harness(engine, mode);
    }

    private static String env(String name, String fallback) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            if (fallback == null) {
                usage(name + " is not set (see drivers/README.md)");
            }
            return fallback;
        }
        return v;
    }

    private static void usage(String message) {
        System.err.println(message);
        System.exit(2);
    }

    /** A HikariCP pool of GH_WORKERS connections, each worker borrowing one at a time. */
    HikariDataSource pool(String url) {
        HikariConfig cfg = new HikariConfig();
        cfg.setPoolName("gh-" + tag);
        cfg.setJdbcUrl(url);
        cfg.setUsername(user);
        cfg.setPassword(password);
        cfg.setMaximumPoolSize(workers);
        cfg.setMinimumIdle(workers);
        cfg.setConnectionTimeout(120_000);
        cfg.setInitializationFailTimeout(30_000);
        return new HikariDataSource(cfg);
    }

    /** A connection of its own, outside the pool (churn, set-up). */
    Connection fresh(String url) throws SQLException {
        return DriverManager.getConnection(url, user, password);
    }

    /** Every row of `rs` (closed here), columns joined by '|', rows by ';'. */
    static String rows(ResultSet rs) throws SQLException {
        try (rs) {
            int cols = rs.getMetaData().getColumnCount();
            StringBuilder sb = new StringBuilder();
            boolean first = true;
            while (rs.next()) {
                if (!first) {
                    sb.append(';');
                }
                first = false;
                for (int k = 1; k <= cols; k++) {
                    if (k > 1) {
                        sb.append('|');
                    }
                    sb.append(rs.getString(k));
                }
            }
            return sb.toString();
        }
    }

    /** The one column of every row of `rs` as longs. */
    static List<Long> longs(ResultSet rs) throws SQLException {
        try (rs) {
            List<Long> out = new ArrayList<>();
            while (rs.next()) {
                out.add(rs.getLong(1));
            }
            return out;
        }
    }

    /**
     * Step 5's memory: what the session state of physical connection `key`
     * must be. Returns the recorded state, or records `seen` when the
     * connection has none yet (its first borrow) and returns it.
     */
    String sessionState(Object key, String seen) {
        synchronized (sessionState) {
            return sessionState.computeIfAbsent(key, k -> seen);
        }
    }

    void setSessionState(Object key, String state) {
        synchronized (sessionState) {
            sessionState.put(key, state);
        }
    }

    /** The first wrong result: report it and end the program (from any thread). */
    void fail(String message) {
        synchronized (Harness.class) {
            System.err.println("FAILED " + tag + " (" + engine + ", " + mode + ", " + workers + " workers, proxy pool "
                    + poolSize + "): " + message);
            System.err.println(checks.get() + " checks had passed, after " + elapsedSeconds() + " s");
            System.err.flush();
            System.out.flush();
            System.exit(1);
        }
    }

    String elapsedSeconds() {
        return String.format("%.1f", (System.nanoTime() - started) / 1e9);
    }

    void passed() {
        checks.incrementAndGet();
    }

    /**
     * Runs `body` for every iteration of GH_WORKERS concurrent worker
     * threads. A watchdog reports where every unfinished worker is (and its
     * stack) if they are not done after WATCHDOG_SECONDS, before the test's
     * own limit kills the program without a word.
     */
    void runWorkers(Body body) throws InterruptedException {
        List<Thread> threads = new ArrayList<>();
        List<Worker> all = new ArrayList<>();
        for (int w = 0; w < workers; w++) {
            Worker wk = new Worker(this, w);
            all.add(wk);
            Thread t = new Thread(() -> {
                try {
                    for (int i = 0; i < iterations; i++) {
                        wk.iteration = i;
                        wk.step = "start";
                        body.iteration(wk);
                    }
                } catch (Throwable e) {
                    wk.unexpected(e);
                }
            }, "worker-" + w);
            threads.add(t);
        }
        threads.forEach(Thread::start);
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(WATCHDOG_SECONDS * 1000L);
            } catch (InterruptedException e) {
                return;
            }
            StringBuilder sb = new StringBuilder("workers still running after " + WATCHDOG_SECONDS + " s:");
            for (int w = 0; w < threads.size(); w++) {
                Thread t = threads.get(w);
                if (t.isAlive()) {
                    sb.append("\n  ").append(all.get(w).where()).append(" (").append(t.getState()).append(')');
                    for (StackTraceElement e : t.getStackTrace()) {
                        sb.append("\n      at ").append(e);
                    }
                }
            }
            fail(sb.toString());
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        for (Thread t : threads) {
            t.join();
        }
        watchdog.interrupt();
    }

    /**
     * When the watchdog reports hung workers: GH_WATCHDOG, 240 s by default (the test
     * kills a program 60 s later, and sets more when every program runs at once).
     */
    private static final int WATCHDOG_SECONDS = watchdogSeconds();

    private static int watchdogSeconds() {
        try {
            int s = Integer.parseInt(System.getenv().getOrDefault("GH_WATCHDOG", "240"));
            return s > 0 ? s : 240;
        } catch (NumberFormatException e) {
            return 240;
        }
    }

    /** The last line of the program's output. */
    void finish() {
        System.out.println("finished in " + elapsedSeconds() + " s");
        System.out.println(tag + ": " + workers + " workers x " + iterations + " iterations, " + checks.get()
                + " checks passed");
        System.out.flush();
    }

    interface Body {
        void iteration(Worker wk) throws Exception;
    }

    interface Sql {
        void run() throws Exception;
    }

    static String describe(Throwable e) {
        StringWriter sw = new StringWriter();
        e.printStackTrace(new PrintWriter(sw));
        return sw.toString();
    }

    static String sqlError(SQLException e) {
        return e.getClass().getName() + " SQLSTATE " + e.getSQLState() + " code " + e.getErrorCode() + ": "
                + e.getMessage();
    }

    /** One worker thread: its number, where it is, and the checks it makes. */
    static final class Worker {
        final Harness h;
        final int id;
        volatile int iteration;
        volatile String step = "";

        Worker(Harness h, int id) {
            this.h = h;
            this.id = id;
        }

        void step(String s) {
            step = s;
        }

        private String where() {
            return "worker " + id + ", iteration " + iteration + ", step " + step;
        }

        void fail(String what, Object expected, Object got) {
            h.fail(where() + ": " + what + ": expected " + expected + ", got " + got);
        }

        void unexpected(Throwable e) {
            String got = e instanceof SQLException ? sqlError((SQLException) e) : e.toString();
            h.fail(where() + ": expected success, got " + got + "\n" + describe(e));
        }

        void eq(String what, Object expected, Object got) {
            if (!Objects.equals(expected, got)) {
                fail(what, "'" + expected + "'", "'" + got + "'");
            }
            h.passed();
        }

        void eq(String what, long expected, long got) {
            if (expected != got) {
                fail(what, expected, got);
            }
            h.passed();
        }

        void isTrue(String what, boolean ok, String expected, Object got) {
            if (!ok) {
                fail(what, expected, got);
            }
            h.passed();
        }

        /**
         * Runs `action`, which must fail with SQLSTATE `state` (and, if
         * `code` is not 0, vendor code `code`); returns the error.
         */
        SQLException expectError(String what, String state, int code, Sql action) {
            try {
                action.run();
            } catch (SQLException e) {
                if (!state.equals(e.getSQLState()) || (code != 0 && code != e.getErrorCode())) {
                    fail(what, "SQLSTATE " + state + (code != 0 ? " code " + code : ""),
                            sqlError(e) + "\n" + describe(e));
                }
                h.passed();
                return e;
            } catch (Exception e) {
                fail(what, "SQLSTATE " + state, e + "\n" + describe(e));
            }
            fail(what, "an error with SQLSTATE " + state, "success");
            return null;
        }

        /** Runs `action`, which must throw a `type`; returns it. */
        <T extends Throwable> T expectThrown(String what, Class<T> type, Sql action) {
            try {
                action.run();
            } catch (Throwable e) {
                if (!type.isInstance(e)) {
                    String got = e instanceof SQLException ? sqlError((SQLException) e) : e.toString();
                    fail(what, type.getName(), got + "\n" + describe(e));
                }
                h.passed();
                return type.cast(e);
            }
            fail(what, "a " + type.getName(), "success");
            return null;
        }
    }
}
