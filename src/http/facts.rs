//! `/api/facts` and `/api/predicates`: asserting, reading, retracting facts.

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, JsonInt, Object, PathParam};
use super::idempotency::{self, IdempotencyKey, Serialized};
use super::query::QueryPairs;
use super::AppState;
use crate::memory::blocking;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
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

/// The JSON of an assertion: the new fact's fields, plus the ids of the facts
/// it closed and of the tails it left. Serialized from the outcome as it is.
#[derive(Serialize)]
pub struct AssertedReply<'a> {
    #[serde(flatten)]
    fact: &'a Fact,
    superseded: Ids<'a>,
    continued: Ids<'a>,
}

impl<'a> AssertedReply<'a> {
    pub fn new(a: &'a Asserted) -> Self {
        AssertedReply { fact: &a.fact, superseded: Ids(&a.superseded), continued: Ids(&a.continued) }
    }
}

/// The ids of some facts, as a JSON array.
struct Ids<'a>(&'a [Fact]);

impl Serialize for Ids<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|f| f.id))
    }
}

/// [`AssertedReply`] as a JSON value.
pub fn asserted_json(a: &Asserted) -> Value {
    serde_json::to_value(AssertedReply::new(a)).expect("facts serialize")
}

/// The reply to a batch: its transaction and each assertion, in order.
#[derive(Serialize)]
struct BatchReply<'a> {
    tx: Tx,
    recorded_at: Millis,
    facts: Vec<AssertedReply<'a>>,
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
            Some(OpOutcome::Asserted(a)) => Serialized::of(&AssertedReply::new(a)),
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
        let facts = out
            .outcomes
            .iter()
            .map(|o| match o {
                OpOutcome::Asserted(a) => AssertedReply::new(a),
                _ => unreachable!("assert ops only"),
            })
            .collect();
        Serialized::of(&BatchReply { tx: out.tx, recorded_at: out.recorded_at, facts })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(subject: &str, object: &str) -> Fact {
        let e = Engine::open(EngineConfig::temporary()).unwrap();
        let mut input = FactInput::new(subject, "p", object).source("hr").valid_from(1_000);
        input.properties = Some(json!({"note": "x", "n": [1, 2]}).as_object().unwrap().clone());
        e.assert("t", input).unwrap().fact
    }

    /// The reply written from the outcome is the fact's JSON with the two id
    /// lists added, as when it was built as a `Value` and then written.
    #[test]
    fn an_assertion_reply_is_the_fact_and_the_ids_it_closed_and_left() {
        let a = Asserted { fact: fact("S:a", "new"), superseded: vec![fact("S:a", "old")], continued: vec![fact("S:a", "tail")] };
        let mut expected = serde_json::to_value(&a.fact).unwrap();
        expected["superseded"] = json!([a.superseded[0].id]);
        expected["continued"] = json!([a.continued[0].id]);
        let written: Value = serde_json::from_slice(&Serialized::of(&AssertedReply::new(&a)).0).unwrap();
        assert_eq!(written, expected);
        assert_eq!(asserted_json(&a), expected);
        let batch = BatchReply { tx: 7, recorded_at: 9, facts: vec![AssertedReply::new(&a)] };
        let written: Value = serde_json::from_slice(&Serialized::of(&batch).0).unwrap();
        assert_eq!(written, json!({"tx": 7, "recorded_at": 9, "facts": [expected]}));
    }
}
