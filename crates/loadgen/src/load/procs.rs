//! Processes the load engine watches while it runs (a proxy, a database
//! server): each one's process tree (the process and all its descendants,
//! as a PostgreSQL postmaster's backends) sampled from /proc once a second,
//! CPU as cores used over the second and RSS summed over the tree. A
//! tree's CPU includes its processes that have exited and been waited for
//! (a PostgreSQL backend of a connection that closed): each live process's
//! own time plus its reaped children's.

use std::collections::HashMap;
use std::time::Instant;

/// A process tree to watch, by the pid at its root.
#[derive(Debug, Clone)]
pub struct Watched {
    pub name: String,
    pub pid: u32,
    pub role: Role,
}

/// What a watched tree is, for the report's sums (backend CPU, proxy CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A database server.
    Server,
    /// The proxy.
    Proxy,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Proxy => "proxy",
        }
    }
}

/// One second of one watched tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcSample {
    /// Cores used over the second (1.0: one core busy all the second).
    pub cpu_cores: f64,
    pub rss_bytes: u64,
    /// Processes in the tree.
    pub processes: usize,
}

/// What the tree had used at the last sample, to take the next one's
/// difference.
pub struct Sampler {
    watched: Vec<Watched>,
    clk_tck: f64,
    last: Option<(Instant, Vec<u64>)>,
}

impl Sampler {
    pub fn new(watched: Vec<Watched>, clk_tck: u64) -> Self {
        Self {
            watched,
            clk_tck: clk_tck.max(1) as f64,
            last: None,
        }
    }

    pub fn watched(&self) -> &[Watched] {
        &self.watched
    }

    /// One sample per watched tree (the first call only sets the baseline
    /// of CPU and reports 0 cores). A tree whose root has exited counts 0.
    pub fn sample(&mut self) -> Vec<ProcSample> {
        if self.watched.is_empty() {
            return Vec::new();
        }
        let table = process_table();
        let now = Instant::now();
        let trees: Vec<(u64, u64, usize)> = self.watched.iter().map(|w| tree_usage(&table, w.pid)).collect();
        let ticks: Vec<u64> = trees.iter().map(|t| t.0).collect();
        let samples = trees
            .iter()
            .enumerate()
            .map(|(i, &(t, rss_bytes, processes))| {
                let cpu_cores = match &self.last {
                    Some((at, before)) => {
                        let secs = now.duration_since(*at).as_secs_f64();
                        let used = t.saturating_sub(before.get(i).copied().unwrap_or(t)) as f64 / self.clk_tck;
                        if secs > 0.0 { used / secs } else { 0.0 }
                    }
                    None => 0.0,
                };
                ProcSample {
                    cpu_cores,
                    rss_bytes,
                    processes,
                }
            })
            .collect();
        self.last = Some((now, ticks));
        samples
    }
}

/// Every process's parent, CPU ticks and RSS, from /proc.
struct Proc {
    ppid: u32,
    ticks: u64,
    rss_bytes: u64,
}

fn process_table() -> HashMap<u32, Proc> {
    let mut table = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return table;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(ppid), Some(ticks)) = (parent_of(&stat), ticks_with_reaped(&stat)) else {
            continue;
        };
        let rss_bytes = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| rss_of(&s))
            .unwrap_or(0);
        table.insert(pid, Proc { ppid, ticks, rss_bytes });
    }
    table
}

/// CPU ticks, RSS and process count of `root` and its descendants.
fn tree_usage(table: &HashMap<u32, Proc>, root: u32) -> (u64, u64, usize) {
    if !table.contains_key(&root) {
        return (0, 0, 0);
    }
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, p) in table {
        children.entry(p.ppid).or_default().push(pid);
    }
    let (mut ticks, mut rss, mut count) = (0, 0, 0);
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Some(p) = table.get(&pid) {
            ticks += p.ticks;
            rss += p.rss_bytes;
            count += 1;
        }
        if let Some(kids) = children.get(&pid) {
            stack.extend(kids.iter().copied().filter(|&k| k != pid));
        }
    }
    (ticks, rss, count)
}

/// The parent pid (field 4) from the text of `/proc/PID/stat`.
fn parent_of(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// User and system CPU ticks of the process and of its children it has
/// waited for (fields 14–17 of `/proc/PID/stat`; the command name in
/// parentheses may contain spaces).
fn ticks_with_reaped(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` starts at field 3 (state): utime is field 14.
    let mut fields = rest.split_whitespace().skip(11);
    let mut sum = 0u64;
    for _ in 0..4 {
        sum = sum.saturating_add(fields.next()?.parse::<i64>().ok()?.max(0) as u64);
    }
    Some(sum)
}

/// `VmRSS` of `/proc/PID/status`, in bytes (the file gives kB).
fn rss_of(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_and_status_fields_are_read() {
        let stat = "42 (a (weird) name) S 7 42 42 0 -1 4194560 1 0 0 0 15 5 30 7 20 0 1 0 1 1 1";
        assert_eq!(parent_of(stat), Some(7));
        assert_eq!(ticks_with_reaped(stat), Some(57), "own and reaped children's");
        assert_eq!(rss_of("Name:\tx\nVmRSS:\t  2048 kB\n"), Some(2048 * 1024));
        assert_eq!(rss_of("Name:\tkthread\n"), None);
    }

    #[test]
    fn this_process_tree_is_sampled() {
        let mut s = Sampler::new(
            vec![Watched {
                name: "self".into(),
                pid: std::process::id(),
                role: Role::Proxy,
            }],
            100,
        );
        let first = s.sample();
        assert_eq!(first.len(), 1);
        assert!(first[0].processes >= 1 && first[0].rss_bytes > 0, "{first:?}");
        let gone = Sampler::new(
            vec![Watched {
                name: "gone".into(),
                pid: u32::MAX,
                role: Role::Server,
            }],
            100,
        )
        .sample();
        assert_eq!(gone[0].processes, 0);
    }
}
