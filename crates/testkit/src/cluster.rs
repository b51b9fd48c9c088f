//! The [`Cluster`] handle: bringing a set of servers up under a directory,
//! re-attaching to it through `cluster.env`, and the per-server operations
//! (stop/kill/restart/promote/SQL), dispatched to `pg` and `mysql`. With
//! [`Options::tls`] it generates the cluster's certificates (`tls.rs`) first.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::env_file::{self, State};
use crate::model::{Engine, Options, Role, Server};
use crate::ports::{free_port, socket_dir};
use crate::sys::{Tools, pid_alive, random_password, read_pid, signal};
use crate::testbed::{self, Hosts};
use crate::{mysql, pg, tls};

const ENV_FILE: &str = "cluster.env";

/// A set of real database servers under one directory. Dropping it stops
/// them, unless it was [`detach`](Cluster::detach)ed or
/// [`attach`](Cluster::attach)ed.
pub struct Cluster {
    pub(crate) st: State,
    pub(crate) tools: Tools,
    detached: bool,
}

impl Cluster {
    /// Create `dir`, start the servers `opts` asks for, wait until the
    /// primaries answer and every replica replicates, write `cluster.env`.
    /// A directory holding an earlier, fully stopped cluster is reused (its
    /// server directories are deleted); a running one is an error.
    pub fn up(dir: &Path, opts: &Options) -> Result<Cluster> {
        if opts.pg_replicas > 0 && !opts.pg {
            bail!("pg_replicas > 0 needs pg = true");
        }
        if opts.mysql_replicas > 0 && !opts.mysql {
            bail!("mysql_replicas > 0 needs mysql = true");
        }
        std::fs::create_dir_all(dir).with_context(|| format!("mkdir {}", dir.display()))?;
        let dir = dir.canonicalize()?;
        if dir.join(ENV_FILE).exists() {
            remove_stopped_cluster(&dir)?;
        }
        let tools = Tools::detect(opts.pg_bindir.as_deref())?;
        make_traversable(&tools, &dir)?;
        let tls = if opts.tls {
            Some(tls::generate(&tools, &dir)?)
        } else {
            None
        };
        let mut c = Cluster {
            st: State {
                dir,
                servers: Vec::new(),
                pg_password: random_password(),
                mysql_password: random_password(),
                pg_max_connections: opts.pg_max_connections,
                mysql_max_connections: opts.mysql_max_connections,
                pg_primary: None,
                mysql_primary: None,
                tls,
                pg_bindir: opts.pg_bindir.clone(),
                testbed: opts.testbed.clone(),
                testbed_id: None,
            },
            tools,
            detached: false,
        };
        // On error `c` is dropped, which stops whatever already started.
        c.open_testbed()?;
        if opts.pg {
            c.launch(Engine::Postgres, 0)?;
            c.st.pg_primary = Some("pg0".into());
            for i in 1..=opts.pg_replicas {
                c.launch(Engine::Postgres, i)?;
            }
            let primary = c.server("pg0")?;
            pg::wait_streaming(&c.tools, primary, &c.st.pg_password, opts.pg_replicas)?;
        }
        if opts.mysql {
            c.launch(Engine::Mysql, 0)?;
            c.st.mysql_primary = Some("my0".into());
            for i in 1..=opts.mysql_replicas {
                c.launch(Engine::Mysql, i)?;
            }
            for s in c.mysql_replicas() {
                mysql::wait_replicating(s, &c.st.mysql_password)?;
            }
        }
        c.write_env()?;
        Ok(c)
    }

    /// Create, configure and start server number `i` of `engine`; index 0
    /// is the primary, the others replicate from it. Retries with another
    /// port if the chosen one got taken in the meantime.
    fn launch(&mut self, engine: Engine, i: usize) -> Result<()> {
        let name = match engine {
            Engine::Postgres => format!("pg{i}"),
            Engine::Mysql => format!("my{i}"),
        };
        let taken: Vec<u16> = self.st.servers.iter().map(|s| s.port).collect();
        let mut s = Server {
            dir: self.st.dir.join(&name),
            name,
            engine,
            host: "127.0.0.1".into(),
            port: free_port(&taken)?,
            client_port: 0,
            role: if i == 0 { Role::Primary } else { Role::Replica },
        };
        s.client_port = s.port;
        self.st.servers.push(s.clone());
        self.write_env()?;
        let primary = if i == 0 {
            None
        } else {
            let p = self
                .st
                .servers
                .iter()
                .find(|p| p.engine == engine && p.role == Role::Primary);
            Some(p.context("no primary to replicate from")?.clone())
        };
        let (t, st) = (&self.tools, &self.st);
        let tls = st.tls.as_ref();
        match (engine, &primary) {
            (Engine::Postgres, None) => pg::init_primary(t, &s, &st.pg_password, st.pg_max_connections, tls)?,
            (Engine::Postgres, Some(p)) => pg::init_replica(t, &s, p, &st.pg_password, st.pg_max_connections, tls)?,
            (Engine::Mysql, _) => mysql::init(t, &s)?,
        }
        for attempt in 0.. {
            let res = match engine {
                Engine::Postgres => pg::start(t, &s, &st.pg_password),
                Engine::Mysql => mysql::start(t, &s, st.mysql_max_connections, tls, &[]),
            };
            let conflict = match engine {
                Engine::Postgres => pg::port_conflict(&s),
                Engine::Mysql => mysql::port_conflict(&s),
            };
            match res {
                Ok(()) => break,
                Err(_) if conflict && attempt < 3 => {
                    s.port = free_port(&taken)?;
                    if engine == Engine::Postgres {
                        pg::write_conf(t, &s, st.pg_max_connections, tls)?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if engine == Engine::Mysql {
            mysql::bootstrap(&s, &st.mysql_password)?;
            if let Some(p) = &primary {
                mysql::replicate_from(&s, p, &st.mysql_password)?;
            }
        }
        s.client_port = s.port;
        if let Some(slot) = self.st.servers.iter_mut().find(|x| x.name == s.name) {
            slot.port = s.port;
            slot.client_port = s.port;
        }
        self.place_on_testbed(&s.name)?;
        self.write_env()
    }

    /// Creates the testbed's hosts cgroup id (and the network host, for
    /// the relays), when the options ask for a testbed.
    fn open_testbed(&mut self) -> Result<()> {
        let bed = &self.st.testbed;
        if bed.is_empty() {
            return Ok(());
        }
        let budgets = testbed::cpu_budgets_available();
        if bed.server_cpu.is_some() || bed.open {
            budgets
                .clone()
                .map_err(|why| anyhow::anyhow!("the testbed cannot give servers CPU budgets here: {why}"))?;
        }
        if budgets.is_ok() {
            let hosts = Hosts::with_id(&Hosts::new_id(&self.st.dir));
            self.st.testbed_id = Some(hosts.id().to_string());
            self.write_env()?;
            if bed.latency.is_some() {
                hosts.create(testbed::NET_HOST, Some(bed.net_cpu.unwrap_or(testbed::DEFAULT_NET_CPU)))?;
            }
        }
        Ok(())
    }

    /// The testbed's hosts, when it has any.
    pub fn testbed_hosts(&self) -> Option<Hosts> {
        self.st.testbed_id.as_deref().map(Hosts::with_id)
    }

    /// The testbed this cluster runs on.
    pub fn testbed(&self) -> &testbed::Testbed {
        &self.st.testbed
    }

    /// Puts server `name` (running) on its host: its processes into its
    /// CPU budget, and with a latency a relay in front of it (kept across
    /// restarts: it dials the server anew per connection).
    pub(crate) fn place_on_testbed(&mut self, name: &str) -> Result<()> {
        let s = self.server(name)?.clone();
        let bed = self.st.testbed.clone();
        let hosts = self.testbed_hosts();
        if let (Some(cpu), Some(hosts)) = (bed.server_cpu, &hosts) {
            let pid = match s.engine {
                Engine::Postgres => pg::running_pid(&s),
                Engine::Mysql => mysql::running_pid(&s),
            }
            .with_context(|| format!("{name} is not running"))?;
            hosts.create(name, Some(cpu))?;
            hosts.enter_tree(name, pid)?;
        }
        if let Some(latency) = bed.latency {
            let pid_file = s.dir.join("relay.pid");
            if read_pid(&pid_file).is_some_and(pid_alive) && s.client_port != s.port {
                return Ok(());
            }
            let port = testbed::start_relay(&bed, s.port, latency, &s.dir, &pid_file)?;
            if let (Some(hosts), Some(pid)) = (&hosts, read_pid(&pid_file)) {
                hosts.enter(testbed::NET_HOST, pid)?;
            }
            if let Some(slot) = self.st.servers.iter_mut().find(|x| x.name == name) {
                slot.client_port = port;
            }
        }
        Ok(())
    }

    /// Stops the relays and removes the testbed's hosts.
    fn close_testbed(&mut self) -> Result<()> {
        let mut relays = Vec::new();
        for s in &self.st.servers {
            let pid_file = s.dir.join("relay.pid");
            if let Some(pid) = read_pid(&pid_file).filter(|p| pid_alive(*p)) {
                relays.push(pid);
            }
            let _ = std::fs::remove_file(pid_file);
        }
        if !relays.is_empty() {
            signal("TERM", &relays)?;
        }
        if let Some(hosts) = self.testbed_hosts() {
            hosts.remove()?;
            self.st.testbed_id = None;
        }
        Ok(())
    }

    /// Re-open a cluster from `dir/cluster.env`. The handle is detached:
    /// dropping it leaves the servers alone.
    pub fn attach(dir: &Path) -> Result<Cluster> {
        let path = dir.join(ENV_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {} (is a cluster up there?)", path.display()))?;
        let st = env_file::parse(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(Cluster {
            tools: Tools::detect(st.pg_bindir.as_deref())?,
            st,
            detached: true,
        })
    }

    /// After this, dropping the handle leaves the servers running.
    pub fn detach(&mut self) {
        self.detached = true;
    }

    /// Stop every server (fast shutdown). Idempotent; dead servers are
    /// skipped. Tries all servers and reports the first failure.
    pub fn down(&mut self) -> Result<()> {
        let mut first_err = None;
        for s in self.st.servers.iter().rev() {
            match self.stop_server(s) {
                Ok(()) => {
                    // A fallback socket dir under /tmp (long DIR): drop it once empty.
                    let sock = socket_dir(&s.dir);
                    if sock != s.dir {
                        let _ = std::fs::remove_dir(sock);
                    }
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Err(e) = self.close_testbed() {
            first_err.get_or_insert(e);
        }
        first_err.map_or(Ok(()), Err)
    }

    pub(crate) fn stop_server(&self, s: &Server) -> Result<()> {
        match s.engine {
            Engine::Postgres => pg::stop(&self.tools, s),
            Engine::Mysql => mysql::stop(s),
        }
    }

    pub fn servers(&self) -> &[Server] {
        &self.st.servers
    }

    /// The server called `name`, or an error listing the known names.
    pub fn server(&self, name: &str) -> Result<&Server> {
        self.st.servers.iter().find(|s| s.name == name).with_context(|| {
            let names: Vec<&str> = self.st.servers.iter().map(|s| s.name.as_str()).collect();
            format!("no server named {name:?} (have: {})", names.join(", "))
        })
    }

    /// The cluster directory (absolute).
    pub fn dir(&self) -> &Path {
        &self.st.dir
    }

    fn current(&self, name: &Option<String>) -> Option<&Server> {
        name.as_deref().and_then(|n| self.server(n).ok())
    }

    fn with(&self, engine: Engine, role: Role) -> Vec<&Server> {
        self.st
            .servers
            .iter()
            .filter(|s| s.engine == engine && s.role == role)
            .collect()
    }

    /// The current PostgreSQL primary (the last promoted one, else pg0).
    pub fn pg_primary(&self) -> Option<&Server> {
        self.current(&self.st.pg_primary)
    }

    pub fn pg_replicas(&self) -> Vec<&Server> {
        self.with(Engine::Postgres, Role::Replica)
    }

    /// The current MariaDB primary (the last promoted one, else my0).
    pub fn mysql_primary(&self) -> Option<&Server> {
        self.current(&self.st.mysql_primary)
    }

    pub fn mysql_replicas(&self) -> Vec<&Server> {
        self.with(Engine::Mysql, Role::Replica)
    }

    pub fn pg_user(&self) -> &str {
        pg::USER
    }

    pub fn pg_password(&self) -> &str {
        &self.st.pg_password
    }

    pub fn mysql_user(&self) -> &str {
        mysql::USER
    }

    pub fn mysql_password(&self) -> &str {
        &self.st.mysql_password
    }

    /// The CA certificate (PEM) that verifies every server's certificate,
    /// when the cluster was started with [`Options::tls`].
    pub fn tls_ca(&self) -> Option<PathBuf> {
        self.st.tls.as_ref().map(|f| f.ca.clone())
    }

    /// The client certificate and key (PEM) the CA signed, CN
    /// [`crate::TLS_CLIENT_CN`], when the cluster was started with
    /// [`Options::tls`]: what mutual TLS presents.
    pub fn tls_client(&self) -> Option<(PathBuf, PathBuf)> {
        self.st
            .tls
            .as_ref()
            .map(|f| (f.client_cert.clone(), f.client_key.clone()))
    }

    /// Path of `DIR/cluster.env`.
    pub fn env_file(&self) -> PathBuf {
        self.st.dir.join(ENV_FILE)
    }

    pub(crate) fn write_env(&self) -> Result<()> {
        let path = self.env_file();
        let tmp = path.with_extension("env.tmp");
        std::fs::write(&tmp, env_file::render(&self.st))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.down();
        }
    }
}

/// `dir` holds an earlier cluster: refuse if any of its servers still
/// runs, else delete its server directories, TLS files and `cluster.env`.
fn remove_stopped_cluster(dir: &Path) -> Result<()> {
    let old = Cluster::attach(dir)?;
    if let Some(s) = old.servers().iter().find(|s| old.is_up(&s.name)) {
        bail!(
            "{} holds a running cluster ({} is up); run `down` first",
            dir.display(),
            s.name
        );
    }
    for s in old.servers() {
        if s.dir.starts_with(dir) && s.dir.exists() {
            std::fs::remove_dir_all(&s.dir).with_context(|| format!("removing old {}", s.dir.display()))?;
        }
    }
    let tls_dir = old.st.tls.as_ref().and_then(|f| f.ca.parent());
    if let Some(tls_dir) = tls_dir.filter(|d| d.starts_with(dir) && d.exists()) {
        std::fs::remove_dir_all(tls_dir).with_context(|| format!("removing old {}", tls_dir.display()))?;
    }
    std::fs::remove_file(dir.join(ENV_FILE))?;
    Ok(())
}

/// chmod 0755 `dir`; when root (servers run as `postgres`), also make sure
/// every ancestor is traversable by others (adds o+x where missing).
fn make_traversable(tools: &Tools, dir: &Path) -> Result<()> {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    if !tools.is_root() {
        return Ok(());
    }
    for anc in dir.ancestors().skip(1) {
        let mode = std::fs::metadata(anc)?.permissions().mode();
        if mode & 0o001 == 0 {
            std::fs::set_permissions(anc, std::fs::Permissions::from_mode((mode & 0o7777) | 0o001))
                .with_context(|| format!("chmod o+x {}", anc.display()))?;
        }
    }
    Ok(())
}
