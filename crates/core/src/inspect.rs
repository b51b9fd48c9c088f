//! What the core does with each statement a session runs, the same for
//! both engines: the query rules that apply to it ([`crate::rules`]) and
//! its per-digest statistics ([`crate::digests`]). A session holds one
//! [`Inspector`]; engines ask it about a statement before sending it
//! ([`Inspector::rules`]) and report what became of it after its answer
//! ([`Inspector::record`]). With no rules for the session and digest
//! statistics off, both cost one pointer comparison and one atomic load.
//! The inspector lives as long as its session, so it also carries the
//! session's log record ([`crate::session_log`]): the login line, and the
//! end line when it is dropped.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_sql::Digest;

use crate::config::Settings;
use crate::digests::{DigestStats, Sample};
use crate::engine::Engine;
use crate::rules::{LoggedHit, Reader, Rules, SessionFacts, SessionRules, Verdict};

/// A session's view of the rules and the digest store.
#[derive(Debug)]
pub struct Inspector {
    tenant: Arc<str>,
    database: String,
    endpoint: Arc<str>,
    client: Option<IpAddr>,
    /// The rule set `rules` was filtered from: another one (a reload)
    /// filters again.
    from: Arc<Rules>,
    rules: Option<SessionRules>,
    /// The session's own counts, logged when it ends ([`crate::session_log`]).
    session: crate::session_log::SessionLog,
    /// What the console lists of the session, once it logged in.
    info: Option<Arc<crate::cancel::ClientInfo>>,
    /// What the session counts for `/metrics` ([`crate::meter`]).
    meter: crate::meter::SessionMeter,
}

impl Drop for Inspector {
    /// The session ends (the engines drop its inspector with it, on every path).
    fn drop(&mut self) {
        tracing::info!(
            tenant = %self.tenant,
            database = %self.database,
            endpoint = %self.endpoint,
            client = %crate::session_log::ClientAddr(self.client),
            duration = ?self.session.duration(),
            transactions = self.meter.transactions(),
            queries = self.meter.statements(),
            leases = self.session.leases(),
            pinned = self.session.pin_reason().unwrap_or("no"),
            "client session ended"
        );
    }
}

/// A statement under way that the core follows: its digest statistics
/// and its rule's statement timeout. Dropping it (the statement answered,
/// skipped, or lost with its connection) stops the timeout.
#[derive(Debug, Default)]
pub struct Tracked {
    pub timed: Option<Timed>,
    /// The reason it pinned the session, if it did.
    pub pin: Option<&'static str>,
    watchdog: Option<tokio::task::AbortHandle>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(w) = self.watchdog.take() {
            w.abort();
        }
    }
}

impl Tracked {
    pub fn new(timed: Option<Timed>, pin: Option<&'static str>) -> Self {
        Self {
            timed,
            pin,
            watchdog: None,
        }
    }

    /// Cancels the statement on its backend if it still runs `after` from
    /// now, as a client's cancel request would (the session's cancel
    /// slot names its backend query; nothing when the session no longer
    /// holds a connection). The server answers it as cancelled (57014 /
    /// MySQL 1317).
    pub fn arm_timeout<E: Engine>(
        &mut self,
        core: &Arc<crate::core::Core<E>>,
        slot: &Arc<crate::cancel::CancelSlot<E::CancelTarget>>,
        after: Duration,
    ) {
        let (core, slot) = (core.clone(), slot.clone());
        let task = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let Some(claimed) = slot.claim() else { return };
            tracing::info!(after = ?after, "statement timeout of a query rule: cancelling the statement");
            if let Err(e) = core.engine.cancel(claimed.target.clone()).await {
                tracing::warn!(error = %e, "a rule's statement timeout could not cancel the statement");
            }
            drop(claimed);
        });
        self.watchdog = Some(task.abort_handle());
    }
}

/// A statement under way whose digest statistics are kept.
#[derive(Debug)]
pub struct Timed {
    pub digest: Digest,
    /// When it was sent to the backend.
    pub sent: Instant,
    /// How long it waited for a backend connection.
    pub lease_wait: Duration,
}

impl Inspector {
    pub fn new(
        settings: &Settings,
        tenant: &str,
        database: &str,
        endpoint: &str,
        client: Option<IpAddr>,
        meter: crate::meter::SessionMeter,
    ) -> Self {
        let mut me = Self {
            tenant: Arc::from(tenant),
            database: database.to_owned(),
            endpoint: Arc::from(endpoint),
            client,
            from: settings.rules.clone(),
            rules: None,
            session: crate::session_log::SessionLog::new(),
            info: None,
            meter,
        };
        me.filter();
        me
    }

    /// The session's meter ([`crate::meter`]).
    pub fn meter(&self) -> &crate::meter::SessionMeter {
        &self.meter
    }

    /// The session's meter, to count statements and transactions.
    pub fn meter_mut(&mut self) -> &mut crate::meter::SessionMeter {
        &mut self.meter
    }

    /// Logs the session's login (its end is logged when it is dropped),
    /// and describes the session in its cancel registry (the console's
    /// list of clients), with `route`: the cluster and backend user of the
    /// pool it logged in to.
    pub fn logged_in<T>(&mut self, tls: bool, key: &crate::cancel::CancelKey<T>, route: Arc<crate::cancel::Route>) {
        self.login(tls, key, false, Some(route));
    }

    /// [`Self::logged_in`] for a session of the admin console.
    pub fn logged_in_console<T>(&mut self, tls: bool, key: &crate::cancel::CancelKey<T>) {
        self.login(tls, key, true, None);
    }

    fn login<T>(
        &mut self,
        tls: bool,
        key: &crate::cancel::CancelKey<T>,
        console: bool,
        route: Option<Arc<crate::cancel::Route>>,
    ) {
        let mut info = crate::cancel::ClientInfo::new(
            self.tenant.clone(),
            &self.database,
            self.endpoint.clone(),
            self.client,
            tls,
        );
        info.console = console;
        info.route = route;
        let info = Arc::new(info);
        key.describe(info.clone());
        self.info = Some(info);
        tracing::info!(
            tenant = %self.tenant,
            database = %self.database,
            endpoint = %self.endpoint,
            client = %crate::session_log::ClientAddr(self.client),
            tls,
            "client logged in"
        );
    }

    /// The session took a backend lease (for its end line).
    pub fn leased(&mut self) {
        self.session.leased();
    }

    /// The session was pinned for `reason` (for its end line).
    pub fn pinned(&mut self, reason: &'static str) {
        self.session.pinned(reason);
        if let Some(info) = &self.info {
            info.pinned(reason);
        }
    }

    /// The session is no longer pinned (MySQL's COM_RESET_CONNECTION).
    pub fn unpinned(&mut self) {
        if let Some(info) = &self.info {
            info.unpinned();
        }
    }

    fn filter(&mut self) {
        self.rules = self.from.for_session(&SessionFacts {
            tenant: &self.tenant,
            database: &self.database,
            endpoint: &self.endpoint,
            client: self.client,
        });
    }

    /// The session now uses another database (MySQL `USE`, COM_INIT_DB).
    pub fn set_database(&mut self, database: &str) {
        if self.database != database {
            database.clone_into(&mut self.database);
            if let Some(info) = &self.info {
                info.set_database(database);
            }
            self.filter();
        }
    }

    /// Whether any rule can apply to this session's statements now.
    pub fn has_rules(&mut self, settings: &Settings) -> bool {
        if !Arc::ptr_eq(&self.from, &settings.rules) {
            self.from = settings.rules.clone();
            self.filter();
        }
        self.rules.is_some()
    }

    /// What the rules decide for `text`; `None` when none matched (or none
    /// can apply). A rule with `log = true` logs the hit here, and keeps it for the
    /// admin API ([`crate::rules::HitLog`]).
    pub fn rules(&mut self, settings: &Settings, text: &str, reader: &Reader<'_>) -> Option<Verdict> {
        if !self.has_rules(settings) {
            return None;
        }
        let verdict = self.rules.as_ref()?.evaluate(text, reader)?;
        if verdict.log {
            tracing::info!(
                tenant = %self.tenant,
                endpoint = %self.endpoint,
                rules = ?verdict.matched,
                blocked = verdict.block.is_some(),
                rewritten = verdict.rewritten.is_some(),
                statement = %crate::digests::cut(text, crate::rules::LOGGED_TEXT_LIMIT),
                "query rule hit"
            );
            settings.rules.logged().push(LoggedHit::now(
                &self.tenant,
                &self.endpoint,
                verdict.matched.iter().map(|r| r.to_string()).collect(),
                verdict.block.is_some(),
                verdict.rewritten.is_some(),
                text,
            ));
        }
        Some(verdict)
    }

    /// Starts timing a statement for its digest statistics, when they are
    /// on: `digest` computes its digest (only then).
    pub fn start<E: Engine>(
        core: &crate::core::Core<E>,
        text: &str,
        lease_wait: Duration,
        digest: impl FnOnce(&str) -> Digest,
    ) -> Option<Timed> {
        core.digests.load().as_ref()?;
        Some(Timed {
            digest: digest(text),
            sent: Instant::now(),
            lease_wait,
        })
    }

    /// Records a statement's outcome in the digest store, if it is on.
    pub fn record(&self, store: Option<&DigestStats>, t: &Timed, rows: u64, error: bool, pin: Option<&'static str>) {
        let Some(store) = store else { return };
        store.record(&Sample {
            id: t.digest.id,
            text: &t.digest.text,
            tenant: &self.tenant,
            endpoint: &self.endpoint,
            backend: t.sent.elapsed(),
            lease_wait: t.lease_wait,
            rows,
            error,
            pin,
        });
    }
}
