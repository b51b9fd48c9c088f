//! A limit that a reload can change while it is in use: a fair semaphore
//! (first come, first served) whose number of places grows at once and
//! shrinks as places come back. Pools (their size), backends (their share
//! of the server's `max_connections`) and endpoints (their client
//! connections) use it, so a new limit applies to what already runs, not
//! only to what is created after the reload.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Semaphore;

pub struct Capacity {
    sem: Arc<Semaphore>,
    /// The limit now; the places in use are `size - available` (more,
    /// briefly, while a shrink waits for places to come back).
    size: Mutex<usize>,
}

impl Capacity {
    pub fn new(size: usize) -> Self {
        Self {
            sem: Arc::new(Semaphore::new(size)),
            size: Mutex::new(size),
        }
    }

    /// The semaphore places are taken from.
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.sem
    }

    pub fn size(&self) -> usize {
        *self.size.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Places taken now.
    pub fn in_use(&self) -> usize {
        self.size().saturating_sub(self.sem.available_permits())
    }

    /// Sets the limit to `size`. Growing frees places (waiters are served
    /// at once); shrinking takes the free places away now and each place in
    /// use away when it comes back, so no holder is disturbed.
    pub fn resize(&self, size: usize) {
        let mut current = self.size.lock().unwrap_or_else(PoisonError::into_inner);
        if size > *current {
            self.sem.add_permits(size - *current);
        } else if size < *current {
            let mut surplus = *current - size;
            let forgotten = self.sem.forget_permits(surplus);
            surplus -= forgotten;
            if surplus > 0 {
                // The rest as holders give their places back: a waiter of
                // its own, first in line, so no newcomer takes them.
                let sem = self.sem.clone();
                let take = u32::try_from(surplus).unwrap_or(u32::MAX);
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    runtime.spawn(async move {
                        if let Ok(p) = sem.acquire_many(take).await {
                            p.forget();
                        }
                    });
                }
            }
        }
        *current = size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn growing_serves_waiters_at_once() {
        let c = Capacity::new(1);
        let held = c.semaphore().clone().try_acquire_owned().ok();
        assert!(held.is_some());
        assert!(c.semaphore().clone().try_acquire_owned().is_err());
        c.resize(3);
        assert_eq!(c.size(), 3);
        let more: Vec<_> = (0..2).map(|_| c.semaphore().clone().try_acquire_owned()).collect();
        assert!(more.iter().all(Result::is_ok), "grown places are free at once");
        assert_eq!(c.in_use(), 3);
    }

    #[tokio::test]
    async fn shrinking_waits_for_places_in_use_to_come_back() {
        let c = Capacity::new(4);
        let a = c.semaphore().clone().try_acquire_owned().ok();
        let b = c.semaphore().clone().try_acquire_owned().ok();
        assert!(a.is_some() && b.is_some());
        c.resize(1);
        assert_eq!(c.size(), 1);
        // The two free places went at once; two are held, one must go.
        assert_eq!(c.semaphore().available_permits(), 0);
        drop(a);
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        assert_eq!(
            c.semaphore().available_permits(),
            0,
            "the first place back is taken away"
        );
        drop(b);
        assert_eq!(c.semaphore().available_permits(), 1, "then the limit is 1");
        assert!(c.semaphore().clone().try_acquire_owned().is_ok());
    }
}
