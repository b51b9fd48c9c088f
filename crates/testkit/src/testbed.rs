//! The testbed: hosts of their own on one machine. Each host (a database
//! server, the proxy, the load generator, the network) gets a CPU budget
//! of its own, a cgroup (v1) under the `cpu` controller with a CFS quota
//! ([`CPU_ROOT`]), and a twin under `cpuacct` that counts what it used; and
//! the database servers can be put a latency away from everyone else (the
//! client side: load generators and proxies) through a delaying relay per
//! server (`gatehouse-loadgen relay`), itself a host with its budget.
//!
//! Why a relay and not `tc netem` in a network namespace: this machine's
//! kernel is built without `sch_netem` (`CONFIG_NET_SCH_NETEM is not set`,
//! no modules to load), so a namespace's veth would add addresses but no
//! delay. The relay delays every chunk in each direction by half the round
//! trip, with the OS timer's precision; what it does not model (the TCP
//! handshake, loss) its own module says.
//!
//! The sum of the budgets must stay under the machine's cores, or the
//! imitation of separate hosts does not hold: [`Hosts::create`] refuses a
//! budget that would take the sum past them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::sys::children_of;

/// Where the cgroup v1 `cpu` controller is mounted.
pub const CPU_ROOT: &str = "/sys/fs/cgroup/cpu";
/// Where the cgroup v1 `cpuacct` controller is mounted.
pub const CPUACCT_ROOT: &str = "/sys/fs/cgroup/cpuacct";
/// The CFS period every host's quota is a share of (100 ms, the kernel's
/// default `cpu.cfs_period_us`).
pub const PERIOD_US: u64 = 100_000;
/// The smallest budget a host can have: 1 % of a core (a CFS quota is at
/// least 1 ms per period).
pub const MIN_CPU: f64 = 0.01;
/// The directory under both controllers that holds every testbed.
const TESTBEDS: &str = "gatehouse-testbed";
/// The network host: every server's latency relay runs in it.
pub const NET_HOST: &str = "net";
/// The network host's budget when none is given.
pub const DEFAULT_NET_CPU: f64 = 0.25;

/// What a cluster's testbed gives its servers (see [`crate::Options`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Testbed {
    /// Each database server's CPU budget, in cores (`None`: unlimited).
    pub server_cpu: Option<f64>,
    /// The round trip added between the client side and every database
    /// server (`None`: none, no relays).
    pub latency: Option<Duration>,
    /// Each chunk's one-way delay varies by up to this much (order kept).
    pub jitter: Duration,
    /// The relays' host budget (default [`DEFAULT_NET_CPU`]).
    pub net_cpu: Option<f64>,
    /// The relay binary (`gatehouse-loadgen`); needed with a latency.
    pub relay_bin: Option<PathBuf>,
    /// Open the testbed even when the servers get neither a budget nor a
    /// latency, for hosts that `gatehouse-testkit host` adds (the proxy,
    /// the load generator).
    pub open: bool,
}

impl Testbed {
    pub fn is_empty(&self) -> bool {
        self.server_cpu.is_none() && self.latency.is_none() && !self.open
    }
}

/// Whether this machine can give hosts CPU budgets here: `Err` says why
/// not (no cgroup v1 `cpu` controller, not writable: not root).
pub fn cpu_budgets_available() -> Result<(), String> {
    for root in [CPU_ROOT, CPUACCT_ROOT] {
        let probe = Path::new(root).join("cgroup.procs");
        if !probe.exists() {
            return Err(format!("no cgroup v1 controller at {root}"));
        }
    }
    let quota = Path::new(CPU_ROOT).join("cpu.cfs_quota_us");
    if !quota.exists() {
        return Err(format!(
            "{CPU_ROOT} has no cpu.cfs_quota_us (CFS bandwidth control off)"
        ));
    }
    // The directory every testbed lives in: creating it is the probe
    // (a cgroup directory's mode says r-x even where root may write).
    for root in [CPU_ROOT, CPUACCT_ROOT] {
        let dir = Path::new(root).join(TESTBEDS);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {} (CPU budgets need root): {e}", dir.display()))?;
    }
    Ok(())
}

/// The machine's cores, as the budgets must share them.
pub fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// One testbed's hosts: `gatehouse-testbed/ID/HOST` under both
/// controllers. `ID` is recorded in `cluster.env`, so separate processes
/// (the kit's `host` command) add hosts to the same testbed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosts {
    id: String,
}

/// One host's budget and what it used.
#[derive(Debug, Clone, PartialEq)]
pub struct HostInfo {
    pub name: String,
    /// Cores (quota over period); `None`: unlimited.
    pub cpu: Option<f64>,
    /// CPU time its processes used so far (`cpuacct.usage`).
    pub used: Duration,
    /// Periods in which the quota stopped it (`cpu.stat` `nr_throttled`).
    pub throttled_periods: u64,
}

impl Hosts {
    /// A new testbed's id, from the cluster directory's name and the time.
    pub fn new_id(dir: &Path) -> String {
        let base: String = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(24)
            .collect();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{base}-{:x}-{stamp:x}", std::process::id())
    }

    pub fn with_id(id: &str) -> Hosts {
        Hosts { id: id.to_string() }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    fn dir(&self, root: &str, host: &str) -> PathBuf {
        Path::new(root).join(TESTBEDS).join(&self.id).join(host)
    }

    fn testbed_dir(&self, root: &str) -> PathBuf {
        Path::new(root).join(TESTBEDS).join(&self.id)
    }

    /// Creates host `name` with `cpu` cores (`None`: unlimited, counted
    /// only), or changes its budget if it exists. Refuses a budget that
    /// takes the sum of this testbed's budgets past the machine's cores.
    pub fn create(&self, name: &str, cpu: Option<f64>) -> Result<HostInfo> {
        cpu_budgets_available().map_err(anyhow::Error::msg)?;
        if let Some(c) = cpu {
            if !(MIN_CPU..=cores()).contains(&c) {
                bail!(
                    "host {name}: a CPU budget of {c} cores is outside {MIN_CPU}..={}",
                    cores()
                );
            }
            let others: f64 = self
                .list()?
                .iter()
                .filter(|h| h.name != name)
                .filter_map(|h| h.cpu)
                .sum();
            if others + c > cores() + 1e-9 {
                bail!(
                    "host {name}: {c} cores on top of the {others} already given exceeds this machine's {} cores; \
                     the hosts would not be hosts of their own",
                    cores()
                );
            }
        }
        for root in [CPU_ROOT, CPUACCT_ROOT] {
            let d = self.dir(root, name);
            std::fs::create_dir_all(&d).with_context(|| format!("mkdir {}", d.display()))?;
        }
        let quota = match cpu {
            Some(c) => ((c * PERIOD_US as f64).round() as i64).max(1000).to_string(),
            None => "-1".to_string(),
        };
        let d = self.dir(CPU_ROOT, name);
        write(&d.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
        write(&d.join("cpu.cfs_quota_us"), &quota)?;
        self.info(name)
    }

    /// Moves process `pid` (all its threads) into host `name`; processes
    /// it forks later are born there.
    pub fn enter(&self, name: &str, pid: u32) -> Result<()> {
        for root in [CPU_ROOT, CPUACCT_ROOT] {
            write(&self.dir(root, name).join("cgroup.procs"), &pid.to_string())
                .with_context(|| format!("moving pid {pid} into host {name}"))?;
        }
        Ok(())
    }

    /// Moves `pid` and every descendant it has now into host `name` (a
    /// postmaster forks its helpers at start; later children inherit).
    pub fn enter_tree(&self, name: &str, pid: u32) -> Result<()> {
        self.enter(name, pid)?;
        let mut todo = children_of(pid);
        while let Some(child) = todo.pop() {
            // A child that exited since is no error.
            if self.enter(name, child).is_ok() {
                todo.extend(children_of(child));
            }
        }
        Ok(())
    }

    /// Host `name`'s budget and usage.
    pub fn info(&self, name: &str) -> Result<HostInfo> {
        let cpu_dir = self.dir(CPU_ROOT, name);
        let quota: i64 = read(&cpu_dir.join("cpu.cfs_quota_us"))?.parse()?;
        let period: i64 = read(&cpu_dir.join("cpu.cfs_period_us"))?.parse()?;
        let used: u64 = read(&self.dir(CPUACCT_ROOT, name).join("cpuacct.usage"))?.parse()?;
        let throttled_periods = read(&cpu_dir.join("cpu.stat"))?
            .lines()
            .find_map(|l| l.strip_prefix("nr_throttled "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        Ok(HostInfo {
            name: name.to_string(),
            cpu: (quota > 0 && period > 0).then(|| quota as f64 / period as f64),
            used: Duration::from_nanos(used),
            throttled_periods,
        })
    }

    /// Every host of this testbed, by name.
    pub fn list(&self) -> Result<Vec<HostInfo>> {
        let dir = self.testbed_dir(CPU_ROOT);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Ok(Vec::new());
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.iter().map(|n| self.info(n)).collect()
    }

    /// Removes the testbed's cgroups once their processes are gone
    /// (waiting up to 5 s for exiting ones); what still holds a live
    /// process is left, and said.
    pub fn remove(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        for root in [CPU_ROOT, CPUACCT_ROOT] {
            let base = self.testbed_dir(root);
            let Ok(entries) = std::fs::read_dir(&base) else {
                continue;
            };
            for e in entries.flatten().filter(|e| e.path().is_dir()) {
                let d = e.path();
                loop {
                    match std::fs::remove_dir(&d) {
                        Ok(()) => break,
                        Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                        Err(err) => bail!("cannot remove host {} (processes left in it?): {err}", d.display()),
                    }
                }
            }
            std::fs::remove_dir(&base).with_context(|| format!("rmdir {}", base.display()))?;
        }
        Ok(())
    }
}

fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).with_context(|| format!("writing {value} to {}", path.display()))
}

fn read(path: &Path) -> Result<String> {
    Ok(std::fs::read_to_string(path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

/// Starts a relay that puts the server at `upstream_port` `latency` (a
/// round trip) away: listens on a free loopback port, runs in the
/// background (its own process group, not this process's child once we
/// exit), writes its pid to `pid_file`. Returns its port.
pub(crate) fn start_relay(
    bed: &Testbed,
    upstream_port: u16,
    latency: Duration,
    dir: &Path,
    pid_file: &Path,
) -> Result<u16> {
    let bin = bed
        .relay_bin
        .as_ref()
        .context("a testbed latency needs the relay binary (gatehouse-loadgen)")?;
    let one_way_ms = latency.as_secs_f64() * 1000.0 / 2.0;
    let addr_file = dir.join("relay.addr");
    let log = dir.join("relay.log");
    let _ = std::fs::remove_file(&addr_file);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#""$0" "$@" </dev/null >"$GH_ADDR" 2>>"$GH_LOG" & echo $!"#)
        .arg(bin)
        .args(["relay", "--listen", "127.0.0.1:0"])
        .arg("--to")
        .arg(format!("127.0.0.1:{upstream_port}"))
        .arg("--delay-ms")
        .arg(format!("{one_way_ms}"))
        .arg("--jitter-ms")
        .arg(format!("{}", bed.jitter.as_secs_f64() * 1000.0))
        .env("GH_ADDR", &addr_file)
        .env("GH_LOG", &log)
        .stdin(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let pid: u32 = crate::sys::run(&mut cmd)?.parse().context("pid of the relay")?;
    std::fs::write(pid_file, pid.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&addr_file).unwrap_or_default();
        if let Some(port) = text
            .lines()
            .next()
            .and_then(|l| l.rsplit_once(':'))
            .and_then(|(_, p)| p.trim().parse().ok())
        {
            return Ok(port);
        }
        if Instant::now() > deadline || !crate::sys::pid_alive(pid) {
            bail!(
                "the relay for port {upstream_port} did not start:\n{}",
                crate::sys::tail(&log, 20)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Parses a duration such as `0.5ms`, `2ms`, `300us`, `1s`.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let (num, scale) = if let Some(n) = raw.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = raw.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = raw.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(format!("{raw:?}: give a unit (us, ms or s)"));
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("{raw:?}: not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("{raw:?}: must be zero or more"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testbed_durations_parse_with_their_units() {
        assert_eq!(parse_duration("0.5ms"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("300us"), Ok(Duration::from_micros(300)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("-1ms").is_err());
    }

    #[test]
    fn a_testbed_id_names_its_directory_and_is_new_each_time() {
        let a = Hosts::new_id(Path::new("/tmp/my cluster"));
        assert!(a.starts_with("my-cluster-"), "{a}");
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'), "{a}");
    }
}
