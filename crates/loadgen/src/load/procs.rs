//! Processes the load engine watches while it runs (a proxy, a database
//! server): each one's process tree (the process and all its descendants,
//! as a PostgreSQL postmaster's backends) sampled from /proc once a second,
//! CPU as cores used over the second and RSS summed over the tree.

use std::collections::HashMap;
use std::time::Instant;

use crate::tenant_storm::spec::cpu_ticks;

/// A process tree to watch, by the pid at its root.
#[derive(Debug, Clone)]
pub struct Watched {
    pub name: String,
    pub pid: u32,
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

    pub fn names(&self) -> Vec<String> {
        self.watched.iter().map(|w| w.name.clone()).collect()
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
        let (Some(ppid), Some(ticks)) = (parent_of(&stat), cpu_ticks(&stat)) else {
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
        let stat = "42 (a (weird) name) S 7 42 42 0 -1 4194560 1 0 0 0 15 5 0 0 20 0 1 0 1 1 1";
        assert_eq!(parent_of(stat), Some(7));
        assert_eq!(cpu_ticks(stat), Some(20));
        assert_eq!(rss_of("Name:\tx\nVmRSS:\t  2048 kB\n"), Some(2048 * 1024));
        assert_eq!(rss_of("Name:\tkthread\n"), None);
    }

    #[test]
    fn this_process_tree_is_sampled() {
        let mut s = Sampler::new(
            vec![Watched {
                name: "self".into(),
                pid: std::process::id(),
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
            }],
            100,
        )
        .sample();
        assert_eq!(gone[0].processes, 0);
    }
}
