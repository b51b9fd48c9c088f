//! The tenant connection-storm experiment: many tenants, each with its own
//! database, and virtual users that for a fixed time repeatedly pick a
//! random tenant, connect as it (a password, or a token minted up front),
//! run `SELECT current_database()`, check the answer, and disconnect. Targets
//! run one after another (A B A B over rounds); per target: successful
//! connections per second, connect+query latency percentiles, errors, and
//! optionally the CPU a process (the proxy) used during its phases.

pub mod report;
pub mod spec;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use gatehouse_token::{IssueRequest, IssuingKey, issue, unix_seconds};
use tokio::task::JoinSet;
use tokio_postgres::{Config, NoTls, SimpleQueryMessage};

use self::report::{StormReport, StormRow};
use self::spec::{Credential, TargetSpec, config_for, database_of, fill, tenant_name};
use crate::series::Series;

/// A failed attempt is followed by this pause, so a refusing target is not
/// hammered in a busy loop.
const ERROR_BACKOFF: Duration = Duration::from_millis(10);
/// Token lifetime beyond the planned run, for slow attempts and clock skew.
const TOKEN_MARGIN: Duration = Duration::from_secs(600);

pub struct Settings {
    pub tenants: u32,
    pub clients: u32,
    pub duration: Duration,
    pub rounds: u32,
    /// Pause after each target's phase (lets its connections wind down).
    pub pause: Duration,
    /// An attempt (connect + query + close) taking longer fails.
    pub attempt_timeout: Duration,
    /// Written with `NAME ROUND` while a phase runs, `idle` between phases
    /// and `done` at the end, for samplers outside this process.
    pub phase_file: Option<PathBuf>,
    /// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`).
    pub clk_tck: u64,
}

/// What a virtual user needs to log in as one tenant.
struct Tenant {
    config: Config,
    database: String,
}

/// A target with its per-tenant connection settings, ready to run.
pub struct Prepared {
    spec: TargetSpec,
    tenants: Arc<Vec<Tenant>>,
}

/// Build every tenant's connection settings, minting tokens where a target
/// uses them (one per tenant, valid for the whole run).
pub fn prepare(specs: Vec<TargetSpec>, settings: &Settings) -> Result<Vec<Prepared>> {
    let phases = settings
        .rounds
        .saturating_mul(u32::try_from(specs.len()).unwrap_or(u32::MAX));
    let ttl = settings
        .duration
        .saturating_add(settings.pause)
        .saturating_add(settings.attempt_timeout)
        .saturating_mul(phases)
        .saturating_add(TOKEN_MARGIN);
    let now = unix_seconds(SystemTime::now());
    let mut out = Vec::with_capacity(specs.len());
    for spec in specs {
        let key = match &spec.credential {
            Credential::Token(t) => Some(
                IssuingKey::hs256_from_file(&t.secret_file, None)
                    .with_context(|| format!("target {}: loading the HS256 secret", spec.name))?,
            ),
            Credential::Password(_) => None,
        };
        let mut tenants = Vec::with_capacity(settings.tenants as usize);
        for i in 0..settings.tenants {
            let name = tenant_name(i);
            let mut config = config_for(&spec.template, &name).map_err(|e| anyhow!("target {}: {e}", spec.name))?;
            let database = database_of(&config)
                .with_context(|| format!("target {}: the template names no user or dbname", spec.name))?
                .to_string();
            let password = match (&spec.credential, &key) {
                (Credential::Password(template), _) => fill(template, &name),
                (Credential::Token(t), Some(key)) => {
                    let user = config
                        .get_user()
                        .with_context(|| format!("target {}: a token needs a user in the template", spec.name))?;
                    let request = IssueRequest {
                        issuer: t.issuer.clone(),
                        audience: t.audience.clone(),
                        tenant: user.to_string(),
                        database: database.clone(),
                        ttl,
                        now,
                    };
                    issue(key, &request).with_context(|| format!("target {}: minting a token for {name}", spec.name))?
                }
                (Credential::Token(_), None) => bail!("target {}: no signing key", spec.name),
            };
            config.password(password);
            tenants.push(Tenant { config, database });
        }
        out.push(Prepared {
            spec,
            tenants: Arc::new(tenants),
        });
    }
    Ok(out)
}

/// Run every target for every round and pool the results per target.
pub async fn run(targets: &[Prepared], settings: &Settings) -> Result<StormReport> {
    let mut rows: Vec<StormRow> = targets
        .iter()
        .map(|t| StormRow {
            target: t.spec.name.clone(),
            series: Series::default(),
            elapsed: Duration::ZERO,
            cpu: t.spec.pid.map(|_| Duration::ZERO),
        })
        .collect();
    write_phase(settings.phase_file.as_deref(), "idle")?;
    let seed = unix_seconds(SystemTime::now()) ^ u64::from(std::process::id());
    let mut phase = 0u64;
    for round in 1..=settings.rounds {
        for (target, row) in targets.iter().zip(&mut rows) {
            phase += 1;
            let name = &target.spec.name;
            eprintln!("round {round}/{}: {name} for {:?}", settings.rounds, settings.duration);
            write_phase(settings.phase_file.as_deref(), &format!("{name} {round}"))?;
            let cpu_before = target.spec.pid.map(|pid| cpu_time(pid, settings.clk_tck)).transpose()?;
            let (series, elapsed) = storm(target, settings, seed.wrapping_add(phase.wrapping_mul(GOLDEN))).await?;
            let cpu_after = target.spec.pid.map(|pid| cpu_time(pid, settings.clk_tck)).transpose()?;
            write_phase(settings.phase_file.as_deref(), "idle")?;
            eprintln!(
                "round {round}/{}: {name}: {} connections ({:.1}/s), {} errors{}",
                settings.rounds,
                series.samples.len(),
                series.samples.len() as f64 / elapsed.as_secs_f64().max(1e-9),
                series.errors,
                series
                    .first_error
                    .as_deref()
                    .map_or(String::new(), |e| format!(" (first: {e})"))
            );
            row.series.merge(series);
            row.elapsed += elapsed;
            if let (Some(total), Some(a), Some(b)) = (row.cpu.as_mut(), cpu_before, cpu_after) {
                *total += b.saturating_sub(a);
            }
            tokio::time::sleep(settings.pause).await;
        }
    }
    write_phase(settings.phase_file.as_deref(), "done")?;
    let params = vec![
        ("tenants".to_string(), settings.tenants.to_string()),
        ("clients".to_string(), settings.clients.to_string()),
        ("seconds".to_string(), settings.duration.as_secs().to_string()),
        ("rounds".to_string(), settings.rounds.to_string()),
    ];
    Ok(StormReport { params, rows })
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// One phase: `clients` virtual users looping until the deadline. Returns
/// their pooled results and the wall time until the last one finished.
async fn storm(target: &Prepared, settings: &Settings, seed: u64) -> Result<(Series, Duration)> {
    let start = Instant::now();
    let deadline = start + settings.duration;
    let timeout = settings.attempt_timeout;
    let mut users = JoinSet::new();
    for vu in 0..settings.clients {
        let tenants = Arc::clone(&target.tenants);
        let mut rng = SplitMix64(seed ^ u64::from(vu).wrapping_mul(GOLDEN));
        users.spawn(async move {
            let mut series = Series::default();
            while Instant::now() < deadline {
                let tenant = &tenants[rng.below(tenants.len())];
                let outcome = tokio::time::timeout(timeout, attempt(tenant))
                    .await
                    .unwrap_or_else(|_| Err(anyhow!("timed out after {timeout:?}")));
                let failed = outcome.is_err();
                series.record(outcome);
                if failed {
                    tokio::time::sleep(ERROR_BACKOFF).await;
                }
            }
            series
        });
    }
    let mut total = Series::default();
    while let Some(joined) = users.join_next().await {
        total.merge(joined.context("virtual user panicked")?);
    }
    Ok((total, start.elapsed()))
}

/// Connect, `SELECT current_database()`, close. The clock covers connect and
/// query; the close is awaited but not timed.
async fn attempt(tenant: &Tenant) -> Result<Duration> {
    let start = Instant::now();
    let (client, connection) = tenant.config.connect(NoTls).await.context("connecting")?;
    let driver = tokio::spawn(connection);
    let rows = client.simple_query("SELECT current_database()").await;
    let elapsed = start.elapsed();
    drop(client);
    let closed = driver.await;
    let rows = rows.context("SELECT current_database()")?;
    let database = rows.iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => row.get(0),
        _ => None,
    });
    if database != Some(tenant.database.as_str()) {
        bail!(
            "SELECT current_database() returned {database:?}, expected {:?}",
            tenant.database
        );
    }
    closed
        .context("connection task panicked")?
        .context("closing connection")?;
    Ok(elapsed)
}

/// A process's user + system CPU time so far.
fn cpu_time(pid: u32, clk_tck: u64) -> Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let ticks = spec::cpu_ticks(&text).with_context(|| format!("parsing {path}"))?;
    Ok(Duration::from_secs_f64(ticks as f64 / clk_tck.max(1) as f64))
}

/// Replace the phase file's content atomically (temporary file + rename).
fn write_phase(path: Option<&Path>, phase: &str) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{phase}\n")).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// A small, fast pseudo-random generator (SplitMix64); picking tenants needs
/// no cryptographic quality.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n` > 0; the modulo bias is negligible for
    /// tenant counts).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_picks_cover_every_tenant_evenly() {
        let mut rng = SplitMix64(7);
        let mut counts = [0u32; 10];
        for _ in 0..10_000 {
            counts[rng.below(10)] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
        assert_eq!(SplitMix64(1).below(1), 0);
    }

    #[test]
    fn prepare_fills_passwords_and_mints_tokens() {
        let dir = std::env::temp_dir().join(format!("loadgen-storm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("hs256.secret");
        std::fs::write(&secret, "0123456789abcdef0123456789abcdef-test\n").unwrap();
        let specs = spec::assemble(
            vec![
                ("direct".into(), "host=127.0.0.1 user={tenant} dbname={tenant}".into()),
                ("gh".into(), "host=127.0.0.1 port=6432 user={tenant}".into()),
            ],
            vec![("direct".into(), "pw-{tenant}".into())],
            vec![(
                "gh".into(),
                spec::TokenSpec {
                    issuer: "iss".into(),
                    audience: "rw".into(),
                    secret_file: secret.clone(),
                },
            )],
            vec![],
        )
        .unwrap();
        let settings = Settings {
            tenants: 3,
            clients: 1,
            duration: Duration::from_secs(1),
            rounds: 1,
            pause: Duration::ZERO,
            attempt_timeout: Duration::from_secs(1),
            phase_file: None,
            clk_tck: 100,
        };
        let prepared = prepare(specs, &settings).unwrap();
        assert_eq!(prepared[0].tenants.len(), 3);
        let t2 = &prepared[0].tenants[2];
        assert_eq!(t2.config.get_password(), Some(&b"pw-t002"[..]));
        assert_eq!(t2.database, "t002");
        let tok = &prepared[1].tenants[1];
        assert_eq!(tok.database, "t001");
        let token = std::str::from_utf8(tok.config.get_password().unwrap()).unwrap();
        assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn phase_file_is_replaced_whole() {
        let path = std::env::temp_dir().join(format!("loadgen-phase-{}", std::process::id()));
        write_phase(Some(&path), "gh 1").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "gh 1\n");
        write_phase(Some(&path), "idle").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "idle\n");
        write_phase(None, "ignored").unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}
