//! `/.well-known/mcp.json`: what a client needs to connect, without
//! connecting: the endpoint, its transport, auth, and the tools with their
//! schemas (the same `tools/list` answers).

use super::server;
use crate::service::tools::schemas;
use crate::http::AppState;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

pub fn manifest(open: bool) -> Value {
    let tools: Vec<Value> = schemas::tools()
        .into_iter()
        .map(|t| json!({"name": t.name, "title": t.title, "description": t.description, "inputSchema": t.input, "outputSchema": t.output}))
        .collect();
    let versions: Vec<&str> = super::transport::supported_versions().iter().map(|v| v.as_str()).collect();
    json!({
        "name": "tempora",
        "title": "tempora memory",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "A persistent, bitemporal memory database for AI agents.",
        "instructions": server::INSTRUCTIONS,
        "endpoint": super::PATH,
        "transport": {
            "type": "streamable-http",
            "url": super::PATH,
            "methods": ["POST"],
            "response": "application/json",
            "sessions": false,
            "protocolVersions": versions,
        },
        "auth": {
            "type": "bearer",
            "header": "Authorization: Bearer <key>",
            "required": !open,
            "description": "The same keys as the REST API. A tenant key is pinned to its namespace; an admin token names one with the namespace argument. In open mode no key is needed and the namespace is `default`.",
        },
        "capabilities": {"tools": {}},
        "idempotency": {"header": "Idempotency-Key", "tools": [schemas::REMEMBER, schemas::DIGEST]},
        "tools": tools,
        "documentation": "docs/mcp.md",
    })
}

pub async fn serve(State(st): State<AppState>) -> Json<Value> {
    Json(manifest(st.service.is_open()))
}
