//! `/api/search`: hybrid recall over the full-text index (`crate::search`).
//! GET takes query parameters, POST a JSON body; both answer a
//! `SearchResult`.

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, JsonInt, Object};
use super::query::QueryPairs;
use super::AppState;
use crate::service::recall::SearchQuery;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

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
    #[serde(default, deserialize_with = "present")]
    valid_from: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    valid_until: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    reference_time: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    signals: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    neighbours: Option<JsonInt>,
}


pub async fn search_get(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let seeds = q
        .string("seeds")?
        .map(|s| s.split(',').map(String::from).collect())
        .unwrap_or_default();
    let req = SearchQuery {
        question: q.string("question")?,
        top_k: q.int("top_k")?,
        as_of: q.int("as_of")?,
        seeds,
        subject: q.string("subject")?,
        predicate: q.string("predicate")?,
        include_candidates: q.bool("include_candidates")?.unwrap_or(false),
        valid_from: q.int("valid_from")?,
        valid_until: q.int("valid_until")?,
        reference_time: q.int("reference_time")?,
        // `signals=` (empty) is BM25 alone, as `[]` is in a body.
        signals: q.string("signals")?.map(|s| s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()),
        neighbours: q.int("neighbours")?,
    };
    run(st, caller.tenant()?, req).await
}

pub async fn search_post(
    State(st): State<AppState>,
    caller: Caller,
    JsonBody(Object(body)): JsonBody<Object<SearchBody>>,
) -> Result<Response, ApiError> {
    let req = SearchQuery {
        question: body.question,
        top_k: body.top_k.map(|k| k.0),
        as_of: body.as_of.map(|t| t.0),
        seeds: body.seeds.unwrap_or_default(),
        subject: body.subject,
        predicate: body.predicate,
        include_candidates: body.include_candidates.unwrap_or(false),
        valid_from: body.valid_from.map(|t| t.0),
        valid_until: body.valid_until.map(|t| t.0),
        reference_time: body.reference_time.map(|t| t.0),
        signals: body.signals,
        neighbours: body.neighbours.map(|n| n.0),
    };
    run(st, caller.tenant()?, req).await
}

async fn run(st: AppState, tenant: &str, req: SearchQuery) -> Result<Response, ApiError> {
    let found = st.service.search(tenant, req.checked()?).await?;
    Ok(with_staleness(Json(found.value).into_response(), found.stale))
}

/// Marks an answer that may miss writes made just before the request.
pub fn with_staleness(mut resp: Response, stale: bool) -> Response {
    if stale {
        resp.headers_mut().insert(STALE_HEADER, HeaderValue::from_static("true"));
    }
    resp
}
