//! Cancel keys: each client session gets a proxy-issued (id, secret) pair
//! instead of the backend's, and a slot saying which backend query, if any,
//! that session is running right now. A cancel presenting the pair reaches
//! exactly that backend query, never another client's. Engines whose
//! cancels carry no secret (MySQL's `KILL QUERY <id>`, sent on another
//! connection) claim the key for the session's tenant instead, and only
//! the same tenant's sessions can reach it.
//!
//! The slot also carries a terminate signal (MySQL's `KILL [CONNECTION]
//! <id>`): another session raises it with
//! [`CancelRegistry::terminate_owned`], and the owning session, which awaits
//! [`CancelSlot::terminated`] wherever it waits (for its client, for a
//! backend reply), cancels what it runs and ends itself.
//!
//! Idle sessions wait without a waiter of their own: they leave their task's
//! waker in the slot ([`CancelSlot::poll_idle`]), and shutdown wakes them all
//! ([`CancelRegistry::wake_idle`]), so an idle client costs no per-wait node.
//!
//! The slot also runs the parking cycle ([`crate::park`]): a session waiting
//! idle marks its slot; a periodic sweep ([`CancelRegistry::ask_idle_to_park`])
//! sees the mark twice in a row and asks the session to park.
//!
//! A cancel is delivered on a connection of its own, and lands some time
//! after the proxy decided to send it: PostgreSQL's postmaster forks, then
//! signals the backend twice (the process, then its group); MariaDB's
//! `KILL QUERY` marks the thread. A backend connection handed to another
//! client in between would have that client's statement cancelled. So a
//! cancel is counted on its connection's [`CancelFlight`] from the moment
//! it is looked up (under the slot's lock, so a session letting go of the
//! connection sees it) until it is delivered, and the pool lends the
//! connection to nobody before then ([`crate::pool::Lease::recycle`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use futures_util::task::AtomicWaker;

mod clients;
mod flight;
pub use clients::{ClientInfo, ClientRow, ClientState, Route};
pub use flight::{CANCEL_SETTLE_LIMIT, CancelFlight, CancelTarget, Claimed, InFlight, LeaseWait};

use subtle::ConstantTimeEq;

/// Where a session's current backend work can be cancelled (empty while the
/// session holds no backend connection), and whether the session was asked
/// to end.
pub struct CancelSlot<T> {
    target: Mutex<Option<T>>,
    /// The session's statement waits for a backend connection (see
    /// [`Self::unless_cancelled`]): a cancel then stops the wait instead.
    waiting: AtomicBool,
    /// A cancel came while [`Self::waiting`].
    cancel_asked: AtomicBool,
    terminate: AtomicBool,
    /// The session's endpoint was removed by a reload: it ends where a
    /// shutdown would end it (between transactions), not at once.
    closing: AtomicBool,
    /// The waker of the owning session's task while it waits idle or
    /// relays (see [`Self::poll_idle`]).
    idle: AtomicWaker,
    /// The parking cycle: [`BUSY`], [`IDLE`], [`SEEN`] or [`PARK`].
    park: AtomicU8,
    /// When the slot was made, and when (in microseconds after that) the
    /// session's current wait for a connection began (the console's
    /// `wait` and `maxwait`).
    born: std::time::Instant,
    wait_from_us: std::sync::atomic::AtomicU64,
}

/// Parking cycle: the session is not waiting idle (or cannot park).
const BUSY: u8 = 0;
/// It waits idle and may park.
const IDLE: u8 = 1;
/// A sweep found it idle; the next one asks it to park.
const SEEN: u8 = 2;
/// Asked to park.
const PARK: u8 = 3;

impl<T> CancelSlot<T> {
    fn new() -> Self {
        Self {
            target: Mutex::new(None),
            waiting: AtomicBool::new(false),
            cancel_asked: AtomicBool::new(false),
            terminate: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            idle: AtomicWaker::new(),
            park: AtomicU8::new(BUSY),
            born: std::time::Instant::now(),
            wait_from_us: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The owning session starts an idle wait in which it could park.
    pub fn enter_idle(&self) {
        self.park.store(IDLE, Ordering::Relaxed);
    }

    /// The owning session's idle wait ended (for whatever reason).
    pub fn leave_idle(&self) {
        self.park.store(BUSY, Ordering::Relaxed);
    }

    /// Whether a sweep asked the session to park (checked after
    /// [`Self::poll_idle`], whose waker the sweep wakes).
    pub fn park_requested(&self) -> bool {
        self.park.load(Ordering::Relaxed) == PARK
    }

    /// One sweep's look at the slot: `true` when the session has been idle
    /// since the previous sweep and was just asked to park (wake it).
    fn sweep(&self) -> bool {
        match self
            .park
            .compare_exchange(IDLE, SEEN, Ordering::Relaxed, Ordering::Relaxed)
        {
            Err(SEEN) => self
                .park
                .compare_exchange(SEEN, PARK, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok(),
            _ => false,
        }
    }

    /// For a parked session: leaves the parking lot's `waker` where
    /// [`Self::terminate`] and [`CancelRegistry::wake_idle`] find it.
    pub fn arm(&self, waker: &Waker) {
        self.idle.register(waker);
    }

    /// For an idle session's hand-written wait: leaves the task's waker
    /// where [`Self::terminate`] and [`CancelRegistry::wake_idle`] find it,
    /// then says whether the session was asked to end. The caller checks
    /// its other conditions (shutdown) after this, so no wake-up is missed.
    pub fn poll_idle(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.idle.register(cx.waker());
        if self.is_terminated() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    fn wake_idle(&self) {
        self.idle.wake();
    }

    /// Asks the owning session to end; it notices at once if it is waiting
    /// in [`Self::terminated`], otherwise at its next check.
    pub fn terminate(&self) {
        self.terminate.store(true, Ordering::Release);
        self.wake_idle();
    }

    /// Whether [`Self::terminate`] was called.
    pub fn is_terminated(&self) -> bool {
        self.terminate.load(Ordering::Acquire)
    }

    /// Whether the session should end as at shutdown (its endpoint was
    /// removed; see [`CancelRegistry::close_endpoint`]).
    pub fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Completes once the session has been asked to end (at once if it
    /// already was). For the owning session only: the slot keeps one waker
    /// (the last poller's), so creating and dropping this costs no waiter.
    pub async fn terminated(&self) {
        std::future::poll_fn(|cx| self.poll_idle(cx)).await;
    }
}

impl<T: Clone> CancelSlot<T> {
    /// Sets (or empties) the target; a wait for a connection the session
    /// gave up on ends here too.
    pub fn set(&self, target: Option<T>) {
        let mut slot = self.target.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiting.store(false, Ordering::Release);
        *slot = target;
    }

    pub fn get(&self) -> Option<T> {
        self.target.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

struct Entry<T> {
    secret: u32,
    /// The tenant that owns the session, once known (see [`CancelKey::claim`]).
    owner: Option<Arc<str>>,
    /// Who the session is, once logged in (see [`CancelKey::describe`]).
    info: Option<Arc<ClientInfo>>,
    /// The endpoint the session came in through.
    endpoint: Option<Arc<crate::config::EndpointSettings>>,
    slot: Arc<CancelSlot<T>>,
}

pub struct CancelRegistry<T> {
    map: Mutex<HashMap<u32, Entry<T>>>,
    /// Endpoints a reload removed, as their accept loops knew them: a
    /// client accepted just before, still logging in, registers closing.
    closed: Mutex<Vec<std::sync::Weak<crate::config::EndpointSettings>>>,
}

impl<T> Default for CancelRegistry<T> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            closed: Mutex::new(Vec::new()),
        }
    }
}

/// A session's registration; dropping it removes the key.
pub struct CancelKey<T> {
    pub id: u32,
    pub secret: u32,
    pub slot: Arc<CancelSlot<T>>,
    registry: Arc<CancelRegistry<T>>,
}

impl<T> CancelKey<T> {
    /// Records the tenant the session turned out to be.
    pub fn claim(&self, owner: &str) {
        if let Some(e) = self
            .registry
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&self.id)
        {
            e.owner = Some(Arc::from(owner));
        }
    }
}

impl<T> Drop for CancelKey<T> {
    fn drop(&mut self) {
        self.registry
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

impl<T: Clone> CancelRegistry<T> {
    /// Issues a fresh, unique key for a new session (of no endpoint).
    pub fn register(self: &Arc<Self>) -> CancelKey<T> {
        self.register_on(None)
    }

    /// Issues a fresh, unique key for a new session of `endpoint`.
    pub fn register_on(self: &Arc<Self>, endpoint: Option<&Arc<crate::config::EndpointSettings>>) -> CancelKey<T> {
        let slot = Arc::new(CancelSlot::new());
        if let Some(e) = endpoint
            && self
                .closed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|c| std::ptr::eq(c.as_ptr(), Arc::as_ptr(e)))
        {
            slot.closing.store(true, Ordering::Release);
        }
        let secret = rand::random::<u32>();
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let id = loop {
            let id = rand::random::<u32>() & 0x7fff_ffff;
            if id != 0 && !map.contains_key(&id) {
                break id;
            }
        };
        map.insert(
            id,
            Entry {
                secret,
                owner: None,
                info: None,
                endpoint: endpoint.cloned(),
                slot: slot.clone(),
            },
        );
        CancelKey {
            id,
            secret,
            slot,
            registry: self.clone(),
        }
    }

    /// The target for a presented key, if the key is valid and the session
    /// is running something now; counted in flight from here.
    pub fn lookup(&self, id: u32, secret: u32) -> Option<Claimed<T>>
    where
        T: CancelTarget,
    {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.get(&id)?;
        if bool::from(entry.secret.to_be_bytes().ct_eq(&secret.to_be_bytes())) {
            entry.slot.claim()
        } else {
            None
        }
    }

    /// Wakes session `id` if a cancel was marked for its wait for a
    /// connection (see [`CancelSlot::unless_cancelled`]).
    pub fn wake_cancelled(&self, id: u32) {
        let slot = self
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .map(|e| e.slot.clone());
        if let Some(slot) = slot
            && slot.cancel_asked.load(Ordering::Acquire)
        {
            slot.wake_idle();
        }
    }

    /// Whether `id` is a session of `owner`, and its target if it is
    /// running something now (counted in flight from here): `None` for
    /// another tenant's or no session.
    pub fn lookup_owned(&self, id: u32, owner: &str) -> Option<Option<Claimed<T>>>
    where
        T: CancelTarget,
    {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = map.get(&id)?;
        (entry.owner.as_deref() == Some(owner)).then(|| entry.slot.claim())
    }

    /// Asks session `id` of `owner` to end (see [`CancelSlot::terminate`]):
    /// false for another tenant's or no session.
    pub fn terminate_owned(&self, id: u32, owner: &str) -> bool {
        let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(&id) {
            Some(entry) if entry.owner.as_deref() == Some(owner) => {
                entry.slot.terminate();
                true
            }
            _ => false,
        }
    }

    /// Wakes every session waiting idle (see [`CancelSlot::poll_idle`]), so
    /// it looks at the shutdown signal again.
    pub fn wake_idle(&self) {
        self.wake_idle_where(|_| true);
    }

    /// Asks every session of `endpoint` (removed by a reload; any session
    /// of its name) to end where a shutdown would end it, and wakes those
    /// waiting idle; clients of it still logging in will be asked when they
    /// register. Returns how many were asked.
    pub fn close_endpoint(&self, endpoint: &Arc<crate::config::EndpointSettings>) -> usize {
        {
            let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
            closed.retain(|c| c.strong_count() > 0);
            closed.push(Arc::downgrade(endpoint));
        }
        let name = endpoint.name.as_str();
        let picked: Vec<Arc<CancelSlot<T>>> = self
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|e| e.endpoint.as_ref().is_some_and(|ep| ep.name == name))
            .map(|e| e.slot.clone())
            .collect();
        for slot in &picked {
            slot.closing.store(true, Ordering::Release);
            slot.wake_idle();
        }
        picked.len()
    }

    /// Runs one parking sweep (see [`CancelSlot::enter_idle`]): a session
    /// found waiting idle by two sweeps in a row is asked to park. Called
    /// every `park_idle_after`, so a session parks after between one and
    /// two of those of idleness.
    pub fn ask_idle_to_park(&self) {
        self.wake_idle_where(CancelSlot::sweep);
    }

    /// Wakes the idle waiter of every slot `pick` selects (`pick` runs
    /// under the registry's lock; the wakes after it is released).
    fn wake_idle_where(&self, pick: impl Fn(&CancelSlot<T>) -> bool) {
        let picked: Vec<Arc<CancelSlot<T>>> = self
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|e| pick(&e.slot))
            .map(|e| e.slot.clone())
            .collect();
        for slot in picked {
            slot.wake_idle();
        }
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
