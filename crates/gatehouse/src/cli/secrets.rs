//! `gatehouse secrets keygen|set|rotate|get|list|remove`: manage the
//! encrypted secrets file (backend credentials, AES-256-GCM under a master
//! key) with `gatehouse-secrets`.
//!
//! Passwords are read from the first line of standard input and printed only
//! by `get --show-password`; the master key is printed only by `keygen`
//! without `--out`. Every command that writes the file first checks that the
//! key opens every secret already in it, so one file never mixes keys.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use gatehouse_secrets::{MasterKey, SecretsFile};
use zeroize::Zeroizing;

#[derive(Subcommand)]
pub enum SecretsCommand {
    /// Make a new random master key (base64 text). Printed, or with --out
    /// written to a new file with mode 0600 (an existing file is never
    /// overwritten).
    Keygen {
        /// Write the key to this new file instead of printing it.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Create a secret, or replace its user and password. The password is the
    /// first line of standard input (e.g. `printf '%s\n' "$PW" | gatehouse
    /// secrets set ...`). The file is created if missing.
    Set {
        #[command(flatten)]
        store: Store,
        /// The secret's name (what `[[tenants]] secret` refers to).
        #[arg(long)]
        name: String,
        /// The backend user name.
        #[arg(long)]
        user: String,
    },
    /// Replace the password of an existing secret (read from the first line
    /// of standard input), keeping its user.
    Rotate {
        #[command(flatten)]
        store: Store,
        #[arg(long)]
        name: String,
    },
    /// Decrypt one secret and print `name user version updated`; the
    /// password only with --show-password, on a line of its own.
    Get {
        #[command(flatten)]
        store: Store,
        #[arg(long)]
        name: String,
        /// Also print the password.
        #[arg(long)]
        show_password: bool,
    },
    /// Print `name user version updated` for every secret. Never decrypts:
    /// the key options are optional here; when one is given the key is loaded
    /// (so a bad key source is reported) but not used.
    List {
        /// The encrypted secrets file.
        #[arg(long, value_name = "PATH")]
        file: PathBuf,
        #[command(flatten)]
        key: OptionalKeyArgs,
    },
    /// Delete a secret. The key must open every secret in the file first.
    Remove {
        #[command(flatten)]
        store: Store,
        #[arg(long)]
        name: String,
    },
}

/// The secrets file and its master key.
#[derive(Args)]
pub struct Store {
    /// The encrypted secrets file.
    #[arg(long, value_name = "PATH")]
    file: PathBuf,
    #[command(flatten)]
    key: KeyArgs,
}

/// Where the master key comes from: exactly one of the two.
#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct KeyArgs {
    /// File holding the master key: 32 raw bytes, 64 hex digits or base64.
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    /// Environment variable holding the master key: 64 hex digits or base64.
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
}

/// [`KeyArgs`] for `list`, where the key is not needed.
#[derive(Args)]
#[group(required = false, multiple = false)]
pub struct OptionalKeyArgs {
    /// File holding the master key (optional; not used to decrypt).
    #[arg(long, value_name = "PATH")]
    key_file: Option<PathBuf>,
    /// Environment variable holding the master key (optional; not used to
    /// decrypt).
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
}

impl KeyArgs {
    fn load(&self) -> anyhow::Result<MasterKey> {
        load_key(self.key_file.as_deref(), self.key_env.as_deref())?.context("give --key-file or --key-env")
    }
}

fn load_key(file: Option<&Path>, env: Option<&str>) -> anyhow::Result<Option<MasterKey>> {
    Ok(match (file, env) {
        (Some(path), _) => Some(MasterKey::from_file(path).context("loading the master key")?),
        (None, Some(var)) => Some(MasterKey::from_env(var).context("loading the master key")?),
        (None, None) => None,
    })
}

pub fn run(command: SecretsCommand) -> anyhow::Result<ExitCode> {
    match command {
        SecretsCommand::Keygen { out } => keygen(out.as_deref()),
        SecretsCommand::Set { store, name, user } => set(&store, &name, &user),
        SecretsCommand::Rotate { store, name } => rotate(&store, &name),
        SecretsCommand::Get {
            store,
            name,
            show_password,
        } => get(&store, &name, show_password),
        SecretsCommand::List { file, key } => list(&file, &key),
        SecretsCommand::Remove { store, name } => remove(&store, &name),
    }?;
    Ok(ExitCode::SUCCESS)
}

fn keygen(out: Option<&Path>) -> anyhow::Result<()> {
    let key = MasterKey::generate().context("generating a master key")?;
    let text = key.to_text();
    let Some(path) = out else {
        println!("{}", text.as_str());
        return Ok(());
    };
    let mut file = match OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            bail!("{} already exists; refusing to overwrite a key file", path.display())
        }
        Err(e) => return Err(e).with_context(|| format!("creating master key file {}", path.display())),
    };
    let mut line = Zeroizing::new(String::with_capacity(text.len() + 1));
    line.push_str(&text);
    line.push('\n');
    file.write_all(line.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing master key file {}", path.display()))?;
    println!("wrote a new master key to {}", path.display());
    Ok(())
}

fn set(store: &Store, name: &str, user: &str) -> anyhow::Result<()> {
    let (mut secrets, key) = open_for_writing(store, true)?;
    let password = read_password()?;
    let version = secrets
        .set(&key, name, user, &password)
        .with_context(|| format!("setting secret {name:?}"))?;
    save(&secrets, &store.file)?;
    println!("set {name} (version {version})");
    Ok(())
}

fn rotate(store: &Store, name: &str) -> anyhow::Result<()> {
    let (mut secrets, key) = open_for_writing(store, false)?;
    if secrets.entry(name).is_none() {
        bail!("no secret named {name:?} in {}", store.file.display());
    }
    let password = read_password()?;
    let version = secrets
        .rotate(&key, name, &password)
        .with_context(|| format!("rotating secret {name:?}"))?;
    save(&secrets, &store.file)?;
    println!("rotated {name} (version {version})");
    Ok(())
}

fn get(store: &Store, name: &str, show_password: bool) -> anyhow::Result<()> {
    let secrets = load(&store.file)?;
    let key = store.key.load()?;
    let (_, password) = secrets
        .decrypt(&key, name)
        .with_context(|| format!("reading secret {name:?} from {}", store.file.display()))?;
    let entry = secrets
        .entry(name)
        .with_context(|| format!("no secret named {name:?}"))?;
    println!(
        "{name} {} {} {}",
        entry.user(),
        entry.version(),
        format_updated(entry.updated())
    );
    if show_password {
        println!("{}", password.expose());
    }
    Ok(())
}

fn list(file: &Path, key: &OptionalKeyArgs) -> anyhow::Result<()> {
    let secrets = load(file)?;
    // Loaded only so that a bad --key-file/--key-env fails as elsewhere.
    let _key = load_key(key.key_file.as_deref(), key.key_env.as_deref())?;
    for name in secrets.names() {
        if let Some(entry) = secrets.entry(name) {
            println!(
                "{name} {} {} {}",
                entry.user(),
                entry.version(),
                format_updated(entry.updated())
            );
        }
    }
    Ok(())
}

fn remove(store: &Store, name: &str) -> anyhow::Result<()> {
    let (mut secrets, _key) = open_for_writing(store, false)?;
    secrets
        .remove(name)
        .with_context(|| format!("removing secret {name:?} from {}", store.file.display()))?;
    save(&secrets, &store.file)?;
    println!("removed {name}");
    Ok(())
}

/// Loads the file (an empty store if missing and `create`) and the key, and
/// checks that the key opens every secret already there.
fn open_for_writing(store: &Store, create: bool) -> anyhow::Result<(SecretsFile, MasterKey)> {
    let secrets = if create {
        SecretsFile::load_or_empty(&store.file).context("loading the secrets file")?
    } else {
        load(&store.file)?
    };
    let key = store.key.load()?;
    // Dropping the decrypted values wipes them.
    secrets.decrypt_all(&key).with_context(|| {
        format!(
            "the master key does not open the secrets in {}; nothing was changed",
            store.file.display()
        )
    })?;
    Ok((secrets, key))
}

fn load(path: &Path) -> anyhow::Result<SecretsFile> {
    SecretsFile::load(path).context("loading the secrets file")
}

fn save(secrets: &SecretsFile, path: &Path) -> anyhow::Result<()> {
    secrets.save(path).context("saving the secrets file")
}

/// The first line of standard input without its line end; empty is refused.
fn read_password() -> anyhow::Result<Zeroizing<String>> {
    // Room up front so that reading rarely reallocates (and leaves copies).
    let mut line = Zeroizing::new(String::with_capacity(1024));
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the password from standard input")?;
    let len = line.trim_end_matches(['\r', '\n']).len();
    line.truncate(len);
    if line.is_empty() {
        bail!("no password on standard input (its first line is empty)");
    }
    Ok(line)
}

/// RFC 3339 (UTC) for times humantime can show, else the raw Unix seconds.
fn format_updated(secs: u64) -> String {
    // humantime's Display fails for years past 9999.
    const YEAR_10000: u64 = 253_402_300_800;
    match UNIX_EPOCH.checked_add(Duration::from_secs(secs)) {
        Some(time) if secs < YEAR_10000 => humantime::format_rfc3339_seconds(time).to_string(),
        _ => secs.to_string(),
    }
}
