//! Handlers of the recall routes: `/api/walk`, `/api/graph`, `/api/context`
//! and `/api/ask`. The work is in `crate::recall`; engine reads run on the
//! blocking pool.

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, JsonInt, Object};
use super::query::QueryPairs;
use super::AppState;
use crate::llm::{LlmError, ModelConfig};
use crate::memory::blocking;
use crate::recall::{ask, context, graph, walk};
use crate::search::{SearchRequest, FRESHNESS_WAIT};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use tempora_storage::Fact;

pub async fn walk(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let start = q.string("start")?.ok_or_else(|| ApiError::schema("query parameter start is required"))?;
    let depth = match q.int("depth")? {
        None => walk::DEFAULT_DEPTH,
        Some(d) if (0..=walk::MAX_DEPTH as i64).contains(&d) => d as usize,
        Some(d) => return Err(ApiError::schema(format!("depth must be within [0, {}], got {d}", walk::MAX_DEPTH))),
    };
    let direction = match q.string("direction")? {
        None => walk::Direction::Out,
        Some(d) => d.parse().map_err(ApiError::schema)?,
    };
    let edge_types = q
        .string("edge_types")?
        .map(|s| s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect())
        .unwrap_or_default();
    let max_nodes = match q.int("max_nodes")? {
        None => walk::DEFAULT_MAX_NODES,
        Some(n) if (1..=walk::MAX_NODES as i64).contains(&n) => n as usize,
        Some(n) => return Err(ApiError::schema(format!("max_nodes must be within [1, {}], got {n}", walk::MAX_NODES))),
    };
    let req = walk::WalkRequest { start, depth, direction, edge_types, as_of: q.as_of()?, max_nodes };
    let engine = st.memory.engine().clone();
    let result = blocking(move || walk::walk(&engine, &tenant, &req)).await?;
    Ok(Json(result).into_response())
}

pub async fn graph(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let limit = match q.int("limit")? {
        None => 0,
        Some(l) if l >= 0 => l as usize,
        Some(l) => return Err(ApiError::schema(format!("limit must not be negative, got {l}"))),
    };
    let req = graph::GraphRequest { q: q.string("q")?, limit, as_of: q.as_of()? };
    let engine = st.memory.engine().clone();
    let result = blocking(move || graph::graph(&engine, &tenant, &req)).await?;
    Ok(Json(result).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextBody {
    #[serde(default)]
    seeds: Vec<String>,
    #[serde(default)]
    goal: String,
    #[serde(default, deserialize_with = "present")]
    token_budget: Option<JsonInt>,
    #[serde(default)]
    project: Option<String>,
    #[serde(default, deserialize_with = "present")]
    max_facts: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    max_pages: Option<JsonInt>,
    #[serde(default)]
    as_of: Option<JsonInt>,
}

pub async fn context(
    State(st): State<AppState>,
    caller: Caller,
    JsonBody(Object(body)): JsonBody<Object<ContextBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    if body.seeds.is_empty() && body.project.is_none() && body.goal.trim().is_empty() {
        return Err(ApiError::schema("give seeds, a project or a goal"));
    }
    let non_negative = |name: &str, v: Option<JsonInt>| match v.map(|n| n.0) {
        Some(n) if n < 0 => Err(ApiError::schema(format!("{name} must not be negative, got {n}"))),
        other => Ok(other.map(|n| n as usize)),
    };
    let req = context::ContextRequest {
        seeds: body.seeds,
        goal: body.goal,
        token_budget: non_negative("token_budget", body.token_budget)?,
        project: body.project,
        max_facts: non_negative("max_facts", body.max_facts)?.unwrap_or(context::DEFAULT_MAX_FACTS),
        max_pages: non_negative("max_pages", body.max_pages)?.unwrap_or(context::DEFAULT_MAX_PAGES),
        as_of: body.as_of.map(|t| t.0),
    };
    let recalled = if req.goal.trim().is_empty() {
        Vec::new()
    } else {
        evidence(&st, &tenant, &req.goal, RECALL_FOR_CONTEXT, req.as_of).await?.0
    };
    let engine = st.memory.engine().clone();
    let packet = blocking(move || context::build(&engine, &tenant, &req, recalled)).await?;
    Ok(Json(packet).into_response())
}

/// Facts recalled for a context goal on top of the seeds' neighbourhood.
const RECALL_FOR_CONTEXT: usize = 16;
const DEFAULT_TOP_K: usize = 8;
const MAX_TOP_K: usize = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskBody {
    question: String,
    #[serde(default, deserialize_with = "present")]
    top_k: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    model: Option<ModelConfig>,
    #[serde(default, deserialize_with = "present")]
    as_of: Option<JsonInt>,
}

pub async fn ask(
    State(st): State<AppState>,
    caller: Caller,
    JsonBody(Object(body)): JsonBody<Object<AskBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let question = body.question.trim().to_string();
    if question.is_empty() {
        return Err(ApiError::schema("question must not be empty"));
    }
    let top_k = match body.top_k.map(|k| k.0) {
        None => DEFAULT_TOP_K,
        Some(k) if (1..=MAX_TOP_K as i64).contains(&k) => k as usize,
        Some(k) => return Err(ApiError::schema(format!("top_k must be within [1, {MAX_TOP_K}], got {k}"))),
    };
    let (evidence, stale) = evidence(&st, &tenant, &question, top_k, body.as_of.map(|t| t.0)).await?;
    let answer = ask::ask(&st.llm, &question, evidence, body.model.as_ref()).await.map_err(llm_error)?;
    let (used_in, used_out) = (answer.tokens.tokens_in, answer.tokens.tokens_out);
    crate::monitor::usage::record_async(st.memory.engine().clone(), tenant.clone(), used_in, used_out).await;
    let mut resp = Json(answer).into_response();
    if stale {
        resp.headers_mut().insert(super::search::STALE_HEADER, axum::http::HeaderValue::from_static("true"));
    }
    Ok(resp)
}

/// Evidence for a question: the fused recall of the full-text index (BM25,
/// proximity to the entities the question names, embeddings when
/// configured), read-your-writes like `/api/search`. The second value says
/// the index had not caught up within the wait.
async fn evidence(
    st: &AppState,
    tenant: &str,
    question: &str,
    top_k: usize,
    as_of: Option<i64>,
) -> Result<(Vec<Fact>, bool), ApiError> {
    let fresh = st.search.wait_fresh(tenant, FRESHNESS_WAIT).await;
    let req = SearchRequest { question: question.to_string(), top_k, as_of, ..Default::default() };
    let search = st.search.clone();
    let tenant = tenant.to_string();
    let fused = tokio::task::spawn_blocking(move || search.recall(&tenant, &req))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "recall task failed");
            ApiError::internal()
        })?
        .map_err(super::search::search_error)?;
    Ok((fused.0.into_iter().map(|f| f.fact).collect(), !fresh))
}

/// The answer to a failed model call (also `/api/digest`'s): a bad
/// configuration is the caller's (400), a timeout 504, anything else 502.
pub(crate) fn llm_error(e: LlmError) -> ApiError {
    tracing::warn!(error = %e, "model call failed");
    match e {
        LlmError::Config(m) => ApiError::schema(m),
        LlmError::Timeout(_) => ApiError::new(StatusCode::GATEWAY_TIMEOUT, "UpstreamTimeout", e.to_string()),
        _ => ApiError::new(StatusCode::BAD_GATEWAY, "UpstreamError", e.to_string()),
    }
}
