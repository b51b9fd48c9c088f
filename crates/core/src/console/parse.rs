//! The console's statements: keywords in any case, names bare or quoted
//! (`"..."` or `'...'`), statements separated by `;`.

use super::{ConsoleError, Refusal};

/// What `SHOW` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show {
    Help,
    Version,
    Pools,
    Clients,
    Servers,
    Backends,
    Clusters,
    Endpoints,
    Stats,
    Totals,
    Digests,
    Config,
}

const SHOWS: [(&str, Show); 12] = [
    ("help", Show::Help),
    ("version", Show::Version),
    ("pools", Show::Pools),
    ("clients", Show::Clients),
    ("servers", Show::Servers),
    ("backends", Show::Backends),
    ("clusters", Show::Clusters),
    ("endpoints", Show::Endpoints),
    ("stats", Show::Stats),
    ("totals", Show::Totals),
    ("digests", Show::Digests),
    ("config", Show::Config),
];

/// What `PAUSE` and `RESUME` act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every cluster.
    All,
    Cluster(String),
    Endpoint(String),
    /// A cluster or, if none has the name, an endpoint.
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Show(Show),
    Pause(Target),
    Resume(Target),
    /// `DISABLE <endpoint>`: new logins on it are refused (sessions go on).
    Disable(String),
    Enable(String),
    Drain {
        cluster: String,
        backend: String,
    },
    Undrain {
        cluster: String,
        backend: String,
    },
    Switchover {
        cluster: String,
        backend: String,
    },
    Reload,
    /// `KILL <client id>`: ends that client's session.
    Kill(u32),
    /// `SELECT @@name, ...`: what a client asks on connecting
    /// (`@@version_comment`, `@@max_allowed_packet`), by name.
    Variables(Vec<String>),
}

impl Command {
    /// Whether it changes anything (admins only).
    pub fn changes_state(&self) -> bool {
        !matches!(self, Self::Show(_) | Self::Variables(_))
    }

    /// Its leading keyword, for messages and tags.
    pub fn verb(&self) -> &'static str {
        match self {
            Self::Show(_) => "SHOW",
            Self::Pause(_) => "PAUSE",
            Self::Resume(_) => "RESUME",
            Self::Disable(_) => "DISABLE",
            Self::Enable(_) => "ENABLE",
            Self::Drain { .. } => "DRAIN",
            Self::Undrain { .. } => "UNDRAIN",
            Self::Switchover { .. } => "SWITCHOVER",
            Self::Reload => "RELOAD",
            Self::Kill(_) => "KILL",
            Self::Variables(_) => "SELECT",
        }
    }
}

/// The statements of `text`, split at `;` outside quotes, blank ones left out.
pub fn statements(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quote) = (0, None);
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ';') => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out.into_iter().map(str::trim).filter(|s| !s.is_empty()).collect()
}

/// Words of one statement; a quoted word keeps its case and spaces.
fn words(statement: &str) -> Result<Vec<Word>, ConsoleError> {
    let mut out = Vec::new();
    let mut chars = statement.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if c.is_whitespace() || c == ',' {
            chars.next();
            continue;
        }
        if c == '"' || c == '\'' {
            chars.next();
            let mut word = String::new();
            let mut closed = false;
            for (_, d) in chars.by_ref() {
                if d == c {
                    closed = true;
                    break;
                }
                word.push(d);
            }
            if !closed {
                return Err(syntax(&format!("unterminated quoted name at {}", &statement[i..])));
            }
            out.push(Word::Quoted(word));
            continue;
        }
        let mut end = statement.len();
        while let Some(&(j, d)) = chars.peek() {
            if d.is_whitespace() || d == ',' || d == '"' || d == '\'' {
                end = j;
                break;
            }
            chars.next();
        }
        out.push(Word::Bare(statement[i..end].to_owned()));
    }
    Ok(out)
}

#[derive(Debug)]
enum Word {
    Bare(String),
    Quoted(String),
}

impl Word {
    fn keyword(&self) -> Option<String> {
        match self {
            Self::Bare(w) => Some(w.to_ascii_lowercase()),
            Self::Quoted(_) => None,
        }
    }

    fn name(&self) -> &str {
        match self {
            Self::Bare(w) | Self::Quoted(w) => w,
        }
    }
}

fn syntax(message: &str) -> ConsoleError {
    ConsoleError::new(
        Refusal::Syntax,
        format!("{message} (SHOW HELP lists the console's commands)"),
    )
}

/// Parses one statement (without its `;`).
pub fn parse(statement: &str) -> Result<Command, ConsoleError> {
    let words = words(statement)?;
    let mut it = words.iter();
    let verb = it.next().and_then(Word::keyword).unwrap_or_default();
    let rest: Vec<&Word> = it.collect();
    let one_name = |what: &str| match rest.as_slice() {
        [w] => Ok(w.name().to_owned()),
        _ => Err(syntax(&format!("{} takes {what}", verb.to_ascii_uppercase()))),
    };
    let two_names = || match rest.as_slice() {
        [c, b] => Ok((c.name().to_owned(), b.name().to_owned())),
        _ => Err(syntax(&format!(
            "{} takes a cluster and a backend",
            verb.to_ascii_uppercase()
        ))),
    };
    match verb.as_str() {
        "show" => {
            let what = match rest.as_slice() {
                [w] => w.keyword().unwrap_or_default(),
                _ => String::new(),
            };
            SHOWS
                .iter()
                .find(|(n, _)| *n == what)
                .map(|(_, s)| Command::Show(*s))
                .ok_or_else(|| {
                    let all: Vec<String> = SHOWS.iter().map(|(n, _)| n.to_ascii_uppercase()).collect();
                    syntax(&format!("SHOW takes one of {}", all.join(", ")))
                })
        }
        "pause" | "resume" => {
            let target = match rest.as_slice() {
                [] => Target::All,
                [w] => Target::Named(w.name().to_owned()),
                [kind, w] => match kind.keyword().as_deref() {
                    Some("cluster") => Target::Cluster(w.name().to_owned()),
                    Some("endpoint") => Target::Endpoint(w.name().to_owned()),
                    _ => return Err(syntax("PAUSE and RESUME take [CLUSTER | ENDPOINT] <name>, or nothing")),
                },
                _ => return Err(syntax("PAUSE and RESUME take [CLUSTER | ENDPOINT] <name>, or nothing")),
            };
            Ok(if verb == "pause" {
                Command::Pause(target)
            } else {
                Command::Resume(target)
            })
        }
        "disable" | "enable" => {
            let name = match rest.as_slice() {
                [kind, w] if kind.keyword().as_deref() == Some("endpoint") => w.name().to_owned(),
                _ => one_name("an endpoint's name")?,
            };
            Ok(if verb == "disable" {
                Command::Disable(name)
            } else {
                Command::Enable(name)
            })
        }
        "drain" => two_names().map(|(cluster, backend)| Command::Drain { cluster, backend }),
        "undrain" => two_names().map(|(cluster, backend)| Command::Undrain { cluster, backend }),
        "switchover" => two_names().map(|(cluster, backend)| Command::Switchover { cluster, backend }),
        "reload" if rest.is_empty() => Ok(Command::Reload),
        "kill" | "kill_client" => {
            let id = match rest.as_slice() {
                [kind, w] if matches!(kind.keyword().as_deref(), Some("client" | "connection")) => w.name(),
                [w] => w.name(),
                _ => "",
            };
            id.parse::<u32>()
                .map(Command::Kill)
                .map_err(|_| syntax("KILL takes a client id, as SHOW CLIENTS lists it"))
        }
        "select" => variables(&rest),
        _ => Err(syntax(&format!("unknown console command \"{}\"", statement))),
    }
}

/// `SELECT @@a, @@session.b [LIMIT n]`.
fn variables(rest: &[&Word]) -> Result<Command, ConsoleError> {
    let mut names = Vec::new();
    let mut it = rest.iter();
    while let Some(w) = it.next() {
        let Word::Bare(b) = w else {
            return Err(syntax("the console answers SELECT of @@variables only"));
        };
        if b.eq_ignore_ascii_case("limit") {
            match it.next().map(|n| n.name().parse::<u64>()) {
                Some(Ok(_)) if it.next().is_none() => break,
                _ => return Err(syntax("LIMIT takes a number")),
            }
        }
        let Some(name) = b.strip_prefix("@@") else {
            return Err(syntax("the console answers SELECT of @@variables only"));
        };
        let name = name
            .strip_prefix("session.")
            .or_else(|| name.strip_prefix("global."))
            .unwrap_or(name);
        names.push(name.to_ascii_lowercase());
    }
    if names.is_empty() {
        return Err(syntax("the console answers SELECT of @@variables only"));
    }
    Ok(Command::Variables(names))
}
