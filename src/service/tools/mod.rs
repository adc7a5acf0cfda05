//! The memory tools (remember, recall, recall_as_of, whats_changed,
//! build_context, explain_fact, digest), offered by MCP's `tools/call` and to
//! the agents of the NeuroSan networks and NeuroDock: each parses its JSON
//! arguments, resolves the namespace against the caller, and calls the
//! service's operations exactly as the matching REST route does.
//! [`schemas`] names and describes them.

pub mod schemas;

use crate::auth::{Principal, DEFAULT_TENANT};
use crate::service::ServiceError;
use crate::json::{present, JsonInt};
use crate::service::facts::Assertion;
use crate::service::params::ReadParams;
use crate::service::digest::DigestRequest;
use crate::service::Answer;
use crate::service::Service;
use crate::recall::context;
use crate::search::neighbours::MAX_NEIGHBOURS;
use crate::search::{SearchRequest, DEFAULT_TOP_K, MAX_TOP_K};
use crate::service::recall::SearchQuery;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use crate::store::{
    Change, ChangeEvent, Fact, FactId, FactInput, FactQuery, Tx,
    DEFAULT_PAGE, MAX_PAGE,
};

/// Who calls, and what the HTTP request carried besides the JSON-RPC body.
#[derive(Debug, Clone)]
pub struct CallerInfo {
    pub principal: Principal,
    /// `Idempotency-Key` (writing tools only).
    pub idempotency_key: Option<crate::service::IdempotencyKey>,
}

pub async fn call(st: &Service, caller: &CallerInfo, name: &str, args: Map<String, Value>) -> Result<Value, ServiceError> {
    match name {
        schemas::REMEMBER => remember(st, caller, parse(args)?).await,
        schemas::RECALL => recall(st, caller, parse(args)?).await,
        schemas::RECALL_AS_OF => recall_as_of(st, caller, parse(args)?).await,
        schemas::WHATS_CHANGED => whats_changed(st, caller, parse(args)?).await,
        schemas::BUILD_CONTEXT => build_context(st, caller, parse(args)?).await,
        schemas::EXPLAIN_FACT => explain_fact(st, caller, parse(args)?).await,
        schemas::DIGEST => digest(st, caller, parse(args)?).await,
        other => Err(ServiceError::invalid(format!("unknown tool {other:?}"))),
    }
}

/// Arguments as a tool's struct; a wrong field is named in the error.
fn parse<T: DeserializeOwned>(args: Map<String, Value>) -> Result<T, ServiceError> {
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            ServiceError::invalid(format!("invalid arguments: {inner}"))
        } else {
            ServiceError::invalid(format!("invalid argument {path}: {inner}"))
        }
    })
}

/// The tenant a call is about. A tenant key (and open mode) is pinned to its
/// own namespace; an admin token must name a configured one. Naming another
/// namespace is refused without saying whether it exists.
pub fn tenant(st: &Service, principal: &Principal, namespace: Option<&str>) -> Result<String, ServiceError> {
    let namespace = namespace.map(str::trim).filter(|n| !n.is_empty());
    match principal {
        Principal::Tenant(own) => match namespace {
            None => Ok(own.clone()),
            Some(n) if n == own => Ok(own.clone()),
            Some(n) if st.is_open() => Err(ServiceError::NotFound(format!(
                "namespace {n:?} not found: in open mode the only namespace is {DEFAULT_TENANT:?}"
            ))),
            Some(n) => Err(ServiceError::NotFound(format!(
                "namespace {n:?} not found: this key is pinned to its own namespace"
            ))),
        },
        Principal::Admin => match namespace {
            None => Err(ServiceError::invalid("an admin token must name the namespace (argument namespace)")),
            Some(n) if st.knows_tenant(n) => Ok(n.to_string()),
            Some(n) => Err(ServiceError::NotFound(format!("namespace {n:?} not found"))),
        },
    }
}

/// An integer argument within `[min, max]` (the shared rule, `service/params.rs`).
fn range(name: &str, v: Option<JsonInt>, min: i64, max: i64) -> Result<Option<i64>, ServiceError> {
    crate::service::params::within(name, v.map(|n| n.0), min, max)
}

// --- remember ----------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    subject: String,
    predicate: String,
    object: Value,
    #[serde(default, deserialize_with = "present")]
    confidence: Option<f64>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    valid_from: Option<JsonInt>,
    #[serde(default)]
    valid_until: Option<JsonInt>,
    #[serde(default)]
    properties: Option<Map<String, Value>>,
    #[serde(default)]
    namespace: Option<String>,
}

/// A tool's answer under an idempotency key: a replayed result says so
/// (`"replayed": true`); a replayed error is the error again.
fn replayed_or_fresh<T>(answer: Answer<T>, render: impl FnOnce(&T) -> Value) -> Result<Value, ServiceError> {
    match answer {
        Answer::Fresh(v) => Ok(render(&v)),
        Answer::Replayed(r) => {
            let mut v = render(&r?);
            if let Some(o) = v.as_object_mut() {
                o.insert("replayed".into(), Value::Bool(true));
            }
            Ok(v)
        }
    }
}

fn remember_result(a: &Assertion) -> Value {
    json!({"fact": a.fact, "superseded": a.superseded, "continued": a.continued, "tx": a.fact.tx})
}

async fn remember(st: &Service, caller: &CallerInfo, a: RememberArgs) -> Result<Value, ServiceError> {
    let tenant = tenant(st, &caller.principal, a.namespace.as_deref())?;
    let input = FactInput {
        subject: a.subject,
        predicate: a.predicate,
        object: a.object,
        confidence: a.confidence,
        source: a.source,
        valid_from: a.valid_from.map(|t| t.0),
        valid_until: a.valid_until.map(|t| t.0),
        properties: a.properties,
    };
    let answer = st.assert(&tenant, input, caller.idempotency_key.as_ref()).await?;
    replayed_or_fresh(answer, remember_result)
}

// --- recall ------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    question: String,
    #[serde(default)]
    top_k: Option<JsonInt>,
    #[serde(default)]
    seeds: Option<Vec<String>>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    predicate: Option<String>,
    #[serde(default)]
    include_candidates: Option<bool>,
    #[serde(default)]
    valid_from: Option<JsonInt>,
    #[serde(default)]
    valid_until: Option<JsonInt>,
    #[serde(default)]
    reference_time: Option<JsonInt>,
    #[serde(default)]
    signals: Option<Vec<String>>,
    #[serde(default)]
    neighbours: Option<JsonInt>,
    #[serde(default)]
    namespace: Option<String>,
}

fn question(q: &str) -> Result<String, ServiceError> {
    let q = q.trim();
    if q.is_empty() {
        return Err(ServiceError::invalid("question must not be empty"));
    }
    Ok(q.to_string())
}

async fn recall(st: &Service, caller: &CallerInfo, a: RecallArgs) -> Result<Value, ServiceError> {
    let tenant = tenant(st, &caller.principal, a.namespace.as_deref())?;
    let req = SearchQuery {
        question: Some(a.question),
        top_k: a.top_k.map(|k| k.0),
        as_of: None,
        seeds: a.seeds.unwrap_or_default(),
        subject: a.subject,
        predicate: a.predicate,
        include_candidates: a.include_candidates.unwrap_or(false),
        valid_from: a.valid_from.map(|t| t.0),
        valid_until: a.valid_until.map(|t| t.0),
        reference_time: a.reference_time.map(|t| t.0),
        signals: a.signals,
        neighbours: a.neighbours.map(|n| n.0),
    }
    .checked()?;
    let q = req.question.clone();
    let found = st.recall_detailed(&tenant, req).await?;
    let (recalled, stale) = (found.value, found.stale);
    let matches: Vec<Value> = recalled
        .fused
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut m = json!({"id": f.fact.id, "score": f.score, "reasons": f.reasons, "ranks": f.ranks});
            if let Some(around) = recalled.neighbours.get(i).filter(|n| !n.is_empty()) {
                m["neighbours"] = json!(around);
            }
            m
        })
        .collect();
    let facts: Vec<Fact> = recalled.fused.into_iter().map(|f| f.fact).collect();
    Ok(json!({"question": q, "facts": facts, "matches": matches, "time": recalled.window, "stale": stale}))
}

// --- recall_as_of --------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecallAsOfArgs {
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    predicate: Option<String>,
    #[serde(default)]
    object: Option<Value>,
    #[serde(default)]
    as_of: Option<JsonInt>,
    #[serde(default)]
    as_of_tx: Option<JsonInt>,
    #[serde(default)]
    valid_at: Option<JsonInt>,
    #[serde(default)]
    limit: Option<JsonInt>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
}

async fn recall_as_of(st: &Service, caller: &CallerInfo, a: RecallAsOfArgs) -> Result<Value, ServiceError> {
    let tenant = tenant(st, &caller.principal, a.namespace.as_deref())?;
    let params = ReadParams {
        as_of: a.as_of.map(|t| t.0),
        as_of_tx: a.as_of_tx.map(|t| t.0),
        valid_at: a.valid_at.map(|t| t.0),
        limit: a.limit.map(|t| t.0),
        cursor: a.cursor.clone(),
    };
    let record_time = params.as_of()?;
    let (as_of, as_of_tx) = (params.as_of, params.as_of_tx);
    let valid_at = a.valid_at.map(|t| t.0);
    let times = json!({"as_of": as_of, "as_of_tx": as_of_tx, "valid_at": valid_at});
    if let Some(q) = a.question.as_deref().filter(|q| !q.trim().is_empty()) {
        if as_of_tx.is_some() {
            return Err(ServiceError::invalid("with a question, give the record time as as_of (unix ms), not as_of_tx"));
        }
        if a.object.is_some() || a.cursor.is_some() {
            return Err(ServiceError::invalid("object and cursor apply to exact reads, not to a question"));
        }
        let req = SearchRequest {
            question: question(q)?,
            top_k: range("limit", a.limit, 1, MAX_TOP_K as i64)?.map_or(DEFAULT_TOP_K, |k| k as usize),
            as_of,
            subject: a.subject,
            predicate: a.predicate,
            ..Default::default()
        };
        let fused = st.recall(&tenant, req).await?.value;
        let facts: Vec<Fact> =
            fused.into_iter().map(|f| f.fact).filter(|f| valid_at.is_none_or(|t| f.covers(t))).collect();
        let mut out = times;
        out["facts"] = json!(facts);
        out["next_cursor"] = Value::Null;
        return Ok(out);
    }
    let query = FactQuery {
        subject: a.subject,
        predicate: a.predicate,
        object: a.object,
        as_of: record_time,
        valid_at,
        limit: params.limit(DEFAULT_PAGE, MAX_PAGE)?,
        cursor: params.cursor,
        ..Default::default()
    };
    let page = st.facts(&tenant, query).await?;
    let mut out = times;
    out["facts"] = json!(page.facts);
    out["next_cursor"] = json!(page.next_cursor);
    Ok(out)
}

// --- whats_changed -------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WhatsChangedArgs {
    #[serde(default)]
    since_tx: Option<JsonInt>,
    #[serde(default)]
    since: Option<JsonInt>,
    #[serde(default)]
    cursor: Option<JsonInt>,
    #[serde(default)]
    limit: Option<JsonInt>,
    #[serde(default)]
    namespace: Option<String>,
}

pub use crate::service::changes::{DEFAULT_CHANGES, MAX_CHANGES};

fn change_json(c: &Change) -> Value {
    let ids = |fs: &[Fact]| fs.iter().map(|f| f.id).collect::<Vec<_>>();
    let events: Vec<Value> = c
        .events
        .iter()
        .map(|e| match e {
            ChangeEvent::Assert { fact, superseded, continued } => {
                json!({"op": "assert", "fact": fact, "superseded": ids(superseded), "continued": ids(continued)})
            }
            ChangeEvent::Retract { fact } => json!({"op": "retract", "fact": fact}),
            ChangeEvent::Cardinality(p) => json!({"op": "predicate", "predicate": p}),
            ChangeEvent::Threshold(t) => json!({"op": "threshold", "threshold": t}),
        })
        .collect();
    json!({"tx": c.tx, "recorded_at": c.recorded_at, "events": events})
}

async fn whats_changed(st: &Service, caller: &CallerInfo, a: WhatsChangedArgs) -> Result<Value, ServiceError> {
    let tenant = tenant(st, &caller.principal, a.namespace.as_deref())?;
    let limit = range("limit", a.limit, 1, MAX_CHANGES as i64)?.map_or(DEFAULT_CHANGES, |l| l as usize);
    let since_tx = range("since_tx", a.since_tx, 0, i64::MAX)?;
    let cursor = range("cursor", a.cursor, 0, i64::MAX)?;
    let after = cursor.or(since_tx).unwrap_or(0) as Tx;
    // A cursor carries on a page series: `since` only picks where one starts.
    let since = if cursor.is_none() { a.since.map(|t| t.0) } else { None };
    let page = st.changes_page(&tenant, after, since, limit).await?;
    Ok(json!({
        "changes": page.changes.iter().map(change_json).collect::<Vec<_>>(),
        "next_cursor": if page.more { Some(page.last_tx) } else { None },
        "last_tx": page.last_tx,
    }))
}

// --- build_context -------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildContextArgs {
    #[serde(default)]
    goal: Option<String>,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    seeds: Option<Vec<String>>,
    #[serde(default)]
    project: Option<String>,
    #[serde(default)]
    token_budget: Option<JsonInt>,
    #[serde(default)]
    max_tokens: Option<JsonInt>,
    #[serde(default)]
    max_facts: Option<JsonInt>,
    #[serde(default)]
    max_pages: Option<JsonInt>,
    #[serde(default)]
    as_of: Option<JsonInt>,
    #[serde(default)]
    reference_time: Option<JsonInt>,
    #[serde(default)]
    neighbours: Option<JsonInt>,
    #[serde(default)]
    namespace: Option<String>,
}

async fn build_context(st: &Service, caller: &CallerInfo, a: BuildContextArgs) -> Result<Value, ServiceError> {
    let tenant = tenant(st, &caller.principal, a.namespace.as_deref())?;
    let goal = match (a.goal, a.task) {
        (Some(g), Some(t)) if g.trim() != t.trim() => {
            return Err(ServiceError::invalid("goal and task are the same argument: give one"))
        }
        (g, t) => g.or(t).unwrap_or_default(),
    };
    let budget = match (a.token_budget, a.max_tokens) {
        (Some(b), Some(m)) if b.0 != m.0 => {
            return Err(ServiceError::invalid("token_budget and max_tokens are the same argument: give one"))
        }
        (b, m) => b.or(m),
    };
    let seeds = a.seeds.unwrap_or_default();
    if seeds.is_empty() && a.project.is_none() && goal.trim().is_empty() {
        return Err(ServiceError::invalid("give seeds, a project or a goal (task)"));
    }
    let non_negative = |name: &str, v: Option<JsonInt>| range(name, v, 0, i64::MAX).map(|v| v.map(|n| n as usize));
    let req = context::ContextRequest {
        seeds,
        goal,
        token_budget: non_negative("token_budget", budget)?,
        project: a.project,
        max_facts: range("max_facts", a.max_facts, 0, context::MAX_FACTS as i64)?
            .map_or(context::DEFAULT_MAX_FACTS, |n| n as usize),
        max_pages: non_negative("max_pages", a.max_pages)?.unwrap_or(context::DEFAULT_MAX_PAGES),
        as_of: a.as_of.map(|t| t.0),
        reference_time: a.reference_time.map(|t| t.0),
        neighbours: range("neighbours", a.neighbours, 0, MAX_NEIGHBOURS as i64)?
            .map_or(context::DEFAULT_NEIGHBOURS, |n| n as usize),
    };
    let packet = st.context(&tenant, req).await?;
    serde_json::to_value(packet).map_err(ServiceError::internal)
}

// --- explain_fact --------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainArgs {
    id: String,
    #[serde(default)]
    namespace: Option<String>,
}

async fn explain_fact(st: &Service, caller: &CallerInfo, a: ExplainArgs) -> Result<Value, ServiceError> {
    let tenant = tenant(st, &caller.principal, a.namespace.as_deref())?;
    let id: FactId = a
        .id
        .trim()
        .parse()
        .map_err(|_| ServiceError::invalid(format!("id must be a fact id (a UUID), got {:?}", a.id)))?;
    let missing = || ServiceError::NotFound(format!("no fact {id} in this namespace"));
    let h = st.history(&tenant, id).await.map_err(|e| match e {
        ServiceError::NotFound(_) => missing(),
        other => other,
    })?;
    // The neighbours as they are now; one gone from this namespace is left out.
    let mut preds = Vec::new();
    for i in &h.predecessors {
        if let Some(f) = st.fact_if_any(&tenant, *i, None).await? {
            preds.push(f);
        }
    }
    let mut succs = Vec::new();
    for i in &h.successors {
        if let Some(f) = st.fact_if_any(&tenant, *i, None).await? {
            succs.push(f);
        }
    }
    let Some(current) = h.versions.last().cloned() else {
        return Err(missing());
    };
    let first = h.versions.first().unwrap_or(&current);
    let provenance = json!({
        "source": current.source,
        "confidence": current.confidence,
        "status": current.status,
        "created_at": first.recorded_at,
        "created_tx": first.tx,
        "last_recorded_at": current.recorded_at,
        "last_tx": current.tx,
        "valid_from": current.valid_from,
        "valid_until": current.valid_until,
    });
    Ok(json!({
        "id": h.id,
        "fact": current,
        "provenance": provenance,
        "versions": h.versions,
        "predecessors": preds,
        "successors": succs,
    }))
}

// --- digest --------------------------------------------------------------------

/// `digest` takes `POST /api/digest`'s body (DigestRequest) and a namespace.
#[derive(Debug, Deserialize)]
pub struct DigestArgs {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(flatten)]
    body: Map<String, Value>,
}

/// Runs `POST /api/digest`'s pipeline (checks, masking, extraction, one
/// atomic write, its `Idempotency-Key` scope) for the caller's namespace,
/// and answers its receipt or its error.
async fn digest(st: &Service, caller: &CallerInfo, a: DigestArgs) -> Result<Value, ServiceError> {
    let tenant = tenant(st, &caller.principal, a.namespace.as_deref())?;
    let body: DigestRequest = parse(a.body)?;
    let answer = st.digest(&tenant, body, caller.idempotency_key.as_ref()).await?;
    replayed_or_fresh(answer, Value::clone)
}
