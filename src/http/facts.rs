//! `/api/facts` and `/api/predicates`: asserting, reading, retracting facts.

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, JsonInt, Object, PathParam};
use super::idempotency::{self, IdempotencyKey};
use super::query::QueryPairs;
use super::AppState;
use crate::memory::blocking;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tempora_storage::*;

/// The HTTP form of a fact to assert. Unlike the engine's input it ignores
/// unknown fields (the spec allows them), including any `tenant`: the tenant
/// comes from the key.
#[derive(Debug, Deserialize)]
pub struct FactBody {
    pub subject: String,
    pub predicate: String,
    #[serde(default)]
    pub object: Value,
    #[serde(default, deserialize_with = "present")]
    pub confidence: Option<f64>,
    #[serde(default, deserialize_with = "present")]
    pub source: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub valid_from: Option<JsonInt>,
    #[serde(default)]
    pub valid_until: Option<JsonInt>,
    #[serde(default, deserialize_with = "present")]
    pub properties: Option<Map<String, Value>>,
}

impl From<FactBody> for FactInput {
    fn from(b: FactBody) -> Self {
        FactInput {
            subject: b.subject,
            predicate: b.predicate,
            object: b.object,
            confidence: b.confidence,
            source: b.source,
            valid_from: b.valid_from.map(|m| m.0),
            valid_until: b.valid_until.map(|m| m.0),
            properties: b.properties,
        }
    }
}

/// `POST /api/facts/batch` takes `{"facts": [...]}` or a bare array. (Not
/// an untagged enum: its one error, "did not match any variant", names
/// neither the fact nor the field that is wrong.)
#[derive(Debug)]
pub struct BatchBody(pub Vec<Object<FactBody>>);

impl<'de> Deserialize<'de> for BatchBody {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
        use serde::de::{MapAccess, SeqAccess, Visitor};
        #[derive(Deserialize)]
        struct Wrapped {
            facts: Vec<Object<FactBody>>,
        }
        struct Batch;
        impl<'de> Visitor<'de> for Batch {
            type Value = BatchBody;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(r#"an array of facts or {"facts": [...]}"#)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<BatchBody, A::Error> {
                Vec::deserialize(SeqAccessDeserializer::new(seq)).map(BatchBody)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<BatchBody, A::Error> {
                Wrapped::deserialize(MapAccessDeserializer::new(map)).map(|w| BatchBody(w.facts))
            }
        }
        d.deserialize_any(Batch)
    }
}

pub const MAX_BATCH: usize = 10_000;

/// The JSON of an assertion: the new fact, plus the ids it closed and the
/// tails it left.
pub fn asserted_json(a: &Asserted) -> Value {
    let mut v = serde_json::to_value(&a.fact).expect("facts serialize");
    v["superseded"] = json!(a.superseded.iter().map(|f| f.id).collect::<Vec<_>>());
    v["continued"] = json!(a.continued.iter().map(|f| f.id).collect::<Vec<_>>());
    v
}

pub async fn assert_fact(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(Object(body)): JsonBody<Object<FactBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let ops = vec![WriteOp::Assert(body.into())];
    idempotency::write(&st, &tenant, "POST /api/facts", idem, ops, StatusCode::CREATED, |out| {
        match out.outcomes.first() {
            Some(OpOutcome::Asserted(a)) => asserted_json(a),
            _ => unreachable!("one assert op"),
        }
    })
    .await
}

pub async fn assert_batch(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let facts = body.0;
    if facts.is_empty() {
        return Err(ApiError::schema("facts must hold at least one fact"));
    }
    if facts.len() > MAX_BATCH {
        return Err(ApiError::schema(format!("a batch holds at most {MAX_BATCH} facts")));
    }
    let ops = facts.into_iter().map(|Object(f)| WriteOp::Assert(f.into())).collect();
    idempotency::write(&st, &tenant, "POST /api/facts/batch", idem, ops, StatusCode::CREATED, |out| {
        let facts: Vec<Value> = out
            .outcomes
            .iter()
            .map(|o| match o {
                OpOutcome::Asserted(a) => asserted_json(a),
                _ => unreachable!("assert ops only"),
            })
            .collect();
        json!({"tx": out.tx, "recorded_at": out.recorded_at, "facts": facts})
    })
    .await
}

pub async fn retract_fact(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let id = parse_id(&id)?;
    let out = st.memory.write(&tenant, vec![WriteOp::Retract(id)], None).await?;
    let out = out.map_err(|_| ApiError::internal())?;
    match out.outcomes.into_iter().next() {
        Some(OpOutcome::Retracted { fact, .. }) => Ok(Json(fact).into_response()),
        _ => Err(ApiError::internal()),
    }
}

fn parse_id(s: &str) -> Result<FactId, ApiError> {
    // An id that cannot exist is simply not found: no shape is disclosed.
    s.parse::<FactId>().map_err(|_| ApiError::not_found())
}

pub async fn get_fact(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    q: QueryPairs,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let id = parse_id(&id)?;
    let as_of = q.as_of()?;
    // A point read is a few key lookups, bounded whatever the store holds:
    // cheaper inline than a hop to the blocking pool and back.
    let fact = st.memory.engine().get(&tenant, id, as_of)?.ok_or_else(ApiError::not_found)?;
    Ok(Json(fact).into_response())
}

pub async fn fact_history(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let id = parse_id(&id)?;
    // A fact's history grows with every supersession; read it off the async
    // threads (see `list_facts`).
    let engine = st.memory.engine().clone();
    let h = blocking(move || engine.history(&tenant, id)).await?;
    Ok(Json(json!({
        "id": h.id,
        "versions": h.versions,
        "predecessors": h.predecessors,
        "successors": h.successors,
    }))
    .into_response())
}

pub async fn list_facts(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let query = FactQuery {
        subject: q.string("subject")?,
        predicate: q.string("predicate")?,
        object: q.string("object")?.map(|o| object_param(&o)),
        status: q.status()?,
        as_of: q.as_of()?,
        valid_at: q.int("valid_at")?,
        include_retracted: q.bool("include_retracted")?.unwrap_or(false),
        limit: q.int("limit")?.map(|l| l.clamp(1, MAX_PAGE as i64) as usize).unwrap_or(DEFAULT_PAGE),
        cursor: q.string("cursor")?,
    };
    // A list scans until it has `limit` matches, which with a selective
    // filter can mean most of the store: `Memory::query` moves long scans
    // off the async threads.
    let page = st.memory.query(&tenant, query).await?;
    let mut headers = HeaderMap::new();
    if let Some(c) = &page.next_cursor {
        headers.insert("x-next-cursor", HeaderValue::from_str(c).map_err(|_| ApiError::internal())?);
    }
    Ok((headers, Json(page.facts)).into_response())
}

/// `object=` is JSON when it parses as JSON (`42`, `true`, `"quoted"`,
/// `{"a":1}`), otherwise the plain string (`Org:acme`).
pub fn object_param(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_string()))
}

#[derive(Debug, Deserialize)]
pub struct PredicateBody {
    pub cardinality: String,
}

pub async fn get_predicate(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let info = st.memory.engine().predicate(&tenant, &name)?;
    Ok(Json(info).into_response())
}

pub async fn put_predicate(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
    JsonBody(Object(body)): JsonBody<Object<PredicateBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    let cardinality: Cardinality = body.cardinality.parse().map_err(ApiError::schema)?;
    let op = WriteOp::SetCardinality { predicate: name.clone(), cardinality };
    st.memory.write(&tenant, vec![op], None).await?.map_err(|_| ApiError::internal())?;
    Ok(Json(PredicateInfo { name, cardinality }).into_response())
}
