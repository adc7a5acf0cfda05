//! The HTTP front of `/mcp`: Streamable HTTP as real MCP clients use it.
//!
//! `rmcp` serves the JSON-RPC (stateless, one `application/json` answer per
//! request); in front of it, this module applies the rules of this server
//! that `rmcp` does not, or not in the same way:
//!
//! - `Origin`, when present, must be this server's own origin (the `Host`
//!   the request came to) or a configured one, else 403;
//! - the same bearer auth as REST, on every request: a missing or wrong key
//!   gets the REST 404 non-disclosure answer;
//! - GET is 405 with `Allow: POST, DELETE` (no server-initiated stream);
//!   DELETE is 204 (no session to end: none is issued);
//! - a body that is not one JSON-RPC object (bad JSON, a batch, not 2.0) is a
//!   400 with a JSON-RPC error, as is an unsupported `MCP-Protocol-Version`;
//! - every error `rmcp` answers in plain text is turned into a JSON-RPC error.
//!
//! Notifications are 202 with an empty body (`rmcp`).

use super::server::Server;
use crate::service::tools::CallerInfo;
use crate::http::error::ApiError;
use crate::http::extract::{credentials, host};
use crate::http::idempotency;
use crate::http::AppState;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{ACCEPT, ALLOW, CONTENT_TYPE, ORIGIN};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const PROTOCOL_HEADER: &str = "mcp-protocol-version";
/// How long a stray server-sent stream is read for its final answer.
const STREAM_WAIT: Duration = Duration::from_secs(120);

/// JSON-RPC error codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;

#[derive(Clone)]
pub struct Endpoint {
    state: AppState,
    rpc: Arc<StreamableHttpService<Server, NeverSessionManager>>,
    origins: Arc<Vec<String>>,
}

impl Endpoint {
    pub fn new(state: AppState) -> Endpoint {
        let origins = state.mcp_allowed_origins.as_ref().clone();
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            // Host and Origin are checked here, before auth.
            .disable_allowed_hosts()
            .disable_allowed_origins()
            .with_sse_keep_alive(None)
            .with_sse_retry(None)
            .with_max_request_body_bytes(state.limits.max_body_bytes);
        let for_factory = state.clone();
        let rpc = StreamableHttpService::new(
            move || Ok(Server::new(for_factory.service.clone())),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        Endpoint { state, rpc: Arc::new(rpc), origins: Arc::new(origins) }
    }
}

/// The protocol versions this endpoint speaks (`MCP-Protocol-Version`).
pub fn supported_versions() -> &'static [ProtocolVersion] {
    ProtocolVersion::KNOWN_VERSIONS
}

/// A JSON-RPC error answer.
pub fn rpc_error(status: StatusCode, id: Value, code: i64, message: impl Into<String>) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}});
    (status, axum::Json(body)).into_response()
}

/// Whether a present `Origin` may call: this server's own origin (its
/// authority is the request's `Host`) or a configured one.
pub fn origin_allowed(origin: &str, host: Option<&str>, configured: &[String]) -> bool {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    if configured.contains(&origin) {
        return true;
    }
    let Some((scheme, authority)) = origin.split_once("://") else { return false };
    if scheme != "http" && scheme != "https" {
        return false;
    }
    let Some(host) = host.map(|h| h.trim().to_ascii_lowercase()) else { return false };
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let strip = |a: &str| a.strip_suffix(default_port).map(str::to_string).unwrap_or_else(|| a.to_string());
    strip(authority) == strip(&host)
}

pub async fn handle(State(ep): State<Endpoint>, req: Request) -> Response {
    let (mut parts, body) = req.into_parts();
    if let Some(origin) = parts.headers.get(ORIGIN) {
        let ok = origin.to_str().is_ok_and(|o| origin_allowed(o, host(&parts), &ep.origins));
        if !ok {
            return ApiError::new(StatusCode::FORBIDDEN, "Forbidden", "this Origin may not call the MCP endpoint")
                .into_response();
        }
    }
    // The namespace a tool names is resolved per call (`service/tools/`).
    let principal = match ep.state.service.authenticate(&credentials(&parts, None)) {
        Ok(caller) => caller.principal,
        Err(_) => return ApiError::not_found().into_response(),
    };
    match parts.method {
        Method::POST => {}
        // No session is ever issued, so there is none to end.
        Method::DELETE => return StatusCode::NO_CONTENT.into_response(),
        _ => {
            let mut resp = ApiError::method_not_allowed().into_response();
            resp.headers_mut().insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
            return resp;
        }
    }

    let is_json = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Value::Null,
            INVALID_REQUEST,
            "expected one JSON-RPC message with Content-Type: application/json",
        );
    }
    let bytes = match axum::body::to_bytes(body, ep.state.limits.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            let mut resp = rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                INVALID_REQUEST,
                "request body is larger than the configured limit (max_body_bytes)",
            );
            resp.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
            return resp;
        }
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return rpc_error(StatusCode::BAD_REQUEST, Value::Null, PARSE_ERROR, format!("parse error: {e}")),
    };
    let id = match check_message(&message) {
        Ok(id) => id,
        Err(resp) => return resp,
    };
    if let Some(v) = parts.headers.get(PROTOCOL_HEADER) {
        let v = v.to_str().unwrap_or("");
        if !supported_versions().iter().any(|s| s.as_str() == v) {
            let list: Vec<&str> = supported_versions().iter().map(|s| s.as_str()).collect();
            return rpc_error(
                StatusCode::BAD_REQUEST,
                id,
                INVALID_REQUEST,
                format!("unsupported MCP-Protocol-Version {v:?}; supported: {}", list.join(", ")),
            );
        }
    }
    let presented = parts.headers.get(idempotency::HEADER).map(|v| v.as_bytes()).unwrap_or_default();
    let idempotency_key = match crate::service::IdempotencyKey::parse(presented) {
        Ok(key) => key,
        Err(e) => return rpc_error(StatusCode::BAD_REQUEST, id, INVALID_REQUEST, e.message()),
    };
    parts.extensions.insert(CallerInfo { principal, idempotency_key });
    // The answer is always one JSON body; rmcp wants to hear that the client
    // takes both kinds.
    parts.headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    let resp = ep.rpc.handle(Request::from_parts(parts, Body::from(bytes))).await;
    normalize(resp.map(Body::new), id).await
}

/// Checks that `message` is one JSON-RPC 2.0 message; answers its id (null
/// for a notification), or the error to send.
#[allow(clippy::result_large_err)]
fn check_message(message: &Value) -> Result<Value, Response> {
    let invalid = |id: Value, m: &str| rpc_error(StatusCode::BAD_REQUEST, id, INVALID_REQUEST, m);
    let obj = match message {
        Value::Array(_) => return Err(invalid(Value::Null, "batches are not supported: send one JSON-RPC message per request")),
        Value::Object(o) => o,
        _ => return Err(invalid(Value::Null, "expected a JSON-RPC message (an object)")),
    };
    let id = obj.get("id").cloned().unwrap_or(Value::Null);
    let id_ok = match obj.get("id") {
        None => true,
        Some(Value::String(_)) => true,
        Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
        Some(_) => false,
    };
    if !id_ok {
        return Err(invalid(Value::Null, "id must be a string or an integer"));
    }
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(id, "jsonrpc must be \"2.0\""));
    }
    match obj.get("method") {
        Some(Value::String(_)) => {}
        Some(_) => return Err(invalid(id, "method must be a string")),
        None if obj.contains_key("result") || obj.contains_key("error") => {
            return Err(invalid(id, "this server sends no requests, so it takes no responses"))
        }
        None => return Err(invalid(id, "method is required")),
    }
    if let Some(p) = obj.get("params") {
        if !p.is_object() {
            return Err(invalid(id, "params must be an object"));
        }
    }
    if obj.get("method").and_then(Value::as_str) == Some("tools/call") {
        let params = obj.get("params");
        let bad = if !params.and_then(|p| p.get("name")).is_some_and(Value::is_string) {
            Some("tools/call needs params.name, the tool's name")
        } else if params.and_then(|p| p.get("arguments")).is_some_and(|a| !a.is_object() && !a.is_null()) {
            Some("tools/call params.arguments must be an object")
        } else {
            None
        };
        if let Some(m) = bad {
            return Err(rpc_error(StatusCode::OK, id, INVALID_PARAMS, m));
        }
    }
    Ok(id)
}

/// Every answer as one JSON body: rmcp's plain-text errors become JSON-RPC
/// errors, and a server-sent stream (not expected: no tool sends progress)
/// is read to its final message.
async fn normalize(resp: Response, id: Value) -> Response {
    let status = resp.status();
    let ctype = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    if status == StatusCode::ACCEPTED || ctype.starts_with("application/json") {
        return resp;
    }
    if ctype.starts_with("text/event-stream") {
        let body = tokio::time::timeout(STREAM_WAIT, axum::body::to_bytes(resp.into_body(), usize::MAX)).await;
        let text = match body {
            Ok(Ok(b)) => String::from_utf8_lossy(&b).into_owned(),
            _ => String::new(),
        };
        let last = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .rfind(|m| m.get("id").is_some() && (m.get("result").is_some() || m.get("error").is_some()));
        return match last {
            Some(m) => (StatusCode::OK, axum::Json(m)).into_response(),
            None => rpc_error(StatusCode::INTERNAL_SERVER_ERROR, id, -32603, "internal error"),
        };
    }
    let bytes: Bytes = axum::body::to_bytes(resp.into_body(), 64 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    if status.is_server_error() {
        tracing::error!(status = %status, body = %text, "MCP transport error");
        return rpc_error(status, id, -32603, "internal error");
    }
    let status = if status.is_success() { StatusCode::BAD_REQUEST } else { status };
    let status = if status == StatusCode::UNSUPPORTED_MEDIA_TYPE { StatusCode::BAD_REQUEST } else { status };
    let message = if text.is_empty() { status.canonical_reason().unwrap_or("bad request").to_string() } else { text };
    rpc_error(status, id, INVALID_REQUEST, message)
}
