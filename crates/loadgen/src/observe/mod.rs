//! `gatehouse-loadgen observe`: an external load tool (sysbench or pgbench)
//! is the load, and the run is sampled around it as `load` samples its
//! own: the command is spawned with stdout and stderr piped, each line
//! copied to the log file (and nowhere else) and read by the tool's parser
//! ([`sysbench`], [`pgbench`]), while once a second from the command's
//! start, until it exits, the watched process trees, the counted servers'
//! connections and the proxy's metrics are sampled. The tool's `N`-th
//! second of progress is matched with sample `N`. The result ([`report`])
//! is the same JSON run as `load --json` writes, which `report` reads, the
//! command in it with its passwords hidden ([`command`]).

pub mod command;
pub mod pgbench;
pub mod report;
pub mod sysbench;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::load::procs::ProcSample;
use crate::load::{Watch, conns};

/// Once the command has exited, its output is read for at most this long
/// (a process it left behind may hold the pipes open).
const PIPE_GRACE: Duration = Duration::from_secs(2);

/// The load tools whose output is understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Sysbench,
    Pgbench,
}

impl Tool {
    /// The tool the command runs: the first word whose file name is
    /// `sysbench` or `pgbench` (so `taskset -c 1 sysbench …` is sysbench).
    pub fn of(command: &[String]) -> Result<Self> {
        for word in command {
            match word.rsplit('/').next() {
                Some("sysbench") => return Ok(Tool::Sysbench),
                Some("pgbench") => return Ok(Tool::Pgbench),
                _ => {}
            }
        }
        bail!("the command runs neither sysbench nor pgbench: {}", command.join(" "))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Tool::Sysbench => "sysbench",
            Tool::Pgbench => "pgbench",
        }
    }

    /// The database engine the command loads: PostgreSQL for pgbench and
    /// for sysbench with `--db-driver=pgsql`, else MySQL (sysbench's
    /// default driver).
    pub fn engine(self, command: &[String]) -> &'static str {
        let pgsql = command.windows(2).any(|w| w[0] == "--db-driver" && w[1] == "pgsql")
            || command.iter().any(|w| w == "--db-driver=pgsql");
        match self {
            Tool::Pgbench => "postgres",
            Tool::Sysbench if pgsql => "postgres",
            Tool::Sysbench => "mysql",
        }
    }

    /// The failure code the tool's failures are counted under (neither
    /// gives the server's codes).
    pub fn failure_code(self) -> &'static str {
        match self {
            Tool::Sysbench => "ignored_errors",
            Tool::Pgbench => "failed_transactions",
        }
    }
}

/// One per-second progress line of the tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The second of the tool's run it ends (`[ 3s ]`, `progress: 3.0 s`).
    pub second: u64,
    /// Threads (sysbench); pgbench's clients are in its summary only.
    pub users: Option<u32>,
    /// Transactions completed in the second (the tool's tps, rounded).
    pub transactions: u64,
    /// Transactions that failed in the second (sysbench's err/s, pgbench's
    /// `failed`); not among `transactions`.
    pub failures: u64,
    /// The latency percentile the tool reports: (percent, ms).
    pub percentile: Option<(f64, f64)>,
    pub mean_ms: Option<f64>,
}

/// What the tool's final report says, and what else its output told.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub version: Option<String>,
    /// Threads or clients.
    pub users: Option<u32>,
    /// Transactions completed (sysbench's `transactions:`, pgbench's
    /// `actually processed`).
    pub transactions: Option<u64>,
    /// sysbench's `ignored errors`, pgbench's `failed transactions`.
    pub failures: Option<u64>,
    pub mean_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// The percentile of the tool's summary: (percent, ms).
    pub percentile: Option<(f64, f64)>,
    /// sysbench's `--histogram=on`: (value µs, count) rows as printed.
    pub histogram: Vec<(u64, u64)>,
    /// How long the tool says it ran (sysbench's `total time`, pgbench's
    /// `duration`).
    pub duration_s: Option<f64>,
    /// The first line that reads as an error (`FATAL`, `error:`, `ERROR:`,
    /// `aborted`), the failures' message in the report.
    pub first_error: Option<String>,
}

/// The parser of the tool's output.
pub enum Parser {
    Sysbench(sysbench::Parser),
    Pgbench(pgbench::Parser),
}

impl Parser {
    pub fn new(tool: Tool) -> Self {
        match tool {
            Tool::Sysbench => Parser::Sysbench(sysbench::Parser::default()),
            Tool::Pgbench => Parser::Pgbench(pgbench::Parser::default()),
        }
    }

    /// Reads one line of the tool's stdout or stderr.
    pub fn line(&mut self, line: &str) -> Option<Progress> {
        let (progress, totals) = match self {
            Parser::Sysbench(p) => (p.line(line), &mut p.totals),
            Parser::Pgbench(p) => (p.line(line), &mut p.totals),
        };
        if totals.first_error.is_none() && reads_as_error(line) {
            totals.first_error = Some(line.trim().to_owned());
        }
        progress
    }

    pub fn totals(&self) -> &Totals {
        match self {
            Parser::Sysbench(p) => &p.totals,
            Parser::Pgbench(p) => &p.totals,
        }
    }
}

fn reads_as_error(line: &str) -> bool {
    ["FATAL", "ERROR:", "error:", "aborted"]
        .iter()
        .any(|m| line.contains(m))
}

/// The first whitespace-separated word of `text` as a number.
fn first_number(text: &str) -> Option<f64> {
    text.split_whitespace().next().and_then(number)
}

/// `text` (trimmed) as a finite number.
fn number(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

/// What to run and how to name it.
pub struct Settings {
    /// The target's name in the report.
    pub name: String,
    pub round: Option<u32>,
    /// The command, program first.
    pub command: Vec<String>,
    /// Where the command's output goes, line by line.
    pub log: Option<PathBuf>,
    /// A progress line on stderr once a second.
    pub progress: bool,
}

/// One second's samples, as `load` takes them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub procs: Vec<ProcSample>,
    pub connections: Vec<Option<u64>>,
    pub metrics: Vec<Option<f64>>,
}

/// A finished observation.
pub struct Observed {
    pub target: String,
    pub tool: Tool,
    pub engine: &'static str,
    pub round: Option<u32>,
    /// The command as shown (passwords hidden).
    pub command: String,
    /// From the start to the command's exit.
    pub elapsed: Duration,
    pub status: Option<ExitStatus>,
    /// Sample `i` is second `i + 1`.
    pub samples: Vec<Sample>,
    /// The tool's progress lines by their second.
    pub progress: BTreeMap<u64, Progress>,
    pub totals: Totals,
    pub watched: Vec<crate::load::procs::Watched>,
    pub counted: Vec<String>,
    pub metrics: Vec<String>,
}

/// Reads `pipe` line by line (invalid UTF-8 replaced) into `lines`.
async fn forward(pipe: impl AsyncRead + Unpin, lines: mpsc::UnboundedSender<String>) {
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                if lines.send(line.trim_end_matches(['\n', '\r']).to_owned()).is_err() {
                    break;
                }
            }
        }
    }
}

/// Runs the command, sampling `watch` once a second until it exits. On
/// SIGINT or SIGTERM the command is killed, and what it printed until then
/// is still the run.
pub async fn run(settings: Settings, watch: Watch) -> Result<Observed> {
    let Some((program, args)) = settings.command.split_first() else {
        bail!("no command to run");
    };
    let tool = Tool::of(&settings.command)?;
    let mut log = match &settings.log {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    let mut interrupt = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let mut terminate = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let Watch {
        processes: mut sampler,
        servers: mut counted,
        metrics: scraper,
    } = watch;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let start = Instant::now();
    sampler.sample();
    let (tx, mut lines) = mpsc::unbounded_channel();
    tokio::spawn(forward(child.stdout.take().context("no stdout pipe")?, tx.clone()));
    tokio::spawn(forward(child.stderr.take().context("no stderr pipe")?, tx));

    let mut parser = Parser::new(tool);
    let mut progress = BTreeMap::new();
    let mut samples = Vec::new();
    let mut status: Option<ExitStatus> = None;
    let mut elapsed = Duration::ZERO;
    let mut open = true;
    let tty = std::io::stderr().is_terminal();
    while status.is_none() || open {
        let tick = start + Duration::from_secs(samples.len() as u64 + 1);
        let drained = start + elapsed + PIPE_GRACE;
        tokio::select! {
            biased;
            () = tokio::time::sleep_until(tick.into()), if status.is_none() => {
                let (connections, metrics) = match &scraper {
                    Some(s) => tokio::join!(conns::count_all(&mut counted), s.sample()),
                    None => (conns::count_all(&mut counted).await, Vec::new()),
                };
                samples.push(Sample { procs: sampler.sample(), connections, metrics });
            }
            line = lines.recv(), if open => {
                let Some(line) = line else {
                    open = false;
                    continue;
                };
                if let Some(out) = &mut log {
                    writeln!(out, "{line}").context("writing the log")?;
                }
                if let Some(p) = parser.line(&line).filter(|p| p.second > 0) {
                    if settings.progress {
                        show(&p, tool, start.elapsed(), tty);
                    }
                    progress.insert(p.second, p);
                }
            }
            exited = child.wait(), if status.is_none() => {
                status = Some(exited.context("waiting for the command")?);
                elapsed = start.elapsed();
            }
            () = tokio::time::sleep_until(drained.into()), if status.is_some() && open => open = false,
            _ = interrupt.recv(), if status.is_none() => child.start_kill().context("stopping the command")?,
            _ = terminate.recv(), if status.is_none() => child.start_kill().context("stopping the command")?,
        }
    }
    if settings.progress && tty && !progress.is_empty() {
        eprintln!();
    }
    if let Some(out) = &mut log {
        out.flush().context("writing the log")?;
    }
    Ok(Observed {
        target: settings.name,
        tool,
        engine: tool.engine(&settings.command),
        round: settings.round,
        command: command::shown(&settings.command),
        elapsed,
        status,
        samples,
        progress,
        totals: parser.totals().clone(),
        watched: sampler.watched().to_vec(),
        counted: counted.iter().map(|c| c.name.clone()).collect(),
        metrics: scraper.map_or_else(Vec::new, |s| s.series.iter().map(|m| m.shown.clone()).collect()),
    })
}

/// The progress line, as `load`'s: in place on a terminal, else every 5 s.
fn show(p: &Progress, tool: Tool, elapsed: Duration, tty: bool) {
    let latency = match (p.percentile, p.mean_ms) {
        (Some((percent, ms)), _) => format!("p{percent} {ms:.2} ms"),
        (None, Some(ms)) => format!("mean {ms:.2} ms"),
        (None, None) => "latency –".to_owned(),
    };
    let line = format!(
        "{} second {} | {} req/s | {latency} | failures {}/s | {:.0} s",
        tool.as_str(),
        p.second,
        p.transactions + p.failures,
        p.failures,
        elapsed.as_secs_f64()
    );
    if tty {
        eprint!("\r{line}   ");
    } else if p.second.is_multiple_of(5) {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_tool_and_engine_come_from_the_command() -> Result<()> {
        let sb = words("taskset -c 1 /usr/bin/sysbench oltp_read_only --mysql-host=h run");
        assert_eq!((Tool::of(&sb)?, Tool::Sysbench.engine(&sb)), (Tool::Sysbench, "mysql"));
        let sb_pg = words("sysbench oltp_read_only --db-driver=pgsql --pgsql-host=h run");
        assert_eq!(Tool::of(&sb_pg)?.engine(&sb_pg), "postgres");
        let pg = words("pgbench -S -T 3 -P 1 postgres");
        assert_eq!((Tool::of(&pg)?, Tool::Pgbench.engine(&pg)), (Tool::Pgbench, "postgres"));
        assert!(Tool::of(&words("ab -n 10 http://x/")).is_err());
        Ok(())
    }

    #[test]
    fn the_first_error_line_is_kept_for_the_failures() {
        let mut p = Parser::new(Tool::Pgbench);
        p.line("progress: 1.0 s, 10.0 tps, lat 1.000 ms stddev 0.100, 0 failed");
        p.line("pgbench: error: client 0 script 0 aborted in command 1 query 0: ERROR:  boom");
        p.line("pgbench: error: client 1 aborted");
        let first = p.totals().first_error.clone();
        assert_eq!(
            first.as_deref(),
            Some("pgbench: error: client 0 script 0 aborted in command 1 query 0: ERROR:  boom")
        );
        let mut s = Parser::new(Tool::Sysbench);
        s.line("    ignored errors:                      0      (0.00 per sec.)");
        assert_eq!(s.totals().first_error, None, "the summary's errors line is no error");
    }
}
