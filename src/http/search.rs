//! `/api/search`: hybrid recall over the full-text index (`crate::search`).
//! GET takes query parameters, POST a JSON body; both answer a
//! `SearchResult`.

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, JsonInt, Object};
use super::query::QueryPairs;
use super::AppState;
use crate::search::{SearchRequest, DEFAULT_TOP_K, FRESHNESS_WAIT, MAX_SEEDS, MAX_TOP_K};
use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use tempora_storage::EngineError;

/// Header set when the answer may miss writes made just before the request.
pub const STALE_HEADER: &str = "x-tempora-index-stale";

/// The POST body (`SearchRequest` and this server's extensions). Unknown
/// fields are ignored; the optional fields may be left out but not sent as
/// `null`.
#[derive(Debug, Deserialize)]
pub struct SearchBody {
    #[serde(default, deserialize_with = "present")]
    question: Option<String>,
    #[serde(default, deserialize_with = "present")]
    top_k: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    as_of: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    seeds: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    subject: Option<String>,
    #[serde(default, deserialize_with = "present")]
    predicate: Option<String>,
    #[serde(default, deserialize_with = "present")]
    include_candidates: Option<bool>,
}


/// Checks and completes a request.
fn validate(
    question: Option<String>,
    top_k: Option<i64>,
    as_of: Option<i64>,
    seeds: Vec<String>,
    subject: Option<String>,
    predicate: Option<String>,
    include_candidates: bool,
) -> Result<SearchRequest, ApiError> {
    let question = question.unwrap_or_default().trim().to_string();
    if question.is_empty() {
        return Err(ApiError::schema("question must not be empty"));
    }
    let top_k = match top_k {
        None => DEFAULT_TOP_K,
        Some(k) if (1..=MAX_TOP_K as i64).contains(&k) => k as usize,
        Some(k) => return Err(ApiError::schema(format!("top_k must be within [1, {MAX_TOP_K}], got {k}"))),
    };
    let seeds: Vec<String> = seeds.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    if seeds.len() > MAX_SEEDS {
        return Err(ApiError::schema(format!("at most {MAX_SEEDS} seeds, got {}", seeds.len())));
    }
    Ok(SearchRequest { question, top_k, as_of, seeds, subject, predicate, include_candidates })
}

pub async fn search_get(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let seeds = q
        .string("seeds")?
        .map(|s| s.split(',').map(String::from).collect())
        .unwrap_or_default();
    let req = validate(
        q.string("question")?,
        q.int("top_k")?,
        q.int("as_of")?,
        seeds,
        q.string("subject")?,
        q.string("predicate")?,
        q.bool("include_candidates")?.unwrap_or(false),
    )?;
    run(st, tenant, req).await
}

pub async fn search_post(
    State(st): State<AppState>,
    caller: Caller,
    JsonBody(Object(body)): JsonBody<Object<SearchBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let req = validate(
        body.question,
        body.top_k.map(|k| k.0),
        body.as_of.map(|t| t.0),
        body.seeds.unwrap_or_default(),
        body.subject,
        body.predicate,
        body.include_candidates.unwrap_or(false),
    )?;
    run(st, tenant, req).await
}

/// A failed search: engine errors keep their meaning, index errors are 500s.
pub fn search_error(e: anyhow::Error) -> ApiError {
    match e.downcast::<EngineError>() {
        Ok(engine) => ApiError::from(engine),
        Err(other) => {
            tracing::error!(error = format!("{other:#}"), "search failed");
            ApiError::internal()
        }
    }
}

async fn run(st: AppState, tenant: String, req: SearchRequest) -> Result<Response, ApiError> {
    // Read-your-writes: wait (bounded) until the index holds every write of
    // the tenant committed before this request.
    let fresh = st.search.wait_fresh(&tenant, FRESHNESS_WAIT).await;
    let search = st.search.clone();
    let result = tokio::task::spawn_blocking(move || search.search(&tenant, &req, !fresh))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "search task failed");
            ApiError::internal()
        })?
        .map_err(search_error)?;
    let mut resp = Json(result).into_response();
    if !fresh {
        resp.headers_mut().insert(STALE_HEADER, HeaderValue::from_static("true"));
    }
    Ok(resp)
}
