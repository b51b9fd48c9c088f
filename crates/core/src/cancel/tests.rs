//! The cancel registry and slots without servers: keys, owners,
//! terminate, parking sweeps and removed endpoints.

use std::time::Duration;

use super::*;

/// A target as the engines' are: a name, and its connection's flight.
#[derive(Clone, Debug)]
struct Target(&'static str, Arc<CancelFlight>);

impl CancelTarget for Target {
    fn flight(&self) -> &Arc<CancelFlight> {
        &self.1
    }

    fn server(&self) -> (&str, u32) {
        (self.0, 1)
    }
}

fn target(name: &'static str) -> Target {
    Target(name, Arc::default())
}

fn name(c: Option<Claimed<Target>>) -> Option<&'static str> {
    c.map(|c| c.target.0)
}

#[test]
fn lookup_needs_the_right_secret_and_a_target() {
    let reg = Arc::new(CancelRegistry::<Target>::default());
    let a = reg.register();
    let b = reg.register();
    assert_ne!(a.id, b.id);
    assert_eq!(
        name(reg.lookup(a.id, a.secret)),
        None,
        "idle session has nothing to cancel"
    );
    a.slot.set(Some(target("backend-a")));
    b.slot.set(Some(target("backend-b")));
    assert_eq!(name(reg.lookup(a.id, a.secret)), Some("backend-a"));
    assert_eq!(name(reg.lookup(a.id, a.secret ^ 1)), None);
    assert_eq!(name(reg.lookup(b.id, b.secret)), Some("backend-b"));
    drop(a);
    assert_eq!(reg.len(), 1);
}

#[tokio::test]
async fn a_cancel_stops_a_wait_for_a_connection() {
    let reg = Arc::new(CancelRegistry::<Target>::default());
    let a = reg.register();
    let slot = a.slot.clone();
    let waiting = tokio::spawn(async move { slot.unless_cancelled(std::future::pending::<()>()).await });
    while !a.slot.waiting.load(Ordering::Acquire) {
        tokio::task::yield_now().await;
    }
    assert!(reg.lookup(a.id, a.secret).is_none(), "no backend query to reach");
    reg.wake_cancelled(a.id);
    let ended = tokio::time::timeout(Duration::from_secs(5), waiting).await;
    assert_eq!(ended.expect("the wait went on").expect("task"), LeaseWait::Cancelled);
    // The next wait is not cancelled by the old request; one that
    // completes gives its result, and its target is published.
    assert_eq!(a.slot.unless_cancelled(async { 7 }).await, LeaseWait::Done(7));
    assert!(a.slot.publish(Some(target("backend-a"))));
    assert!(a.slot.get().is_some());
    a.slot.set(None);
    // A cancel after the wait ended but before the target is published
    // still counts.
    assert_eq!(a.slot.unless_cancelled(async { 8 }).await, LeaseWait::Done(8));
    assert!(reg.lookup(a.id, a.secret).is_none());
    assert!(!a.slot.publish(Some(target("backend-a"))), "the cancel was lost");
    assert!(a.slot.get().is_none());
    // A cancel with nothing waiting and no target is dropped.
    assert!(reg.lookup(a.id, a.secret).is_none());
    assert_eq!(a.slot.unless_cancelled(async { 9 }).await, LeaseWait::Done(9));
    assert!(a.slot.publish(None));
}

#[test]
fn owned_keys_reach_only_their_tenant() {
    let reg = Arc::new(CancelRegistry::<Target>::default());
    let a = reg.register();
    let owned = |id, owner| reg.lookup_owned(id, owner).map(name);
    assert_eq!(owned(a.id, "t1"), None, "not claimed yet");
    a.claim("t1");
    assert_eq!(owned(a.id, "t1"), Some(None), "idle: nothing to cancel");
    a.slot.set(Some(target("backend-a")));
    assert_eq!(owned(a.id, "t1"), Some(Some("backend-a")));
    assert_eq!(owned(a.id, "t2"), None, "another tenant sees no session");
    assert_eq!(owned(a.id ^ 1, "t1"), None);
}

#[tokio::test]
async fn a_looked_up_cancel_is_in_flight_until_dropped() {
    let reg = Arc::new(CancelRegistry::<Target>::default());
    let a = reg.register();
    let t = target("backend-a");
    let flight = t.1.clone();
    a.slot.set(Some(t));
    let claimed = reg.lookup(a.id, a.secret).expect("a target");
    // The session lets go of its connection: the cancel is still counted.
    a.slot.set(None);
    assert!(!flight.idle());
    assert!(
        !flight.settled(Duration::from_millis(20)).await,
        "settled with a cancel in flight"
    );
    let waiter = tokio::spawn({
        let flight = flight.clone();
        async move { flight.settled(Duration::from_secs(5)).await }
    });
    tokio::task::yield_now().await;
    drop(claimed);
    assert!(waiter.await.expect("waiter"), "delivery did not wake the waiter");
    assert!(flight.idle());
    assert!(reg.lookup(a.id, a.secret).is_none(), "nothing to cancel once let go");
}

#[test]
fn terminate_reaches_only_the_tenants_session() {
    let reg = Arc::new(CancelRegistry::<Target>::default());
    let a = reg.register();
    let b = reg.register();
    assert!(!reg.terminate_owned(a.id, "t1"), "not claimed yet");
    a.claim("t1");
    b.claim("t2");
    assert!(!reg.terminate_owned(a.id, "t2"), "another tenant's session");
    assert!(!reg.terminate_owned(a.id ^ 1, "t1"));
    assert!(!a.slot.is_terminated());
    assert!(reg.terminate_owned(a.id, "t1"));
    assert!(a.slot.is_terminated());
    assert!(!b.slot.is_terminated());
}

#[test]
fn two_sweeps_of_idleness_ask_a_session_to_park() {
    let reg = Arc::new(CancelRegistry::<Target>::default());
    let a = reg.register();
    let b = reg.register();
    reg.ask_idle_to_park();
    assert!(!a.slot.park_requested(), "busy sessions are left alone");
    a.slot.enter_idle();
    reg.ask_idle_to_park();
    assert!(!a.slot.park_requested(), "one sweep is not enough");
    b.slot.enter_idle();
    reg.ask_idle_to_park();
    assert!(a.slot.park_requested());
    assert!(!b.slot.park_requested(), "b went idle after the first sweep");
    b.slot.leave_idle();
    b.slot.enter_idle();
    reg.ask_idle_to_park();
    assert!(!b.slot.park_requested(), "activity restarts the count");
    a.slot.leave_idle();
    assert!(!a.slot.park_requested());
}

#[tokio::test]
async fn terminated_wakes_a_waiting_session_and_answers_a_late_one() {
    let reg = Arc::new(CancelRegistry::<Target>::default());
    let a = reg.register();
    a.claim("t1");
    let slot = a.slot.clone();
    let waiter = tokio::spawn(async move { slot.terminated().await });
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    assert!(reg.terminate_owned(a.id, "t1"));
    tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
        .await
        .expect("the waiting session was not woken")
        .expect("waiter panicked");
    // Asked before it waits: answered at once.
    tokio::time::timeout(std::time::Duration::from_secs(5), a.slot.terminated())
        .await
        .expect("a late waiter missed the signal");
}

/// Two endpoints of one small configuration.
fn endpoints() -> Vec<Arc<crate::config::EndpointSettings>> {
    let text = r#"
[[clusters]]
name = "c"
engine = "postgres"
backends = ["b:1"]

[[endpoints]]
name = "kept"
listen = "127.0.0.1:0"
cluster = "c"
role = "read_write"

[[endpoints]]
name = "gone"
listen = "127.0.0.1:0"
cluster = "c"
role = "read_write"
"#;
    match crate::config::parse(text, std::path::Path::new(".")) {
        Ok(s) => s.endpoints,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_removed_endpoint_closes_its_sessions_and_its_late_logins_only() {
    let eps = endpoints();
    let (kept, gone) = (&eps[0], &eps[1]);
    let reg = Arc::new(CancelRegistry::<Target>::default());
    let a = reg.register_on(Some(kept));
    let b = reg.register_on(Some(gone));
    assert_eq!(reg.close_endpoint(gone), 1);
    assert!(b.slot.is_closing());
    assert!(!a.slot.is_closing(), "another endpoint's session");
    // A client of the removed endpoint that was still logging in.
    let late = reg.register_on(Some(gone));
    assert!(late.slot.is_closing());
    assert!(!reg.register_on(Some(kept)).slot.is_closing());
    assert!(!reg.register_on(None).slot.is_closing());
}
