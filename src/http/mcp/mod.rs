//! The MCP surface: the Model Context Protocol over Streamable HTTP at
//! `/mcp`, and its manifest at `/.well-known/mcp.json` (docs/mcp.md).
//!
//! - [`transport`], the HTTP front (origin, auth, the transport rules real
//!   clients rely on) around the `rmcp` server, which speaks JSON-RPC.
//! - [`server`], the `rmcp` handler: `initialize`, `tools/list`, `tools/call`.
//!   The tools themselves, with their names and JSON Schemas, are the
//!   service's (`service/tools/`).
//! - [`manifest`], `/.well-known/mcp.json`.
//!
//! Like the REST handlers, this surface only translates its wire to
//! service calls.

pub mod manifest;
pub mod server;
pub mod transport;

/// The path of the endpoint (routed in `crate::http::router`).
pub const PATH: &str = "/mcp";
