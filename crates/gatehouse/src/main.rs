//! The `gatehouse` command: run the proxy, check a configuration, make the
//! password verifiers tenants are configured with, manage the encrypted
//! secrets file (`secrets`), and mint development tokens (`token`).

mod cli;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use gatehouse::config;
use gatehouse_proto_pg::auth::md5::md5_stored;
use gatehouse_proto_pg::auth::random_salt;
use gatehouse_proto_pg::auth::scram::{DEFAULT_ITERATIONS, ScramVerifier};

#[derive(Parser)]
#[command(
    name = "gatehouse",
    version,
    about = "A database proxy for PostgreSQL and MySQL/MariaDB"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy until SIGINT or SIGTERM.
    Run {
        #[arg(long)]
        config: PathBuf,
    },
    /// Take over from the proxy running with the same `[proxy]
    /// upgrade_socket` (a new binary, a new configuration) without dropping
    /// clients: accept on its listening sockets, then it stops accepting,
    /// finishes its transactions in flight and exits; this process runs on
    /// until SIGINT or SIGTERM, as `run` does.
    Upgrade {
        #[arg(long)]
        config: PathBuf,
    },
    /// Validate a configuration file and list every problem with its line.
    CheckConfig { file: PathBuf },
    /// Print the verifier to put in a tenant's `scram_verifier` (or, with
    /// --md5, its `md5_hash`; with --mysql, its `mysql_native_password`;
    /// with --mysql-ed25519, its `mysql_ed25519` key as MariaDB stores it).
    /// The password is read from standard input.
    HashPassword {
        /// The tenant (user) name; needed for md5.
        #[arg(long)]
        user: Option<String>,
        #[arg(long, conflicts_with_all = ["mysql", "mysql_ed25519"])]
        md5: bool,
        #[arg(long, conflicts_with = "mysql_ed25519")]
        mysql: bool,
        #[arg(long)]
        mysql_ed25519: bool,
    },
    /// Manage the encrypted secrets file (backend credentials).
    #[command(subcommand)]
    Secrets(cli::secrets::SecretsCommand),
    /// Mint development tokens (JWT) and JWKS documents.
    #[command(subcommand)]
    Token(cli::token::TokenCommand),
    /// Print the configuration reference (every key with its type, default
    /// and meaning) as Markdown: docs/CONFIG.md is its output.
    ConfigReference,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { config } => run(config, false),
        Command::Upgrade { config } => run(config, true),
        Command::CheckConfig { file } => check(&file),
        Command::HashPassword {
            user,
            md5,
            mysql,
            mysql_ed25519,
        } => hash_password(user, md5, mysql, mysql_ed25519),
        Command::Secrets(command) => cli::secrets::run(command),
        Command::Token(command) => cli::token::run(command),
        Command::ConfigReference => {
            print!("{}", config::reference::render_markdown());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gatehouse: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn check(file: &std::path::Path) -> anyhow::Result<ExitCode> {
    match config::load(file) {
        Ok(s) => {
            println!(
                "{}: OK ({} clusters, {} endpoints, {} tenants, {} secrets)",
                file.display(),
                s.clusters.len(),
                s.endpoints.len(),
                s.tenants.len(),
                s.secrets.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(problems) => {
            for p in &problems.0 {
                match p.line {
                    Some(l) => eprintln!("{}:{l}: {}", file.display(), p.message),
                    None => eprintln!("{}: {}", file.display(), p.message),
                }
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

fn hash_password(user: Option<String>, md5: bool, mysql: bool, mysql_ed25519: bool) -> anyhow::Result<ExitCode> {
    let mut password = String::new();
    std::io::stdin()
        .read_line(&mut password)
        .context("reading the password from standard input")?;
    let password = password.trim_end_matches(['\r', '\n']);
    if mysql_ed25519 {
        use base64::Engine as _;
        let key = gatehouse_proto_mysql::auth::ed25519::public_key(password.as_bytes());
        println!("{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(key));
    } else if mysql {
        use gatehouse_proto_mysql::auth::native_password;
        println!(
            "{}",
            native_password::format_stored(&native_password::stored_hash(password.as_bytes()))
        );
    } else if md5 {
        let user = user.context("--md5 needs --user")?;
        println!("{}", md5_stored(&user, password));
    } else {
        println!(
            "{}",
            ScramVerifier::from_password(password, &random_salt(), DEFAULT_ITERATIONS)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run(path: PathBuf, take_over: bool) -> anyhow::Result<ExitCode> {
    let settings = match config::load(&path) {
        Ok(s) => s,
        Err(problems) => anyhow::bail!("invalid configuration {}:\n{problems}", path.display()),
    };
    let logging = gatehouse::logging::init(settings.proxy.log_format, &settings.proxy.log_filter)?;
    // The predecessor's listeners, taken before anything else starts.
    let handover = match (take_over, &settings.proxy.upgrade_socket) {
        (false, _) => None,
        (true, None) => anyhow::bail!("upgrade needs [proxy] upgrade_socket in {}", path.display()),
        (true, Some(socket)) => Some(gatehouse::upgrade::take_over(socket)?),
    };
    // One thread: a single event loop, no work stealing or cross-thread
    // wake-ups (the cheapest per transaction where the proxy shares cores
    // with the database and its clients). More: tokio's multi-thread runtime.
    let mut builder = match settings.proxy.worker_threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            if n > 1 {
                b.worker_threads(n);
            }
            b
        }
    };
    let runtime = builder.enable_all().build()?;
    runtime.block_on(async {
        let (inherited, successor) = match handover {
            Some((inherited, successor)) => (inherited, Some(successor)),
            None => (gatehouse::upgrade::Inherited::none(), None),
        };
        let taken = inherited.len();
        let mut app = gatehouse::App::bind_inheriting(settings, inherited).await?;
        app.reloader().control_logging(logging);
        tokio::spawn(reload_on_hangup(app.reloader()));
        if let Some(successor) = successor {
            // Ready once accepting: the predecessor then stops, and this
            // process offers its own listeners on the socket path.
            let serving = app.when_serving();
            let (free_tx, free_rx) = tokio::sync::oneshot::channel();
            app.offer_after(free_rx);
            tokio::spawn(async move {
                if serving.await.is_err() {
                    return;
                }
                match successor.serving().await {
                    Ok(_) => {
                        tracing::info!(
                            listeners = taken,
                            "upgrade done: the previous process stopped accepting and drains"
                        );
                        let _ = free_tx.send(());
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "upgrade: the previous process did not confirm; both may accept")
                    }
                }
            });
        }
        gatehouse::run(app, shutdown_signal()).await?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// On SIGHUP, reads the configuration again and takes its tenants (with the
/// tenant directory) and secrets (with the secrets store); an invalid file
/// is reported and the running configuration kept.
async fn reload_on_hangup(reloader: std::sync::Arc<gatehouse::reload::Reloader>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP: reload by restart only");
        return;
    };
    while hangup.recv().await.is_some() {
        // The reloader logs the outcome.
        let _ = reloader.reload().await;
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
