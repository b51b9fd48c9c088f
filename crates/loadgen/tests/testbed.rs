//! The test kit's testbed, measured: a PostgreSQL server started with a CPU
//! budget and a latency (the kit's relay, this crate's `relay` binary)
//! uses no more CPU than its budget and runs a CPU-bound query slower
//! under a smaller budget, and a round trip to it takes at least the
//! latency. Where the machine cannot give CPU budgets (no cgroup v1 `cpu`
//! controller, not root) both cases are reported as ignored, with the
//! reason printed: never passed without measuring.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use gatehouse_testkit::testbed::{self, Testbed};
use gatehouse_testkit::trials::{runtime, scratch_dir};
use gatehouse_testkit::{Cluster, Options};
use libtest_mimic::{Arguments, Failed, Trial};

/// The small budget the CPU case starts the server with (cores).
const SMALL_CPU: f64 = 0.1;
/// The budget it then raises it to.
const LARGE_CPU: f64 = 1.0;
/// The round trip the latency case puts between client and server.
const LATENCY: Duration = Duration::from_millis(4);
/// A CPU-bound query: about 0.1–0.3 s of one core here.
const BUSY_QUERY: &str = "SELECT count(*) FROM generate_series(1, 2000000)";

/// One case: measures, fails with an error.
type Case = fn() -> Result<()>;

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let unavailable = testbed::cpu_budgets_available().err();
    if let (Some(why), false) = (&unavailable, args.list) {
        println!("testbed cases ignored: {why}");
    }
    let cases: Vec<(&str, Case)> = vec![
        (
            "testbed::a_server_on_a_cpu_budget_uses_no_more_than_it_and_runs_slower_under_a_smaller_one",
            cpu_budget,
        ),
        (
            "testbed::a_round_trip_to_a_server_takes_at_least_the_testbed_latency",
            latency,
        ),
    ];
    let trials = cases
        .into_iter()
        .map(|(name, case)| {
            Trial::test(name, move || case().map_err(|e| Failed::from(format!("{e:#}"))))
                .with_ignored_flag(unavailable.is_some())
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

async fn connect(c: &Cluster, port: u16) -> Result<tokio_postgres::Client> {
    let conninfo = format!(
        "host=127.0.0.1 port={port} user={} password={} dbname=postgres",
        c.pg_user(),
        c.pg_password()
    );
    let (client, conn) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// Runs [`BUSY_QUERY`] on the server's host; returns the wall time and the
/// host's CPU time used meanwhile.
async fn busy(c: &Cluster, client: &tokio_postgres::Client) -> Result<(Duration, Duration)> {
    let hosts = c.testbed_hosts().context("the cluster has no testbed hosts")?;
    let before = hosts.info("pg0")?.used;
    let start = Instant::now();
    client.simple_query(BUSY_QUERY).await?;
    let wall = start.elapsed();
    Ok((wall, hosts.info("pg0")?.used.saturating_sub(before)))
}

fn cpu_budget() -> Result<()> {
    let dir = scratch_dir("testbed-cpu")?;
    let opts = Options {
        testbed: Testbed {
            server_cpu: Some(SMALL_CPU),
            ..Testbed::default()
        },
        ..Options::default()
    };
    let c = Cluster::up(&dir.join("cluster"), &opts)?;
    let hosts = c.testbed_hosts().context("no testbed hosts")?;
    let info = hosts.info("pg0")?;
    ensure!(
        info.cpu == Some(SMALL_CPU),
        "pg0's budget is {:?}, not {SMALL_CPU}",
        info.cpu
    );
    runtime()?.block_on(async {
        let client = connect(&c, c.server("pg0")?.port).await?;
        // Warm the backend (catalog caches) on the large budget first.
        hosts.create("pg0", Some(LARGE_CPU))?;
        client.simple_query(BUSY_QUERY).await?;
        let (large_wall, _) = busy(&c, &client).await?;
        hosts.create("pg0", Some(SMALL_CPU))?;
        let throttled_before = hosts.info("pg0")?.throttled_periods;
        let (small_wall, small_used) = busy(&c, &client).await?;
        let throttled = hosts.info("pg0")?.throttled_periods - throttled_before;
        let rate = small_used.as_secs_f64() / small_wall.as_secs_f64();
        println!(
            "budget {LARGE_CPU}: {large_wall:?}; budget {SMALL_CPU}: {small_wall:?}, \
             {small_used:?} of CPU ({rate:.3} cores), throttled in {throttled} periods"
        );
        // The quota is enforced per 100 ms period: a few periods' slack.
        ensure!(
            rate <= SMALL_CPU * 1.5,
            "the server used {rate:.3} cores on a budget of {SMALL_CPU}"
        );
        ensure!(throttled > 0, "the quota never stopped the server");
        ensure!(
            small_wall >= large_wall * 2,
            "the query took {small_wall:?} on {SMALL_CPU} cores, {large_wall:?} on {LARGE_CPU}"
        );
        Ok(())
    })
}

fn latency() -> Result<()> {
    let dir = scratch_dir("testbed-latency")?;
    let opts = Options {
        testbed: Testbed {
            latency: Some(LATENCY),
            relay_bin: Some(env!("CARGO_BIN_EXE_gatehouse-loadgen").into()),
            ..Testbed::default()
        },
        ..Options::default()
    };
    let c = Cluster::up(&dir.join("cluster"), &opts)?;
    let s = c.server("pg0")?;
    ensure!(s.client_port != s.port, "no relay in front of pg0");
    runtime()?.block_on(async {
        let far = connect(&c, s.client_port).await?;
        let near = connect(&c, s.port).await?;
        let mut far_times = Vec::new();
        let mut near_times = Vec::new();
        for _ in 0..10 {
            for (client, times) in [(&far, &mut far_times), (&near, &mut near_times)] {
                let start = Instant::now();
                client.simple_query("SELECT 1").await?;
                times.push(start.elapsed());
            }
        }
        far_times.sort();
        near_times.sort();
        println!("round trips through the testbed {far_times:?}, on the server's own port {near_times:?}");
        ensure!(
            far_times[0] >= LATENCY,
            "a round trip took {:?}, under the testbed's {LATENCY:?}",
            far_times[0]
        );
        ensure!(
            near_times[5] < far_times[5],
            "the latency is not the relay's: median {:?} near, {:?} far",
            near_times[5],
            far_times[5]
        );
        Ok(())
    })
}
