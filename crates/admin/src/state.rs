//! [`AdminState`]: what the admin API's handlers and `/metrics` read, the
//! cores (through their views) and the process around them.

use std::sync::Arc;

use crate::process::{Listeners, Reload};
use crate::view::CoreView;

/// What the admin handlers read.
pub struct AdminState {
    pub cores: Vec<Arc<dyn CoreView>>,
    /// The running endpoints, for their connected clients.
    pub endpoints: Arc<dyn Listeners>,
    pub reloader: Arc<dyn Reload>,
    pub token: Option<zeroize::Zeroizing<String>>,
    /// Where idle sessions park, if parking is on.
    pub parking: Option<gatehouse_core::park::ParkingLot>,
}
