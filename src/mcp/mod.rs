//! The MCP surface: the Model Context Protocol over Streamable HTTP at
//! `/mcp`, and its manifest at `/.well-known/mcp.json` (docs/mcp.md).
//!
//! - [`transport`], the HTTP front (origin, auth, the transport rules real
//!   clients rely on) around the `rmcp` server, which speaks JSON-RPC.
//! - [`server`], the `rmcp` handler: `initialize`, `tools/list`, `tools/call`.
//! - [`tools`], each tool translated to memory-layer calls.
//! - [`schemas`], tool names, descriptions and input/output JSON Schemas.
//! - [`manifest`], `/.well-known/mcp.json`.
//!
//! Like the REST handlers, the tools only translate: the rules live in the
//! engine, the recall layer and the search index.

pub mod manifest;
pub mod schemas;
pub mod server;
pub mod tools;
pub mod transport;

/// The path of the endpoint (routed in `crate::http::router`).
pub const PATH: &str = "/mcp";
