//! Per-server operations on a [`Cluster`]: SQL, pg_hba rules, kill,
//! pause/resume, stop, restart, promote and liveness, dispatched to the
//! `pg` / `mysql` modules.

use anyhow::{Result, bail};

use crate::sys::{Check, wait_for};
use crate::{Cluster, Engine, Role, Server, mysql, pg};

impl Cluster {
    fn engine_server(&self, name: &str, engine: Engine) -> Result<&Server> {
        let s = self.server(name)?;
        if s.engine != engine {
            bail!("{name} is a {} server, not {}", s.engine, engine);
        }
        Ok(s)
    }

    /// Run SQL with psql over TCP; returns trimmed stdout, errors carry stderr.
    pub fn pg_sql(&self, server: &str, database: &str, sql: &str) -> Result<String> {
        let s = self.engine_server(server, Engine::Postgres)?;
        pg::sql(&self.tools, s, &self.st.pg_password, database, sql)
    }

    /// Run SQL with the mariadb client over TCP (-N -B); trimmed stdout.
    pub fn mysql_sql(&self, server: &str, sql: &str) -> Result<String> {
        let s = self.engine_server(server, Engine::Mysql)?;
        mysql::sql(s, &self.st.mysql_password, sql)
    }

    /// Prepend `rule` to pg_hba.conf of every PostgreSQL server; reload.
    pub fn add_pg_hba_rule(&self, rule: &str) -> Result<()> {
        for s in self.st.servers.iter().filter(|s| s.engine == Engine::Postgres) {
            pg::add_hba_rule(&self.tools, s, rule)?;
        }
        Ok(())
    }

    /// SIGKILL the server (PostgreSQL: the postmaster and its children).
    pub fn kill(&mut self, name: &str) -> Result<()> {
        let s = self.server(name)?;
        match s.engine {
            Engine::Postgres => pg::kill(s),
            Engine::Mysql => mysql::kill(s),
        }
    }

    /// Hang the server without killing it: SIGSTOP (PostgreSQL: the
    /// postmaster and its children, as [`kill`](Cluster::kill) finds them;
    /// MariaDB: mariadbd). Its sockets stay open and connections to it are
    /// still accepted by the kernel, but nothing answers until
    /// [`resume`](Cluster::resume). Returns once every process is stopped.
    /// [`stop`](Cluster::stop) and [`down`](Cluster::down) resume a paused
    /// server before shutting it down.
    pub fn pause(&mut self, name: &str) -> Result<()> {
        let s = self.server(name)?;
        match s.engine {
            Engine::Postgres => pg::pause(s),
            Engine::Mysql => mysql::pause(s),
        }
    }

    /// Undo [`pause`](Cluster::pause): SIGCONT the same processes (for
    /// PostgreSQL the children first, then the postmaster), and return once
    /// none of them is stopped. Harmless on a server that is not paused.
    pub fn resume(&mut self, name: &str) -> Result<()> {
        let s = self.server(name)?;
        match s.engine {
            Engine::Postgres => pg::resume(s),
            Engine::Mysql => mysql::resume(s),
        }
    }

    /// Cleanly stop one server (no-op if it is not running).
    pub fn stop(&mut self, name: &str) -> Result<()> {
        self.stop_server(self.server(name)?)
    }

    /// Start a stopped/killed server again (same port and directory) and
    /// wait until it accepts connections.
    pub fn restart(&mut self, name: &str) -> Result<()> {
        self.restart_with(name, &[])
    }

    /// [`restart`](Self::restart) a MariaDB server with `options` added to
    /// its command line, for this run only (a TLS version it cannot
    /// serve, say; a later `restart` drops them). PostgreSQL servers take
    /// settings by `ALTER SYSTEM` instead, so `options` must be empty.
    pub fn restart_with(&mut self, name: &str, options: &[&str]) -> Result<()> {
        self.start_again(name, options)?;
        // Back on its host: a restarted server is a new process tree.
        self.place_on_testbed(name)
    }

    fn start_again(&self, name: &str, options: &[&str]) -> Result<()> {
        let s = self.server(name)?;
        match s.engine {
            Engine::Postgres if !options.is_empty() => {
                bail!("{name}: PostgreSQL takes settings by ALTER SYSTEM, not on its command line")
            }
            Engine::Postgres => pg::start(&self.tools, s, &self.st.pg_password),
            Engine::Mysql => {
                let tls = self.st.tls.as_ref();
                mysql::start(&self.tools, s, self.st.mysql_max_connections, tls, options)?;
                if !options.is_empty() {
                    // It answered a ping on its socket; over TCP the kit's
                    // client may not get in (the options may be why).
                    return Ok(());
                }
                wait_for(&format!("{name} to answer SELECT 1"), &mysql::log_file(s), || {
                    Ok(if mysql::is_up(s, &self.st.mysql_password) {
                        Check::Ready
                    } else {
                        Check::NotYet("SELECT 1 failed".into())
                    })
                })
            }
        }
    }

    /// Make a replica a primary; records the new role in `cluster.env`.
    pub fn promote(&mut self, name: &str) -> Result<()> {
        let s = self.server(name)?;
        match s.engine {
            Engine::Postgres => pg::promote(&self.tools, s, &self.st.pg_password)?,
            Engine::Mysql => mysql::promote(s, &self.st.mysql_password)?,
        }
        let engine = s.engine;
        if let Some(s) = self.st.servers.iter_mut().find(|s| s.name == name) {
            s.role = Role::Primary;
        }
        match engine {
            Engine::Postgres => self.st.pg_primary = Some(name.to_string()),
            Engine::Mysql => self.st.mysql_primary = Some(name.to_string()),
        }
        self.write_env()
    }

    /// Does the server accept a connection and answer `SELECT 1`?
    pub fn is_up(&self, name: &str) -> bool {
        match self.server(name) {
            Ok(s) if s.engine == Engine::Postgres => pg::is_up(&self.tools, s, &self.st.pg_password),
            Ok(s) => mysql::is_up(s, &self.st.mysql_password),
            Err(_) => false,
        }
    }
}
