//! A libtest-mimic runner for integration-test binaries (`harness = false`)
//! whose cases all share one expensive fixture, set up once per binary: a
//! cluster from this kit, usually with an in-process proxy in front of it.
//!
//! [`run`] collects nothing itself: the binary builds its case list, and
//! passes how to set the fixture up and how to tear it down. The small
//! helpers below are the parts of such a setup that do not depend on the
//! engine or the proxy: logging, the runtime, a fresh scratch directory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use libtest_mimic::{Arguments, Failed, Trial};

/// One named case: gets the shared fixture, fails with an error.
pub type Case<C> = fn(&C) -> Result<()>;

/// Runs `cases` as libtest trials (honouring the usual test-binary flags:
/// filters, `--list`, `--test-threads`, ...) against one fixture.
///
/// With `--list` nothing is set up. Otherwise `setup` runs once before any
/// case (if it fails, no case runs and the binary fails), and `teardown` gets
/// the fixture back once every case has finished.
pub fn run<C: Send + Sync + 'static>(
    cases: Vec<(&'static str, Case<C>)>,
    setup: impl FnOnce() -> Result<Arc<C>>,
    teardown: impl FnOnce(Arc<C>),
) -> ExitCode {
    let args = Arguments::from_args();
    let ctx = if args.list {
        None
    } else {
        match setup() {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("test setup failed: {e:#}");
                return ExitCode::FAILURE;
            }
        }
    };
    let trials = cases
        .into_iter()
        .map(|(name, case)| {
            let ctx = ctx.clone();
            Trial::test(name, move || match &ctx {
                Some(ctx) => case(ctx).map_err(|e| Failed::from(format!("{e:#}"))),
                None => Ok(()),
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(ctx) = ctx {
        teardown(ctx);
    }
    conclusion.exit_code()
}

/// Logs to the test writer, filtered by `RUST_LOG` (off without it). Does
/// nothing if a global subscriber is already installed.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// The multi-threaded runtime the fixture and the cases share (two workers).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// An empty directory `gatehouse-{name}-test-{pid}` under the system temp
/// directory, emptied first if a previous run left it behind.
pub fn scratch_dir(name: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("gatehouse-{name}-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
