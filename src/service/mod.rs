//! The service: the one layer every surface (REST and SSE, MCP, NeuroSan
//! over HTTP and gRPC, the Agent Protocol, NeuroDock, the console) calls.
//! It knows no wire: its operations take and return typed values, are
//! scoped to a tenant, and fail with one [`ServiceError`] that each wire
//! maps once.

pub mod changes;
pub mod chat;
pub mod client_tools;
pub mod connectors;
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
pub mod start;
pub mod tasks;
pub mod tools;

pub use error::{Result, ServiceError};
pub use idempotency::{Answer, IdempotencyKey};
pub use start::{Background, StartError};

/// A failed search, as the service's error.
pub fn search_error(e: anyhow::Error) -> ServiceError {
    match e.downcast::<tempora_storage::EngineError>() {
        Ok(engine) => ServiceError::from(engine),
        Err(other) => ServiceError::internal(format!("search failed: {other:#}")),
    }
}

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
}

impl std::ops::Deref for Service {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// What [`Service`] holds.
pub struct Parts {
    pub memory: Memory,
    pub auth: Arc<Auth>,
    pub limits: Limits,
    pub metrics: Arc<Metrics>,
    /// Outbound calls to caller-supplied model endpoints (`ask`, digest).
    pub llm: Arc<crate::llm::Client>,
    /// The full-text recall index.
    pub search: crate::search::Search,
    /// Agent networks served by the NeuroSan API and the Agent Protocol.
    pub agents: crate::agents::Registry,
    /// The `memory` network's model, when the operator set one (`[agents]`).
    pub memory_llm: Option<Arc<crate::agents::LlmConfig>>,
    /// Connector pulls and their schedule.
    pub connectors: Arc<crate::connectors::schedule::Runtime>,
    /// Flips to true when the server starts shutting down; long answers
    /// (streams, agent turns) end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Alert rules, their locks and the background settings (`[monitor]`).
    pub monitor: crate::monitor::Monitor,
}
