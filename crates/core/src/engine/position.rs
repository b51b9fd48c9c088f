//! Replication positions, engine-agnostic: what a replica has replayed and
//! what a client's read must wait for (read-your-writes on split
//! endpoints). A PostgreSQL position is a WAL LSN; a MariaDB one is a GTID
//! list, one sequence number per replication domain. A replica *covers* a
//! required position when it has replayed at least that far: for an LSN,
//! a greater or equal one; for GTIDs, in every domain the requirement
//! names, a greater or equal sequence number (MariaDB numbers each
//! domain's event groups in commit order: "GTID", MariaDB Knowledge Base).

/// Most replication domains a GTID position may list; a longer list is
/// not understood (and so covers nothing, and requires the writer).
pub const MAX_GTID_DOMAINS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// A PostgreSQL WAL location (`pg_lsn`, printed `XXXXXXXX/XXXXXXXX`).
    Lsn(u64),
    /// MariaDB GTIDs: (domain id, sequence number), one per domain.
    Gtid(Box<[(u32, u64)]>),
}

impl Position {
    /// Parses a `pg_lsn` as PostgreSQL prints it (two hexadecimal halves).
    pub fn parse_lsn(text: &str) -> Option<Self> {
        let (hi, lo) = text.trim().split_once('/')?;
        let hi = u32::from_str_radix(hi, 16).ok()?;
        let lo = u32::from_str_radix(lo, 16).ok()?;
        Some(Self::Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }

    /// Parses a MariaDB GTID list (`domain-server-seq[,...]`, as
    /// `@@last_gtid` and `@@gtid_slave_pos` print it). An empty text is the
    /// empty position (nothing required, nothing replayed).
    pub fn parse_gtid(text: &str) -> Option<Self> {
        let mut out: Vec<(u32, u64)> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut fields = part.split('-');
            let (Some(domain), Some(_server), Some(seq), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return None;
            };
            let (domain, seq) = (domain.parse().ok()?, seq.parse().ok()?);
            match out.iter_mut().find(|(d, _)| *d == domain) {
                Some(e) => e.1 = e.1.max(seq),
                None => out.push((domain, seq)),
            }
            if out.len() > MAX_GTID_DOMAINS {
                return None;
            }
        }
        Some(Self::Gtid(out.into_boxed_slice()))
    }

    /// Whether a server that replayed up to `self` has replayed `needed`.
    /// Positions of different engines never cover each other.
    pub fn covers(&self, needed: &Position) -> bool {
        match (self, needed) {
            (Self::Lsn(have), Self::Lsn(need)) => have >= need,
            (Self::Gtid(have), Self::Gtid(need)) => {
                need.iter().all(|(d, n)| have.iter().any(|(hd, h)| hd == d && h >= n))
            }
            _ => false,
        }
    }

    /// The later of two requirements (a client that wrote twice needs both).
    pub fn merge(self, other: Position) -> Position {
        match (self, other) {
            (Self::Lsn(a), Self::Lsn(b)) => Self::Lsn(a.max(b)),
            (Self::Gtid(a), Self::Gtid(b)) => {
                let mut out = a.into_vec();
                for (d, n) in b.iter() {
                    match out.iter_mut().find(|(od, _)| od == d) {
                        Some(e) => e.1 = e.1.max(*n),
                        None => out.push((*d, *n)),
                    }
                }
                Self::Gtid(out.into_boxed_slice())
            }
            (_, b) => b,
        }
    }

    /// Whether nothing is required (an empty GTID list).
    pub fn is_empty(&self) -> bool {
        matches!(self, Self::Gtid(g) if g.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::Position;

    #[test]
    fn lsn_orders_by_both_halves() {
        let a = Position::parse_lsn("0/16B3740").unwrap();
        let b = Position::parse_lsn("1/0").unwrap();
        assert!(b.covers(&a));
        assert!(!a.covers(&b));
        assert!(a.covers(&a));
        assert_eq!(Position::parse_lsn("nonsense"), None);
        assert_eq!(Position::parse_lsn("0/XYZ"), None);
    }

    #[test]
    fn gtid_covers_per_domain() {
        let have = Position::parse_gtid("0-1-100,1-2-7").unwrap();
        assert!(have.covers(&Position::parse_gtid("0-1-100").unwrap()));
        assert!(have.covers(&Position::parse_gtid("0-3-99,1-2-7").unwrap()));
        assert!(!have.covers(&Position::parse_gtid("0-1-101").unwrap()));
        assert!(!have.covers(&Position::parse_gtid("2-1-1").unwrap()));
        assert!(have.covers(&Position::parse_gtid("").unwrap()));
        assert!(Position::parse_gtid("").unwrap().is_empty());
        assert_eq!(Position::parse_gtid("0-1"), None);
        assert_eq!(Position::parse_gtid("0-1-2-3"), None);
    }

    #[test]
    fn merged_requirement_needs_both() {
        let m = Position::parse_gtid("0-1-5")
            .unwrap()
            .merge(Position::parse_gtid("0-1-3,1-1-9").unwrap());
        assert_eq!(m, Position::parse_gtid("0-1-5,1-1-9").unwrap());
        let l = Position::Lsn(5).merge(Position::Lsn(9));
        assert_eq!(l, Position::Lsn(9));
    }

    #[test]
    fn engines_never_cover_each_other() {
        assert!(!Position::Lsn(u64::MAX).covers(&Position::parse_gtid("0-1-1").unwrap()));
        assert!(!Position::parse_gtid("0-1-1").unwrap().covers(&Position::Lsn(0)));
    }
}
