//! Process plumbing: locating server binaries, running external commands
//! (as the `postgres` OS user when we are root), pid liveness, signals,
//! log tails, bounded wait loops and cheap randomness.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};

/// Upper bound for every wait loop.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// How external programs are found and run on this host.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    /// uid/gid of the `postgres` OS user when we run as root (PostgreSQL
    /// refuses to run as root), `None` when we are an ordinary user.
    pg_owner: Option<(u32, u32)>,
    pg_bindir: PathBuf,
}

impl Tools {
    /// The host's tools; PostgreSQL's from `pg_bindir` when given, else
    /// from `GH_PG_BINDIR` or the installed server (15 preferred).
    pub(crate) fn detect(pg_bindir: Option<&Path>) -> Result<Tools> {
        let root = run(Command::new("id").arg("-u"))? == "0";
        let pg_owner = if root {
            let uid = run(Command::new("id").args(["-u", "postgres"]))
                .context("running as root needs a `postgres` OS user")?;
            let gid = run(Command::new("id").args(["-g", "postgres"]))?;
            Some((uid.parse()?, gid.parse()?))
        } else {
            None
        };
        Ok(Tools {
            pg_owner,
            pg_bindir: pg_bindir.map_or_else(default_pg_bindir, Path::to_path_buf),
        })
    }

    pub(crate) fn is_root(&self) -> bool {
        self.pg_owner.is_some()
    }

    /// A command for a PostgreSQL server binary (initdb, pg_ctl, ...), run
    /// as `postgres` when we are root. Its working directory is `cwd`.
    pub(crate) fn pg_cmd(&self, bin: &str, cwd: &Path) -> Command {
        let program = self.pg_bin(bin);
        let mut cmd = if self.is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.current_dir(cwd);
        cmd
    }

    /// Path of a PostgreSQL binary (client tools are run directly). A
    /// server-only build ([`crate::Options::pg_bindir`]) lends its client
    /// tools (psql, pg_basebackup) from the host's PostgreSQL.
    pub(crate) fn pg_bin(&self, bin: &str) -> PathBuf {
        let path = self.pg_bindir.join(bin);
        if path.exists() {
            path
        } else {
            default_pg_bindir().join(bin)
        }
    }

    /// Hand a path we created over to the PostgreSQL server user.
    pub(crate) fn give_to_pg(&self, path: &Path) -> Result<()> {
        if let Some((uid, gid)) = self.pg_owner {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .with_context(|| format!("chown {}", path.display()))?;
        }
        Ok(())
    }

    /// Write a file and make it owned by the PostgreSQL server user.
    pub(crate) fn write_pg_file(&self, path: &Path, contents: &str) -> Result<()> {
        std::fs::write(path, contents).with_context(|| format!("write {}", path.display()))?;
        self.give_to_pg(path)
    }
}

fn default_pg_bindir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GH_PG_BINDIR") {
        return dir.into();
    }
    let preferred = PathBuf::from("/usr/lib/postgresql/15/bin");
    if preferred.join("postgres").exists() {
        return preferred;
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("postgres").exists())
        .collect();
    found.sort();
    found.pop().unwrap_or(preferred)
}

/// First existing path among `candidates`, else the bare name (PATH lookup).
pub(crate) fn find_bin(name: &str, candidates: &[&str]) -> PathBuf {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Human-readable command line, with `-pSECRET` style arguments masked.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    for arg in cmd.get_args() {
        let arg = arg.to_string_lossy();
        if arg.starts_with("-p") && arg.len() > 2 && !arg.starts_with("--") {
            parts.push("-p***".into());
        } else {
            parts.push(arg.into_owned());
        }
    }
    parts.join(" ")
}

/// Run to completion; returns trimmed stdout, or an error carrying stderr.
pub(crate) fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot execute `{}`", describe(cmd)))?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "`{}` failed ({}): {}{}",
            describe(cmd),
            out.status,
            stderr.trim(),
            if stdout.is_empty() {
                String::new()
            } else {
                format!("\nstdout: {stdout}")
            }
        );
    }
    Ok(stdout)
}

/// Is `pid` a live (non-zombie) process? Zombies count as dead: orphaned
/// servers may never be reaped when PID 1 is not a real init.
pub(crate) fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.trim().chars().next());
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

/// The state letter of a live process in `/proc/PID/stat` (`R`, `S`, `D`,
/// `T` when stopped by a signal, ...), `None` if there is no such process.
pub(crate) fn pid_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim().chars().next()
}

/// Send SIGSTOP (`stop`) or SIGCONT to each of `pids` and wait (bounded)
/// until every one still alive is stopped, or none is. A pid that is gone
/// meanwhile is skipped: a process may exit between listing and signal.
pub(crate) fn stop_or_continue(pids: &[u32], stop: bool, what: &str, log: &Path) -> Result<()> {
    let sig = if stop { "STOP" } else { "CONT" };
    for pid in pids {
        let sent = signal(sig, &[*pid]);
        if sent.is_err() && pid_alive(*pid) {
            return sent.with_context(|| format!("SIG{sig} to pid {pid}"));
        }
    }
    wait_for(what, log, || {
        let wrong = pids
            .iter()
            .find(|p| matches!(pid_state(**p), Some(state) if (state == 'T') != stop && pid_alive(**p)));
        Ok(match wrong {
            None => Check::Ready,
            Some(p) => Check::NotYet(format!("pid {p} is in state {:?}", pid_state(*p))),
        })
    })
}

/// Direct children of `pid` (scanning /proc).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s.rsplit_once(')')?.1.to_string();
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// First line of a pid file as a pid.
pub(crate) fn read_pid(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.lines().next()?.trim().parse().ok()
}

/// Send `signal` (e.g. "KILL", "TERM") to the given pids.
pub(crate) fn signal(signal: &str, pids: &[u32]) -> Result<()> {
    let mut cmd = Command::new("kill");
    cmd.arg("-s").arg(signal);
    cmd.args(pids.iter().map(|p| p.to_string()));
    run(&mut cmd).map(|_| ())
}

/// Wait (bounded) until none of `pids` is alive.
pub(crate) fn wait_dead(pids: &[u32], what: &str, log: &Path) -> Result<()> {
    wait_for(what, log, || {
        Ok(match pids.iter().find(|p| pid_alive(**p)) {
            None => Check::Ready,
            Some(p) => Check::NotYet(format!("pid {p} still alive")),
        })
    })
}

/// Last `n` lines of a (log) file, for error messages.
pub(crate) fn tail(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// Outcome of one poll of a wait loop.
pub(crate) enum Check {
    Ready,
    NotYet(String),
}

/// Poll `check` every 100 ms for up to [`WAIT`]. An `Err` from `check`
/// aborts at once. Failures carry the tail of `log`.
pub(crate) fn wait_for(what: &str, log: &Path, mut check: impl FnMut() -> Result<Check>) -> Result<()> {
    let start = Instant::now();
    loop {
        let why = match check() {
            Ok(Check::Ready) => return Ok(()),
            Ok(Check::NotYet(why)) => why,
            Err(e) => bail!(
                "{what}: {e:#}\n--- last lines of {} ---\n{}",
                log.display(),
                tail(log, 30)
            ),
        };
        if start.elapsed() > WAIT {
            bail!(
                "timed out after {}s waiting for {what} (last status: {why})\n--- last lines of {} ---\n{}",
                WAIT.as_secs(),
                log.display(),
                tail(log, 30)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A random u64 (std's randomly keyed hasher over time and a caller salt).
pub(crate) fn random_u64(salt: u64) -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(salt);
    h.write_u32(std::process::id());
    if let Ok(d) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    h.finish()
}

/// A random password of hex digits (safe in shell, SQL and conninfo).
pub(crate) fn random_password() -> String {
    format!("gh{:016x}{:016x}", random_u64(1), random_u64(2))
}

/// Stable 64-bit FNV-1a hash (used to derive short socket directories).
pub(crate) fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
