//! The HTTP listener's state: the service, and what only the listener
//! needs besides.

use crate::service::Service;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// Every handler's view of the server. axum clones the state for each request
/// and again for each layer, and the parts hold a dozen `Arc`s of their own,
/// so they sit behind one: a clone is one reference count, not twenty.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(parts: Shared) -> AppState {
        AppState(Arc::new(parts))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] shares: the service, and what only the HTTP listener
/// needs besides.
pub struct Shared {
    pub service: Service,
    /// Origins allowed on `/mcp` besides the server's own (`[mcp]`).
    pub mcp_allowed_origins: Arc<Vec<String>>,
    pub sse_subscribers: Arc<AtomicUsize>,
    /// The places of `max_in_flight`, shared by the HTTP and gRPC listeners:
    /// the limit is the server's, whichever way the requests come in.
    pub in_flight: Arc<tokio::sync::Semaphore>,
}

/// Handlers reach the service's parts (`st.memory`, `st.search`) through
/// the state.
impl std::ops::Deref for Shared {
    type Target = Service;
    fn deref(&self) -> &Service {
        &self.service
    }
}
