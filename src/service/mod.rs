//! The service: the one layer every surface (REST and SSE, MCP, NeuroSan
//! over HTTP and gRPC, the Agent Protocol, NeuroDock, the console) calls.
//! It knows no wire: its operations take and return typed values, are
//! scoped to a tenant, and fail with one [`ServiceError`] that each wire
//! maps once.

pub mod changes;
pub mod chat;
pub mod client_tools;
pub mod connectors;
pub mod conversations;
pub mod digest;
pub mod error;
pub mod facts;
pub mod idempotency;
pub mod model;
pub mod monitor;
pub mod ops;
pub mod params;
pub mod principal;
pub mod recall;
pub mod sessions;
pub mod start;
pub mod tasks;
pub mod tools;

pub use error::{Result, ServiceError};
pub use idempotency::{Answer, IdempotencyKey};
pub use start::{Background, StartError};

use crate::auth::Auth;
use crate::config::Limits;
use crate::memory::Memory;
use crate::metrics::Metrics;
use std::sync::Arc;

/// The service's parts, shared by every surface. Cloning is one reference
/// count.
#[derive(Clone)]
pub struct Service(Arc<Parts>);

impl Service {
    pub fn new(parts: Parts) -> Service {
        Service(Arc::new(parts))
    }

    /// The agent networks served, as neuro-san lists them.
    pub fn networks(&self) -> Vec<crate::agents::NetworkInfo> {
        self.agents.list()
    }

    /// One agent network, if it is served.
    pub fn network(&self, name: &str) -> Option<Arc<crate::agents::AgentNetwork>> {
        self.agents.get(name)
    }

    /// Reads the agent network files again and serves the new set whole
    /// (SIGHUP); blocks while it reads.
    pub fn reload_networks(&self) -> crate::agents::ReloadReport {
        self.agents.reload()
    }

    /// Turns true when the server starts shutting down: long answers
    /// (streams, chat turns) end.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.clone()
    }

    /// How long a connector pull may take on top of a request's own time.
    pub fn pull_timeout(&self) -> std::time::Duration {
        self.connectors.pull.timeout
    }
}

impl std::ops::Deref for Service {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// What [`Service`] holds. The surfaces see only the settings they apply
/// themselves (`limits`: body sizes, timeouts) and the metrics they record
/// (requests, latency); everything else is reached through the service's
/// operations.
pub struct Parts {
    pub(in crate::service) memory: Memory,
    pub(in crate::service) auth: Arc<Auth>,
    pub limits: Limits,
    pub metrics: Arc<Metrics>,
    /// Outbound calls to caller-supplied model endpoints (`ask`, digest).
    pub(in crate::service) llm: Arc<crate::llm::Client>,
    /// The full-text recall index.
    pub(in crate::service) search: crate::search::Search,
    /// Agent networks served by the NeuroSan API and the Agent Protocol.
    pub(in crate::service) agents: crate::agents::Registry,
    /// The `memory` network's model, when the operator set one (`[agents]`).
    pub(in crate::service) memory_llm: Option<Arc<crate::agents::LlmConfig>>,
    /// Connector pulls and their schedule.
    pub(in crate::service) connectors: Arc<crate::connectors::schedule::Runtime>,
    /// Flips to true when the server starts shutting down; long answers
    /// (streams, agent turns) end.
    pub(in crate::service) shutdown: tokio::sync::watch::Receiver<bool>,
    /// Alert rules, their locks and the background settings (`[monitor]`).
    pub(in crate::service) monitor: crate::monitor::Monitor,
}
