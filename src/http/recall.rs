//! Handlers of the recall routes: `/api/walk`, `/api/graph`, `/api/context`
//! and `/api/ask` (`service/recall.rs`).

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, JsonInt, Object};
use super::query::QueryPairs;
use super::AppState;
use crate::service::model::ModelConfig;
use crate::service::recall::{context, graph, walk};
use crate::service::recall::AskQuery;
use crate::service::recall::MAX_NEIGHBOURS;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

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
    Ok(Json(st.service.walk(&tenant, req).await?).into_response())
}

pub async fn graph(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let limit = match q.int("limit")? {
        None => 0,
        Some(l) if l >= 0 => l as usize,
        Some(l) => return Err(ApiError::schema(format!("limit must not be negative, got {l}"))),
    };
    let req = graph::GraphRequest { q: q.string("q")?, limit, as_of: q.as_of()? };
    Ok(Json(st.service.graph(&tenant, req).await?).into_response())
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
    #[serde(default, deserialize_with = "present")]
    reference_time: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    neighbours: Option<JsonInt>,
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
        reference_time: body.reference_time.map(|t| t.0),
        neighbours: match body.neighbours.map(|n| n.0) {
            None => context::DEFAULT_NEIGHBOURS,
            Some(n) if (0..=MAX_NEIGHBOURS as i64).contains(&n) => n as usize,
            Some(n) => return Err(ApiError::schema(format!("neighbours must be within [0, {MAX_NEIGHBOURS}], got {n}"))),
        },
    };
    Ok(Json(st.service.context(&tenant, req).await?).into_response())
}

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
    #[serde(default, deserialize_with = "present")]
    reference_time: Option<JsonInt>,
}

pub async fn ask(
    State(st): State<AppState>,
    caller: Caller,
    JsonBody(Object(body)): JsonBody<Object<AskBody>>,
) -> Result<Response, ApiError> {
    let q = AskQuery {
        question: body.question,
        top_k: body.top_k.map(|k| k.0),
        model: body.model,
        as_of: body.as_of.map(|t| t.0),
        reference_time: body.reference_time.map(|t| t.0),
    };
    let answer = st.service.ask(caller.tenant()?, q).await?;
    Ok(super::search::with_staleness(Json(answer.value).into_response(), answer.stale))
}
