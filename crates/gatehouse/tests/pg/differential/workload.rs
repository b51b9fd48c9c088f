//! The workload: the operations a client can run ([`Op`]) and the seeded
//! generator that gives every client its own deterministic sequence of them,
//! plus the tables of tracked parameters and values the operations draw on.

/// Operations per client: OPS - 5 ..= OPS + 5.
const OPS: usize = 40;

/// splitmix64: tiny, deterministic, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// Tracked parameters and the raw values clients give them.
pub(super) const PARAMS: &[(&str, &[&str])] = &[
    (
        "search_path",
        &[
            "public",
            "\"$user\", public",
            "pg_catalog, public",
            "public, pg_catalog",
            "pg_catalog",
        ],
    ),
    ("application_name", &["diff-a", "diff b", "ünïcödé"]),
    (
        "TimeZone",
        &[
            "UTC",
            "Asia/Tokyo",
            "America/New_York",
            "Europe/Berlin",
            "Australia/Adelaide",
        ],
    ),
    ("DateStyle", &["ISO, MDY", "SQL, DMY", "German", "Postgres, YMD"]),
    ("statement_timeout", &["0", "45s", "2min", "3600000"]),
    ("lock_timeout", &["0", "5s", "90s"]),
    ("extra_float_digits", &["0", "1", "2", "-3", "3"]),
    (
        "default_transaction_isolation",
        &["read committed", "repeatable read", "serializable"],
    ),
];

/// Index of application_name in [`PARAMS`]: its default differs between a
/// direct connection and a pooled one, so it is only shown once set.
pub(super) const APP: usize = 1;

/// Values the server rejects, by parameter index (none for search_path and
/// application_name, which take anything).
pub(super) const INVALID: &[(usize, &str)] = &[
    (2, "Mars/Olympus_Mons"),
    (3, "bogus"),
    (4, "abc"),
    (5, "-1s"),
    (6, "99"),
    (7, "chaotic"),
];

pub(super) const WORDS: &[&str] = &["a", "héllo", "it's", "x y z", "", "日本語", "tab\there", "50%"];

#[derive(Debug, Clone)]
pub(super) enum SetHow {
    Plain,
    SessionTo,
    SetConfig,
    WithShow,
    /// Parse + Describe + Sync, then Bind + Execute + Sync (known proxy bug:
    /// the proxy does not notice the SET).
    Extended,
    /// The unnamed statement, Parse to Sync in one go.
    Unnamed,
}

#[derive(Debug, Clone)]
pub(super) enum Op {
    SelectInt(i64),
    Repeat(usize),
    Multi(i64, i64),
    MultiWithError(i64),
    Set {
        p: usize,
        v: usize,
        how: SetHow,
    },
    SetInvalid {
        i: usize,
        set_config: bool,
    },
    SetLocalOutside {
        p: usize,
        v: usize,
    },
    Show(usize),
    Reset {
        p: usize,
        to_default: bool,
    },
    ResetAll,
    SetThenFail {
        p: usize,
        v: usize,
    },
    Settings,
    Formats,
    FormatsExt(i32),
    Prepared {
        a: i32,
        b: i32,
        w: usize,
    },
    Inline {
        a: i64,
        w: usize,
    },
    Typed {
        a: i32,
        w: usize,
    },
    BigText {
        w: usize,
        k: i32,
    },
    Count,
    TxCommit {
        rows: Vec<(i64, i64)>,
        local: Option<(usize, usize)>,
        iso: Option<usize>,
    },
    TxRollback {
        id: i64,
        p: usize,
        v: usize,
    },
    TxUnique {
        v: i64,
        commit: bool,
    },
    SimpleTx {
        id: i64,
        v: i64,
    },
    DivZero {
        extended: bool,
    },
    Syntax {
        extended: bool,
    },
    Pipeline {
        a: i32,
        b: i32,
        w: usize,
    },
    PipelineInTxn {
        id: i64,
        v: i64,
        a: i32,
    },
}

/// A parameter that SHOW may report (application_name only once set).
fn showable(r: &mut Rng, app_set: bool) -> usize {
    loop {
        let p = r.below(PARAMS.len());
        if p != APP || app_set {
            return p;
        }
    }
}

/// The operations of client `idx`: the same on every run.
pub(super) fn generate(idx: usize) -> Vec<Op> {
    let mut r = Rng::new(idx as u64 + 1);
    let mut app_set = false;
    let mut next_id = 1i64;
    let mut id = move || {
        next_id += 1;
        next_id
    };
    let n = OPS - 5 + r.below(11);
    let mut ops = Vec::with_capacity(n);
    while ops.len() < n {
        let op = match r.below(100) {
            0..=4 => Op::SelectInt(r.range(-1000, 1_000_000)),
            5..=6 => Op::Repeat(r.below(3000)),
            7..=9 => Op::Multi(r.range(-50, 50), r.range(0, 1000)),
            10..=11 => Op::MultiWithError(r.range(0, 100)),
            12..=21 => {
                let p = r.below(PARAMS.len());
                let v = r.below(PARAMS[p].1.len());
                app_set |= p == APP;
                let how = match r.below(6) {
                    0 => SetHow::Plain,
                    1 => SetHow::SessionTo,
                    2 => SetHow::SetConfig,
                    3 => SetHow::WithShow,
                    4 => SetHow::Extended,
                    _ => SetHow::Unnamed,
                };
                Op::Set { p, v, how }
            }
            22..=24 => Op::SetInvalid {
                i: r.below(INVALID.len()),
                set_config: r.chance(30),
            },
            25 => {
                let p = showable(&mut r, app_set);
                Op::SetLocalOutside {
                    p,
                    v: r.below(PARAMS[p].1.len()),
                }
            }
            26..=32 => Op::Show(showable(&mut r, app_set)),
            33..=35 => {
                let p = r.below(PARAMS.len());
                if p == APP {
                    app_set = false;
                }
                Op::Reset {
                    p,
                    to_default: r.chance(40),
                }
            }
            36 => {
                app_set = false;
                Op::ResetAll
            }
            37..=39 => {
                let p = showable(&mut r, app_set);
                Op::SetThenFail {
                    p,
                    v: r.below(PARAMS[p].1.len()),
                }
            }
            40..=43 => Op::Settings,
            44..=46 => Op::Formats,
            47..=49 => Op::FormatsExt(r.range(-30, 30) as i32),
            50..=56 => Op::Prepared {
                a: r.range(-1000, 1000) as i32,
                b: r.range(-1000, 1000) as i32,
                w: r.below(WORDS.len()),
            },
            57..=60 => Op::Inline {
                a: r.range(-1_000_000, 1_000_000),
                w: r.below(WORDS.len()),
            },
            61..=64 => Op::Typed {
                a: r.range(-1000, 1000) as i32,
                w: r.below(WORDS.len()),
            },
            65..=66 => Op::BigText {
                w: r.below(WORDS.len()),
                k: r.range(0, 5000) as i32,
            },
            67..=69 => Op::Count,
            70..=77 => {
                let rows = (0..1 + r.below(3)).map(|_| (id(), r.range(-100, 100))).collect();
                let local = if r.chance(50) {
                    let p = showable(&mut r, app_set);
                    Some((p, r.below(PARAMS[p].1.len())))
                } else {
                    None
                };
                let iso = if r.chance(30) { Some(r.below(3)) } else { None };
                Op::TxCommit { rows, local, iso }
            }
            78..=82 => {
                let p = showable(&mut r, app_set);
                Op::TxRollback {
                    id: id(),
                    p,
                    v: r.below(PARAMS[p].1.len()),
                }
            }
            83..=86 => Op::TxUnique {
                v: r.range(1, 99),
                commit: r.chance(50),
            },
            87..=88 => Op::SimpleTx {
                id: id(),
                v: r.range(-100, 100),
            },
            89..=91 => Op::DivZero { extended: r.chance(50) },
            92..=93 => Op::Syntax { extended: r.chance(50) },
            94..=96 => Op::Pipeline {
                a: r.range(-100, 100) as i32,
                b: r.range(-100, 100) as i32,
                w: r.below(WORDS.len()),
            },
            _ => Op::PipelineInTxn {
                id: id(),
                v: r.range(-100, 100),
                a: r.range(-100, 100) as i32,
            },
        };
        ops.push(op);
    }
    ops
}
