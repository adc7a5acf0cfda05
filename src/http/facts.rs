//! `/api/facts` and `/api/predicates`: asserting, reading, retracting facts.

use super::error::ApiError;
use super::extract::{present, Caller, JsonBody, JsonInt, Object, PathParam};
use super::idempotency::{self, IdempotencyKey};
use super::query::QueryPairs;
use super::AppState;
pub use crate::service::facts::MAX_BATCH;
use crate::service::facts::{Assertion, Assertions};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use crate::service::model::{Cardinality, Fact, FactId, FactInput, FactQuery, Millis, Tx, DEFAULT_PAGE, MAX_PAGE};

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

/// The JSON of an assertion: the new fact's fields, plus the ids of the facts
/// it closed and of the tails it left. Serialized from the assertion as it is.
#[derive(Serialize)]
pub struct AssertedReply<'a> {
    #[serde(flatten)]
    fact: &'a Fact,
    superseded: &'a [FactId],
    continued: &'a [FactId],
}

impl<'a> AssertedReply<'a> {
    pub fn new(a: &'a Assertion) -> Self {
        AssertedReply { fact: &a.fact, superseded: &a.superseded, continued: &a.continued }
    }
}

/// The reply to a batch: its transaction and each assertion, in order.
#[derive(Serialize)]
struct BatchReply<'a> {
    tx: Tx,
    recorded_at: Millis,
    facts: Vec<AssertedReply<'a>>,
}

impl<'a> BatchReply<'a> {
    fn new(a: &'a Assertions) -> Self {
        BatchReply { tx: a.tx, recorded_at: a.recorded_at, facts: a.facts.iter().map(AssertedReply::new).collect() }
    }
}

pub async fn assert_fact(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(Object(body)): JsonBody<Object<FactBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?;
    let answer = st.service.assert(tenant, body.into(), idem.key()).await?;
    Ok(idempotency::respond(answer, StatusCode::CREATED, |a| idempotency::to_json(&AssertedReply::new(a))))
}

pub async fn assert_batch(
    State(st): State<AppState>,
    caller: Caller,
    idem: IdempotencyKey,
    JsonBody(body): JsonBody<BatchBody>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?;
    let inputs = body.0.into_iter().map(|Object(f)| f.into()).collect();
    let answer = st.service.assert_batch(tenant, inputs, idem.key()).await?;
    Ok(idempotency::respond(answer, StatusCode::CREATED, |a| idempotency::to_json(&BatchReply::new(a))))
}

pub async fn retract_fact(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?;
    let id = parse_id(&id)?;
    Ok(Json(st.service.retract(tenant, id).await?).into_response())
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
    let tenant = caller.tenant()?;
    let id = parse_id(&id)?;
    let as_of = q.read_params()?.as_of()?;
    Ok(Json(st.service.fact(tenant, id, as_of).await?).into_response())
}

pub async fn fact_history(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?;
    let id = parse_id(&id)?;
    let h = st.service.history(tenant, id).await?;
    Ok(Json(json!({
        "id": h.id,
        "versions": h.versions,
        "predecessors": h.predecessors,
        "successors": h.successors,
    }))
    .into_response())
}

pub async fn list_facts(State(st): State<AppState>, caller: Caller, q: QueryPairs) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?;
    let params = q.read_params()?;
    let query = FactQuery {
        subject: q.string("subject")?,
        predicate: q.string("predicate")?,
        object: q.string("object")?.map(|o| object_param(&o)),
        status: q.status()?,
        as_of: params.as_of()?,
        valid_at: params.valid_at,
        include_retracted: q.bool("include_retracted")?.unwrap_or(false),
        limit: params.limit(DEFAULT_PAGE, MAX_PAGE)?,
        cursor: params.cursor,
    };
    let page = st.service.facts(tenant, query).await?;
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
    let tenant = caller.tenant()?;
    Ok(Json(st.service.predicate(tenant, &name).await?).into_response())
}

pub async fn put_predicate(
    State(st): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
    JsonBody(Object(body)): JsonBody<Object<PredicateBody>>,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?;
    let cardinality: Cardinality = body.cardinality.parse().map_err(ApiError::schema)?;
    Ok(Json(st.service.set_cardinality(tenant, &name, cardinality).await?).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(subject: &str, object: &str) -> Fact {
        serde_json::from_value(json!({
            "id": uuid::Uuid::now_v7(), "tenant": "t", "subject": subject, "predicate": "p", "object": object,
            "confidence": 1.0, "source": "hr", "properties": {"note": "x", "n": [1, 2]},
            "valid_from": 1_000, "valid_until": null, "recorded_at": 5, "tx": 1, "status": "active",
            "created_tx": 1, "created_at": 5, "supersedes": [], "superseded_by": null,
            "continues": null, "continued_by": []
        }))
        .expect("a fact")
    }

    /// The reply written from the assertion is the fact's JSON with the two
    /// id lists added.
    #[test]
    fn an_assertion_reply_is_the_fact_and_the_ids_it_closed_and_left() {
        let (old, tail) = (fact("S:a", "old"), fact("S:a", "tail"));
        let a = Assertion { fact: fact("S:a", "new"), superseded: vec![old.id], continued: vec![tail.id] };
        let mut expected = serde_json::to_value(&a.fact).unwrap();
        expected["superseded"] = json!([old.id]);
        expected["continued"] = json!([tail.id]);
        let written: Value = serde_json::from_slice(&idempotency::to_json(&AssertedReply::new(&a))).unwrap();
        assert_eq!(written, expected);
        let batch = Assertions { tx: 7, recorded_at: 9, facts: vec![a] };
        let written: Value = serde_json::from_slice(&idempotency::to_json(&BatchReply::new(&batch))).unwrap();
        assert_eq!(written, json!({"tx": 7, "recorded_at": 9, "facts": [expected]}));
    }
}
