//! The application: every route of the listener (through [`Routes`], which
//! keeps the table), and the layers around them: the in-flight limit, the
//! body limit, the deadline, metrics, the panic catcher.

use super::error::ApiError;
use super::mcp::transport as mcp_transport;
use super::routing::{get, post, Routes};
use super::*;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use std::time::{Duration, Instant};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::ServiceBuilder;


/// Every `(method, path template)` the HTTP listener serves, as [`Routes`]
/// wrote them down while routing them (the fallbacks aside).
/// tests/it/openapi_doc.rs holds /openapi.json to it.
pub fn route_table() -> Vec<(Method, &'static str)> {
    routes(None).table().to_vec()
}

/// The routes of [`router`], each routed once, through [`Routes`], which
/// keeps the table. With no MCP endpoint (only the table is wanted) `/mcp`
/// is in the table but has no handlers.
fn routes(mcp_endpoint: Option<mcp_transport::Endpoint>) -> Routes<AppState> {
    Routes::new()
        .route("/api/health", get(ops::health))
        .route("/api/stats", get(ops::stats))
        .route("/api/admin/backup", get(backup::backup))
        .route("/api/facts", get(facts::list_facts).post(facts::assert_fact))
        .route("/api/facts/batch", post(facts::assert_batch))
        .route("/api/facts/{id}", get(facts::get_fact).delete(facts::retract_fact))
        .route("/api/facts/{id}/history", get(facts::fact_history))
        .route("/api/predicates/{name}", get(facts::get_predicate).put(facts::put_predicate))
        .route("/api/walk", get(recall::walk))
        .route("/api/graph", get(recall::graph))
        .route("/api/context", post(recall::context))
        .route("/api/ask", post(recall::ask))
        .route("/api/digest", post(digest::digest))
        .route("/api/conversations", post(conversations::record))
        .route("/api/connectors", get(connectors::list).post(connectors::register))
        .route("/api/connectors/{name}/events", post(connectors::events))
        .route("/api/connectors/{name}/pull", post(connectors::pull))
        .route("/api/search", get(search::search_get).post(search::search_post))
        .route("/api/session", post(session::login).delete(session::logout))
        .route("/api/v1/list", get(crate::http::neurosan::list))
        .route("/api/v1/docs", get(crate::http::neurosan::docs))
        .route("/api/v1/{*rest}", get(crate::http::neurosan::agent_get).post(crate::http::neurosan::agent_post))
        .route("/api/stream", get(stream::stream))
        // Monitoring: alerts and reports (docs/monitoring.md).
        .route("/api/alerts", get(alerts::list))
        .route("/api/alerts/evaluate", post(alerts::evaluate))
        .route("/api/alerts/rules", get(alerts::get_rules).put(alerts::put_rules))
        .route("/api/alerts/usage", get(alerts::get_usage))
        .route("/api/alerts/{id}/ack", post(alerts::ack))
        .route("/api/reports", get(reports::list).post(reports::create))
        .route("/api/reports/{id}", get(reports::get))
        .route("/api/reports/{id}/run", post(reports::run))
        .route("/api/reports/{id}/runs", get(reports::runs))
        .route("/healthz", get(ops::health))
        .route("/livez", get(ops::health))
        .route("/readyz", get(ops::ready))
        .route("/metrics", get(metrics_gate))
        .route("/openapi.json", get(openapi::serve))
        // MCP: every method goes to its front (GET and others answer 405 there).
        .route(
            "/mcp",
            post(mcp_transport::handle)
                .get(mcp_transport::handle)
                .delete(mcp_transport::handle)
                .fallback(mcp_transport::handle)
                .with_state_if(mcp_endpoint),
        )
        .route("/.well-known/mcp.json", get(crate::http::mcp::manifest::serve))
        // The operator console (docs/console.md): one page and its embedded assets.
        .route("/", get(console::root))
        .route("/console", get(console::page))
        .route("/console/", get(console::slash))
        .route("/console/{file}", get(console::asset))
        // The Agent Protocol (docs/agent-protocol.md).
        .merge(crate::http::agent_protocol::router())
}

/// The whole HTTP application, without a socket (tests can call it directly).
pub fn router(state: AppState) -> Router {
    let limits = state.limits.clone();
    routes(Some(mcp_transport::Endpoint::new(state.clone())))
        .into_router()
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), deadline))
        .layer(middleware::from_fn_with_state(state.clone(), track))
        .layer(middleware::map_response(close_after_too_large))
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        // `Router::layer` wraps every route (and every method of it) on its
        // own, so a plain `concurrency_limit` would make one semaphore per
        // route and admit `max_in_flight` requests per route. One shared
        // semaphore makes it the server's limit. `load_shed` in front answers
        // 503 at once when no permit is free, instead of queueing.
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(|_: tower::BoxError| async {
                    let mut resp = ApiError::unavailable(AT_REQUEST_LIMIT).into_response();
                    // A place frees up as soon as any request finishes: one second is a fair first wait.
                    resp.headers_mut()
                        .insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
                    resp
                }))
                .load_shed()
                .layer(GlobalConcurrencyLimitLayer::with_semaphore(state.in_flight.clone())),
        )
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| ApiError::internal().into_response()))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found()
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

/// `/metrics` is public in open mode and for admins in keyed mode.
async fn metrics_gate(State(st): State<AppState>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    // Only who the key names counts here: an admin naming a tenant may still read them.
    let caller = st.service.authenticate(&extract::credentials(&parts, None)).ok();
    if !st.service.may_see_all(caller.as_ref()) {
        return ApiError::not_found().into_response();
    }
    ops::metrics(State(st)).await
}

/// A body over the limit is left unread, so hyper drops the connection after
/// the answer; `Connection: close` says so, or a client would send its next
/// request on a pooled connection that is about to vanish.
async fn close_after_too_large(mut resp: Response) -> Response {
    if resp.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        resp.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    resp
}

/// Whether a request may rightly run for long without `request_timeout_secs`
/// applying: the change feed, MCP's server-to-client stream and NeuroSan's
/// streamed chat turns are bounded by the client and by shutdown; an Agent
/// Protocol step runs one agent turn, bounded by the network's
/// `max_execution_seconds`; a connector delivery is read and recorded as it
/// streams in (up to `max_ingest_bytes`, hundreds of MB), so its length is
/// the body's, not a stall; a backup streams the whole store, and ends
/// itself if the client stops reading (`http/backup.rs`).
pub fn is_long_running(method: &axum::http::Method, path: &str) -> bool {
    let post = method == axum::http::Method::POST;
    path == "/api/stream"
        || path == "/api/admin/backup"
        || (path == "/mcp" && method == axum::http::Method::GET)
        || (path.starts_with("/api/v1/") && path.ends_with("/streaming_chat"))
        || (post && path.starts_with("/ap/v1/agent/tasks/") && path.ends_with("/steps"))
        || (post && path.starts_with("/api/connectors/") && path.ends_with("/events"))
}

/// How long a request may take to produce its answer's head. A connector
/// pull has its own upstream timeout, so it gets that on top.
fn time_allowed(st: &AppState, method: &axum::http::Method, path: &str) -> Option<Duration> {
    if is_long_running(method, path) {
        return None;
    }
    let base = Duration::from_secs(st.limits.request_timeout_secs as u64);
    if path.starts_with("/api/connectors/") && path.ends_with("/pull") {
        return Some(base + st.service.pull_timeout());
    }
    Some(base)
}

/// Answers 503 `Unavailable` when a non-streaming request runs past its
/// time (a stalled model endpoint, a client trickling its body). Dropping
/// the handler is safe: a write is one engine transaction, whole or not at
/// all, and a retry with the same `Idempotency-Key` finds it if it landed.
async fn deadline(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let Some(limit) = time_allowed(&st, req.method(), req.uri().path()) else {
        return next.run(req).await;
    };
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => ApiError::unavailable(format!(
            "the request took longer than {} s (request_timeout_secs); retry later",
            limit.as_secs()
        ))
        .into_response(),
    }
}

/// Counts and times every request by its route template (never the raw
/// path, which would leak ids into label values).
async fn track(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let route =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let method = req.method().as_str().to_string();
    let started = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    st.metrics.requests.with_label_values(&[&route, &method, &status]).inc();
    st.metrics.latency.with_label_values(&[&route, &method]).observe(started.elapsed().as_secs_f64());
    resp
}
