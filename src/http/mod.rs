//! The HTTP surface: everything the listener serves. The memory REST API
//! (`/api/*`) and its SSE change feed, health, metrics, the OpenAPI
//! document and the operator console; the NeuroSan API (`/api/v1`,
//! [`neurosan`]), the Agent Protocol (`/ap/v1`, [`agent_protocol`]) and MCP
//! (`/mcp`, [`mcp`]). Handlers only translate between their wire and the
//! service (`crate::service`); [`router`] puts them together.

pub mod agent_protocol;
pub mod connectors;
pub mod conversations;
pub mod alerts;
pub mod backup;
pub mod console;
pub mod digest;
pub mod error;
pub mod extract;
pub mod facts;
pub mod head_errors;
pub mod idempotency;
pub mod mcp;
pub mod neurosan;
pub mod openapi;
pub mod ops;
pub mod query;
pub mod recall;
pub mod reports;
pub mod router;
pub mod routing;
pub mod search;
pub mod session;
pub mod state;
pub mod stream;

pub use router::{is_long_running, route_table, router};
pub use routing::{delete, get, post, put, Routes};
pub use state::{AppState, Shared};

/// Why a request beyond `max_in_flight` is turned away, over HTTP and gRPC.
pub use crate::service::error::AT_REQUEST_LIMIT;
