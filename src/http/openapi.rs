//! `/openapi.json`: the memory API spec this server implements, built from
//! the reference document (`api/abagraph.openapi.json`) plus this server's
//! extensions, so it is always a superset of the reference.
//!
//! Everything of the reference is kept. The patches add what this server
//! does on top (routes, parameters, fields, responses, schemas), fix what it
//! does differently (PRODUCT.md wins over the reference: e.g. the session
//! cookie is `tempora_session`), and mark the reference operations that are
//! not implemented yet with `x-tempora-planned: true` (they answer 404).
//! Added operations carry `x-tempora-extension: true`.

use axum::Json;
use serde_json::{json, Map, Value};
use std::sync::OnceLock;
use tempora_storage::{DEFAULT_PAGE, MAX_PAGE};

const REFERENCE: &str = include_str!("../../api/abagraph.openapi.json");

/// A subject or predicate: not blank, no control characters (what the
/// engine accepts).
pub const NAME_PATTERN: &str = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$";

/// Reference operations this server does not implement yet. They stay in
/// the document (they are part of the product), marked as planned.
pub const PLANNED: &[(&str, &str)] = &[];

pub fn reference() -> Value {
    serde_json::from_str(REFERENCE).expect("the embedded spec is JSON")
}

pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(build)
}

pub async fn serve() -> Json<Value> {
    Json(document().clone())
}

fn build() -> Value {
    let mut doc = reference();
    doc["info"]["title"] = json!("tempora memory API");
    doc["info"]["version"] = json!(env!("CARGO_PKG_VERSION"));
    let about = doc["info"]["description"].as_str().unwrap_or_default().to_string();
    doc["info"]["description"] = json!(format!(
        "{about}\n\nThis is the document of tempora, which implements the memory API above: the reference \
         operations (operations marked `x-tempora-planned: true` are not implemented by this version yet and \
         answer 404 NotFound) plus its own extensions (marked `x-tempora-extension: true`): batch writes, \
         one fact and its history, retraction, predicate cardinality, pagination, valid-time and \
         transaction-time reads, the resumable change feed, and the operational routes. All times are unix \
         milliseconds. In open mode (no keys configured) no credentials are needed and every request is \
         tenant `default`."
    ));
    doc["servers"] = json!([{"url": "/", "description": "this server"}]);
    components(&mut doc);
    reference_paths(&mut doc);
    extension_paths(&mut doc);
    monitor_paths(&mut doc);
    doc
}

fn obj(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut().expect("an object")
}

fn merge(target: &mut Value, add: Value) {
    let target = obj(target);
    if let Value::Object(add) = add {
        for (k, v) in add {
            target.insert(k, v);
        }
    }
}

fn reference_to(name: &str, kind: &str) -> Value {
    json!({"$ref": format!("#/components/{kind}/{name}")})
}

fn resp(name: &str) -> Value {
    reference_to(name, "responses")
}

fn param(name: &str) -> Value {
    reference_to(name, "parameters")
}

fn schema(name: &str) -> Value {
    reference_to(name, "schemas")
}

fn json_content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}})
}

/// The error answers every implemented operation can give besides its own:
/// the request limiter and a closing or full engine answer 503.
fn with_common_errors(responses: &mut Value, gated: bool) {
    let r = obj(responses);
    if gated {
        r.entry("404").or_insert_with(|| resp("NotFound"));
    }
    r.entry("503").or_insert_with(|| resp("Unavailable"));
}

fn error_response(description: &str, code: &str, message: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {
            "schema": schema("Error"),
            "example": {"error": {"code": code, "message": message}},
        }},
    })
}

fn components(doc: &mut Value) {
    let c = &mut doc["components"];

    c["securitySchemes"]["bearerAuth"]["description"] = json!(
        "A tenant API key or an admin token: send `Authorization: Bearer <key>`. Browser clients may instead \
         carry the HttpOnly `tempora_session` cookie set by POST /api/session. A tenant key reads and writes \
         only its own tenant; an admin token reads any tenant, named with the `tenant` query parameter or the \
         `X-Tempora-Tenant` header. With `auth.tenant_host` configured (e.g. `{tenant}.example.com`) a tenant \
         key authenticates only on its own host. By design, an unauthenticated or cross-tenant request to a \
         gated surface returns 404 NotFound (non-disclosure) rather than 401/403, so the protected surface is \
         never advertised. In open mode (no keys configured) no credentials are needed."
    );

    let responses = &mut c["responses"];
    responses["PayloadTooLarge"] = error_response(
        "The request body is larger than the configured limit (`max_body_bytes`, default 1 MiB).",
        "PayloadTooLarge",
        "request body is larger than the configured limit (max_body_bytes)",
    );
    responses["Unavailable"] = error_response(
        "The server is at its in-flight request limit, shutting down, or its data volume is full, or the request \
         ran past `request_timeout_secs` (default 30 s; streams are exempt); retry later.",
        "Unavailable",
        "the server is at its request limit; retry shortly",
    );
    responses["RateLimited"] = error_response(
        "Too many concurrent stream subscribers (`max_sse_subscribers`); retry later.",
        "RateLimited",
        "too many stream subscribers; try again later",
    );

    let params = &mut c["parameters"];
    params["IdempotencyKey"]["description"] = json!(
        "Client-generated token (e.g. a UUID) that makes a writing POST safe to retry. The first response under \
         a key is stored in the same transaction as the write (it survives a restart) and returned verbatim, \
         with `Idempotency-Replayed: true`, to every later request of the same tenant and route carrying that \
         key; the retry writes nothing. Request errors (4xx) are stored too, server errors are not. An empty \
         value counts as no key."
    );
    params["Tenant"] = json!({
        "name": "tenant",
        "in": "query",
        "required": false,
        "description": "Admin tokens only: the tenant the request is about. Ignored for tenant keys (their tenant comes from the key).",
        "schema": {"type": "string"},
    });
    params["TenantHeader"] = json!({
        "name": "X-Tempora-Tenant",
        "in": "header",
        "required": false,
        "description": "Admin tokens only: the tenant the request is about (like the `tenant` query parameter, which it takes precedence over). Ignored for tenant keys.",
        "schema": {"type": "string"},
    });
    params["FactId"] = json!({
        "name": "id",
        "in": "path",
        "required": true,
        "description": "The fact id. An id that does not exist (or is not a UUID) answers 404.",
        "schema": {"type": "string", "format": "uuid"},
    });
    params["AsOf"] = json!({
        "name": "as_of",
        "in": "query",
        "required": false,
        "description": "Record time (unix milliseconds) to rewind the read to. Not together with as_of_tx (400).",
        "schema": {"type": "integer", "format": "int64"},
    });
    params["AsOfTx"] = json!({
        "name": "as_of_tx",
        "in": "query",
        "required": false,
        "description": "Transaction number to rewind the read to: every write with tx at or below it. Not together with as_of (400).",
        "schema": {"type": "integer", "format": "int64", "minimum": 0},
    });

    let schemas = &mut c["schemas"];
    let id_list = |d: &str| json!({"type": "array", "items": {"type": "string", "format": "uuid"}, "description": d});
    let fact = &mut schemas["Fact"];
    merge(
        &mut fact["properties"],
        json!({
            "tx": {
                "type": "integer", "format": "int64", "minimum": 1,
                "description": "The write transaction that wrote this version. Strictly increasing across the server.",
            },
            "created_tx": {
                "type": "integer", "format": "int64", "minimum": 1,
                "description": "The transaction of the fact's first version.",
            },
            "created_at": {
                "type": "integer", "format": "int64",
                "description": "The record time (unix milliseconds) of the fact's first version.",
            },
            "supersedes": id_list("Facts this one closed when it was asserted."),
            "superseded_by": {
                "type": ["string", "null"], "format": "uuid",
                "description": "The fact that closed this one, if any.",
            },
            "continues": {
                "type": ["string", "null"], "format": "uuid",
                "description": "When this fact is the surviving tail of an older fact whose interval a bounded assertion cut in two: that older fact.",
            },
            "continued_by": id_list("The tail facts that carry on parts of this one's interval, oldest first."),
        }),
    );
    let required = obj(fact).entry("required").or_insert_with(|| json!([]));
    for f in [
        "id",
        "tenant",
        "recorded_at",
        "tx",
        "created_tx",
        "created_at",
        "supersedes",
        "superseded_by",
        "continues",
        "continued_by",
    ] {
        if let Some(list) = required.as_array_mut() {
            if !list.iter().any(|v| v == f) {
                list.push(json!(f));
            }
        }
    }

    // The engine's input limits (storage/src/limits.rs): subject and
    // predicate are not blank and hold no control characters; sizes are in
    // bytes of UTF-8, so a limit in characters is exact for ASCII.
    let input = &mut schemas["FactInput"];
    input["description"] = json!(format!(
        "{} Unknown fields are ignored. Optional fields may be left out but not sent as null (valid_until may \
         be null). valid_until must be after valid_from (which defaults to the time of the write). The object \
         and properties together are at most {} bytes of JSON, nested at most {} levels.",
        input["description"].as_str().unwrap_or_default(),
        tempora_storage::MAX_VALUE_BYTES,
        tempora_storage::MAX_JSON_DEPTH,
    ));
    for (field, max) in
        [("subject", tempora_storage::MAX_SUBJECT_BYTES), ("predicate", tempora_storage::MAX_PREDICATE_BYTES)]
    {
        merge(&mut input["properties"][field], json!({"minLength": 1, "maxLength": max, "pattern": NAME_PATTERN}));
    }
    input["properties"]["source"]["maxLength"] = json!(tempora_storage::MAX_SOURCE_BYTES);

    schemas["AssertedFact"] = json!({
        "description": "An assertion's answer: the stored fact plus what the write did to other facts.",
        "allOf": [
            schema("Fact"),
            {
                "type": "object",
                "required": ["superseded", "continued"],
                "properties": {
                    "superseded": id_list("Ids of the facts this assertion closed."),
                    "continued": id_list("Ids of the tail facts it left (the part of an older interval after a bounded new one)."),
                },
            },
        ],
    });
    let fact_list = json!({"type": "array", "items": schema("FactInput"), "minItems": 1, "maxItems": crate::http::facts::MAX_BATCH});
    schemas["BatchInput"] = json!({
        "description": "Several facts written in one transaction: either all land or none does. `{\"facts\": [...]}` or a bare array.",
        "oneOf": [
            {"type": "object", "required": ["facts"], "properties": {"facts": fact_list.clone()}},
            fact_list,
        ],
    });
    schemas["BatchReceipt"] = json!({
        "type": "object",
        "description": "The transaction a batch wrote and its facts, in request order.",
        "required": ["tx", "recorded_at", "facts"],
        "properties": {
            "tx": {"type": "integer", "format": "int64", "minimum": 1},
            "recorded_at": {"type": "integer", "format": "int64"},
            "facts": {"type": "array", "items": schema("AssertedFact")},
        },
    });
    schemas["FactHistory"] = json!({
        "type": "object",
        "description": "Every stored version of one fact, oldest first, with the supersession chain both ways.",
        "required": ["id", "versions", "predecessors", "successors"],
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "versions": {"type": "array", "items": schema("Fact")},
            "predecessors": id_list("Facts this one closed, and the fact it continues."),
            "successors": id_list("The fact that closed this one and the tails that continue it."),
        },
    });
    let cardinality = json!({
        "type": "string",
        "enum": ["one", "many", "strict"],
        "description": "one: at most one active value per valid instant, a new value takes over its interval. many: values coexist. strict: like one, but a conflicting assertion is rejected with 400 Conflict.",
    });
    schemas["PredicateInput"] = json!({
        "type": "object",
        "required": ["cardinality"],
        "properties": {"cardinality": cardinality.clone()},
    });
    schemas["Predicate"] = json!({
        "type": "object",
        "required": ["name", "cardinality"],
        "properties": {"name": {"type": "string"}, "cardinality": cardinality},
    });
    schemas["StreamEvent"] = json!({
        "type": "object",
        "description": "The `data` of one change-feed event.",
        "required": ["op", "tx"],
        "properties": {
            "op": {"type": "string", "enum": ["assert", "retract", "predicate", "threshold"]},
            "tx": {"type": "integer", "format": "int64", "minimum": 1},
            "fact": schema("Fact"),
            "superseded": id_list("assert: the facts it closed (absent when none)."),
            "continued": id_list("assert: the tails it left (absent when none)."),
            "predicate": schema("Predicate"),
            "threshold": {"type": "number", "description": "threshold: the tenant's new candidate threshold."},
        },
    });
    schemas["Ready"] = json!({
        "type": "object",
        "required": ["ready", "last_tx", "writes"],
        "properties": {
            "ready": {"type": "boolean"},
            "last_tx": {"type": "integer", "format": "int64", "minimum": 0, "description": "The last committed transaction."},
            "writes": {"type": "string", "description": "`ok` when writes are taken; otherwise why they are refused \
                (disk below its free-space reserve, read-only filesystem, or a failed write). Reads go on either way."},
        },
    });
    merge(
        &mut schemas["Stats"]["properties"],
        json!({
            "last_tx": {"type": "integer", "format": "int64", "minimum": 0, "description": "The last committed transaction (server-wide)."},
            "last_recorded_at": {"type": "integer", "format": "int64", "description": "Its record time (unix milliseconds)."},
        }),
    );
}

fn reference_paths(doc: &mut Value) {
    let paths = &mut doc["paths"];

    for (path, method) in PLANNED {
        let op = &mut paths[*path][*method];
        if op.is_object() {
            op["x-tempora-planned"] = json!(true);
            let d = op["description"].as_str().unwrap_or_default().to_string();
            op["description"] =
                json!(format!("{d}\n\nNot implemented by this version of tempora yet: answers 404 NotFound."));
        }
    }

    recall_paths(paths);
    search_paths(paths);
    digest_paths(paths);
    connector_paths(paths);
    mcp_paths(paths);

    // GET /api/facts
    let list = &mut paths["/api/facts"]["get"];
    list["description"] = json!(
        "Pattern query over facts, filtered by subject, predicate, object and status, optionally pinned in record \
         time (as_of / as_of_tx) and valid time (valid_at). Results are tenant-scoped and paginated: when more \
         facts match, the `X-Next-Cursor` response header carries the cursor of the next page."
    );
    let ps = list["parameters"].as_array_mut().expect("listFacts has parameters");
    for p in ps.iter_mut() {
        if p["name"] == "status" {
            p["description"] = json!(
                "Status filter: a comma-separated list of active, candidate, superseded, retracted, or `all`. \
                 Defaults to active (with valid_at: also superseded facts for the instants they still cover)."
            );
            // Exactly what the server accepts: `all`/`any`, or a comma-separated list of statuses
            // (empty items are ignored), surrounded by spaces.
            p["schema"]["pattern"] = json!(
                "^ *(all|any|[ ,]*((active|candidate|superseded|retracted)( *,[ ,]*(active|candidate|superseded|retracted))*)?[ ,]*) *$"
            );
        }
    }
    ps.extend([
        json!({
            "name": "object", "in": "query", "required": false,
            "description": "Exact object to match: parsed as JSON when it is JSON (`42`, `true`, `\"a b\"`, `{\"a\":1}`), otherwise taken as a string (`Org:acme`).",
            "schema": {"type": "string"},
        }),
        json!({
            "name": "valid_at", "in": "query", "required": false,
            "description": "Valid-time instant (unix milliseconds): only facts whose [valid_from, valid_until) covers it.",
            "schema": {"type": "integer", "format": "int64"},
        }),
        param("AsOfTx"),
        json!({
            "name": "include_retracted", "in": "query", "required": false,
            "description": "Also list retracted facts.",
            "schema": {"type": "boolean", "default": false},
        }),
        json!({
            "name": "limit", "in": "query", "required": false,
            "description": format!("Page size; values are clamped to 1..{MAX_PAGE}. Default {DEFAULT_PAGE}."),
            "schema": {"type": "integer", "format": "int64"},
        }),
        json!({
            "name": "cursor", "in": "query", "required": false,
            "description": "The `X-Next-Cursor` of the previous page (with the same filters). A cursor that does not belong to the query answers 400.",
            "schema": {"type": "string"},
        }),
        param("Tenant"),
        param("TenantHeader"),
    ]);
    list["responses"]["200"]["headers"] = json!({
        "X-Next-Cursor": {
            "description": "Present when more facts match: pass it as `cursor` to read the next page.",
            "schema": {"type": "string"},
        },
    });
    list["responses"]["400"] = resp("BadRequest");
    with_common_errors(&mut list["responses"], true);

    // POST /api/facts
    let assert = &mut paths["/api/facts"]["post"];
    assert["description"] = json!(format!(
        "{} With cardinality `one` (the default) a new assertion takes over exactly its valid interval; the \
         answer lists the facts it closed (`superseded`) and the tails it left (`continued`). A `strict` \
         predicate rejects a conflicting value with 400 Conflict. One request is one transaction.",
        assert["description"].as_str().unwrap_or_default()
    ));
    if let Some(ps) = assert["parameters"].as_array_mut() {
        ps.extend([param("Tenant"), param("TenantHeader")]);
    }
    assert["responses"]["201"]["content"] = json_content(schema("AssertedFact"));
    assert["responses"]["201"]["headers"] = replayed_header();
    assert["responses"]["201"]["links"] = fact_links("$response.body#/id");
    assert["responses"]["413"] = resp("PayloadTooLarge");
    with_common_errors(&mut assert["responses"], true);

    // GET /api/health, GET /api/stats
    with_common_errors(&mut paths["/api/health"]["get"]["responses"], false);
    let stats = &mut paths["/api/stats"]["get"];
    stats["parameters"] = json!([param("Tenant"), param("TenantHeader")]);
    with_common_errors(&mut stats["responses"], true);

    // GET /api/stream
    let stream = &mut paths["/api/stream"]["get"];
    stream["description"] = json!(format!(
        "{} Besides assert and retract, `op` may be `predicate` (a cardinality change) or `threshold`. An \
         assert that closed facts adds `superseded` (their ids), one that left tails adds `continued`. The SSE \
         `id:` (the tx) is set on the last frame of each transaction; reconnect with `Last-Event-ID` (or \
         `after_tx`) to resume right after it without gaps. Without either the stream starts at the current \
         transaction.",
        stream["description"].as_str().unwrap_or_default()
    ));
    stream["parameters"] = json!([
        {
            "name": "Last-Event-ID", "in": "header", "required": false,
            "description": "Resume after this transaction (the last SSE id the client saw): its digits, or empty for none. Takes precedence over after_tx.",
            "schema": {"type": "string", "pattern": "^[ \\t]*[0-9]{0,18}[ \\t]*$"},
        },
        {
            "name": "after_tx", "in": "query", "required": false,
            "description": "Resume after this transaction (for clients that cannot set Last-Event-ID); values below 0 count as 0, i.e. from the beginning.",
            "schema": {"type": "integer", "format": "int64"},
        },
        param("Tenant"),
        param("TenantHeader"),
    ]);
    // Each event, as OpenAPI 3.2 spells it (`itemSchema`); the reference's
    // `schema` (the whole byte stream as a string) stays.
    stream["responses"]["200"]["content"]["text/event-stream"]["itemSchema"] = json!({
        "type": "object",
        "description": "One Server-Sent Event: `data` is a StreamEvent as JSON; `id` (the tx) is on the last event of each transaction.",
        "required": ["data"],
        "properties": {
            "event": {"type": "string", "enum": ["message"]},
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": schema("StreamEvent")},
            "retry": {"type": "integer"},
        },
    });
    stream["responses"]["400"] = resp("BadRequest");
    stream["responses"]["429"] = resp("RateLimited");
    with_common_errors(&mut stream["responses"], true);

    // /api/session: the cookie of this server is `tempora_session`.
    let login = &mut paths["/api/session"]["post"];
    login["description"] = json!(
        "Validate a tenant or admin key and set an HttpOnly `tempora_session` cookie carrying it (`Secure` when \
         the request came over HTTPS, per `X-Forwarded-Proto`). This is the login door used by browser clients, \
         so it is the one endpoint that does not itself require a bearer token, and the one that answers 401 \
         for a bad key. The key is re-validated on every subsequent request, like a bearer token. In open mode \
         any key answers scope `open` and no cookie is set."
    );
    login["responses"]["200"]["description"] =
        json!("Logged in. Sets an HttpOnly tempora_session cookie (not in open mode).");
    login["responses"]["200"]["headers"]["Set-Cookie"]["description"] =
        json!("`tempora_session=<key>; HttpOnly; SameSite=Lax; Path=/` (plus `Secure` over HTTPS).");
    login["responses"]["413"] = resp("PayloadTooLarge");
    with_common_errors(&mut login["responses"], false);
    let logout = &mut paths["/api/session"]["delete"];
    logout["description"] = json!("Log out by clearing the tempora_session cookie.");
    logout["responses"]["200"]["description"] = json!("Logged out. Expires the tempora_session cookie.");
    logout["responses"]["200"]["headers"]["Set-Cookie"]["description"] =
        json!("Expired (Max-Age=0) tempora_session cookie.");
    with_common_errors(&mut logout["responses"], false);
}

/// What `/api/walk`, `/api/graph`, `/api/context` and `/api/ask` do beyond
/// the reference: bounds, extra parameters and fields, error answers.
fn recall_paths(paths: &mut Value) {
    use crate::recall::{context, graph, walk};
    let tenant_params = [param("Tenant"), param("TenantHeader")];
    let as_of = json!({
        "name": "as_of", "in": "query", "required": false,
        "description": "Time-travel instant in unix milliseconds.",
        "schema": {"type": "integer", "format": "int64"},
    });

    let w = &mut paths["/api/walk"]["get"];
    w["description"] = json!(format!(
        "Breadth-first walk from `start` over current facts whose object is an entity ref (`Type:id`), out of a \
         node (its facts), into it (facts pointing at it) or both; optionally only along `edge_types` and as of \
         a record time. Bounded: depth at most {}, at most `max_nodes` entities (default {}, at most {}), and \
         {} edges read per node and direction; a walk that hits a bound says `truncated`. Never crosses tenants.",
        walk::MAX_DEPTH,
        walk::DEFAULT_MAX_NODES,
        walk::MAX_NODES,
        walk::MAX_EDGES_PER_NODE
    ));
    let ps = w["parameters"].as_array_mut().expect("walkGraph has parameters");
    for p in ps.iter_mut() {
        match p["name"].as_str() {
            Some("start") => p["schema"]["pattern"] = json!("^[A-Za-z][A-Za-z0-9_-]*:\\S+$"),
            Some("depth") => {
                p["schema"] =
                    json!({"type": "integer", "minimum": 0, "maximum": walk::MAX_DEPTH, "default": walk::DEFAULT_DEPTH})
            }
            Some("direction") => p["schema"]["default"] = json!("out"),
            _ => {}
        }
    }
    ps.push(json!({
        "name": "max_nodes", "in": "query", "required": false,
        "description": "Stop after reaching this many entities (the start included).",
        "schema": {"type": "integer", "minimum": 1, "maximum": walk::MAX_NODES, "default": walk::DEFAULT_MAX_NODES},
    }));
    ps.extend(tenant_params.clone());
    w["responses"]["200"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("WalkResult"), {
        "type": "object",
        "properties": {
            "start": {"type": "string"},
            "depths": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "Hops from the start, by entity."},
            "truncated": {"type": "boolean", "description": "A bound stopped the walk."},
        },
    }]});
    with_common_errors(&mut w["responses"], true);

    let g = &mut paths["/api/graph"]["get"];
    g["description"] = json!(format!(
        "The tenant's entity graph: edges are current facts whose object is an entity ref, nodes the entities \
         at their ends with their degree. `q` keeps the entities and predicates containing it (case-insensitive) \
         plus their one-hop neighbourhood, at most {} nodes; `limit` keeps the top-N nodes by degree (ties by id) \
         and the edges between them. At most {} facts are read for one view (`truncated` says when there were more).",
        graph::FOCUS_CAP,
        graph::MAX_SCAN
    ));
    let ps = g["parameters"].as_array_mut().expect("getGraph has parameters");
    for p in ps.iter_mut() {
        if p["name"] == "limit" {
            p["schema"]["minimum"] = json!(0);
        }
    }
    ps.push(as_of.clone());
    ps.extend(tenant_params.clone());
    g["responses"]["400"] = resp("BadRequest");
    g["responses"]["200"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("Graph"), {
        "type": "object",
        "properties": {"truncated": {"type": "boolean"}},
    }]});
    with_common_errors(&mut g["responses"], true);

    let c = &mut paths["/api/context"]["post"];
    c["description"] = json!(format!(
        "{} Candidates: the seeds' active and candidate facts, facts pointing at the seeds, the current facts of \
         entities one hop out, and facts recalled for the goal. Ranked by 0.40 relevance to the goal (BM25 over \
         the candidates) + 0.25 closeness to the seeds (1.0 own fact, 0.8 pointing at a seed, 0.5 one hop out, 0.3 recalled for the goal only) + 0.20 confidence + 0.15 recency, ties by fact id, so \
         the same memory gives the same packet. Trimmed to `max_facts` (default {}, at most {}) and to \
         `token_budget`, where a fact costs the tokens of its rendered line (one per 4 bytes, at least one per \
         word). Warnings: conflict, candidate, low_confidence, expired, stale, budget. `pages`: the digested \
         documents (POST /api/digest) that mention the packet's entities, the seeds' first, newest first, at most \
         `max_pages` (default {}, at most {}; not counted in the token budget), each with a snippet of its body \
         (the first {} characters); a page's own facts are not among the packet's facts unless the page is a seed.",
        c["description"].as_str().unwrap_or_default(), context::DEFAULT_MAX_FACTS, context::MAX_FACTS,
        context::DEFAULT_MAX_PAGES, context::MAX_PAGES, context::SNIPPET_CHARS
    ));
    if let Some(ps) = c.get_mut("parameters").and_then(Value::as_array_mut) {
        ps.extend(tenant_params.clone());
    } else {
        c["parameters"] = json!(tenant_params.clone());
    }
    let props = &mut c["requestBody"]["content"]["application/json"]["schema"];
    *props = json!({"allOf": [schema("ContextRequest"), {
        "type": "object",
        "description": "At least one of: a seed, a goal that is not blank, a project. Unknown fields are refused (a misspelt field must not be silently ignored).",
        "additionalProperties": false,
        "anyOf": [
            {"required": ["seeds"], "properties": {"seeds": {"type": "array", "minItems": 1}}},
            {"required": ["goal"], "properties": {"goal": {"type": "string", "pattern": "\\S"}}},
            {"required": ["project"], "properties": {"project": {"type": "string"}}},
        ],
        "properties": {
            "seeds": {"type": "array", "maxItems": context::MAX_SEEDS},
            "goal": {"type": "string"},
            "project": {"type": ["string", "null"]},
            "as_of": {"type": ["integer", "null"], "format": "int64"},
            "token_budget": {"type": "integer", "minimum": 0},
            "max_facts": {"type": "integer", "minimum": 0},
            "max_pages": {"type": "integer", "minimum": 0, "description": "Values above the maximum are clamped to it; 0 asks for no pages."},
        },
    }]});
    c["responses"]["200"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("ContextPacket"), {
        "type": "object",
        "properties": {
            "goal": {"type": "string"},
            "candidates": {"type": "integer", "description": "Facts considered before ranking and trimming."},
            "ranking": {"type": "array", "description": "Why each selected fact is there, in the order of `facts`.", "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "score": {"type": "number"},
                    "relevance": {"type": "number"},
                    "origin": {"type": "string", "enum": ["seed", "inbound", "hop", "recall"]},
                    "recalled": {"type": "boolean", "description": "The goal's full-text recall found it too."},
                    "tokens": {"type": "integer"},
                },
            }},
        },
    }]});
    with_common_errors(&mut c["responses"], true);

    let a = &mut paths["/api/ask"]["post"];
    a["description"] = json!(
        "Answer a question from tenant-scoped evidence. With `model` (any OpenAI-compatible chat completions \
         endpoint: `base_url`, `api_key`, `model`, optional `temperature`, `max_tokens`, `timeout_ms`) the model \
         answers from the numbered evidence lines; the key is sent on that call only and never stored or logged. \
         Without `model` the answer is extractive and deterministic: the best evidence facts as sentences \
         (`mode: extractive`). `system_reliability` is the mean confidence of the evidence. A model that fails \
         answers 502 UpstreamError, one that times out 504 UpstreamTimeout; nothing is written either way."
    );
    if let Some(ps) = a.get_mut("parameters").and_then(Value::as_array_mut) {
        ps.extend(tenant_params.clone());
    } else {
        a["parameters"] = json!(tenant_params);
    }
    a["requestBody"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("AskRequest"), {
        "type": "object",
        "description": "Unknown fields are refused (a misspelt field must not be silently ignored).",
        "additionalProperties": false,
        "properties": {
            "question": {"type": "string", "pattern": "\\S"},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 100},
            "as_of": {"type": "integer", "format": "int64", "description": "Gather the evidence as memory stood at this time (unix ms)."},
            "model": model_config_schema(),
        },
    }]});
    a["responses"]["200"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("AskResponse"), {
        "type": "object",
        "properties": {"mode": {"type": "string", "enum": ["model", "extractive"]}},
    }]});
    a["responses"]["502"] = error_response(
        "The model endpoint failed or answered something unusable.",
        "UpstreamError",
        "the model endpoint answered HTTP 500: ...",
    );
    a["responses"]["504"] = error_response(
        "The model endpoint did not answer in time.",
        "UpstreamTimeout",
        "the model endpoint did not answer within 30000 ms",
    );
    with_common_errors(&mut a["responses"], true);
}

/// `/api/search`: the reference operations, with this server's ranking,
/// bounds and extensions.
fn search_paths(paths: &mut Value) {
    use crate::search::{DEFAULT_TOP_K, MAX_SEEDS, MAX_TOP_K};
    let description = format!(
        "Hybrid recall over the tenant's facts: BM25 full-text ranking over subject, predicate, object, source and \
         properties (the object weighs most), fused by reciprocal rank fusion (k = 60) with a graph-proximity list \
         when there are seeds (facts about or pointing at a seed, then at its direct neighbours; entity refs \
         `Type:id` named in the question count as seeds), and with a vector-similarity list when the operator \
         configured embeddings (if the question cannot be embedded, the answer comes from the other lists and \
         `unavailable` names `vector`). Every result is checked against the store: without \
         `as_of` only current active facts (and candidates with `include_candidates`), with `as_of` the facts that \
         were active at that record time. Read-your-writes: the search first waits (at most 2 s) until the index \
         holds every write committed before it; if it could not, `stale` is true and the \
         `X-Tempora-Index-Stale: true` header is set. `matches` says, in the order of `answer_facts`, why each \
         fact matched. `top_k` defaults to {DEFAULT_TOP_K}, at most {MAX_TOP_K}; an empty question answers 400."
    );
    let result = json!({"allOf": [schema("SearchResult"), {
        "type": "object",
        "required": ["kind", "question", "answer_facts", "matches", "entities", "terms", "stale"],
        "properties": {
            "kind": {"type": "string", "enum": ["search_result"]},
            "matches": {"type": "array", "description": "Why each fact matched, in the order of `answer_facts`.", "items": {
                "type": "object",
                "required": ["id", "score", "reasons", "ranks", "terms"],
                "properties": {
                    "id": {"type": "string"},
                    "score": {"type": "number", "description": "The fused score: the sum of 1 / (60 + rank) over the lists the fact is in."},
                    "reasons": {"type": "array", "items": {"type": "string", "enum": ["bm25", "graph", "vector"]}},
                    "ranks": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}, "description": "Rank (1-based) in each list."},
                    "terms": {"type": "array", "items": {"type": "string"}, "description": "Question terms the fact contains."},
                },
            }},
            "terms": {"type": "array", "items": {"type": "string"}, "description": "The question's index terms (lower-cased, stopwords dropped, lightly stemmed)."},
            "stale": {"type": "boolean", "description": "The index had not caught up with the writes made before the request within 2 s."},
            "unavailable": {"type": "array", "items": {"type": "string", "enum": ["vector"]}, "description": "Lists that could not be computed for this search (`vector`: the embeddings endpoint failed); the answer comes from the others. Absent when every list ran."},
        },
    }]});
    let stale_header = json!({
        "X-Tempora-Index-Stale": {
            "description": "`true` when the answer may miss writes committed just before the request.",
            "schema": {"type": "string", "enum": ["true"]},
        },
    });
    let extensions = json!({
        "seeds": {"type": "array", "maxItems": MAX_SEEDS, "items": {"type": "string"}, "description": "Entity refs (`Type:id`): facts about or pointing at them, or at their direct neighbours, get a graph-proximity boost."},
        "subject": {"type": "string", "description": "Only facts with exactly this subject."},
        "predicate": {"type": "string", "description": "Only facts with exactly this predicate."},
        "include_candidates": {"type": "boolean", "default": false, "description": "Also return candidate facts (below the confidence threshold)."},
    });

    let g = &mut paths["/api/search"]["get"];
    g["description"] = json!(description.clone());
    let ps = g["parameters"].as_array_mut().expect("search has parameters");
    for p in ps.iter_mut() {
        match p["name"].as_str() {
            Some("question") => {
                p["required"] = json!(true);
                p["description"] = json!("The question; its words are matched against the facts' words.");
                p["schema"]["pattern"] = json!("\\S");
            }
            Some("top_k") => {
                p["schema"] = json!({"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": DEFAULT_TOP_K})
            }
            _ => {}
        }
    }
    ps.extend([
        json!({"name": "seeds", "in": "query", "required": false, "description": "Comma-separated entity refs (`Type:id`) to boost facts near.", "schema": {"type": "string"}}),
        json!({"name": "subject", "in": "query", "required": false, "description": extensions["subject"]["description"].clone(), "schema": {"type": "string"}}),
        json!({"name": "predicate", "in": "query", "required": false, "description": extensions["predicate"]["description"].clone(), "schema": {"type": "string"}}),
        json!({"name": "include_candidates", "in": "query", "required": false, "description": extensions["include_candidates"]["description"].clone(), "schema": {"type": "boolean", "default": false}}),
        param("Tenant"),
        param("TenantHeader"),
    ]);
    g["responses"]["200"]["content"]["application/json"]["schema"] = result.clone();
    g["responses"]["200"]["headers"] = stale_header.clone();
    g["responses"]["400"] = resp("BadRequest");
    with_common_errors(&mut g["responses"], true);

    let p = &mut paths["/api/search"]["post"];
    p["description"] = json!(format!("{description} The same search as GET, with the parameters in a JSON body."));
    p["parameters"] = json!([param("Tenant"), param("TenantHeader")]);
    p["requestBody"]["required"] = json!(true);
    let mut props = json!({
        "question": {"type": "string", "pattern": "\\S"},
        "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": DEFAULT_TOP_K},
        "as_of": {"type": "integer", "format": "int64", "description": "Search memory as it stood at this record time (unix ms)."},
    });
    merge(&mut props, extensions);
    p["requestBody"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("SearchRequest"), {
        "type": "object",
        "required": ["question"],
        "properties": props,
    }]});
    p["responses"]["200"]["content"]["application/json"]["schema"] = result;
    p["responses"]["200"]["headers"] = stale_header;
    with_common_errors(&mut p["responses"], true);
}

/// A caller's model endpoint (`/api/ask`, `/api/digest`).
fn model_config_schema() -> Value {
    json!({
        "type": "object",
        "required": ["model"],
        "additionalProperties": false,
        "description": "An OpenAI-compatible chat completions endpoint. The key is sent on the call only and never stored or logged.",
        "properties": {
            "base_url": {"type": "string", "pattern": "^https?://"},
            "api_key": {"type": "string"},
            "model": {"type": "string", "pattern": "\\S"},
            "temperature": {"type": "number"},
            "max_tokens": {"type": "integer", "minimum": 0, "maximum": 4294967295_u64},
            "timeout_ms": {"type": "integer", "minimum": 0, "description": "Clamped to 100..600000 ms; default 30000."},
        },
    })
}

/// `POST /api/digest`: formats, masking, models, the receipt.
fn digest_paths(paths: &mut Value) {
    use crate::digest::{formats::CONTENT_TYPES, mask::Strategy, pages, MAX_FACTS};
    let d = &mut paths["/api/digest"]["post"];
    d["description"] = json!(format!(
        "Digest a document into facts, in one transaction (all of it lands or none). Structured content becomes \
         facts without any model: a JSON object or array of objects, JSON Lines, CSV (the header row names the \
         predicates), Markdown front matter and `key: value` lines. A record names its subject with `id`, \
         `subject` or a `Type:id` `@id` (CSV: an `id` column, else the first column), typed by its `type` field, \
         the request's `subject` type or `Record`; every other field is a predicate, and `Type:id` strings are \
         edges. A record that cannot be read or stored is rejected with its reason (`rejections`); the others \
         land. Every document is also kept as a page `Page:<uuid>` (title, body, source, content_type, and a \
         `mentions` edge to each entity it names) that context packets attach. With `extract_model` (or \
         `model`) a caller's OpenAI-compatible model proposes facts from the masked text and `judge_model` (or \
         `model`) scores them: the score is the fact's confidence, so facts under `threshold` land as \
         candidates. Keys are used for those calls only, never stored or logged; a model that fails answers 502 \
         UpstreamError, one that times out 504 UpstreamTimeout, and nothing is written. PII is masked before \
         anything is stored or sent: e-mails, phone numbers, Luhn-valid card numbers, mod-97-valid IBANs, IPv4 \
         and IPv6 addresses, US-SSN-shaped ids (`shift_date` also moves ISO dates by a per-tenant offset); \
         pattern-based, not a complete redaction guarantee (names and addresses are not detected). At most {MAX_FACTS} \
         facts per digest (400 beyond, nothing written)."
    ));
    if let Some(ps) = d.get_mut("parameters").and_then(Value::as_array_mut) {
        ps.extend([param("Tenant"), param("TenantHeader")]);
    }
    d["requestBody"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("DigestRequest"), {
        "type": "object",
        "required": ["content"],
        "description": "Unknown fields are refused (a misspelt field must not be silently ignored).",
        "additionalProperties": false,
        "properties": {
            "content": {"type": "string", "pattern": "\\S", "description": "The document (at most the request body limit)."},
            "content_type": {"type": "string", "enum": CONTENT_TYPES, "default": "text/markdown"},
            "source": {"type": "string", "maxLength": tempora_storage::MAX_SOURCE_BYTES, "default": "upload"},
            "threshold": {"type": "number", "minimum": 0, "maximum": 1, "description": "Facts whose confidence is below it land as candidates; default: the tenant's threshold (0.75)."},
            "mask": {"type": "string", "enum": Strategy::NAMES, "default": "redact", "description": "`none` (an extension) stores the content as sent."},
            "subject": {
                "type": "string",
                "pattern": "^[A-Za-z][A-Za-z0-9_-]*(:\\S+)?$",
                "description": "Extension. An entity ref (`Person:sarah`): what records without an id (and a Markdown document without a front matter subject) are about. A type name (`Person`): the type of records without a `type` field.",
            },
            "extract_model": model_config_schema(),
            "judge_model": model_config_schema(),
            "model": model_config_schema(),
        },
    }]});
    let rejection = json!({
        "type": "object",
        "required": ["record", "origin", "reason"],
        "properties": {
            "record": {"type": "integer", "minimum": 1, "description": "1-based: the content's records in order, then the extractor's proposals."},
            "line": {"type": "integer", "minimum": 1, "description": "The content line the record starts on (JSON Lines, CSV, Markdown)."},
            "origin": {"type": "string", "enum": ["content", "extract"]},
            "reason": {"type": "string"},
        },
    });
    let ok = &mut d["responses"]["200"];
    ok["content"]["application/json"]["schema"] = json!({"allOf": [schema("IngestReceipt"), {
        "type": "object",
        "required": ["records", "asserted", "candidates", "rejected", "rejections", "facts", "page", "mentions", "tx"],
        "properties": {
            "records": {"type": "integer", "minimum": 0},
            "asserted": {"type": "integer", "minimum": 0, "description": "Content facts stored active (the page's own facts are not counted)."},
            "candidates": {"type": "integer", "minimum": 0},
            "rejected": {"type": "integer", "minimum": 0, "description": "Records rejected."},
            "rejections": {"type": "array", "items": rejection},
            "facts": {"type": "array", "items": {"type": "string"}, "description": "Ids of the content facts, in record order."},
            "page": {"type": "string", "pattern": "^Page:", "description": "The page kept for the document."},
            "title": {"type": "string"},
            "mentions": {"type": "array", "items": {"type": "string"}, "description": format!("Entities the page links to with `mentions` (at most {}).", pages::MAX_MENTIONS)},
            "mentions_truncated": {"type": "boolean"},
            "body_truncated": {"type": "boolean", "description": "The document was longer than a page body holds (256 KiB)."},
            "content_type": {"type": "string"},
            "source": {"type": "string"},
            "mask": {"type": "string"},
            "masked": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "Items masked in the document, by kind (email, phone, card, iban, ip, national_id, date)."},
            "mode": {"type": "string", "enum": ["structured", "model"]},
            "threshold": {"type": "number"},
            "tokens": {"type": "object", "properties": {"in": {"type": "integer"}, "out": {"type": "integer"}}},
            "tx": {"type": "integer"},
            "recorded_at": {"type": "integer"},
        },
    }]});
    ok["headers"] = replayed_header();
    d["responses"]["413"] = resp("PayloadTooLarge");
    d["responses"]["502"] = error_response(
        "A model endpoint failed or answered something unusable; nothing was written.",
        "UpstreamError",
        "the model endpoint answered HTTP 500: ...",
    );
    d["responses"]["504"] = error_response(
        "A model endpoint did not answer in time; nothing was written.",
        "UpstreamTimeout",
        "the model endpoint did not answer within 30000 ms",
    );
    with_common_errors(&mut d["responses"], true);
}

/// `/api/connectors` (docs/connectors.md).
fn connector_paths(paths: &mut Value) {
    use crate::connectors::{ingest, MAX_EVERY_SECS, MAX_NAME_LEN, MIN_EVERY_SECS};
    use crate::digest::mask::Strategy;
    let name_pattern = format!("^[A-Za-z0-9_.-]{{1,{MAX_NAME_LEN}}}$");
    let name_param = json!({
        "name": "name", "in": "path", "required": true,
        "description": "The connector's name.",
        "schema": {"type": "string", "pattern": name_pattern},
    });
    let connector = json!({"allOf": [schema("Connector"), {
        "type": "object",
        "required": ["name", "kind", "label", "url", "subject", "fields", "mask", "ingested", "source", "entity", "last_pull"],
        "properties": {
            "name": {"type": "string"},
            "kind": {"type": "string", "enum": crate::connectors::KINDS},
            "label": {"type": "string", "description": "The label, or the name when none was given."},
            "url": {"type": ["string", "null"]},
            "subject": {"type": "string", "description": "The subject mapping as registered; empty: the records decide."},
            "fields": {"description": "Which fields become predicates: null (all), a list, or field -> predicate."},
            "mask": {"type": "string", "enum": Strategy::NAMES},
            "confidence": {"type": ["number", "null"]},
            "every_secs": {"type": ["integer", "null"]},
            "ingested": {"type": "integer", "minimum": 0, "description": "Live facts (active and held candidates) whose source is the connector's, now: superseded and retracted ones are not counted."},
            "source": {"type": "string", "description": "`connector:<name>`: the source of every fact the connector writes."},
            "entity": {"type": "string", "description": "`Connector:<name>`: the entity whose facts are the settings (their history is the connector's)."},
            "created_at": {"type": "integer"},
            "updated_at": {"type": "integer"},
            "last_pull": {
                "type": ["object", "null"],
                "description": "The last pull (requested or scheduled); null if never pulled.",
                "properties": {
                    "at": {"type": "integer"}, "ok": {"type": "boolean"}, "duration_ms": {"type": "integer"},
                    "error": {"type": "string"}, "records": {"type": "integer"}, "asserted": {"type": "integer"},
                    "candidates": {"type": "integer"}, "unchanged": {"type": "integer"}, "rejected": {"type": "integer"},
                    "trigger": {"type": "string", "enum": ["request", "schedule"]},
                },
            },
        },
    }]});

    let list = &mut paths["/api/connectors"]["get"];
    list["description"] = json!("The tenant's connectors by name, each with its settings, the live count of the facts it ingested and its last pull.");
    list["parameters"] = json!([param("Tenant"), param("TenantHeader")]);
    list["responses"]["200"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("ConnectorList"), {
        "type": "object", "required": ["connectors"],
        "properties": {"connectors": {"type": "array", "items": connector.clone()}},
    }]});
    with_common_errors(&mut list["responses"], true);

    let reg = &mut paths["/api/connectors"]["post"];
    reg["description"] = json!(format!(
        "Register a connector, or update one: the body is the whole configuration (a setting left out is \
         removed). Settings are facts about `Connector:<name>` (`connector.kind`, `connector.url`, ...): a changed one supersedes its old value, so the \
         configuration's history is kept. `kind` is `webhook` (deliveries are POSTed to .../events) or `pull` \
         (the server fetches `url`, needs a url; the default when `every_secs` is given). `url` is http(s), \
         without credentials; a literal non-public address is refused now, a name when it is pulled. `subject` \
         maps records to their subject: a template (`Person:{{id}}`, placeholders are record fields and do not \
         also become facts), a type name (`Person`: records are `Person:<id>`), one entity (`Org:acme`), or \
         unset (each record's `id` / `subject` / `type` fields decide, as in /api/digest). `fields` picks the \
         predicates: a list of field names, or an object field -> predicate; unset: every field. `mask` masks PII \
         before anything is stored (default redact). `confidence` is given to every fact (below the tenant's \
         threshold they land as candidates). `every_secs` ({MIN_EVERY_SECS} (`[connectors] min_every_secs`) to \
         {MAX_EVERY_SECS}) schedules pulls."
    ));
    reg["parameters"] = json!([param("Tenant"), param("TenantHeader")]);
    reg["requestBody"]["content"]["application/json"]["schema"] = json!({"allOf": [schema("ConnectorInput"), {
        "type": "object",
        "required": ["name"],
        "additionalProperties": false,
        "description": "Unknown fields are refused.",
        "properties": {
            "name": {"type": "string", "pattern": name_pattern},
            "kind": {"type": "string", "enum": crate::connectors::KINDS},
            "label": {"type": "string", "maxLength": 200},
            "url": {"type": ["string", "null"], "pattern": "^https?://[^\\s/@]+(/\\S*)?$"},
            "subject": {"type": ["string", "null"], "description": "`Person:{id}`, `Person` or `Org:acme`."},
            "fields": {"description": "A list of field names or an object field -> predicate; null: every field.", "oneOf": [
                {"type": "null"},
                {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string", "minLength": 1}},
            ]},
            "mask": {"type": "string", "enum": Strategy::NAMES, "default": "redact"},
            "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "every_secs": {"type": ["integer", "null"], "minimum": MIN_EVERY_SECS, "maximum": MAX_EVERY_SECS},
        },
    }]});
    reg["responses"]["200"]["content"]["application/json"]["schema"] = connector;
    reg["responses"]["400"] = resp("BadRequest");
    with_common_errors(&mut reg["responses"], true);

    let rejection = json!({
        "type": "object", "required": ["record", "line", "reason"],
        "properties": {"record": {"type": "integer"}, "line": {"type": "integer"}, "reason": {"type": "string"}},
    });
    let receipt = json!({"allOf": [schema("IngestReceipt"), {
        "type": "object",
        "required": ["connector", "source", "delivery", "records", "asserted", "candidates", "unchanged", "rejected", "rejections", "transactions", "bytes"],
        "properties": {
            "connector": {"type": "string"},
            "source": {"type": "string"},
            "delivery": {"type": "string", "description": "This delivery's id, also in each fact's properties."},
            "records": {"type": "integer", "minimum": 0},
            "asserted": {"type": "integer", "minimum": 0, "description": "Facts stored active."},
            "candidates": {"type": "integer", "minimum": 0},
            "unchanged": {"type": "integer", "minimum": 0, "description": "Records that repeat what is stored (nothing written)."},
            "rejected": {"type": "integer", "minimum": 0},
            "rejections": {"type": "array", "items": rejection, "maxItems": ingest::MAX_LISTED_REJECTIONS},
            "rejections_truncated": {"type": "boolean"},
            "transactions": {"type": "integer", "minimum": 0},
            "first_tx": {"type": "integer"},
            "last_tx": {"type": "integer"},
            "bytes": {"type": "integer", "minimum": 0},
        },
    }]});

    let ev = &mut paths["/api/connectors/{name}/events"]["post"];
    ev["description"] = json!(format!(
        "Deliver records: one JSON object, a JSON array of objects (or objects one after another), JSON Lines \
         (`application/x-ndjson`) or CSV (`text/csv`, header row = field names). The body is read as it \
         arrives (not held whole; CSV excepted, at most {} bytes) and written in transactions of about {} facts, \
         so a delivery may be far larger than other requests: up to `[connectors] max_ingest_bytes` (default \
         256 MiB) and `max_records` (1,000,000); a single record up to `max_record_bytes` (1 MiB). Each record \
         lands whole or is rejected with its reason and line; a record that repeats what is stored writes \
         nothing (`unchanged`). Over a bound the delivery stops with 413: the records before it are stored, \
         and the message says how many. With `Idempotency-Key` the receipt is stored with the delivery's last \
         write and replayed to retries.",
        ingest::MAX_CSV_BYTES,
        ingest::CHUNK_FACTS
    ));
    ev["parameters"] = json!([name_param.clone(), param("IdempotencyKey"), param("Tenant"), param("TenantHeader")]);
    ev["requestBody"]["content"]["application/json"]["schema"] = json!({
        "description": "One JSON object, an array of objects, or objects one after another. Any JSON is read: \
                        a record that is not an object is rejected in the receipt, not the delivery.",
    });
    ev["requestBody"]["content"]["text/csv"] =
        json!({"schema": {"type": "string", "minLength": 1, "description": "CSV with a header row."}});
    ev["requestBody"]["content"]["application/x-ndjson"]["schema"] =
        json!({"type": "string", "minLength": 1, "description": "JSON Lines: one event object per line."});
    ev["responses"]["200"]["content"]["application/json"]["schema"] = receipt.clone();
    ev["responses"]["200"]["headers"] = replayed_header();
    ev["responses"]["400"] = resp("BadRequest");
    ev["responses"]["413"] = error_response(
        "The delivery is over a bound (bytes or records); the records before it are stored.",
        "PayloadTooLarge",
        "the body is larger than the limit of 268435456 bytes; the 1200 records read before it: ... are stored",
    );
    ev["responses"]["415"] = error_response(
        "The body is not JSON, JSON Lines or CSV.",
        "UnsupportedMediaType",
        "events are JSON (application/json), JSON Lines (application/x-ndjson) or CSV (text/csv), not \"application/xml\"",
    );
    with_common_errors(&mut ev["responses"], true);

    let pull = &mut paths["/api/connectors/{name}/pull"]["post"];
    pull["description"] = json!(
        "Pull the connector's url now and ingest the answer (JSON, JSON Lines or CSV, by its content type) like a \
         delivery. The SSRF guard: the host is resolved once, every address checked and the connection pinned to \
         them; loopback, private, link-local (cloud metadata), CGNAT, multicast, unspecified, reserved and \
         documentation ranges, IPv4 and IPv6 (v4-mapped, 6to4, NAT64 and Teredo included), are refused unless \
         `[outbound] allow` names them. Redirects are followed by hand (at most `[connectors] max_redirects`, \
         default 5), each hop checked the same way. The body is bounded by `max_ingest_bytes`, the whole pull \
         by `pull_timeout_secs` (default 60). The outcome is kept as the connector's `last_pull`."
    );
    pull["parameters"] = json!([name_param, param("Tenant"), param("TenantHeader")]);
    pull["responses"]["200"]["content"]["application/json"]["schema"] = receipt;
    pull["responses"]["409"] = error_response(
        "The connector has no url to pull.",
        "Conflict",
        "connector hr-feed has no url to pull; register it with one",
    );
    pull["responses"]["400"] = error_response(
        "The url (or a redirect) is refused by the outbound policy.",
        "SchemaInvalid",
        "redirect 1 refused: 169.254.169.254 is a private, loopback or otherwise non-public address ...",
    );
    pull["responses"]["502"] = error_response(
        "The source could not be reached, answered an HTTP error or something that is not records, redirected too often, or sent more than the limit (records before the limit are stored).",
        "UpstreamError",
        "the source answered HTTP 500 Internal Server Error",
    );
    pull["responses"]["504"] =
        error_response("The pull did not finish in time.", "UpstreamTimeout", "the pull did not finish within 60 s");
    with_common_errors(&mut pull["responses"], true);
}

/// Monitoring: `/api/alerts*` and `/api/reports*` (docs/monitoring.md).
fn monitor_paths(doc: &mut Value) {
    use crate::http::reports::{MAX_EVERY_SECS, MAX_RUNS};
    use crate::monitor::reports::{BLOCK_TYPES, MAX_BLOCKS, MAX_LIMIT, MAX_NAME, MAX_TEXT, STATUS_PATTERN};
    use crate::monitor::rules::{
        MAX_BASELINE_WINDOWS, MAX_BUDGET, MAX_COUNT, MAX_FACTOR, MAX_PREDICATE_CHARS, MAX_TTL_MS, MAX_TTL_PREDICATES,
        MAX_WINDOW_MS,
    };
    use crate::monitor::time::{DURATION_PATTERN, ISO_PATTERN};
    let s = &mut doc["components"]["schemas"];
    merge(&mut s["Alert"], json!({
        "description": "A trust alert (monitoring on confidence, freshness, drift, cost). Stored as facts of the subject `Alert:<id>` (`alert.state`, `alert.rule`, ...), so its state transitions are bitemporal history: acking supersedes the `open` state fact with an `acked` one.",
        "required": ["subject", "object", "id", "state", "rule", "key", "message", "value", "limit", "fired_at", "fact_id", "tx"],
        "properties": {
            "subject": {"type": "string", "pattern": "^Alert:", "description": "`Alert:<id>`."},
            "object": {"type": "string", "enum": ["open", "acked", "resolved"], "description": "The alert's state (the object of its `alert.state` fact)."},
            "id": {"type": "string", "format": "uuid"},
            "state": {"type": "string", "enum": ["open", "acked", "resolved"]},
            "rule": {"type": "string", "enum": ["confidence", "freshness", "drift", "cost"]},
            "key": {"type": "string", "description": "What the alert is about: `candidates` (confidence), the predicate (freshness), `supersessions` (drift), `tokens` (cost)."},
            "message": {"type": "string"},
            "value": {"description": "The measured value when it fired."},
            "limit": {"description": "The limit it was measured against."},
            "fired_at": {"type": "integer", "format": "int64"},
            "acked_at": {"type": "integer", "format": "int64"},
            "resolved_at": {"type": "integer", "format": "int64"},
            "fact_id": {"type": "string", "format": "uuid", "description": "The fact holding the current state (its history shows the earlier states)."},
            "tx": {"type": "integer", "description": "The transaction that wrote the current state."},
        },
    }));
    let block_limit = |default: usize| json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": default});
    let text = json!({"type": "string", "maxLength": MAX_TEXT, "pattern": NAME_PATTERN});
    s["ReportBlock"] = json!({
        "description": format!("One block of a report (`type`: {}). Unknown fields are refused.", BLOCK_TYPES.join(", ")),
        "oneOf": [
            {"type": "object", "title": "stats", "required": ["type"], "additionalProperties": false, "description": "The tenant's fact counts (like GET /api/stats).",
             "properties": {"type": {"type": "string", "enum": ["stats"]}}},
            {"type": "object", "title": "facts", "required": ["type"], "additionalProperties": false, "description": "A fact query (default: current facts; the monitor's own subjects only when `subject` names one).",
             "properties": {"type": {"type": "string", "enum": ["facts"]}, "subject": text.clone(), "predicate": text,
                            "status": {"type": "string", "pattern": STATUS_PATTERN, "description": "`all`, or a comma-separated list of statuses; default active."},
                            "limit": block_limit(20)}},
            {"type": "object", "title": "changes", "required": ["type"], "additionalProperties": false, "description": "Changes recorded since a time.",
             "properties": {"type": {"type": "string", "enum": ["changes"]},
                            "since": {"description": "Unix ms, an ISO date/time (UTC), or a duration back from the run (`24h`, `90m`, `7d`); default `24h`.",
                                      "oneOf": [{"type": "integer", "format": "int64"}, {"type": "string", "pattern": DURATION_PATTERN}, {"type": "string", "pattern": ISO_PATTERN}]},
                            "limit": block_limit(50)}},
            {"type": "object", "title": "alerts", "required": ["type"], "additionalProperties": false, "description": "The open and acked alerts.",
             "properties": {"type": {"type": "string", "enum": ["alerts"]}}},
            {"type": "object", "title": "top_entities", "required": ["type"], "additionalProperties": false, "description": "Entities by degree (edges are current facts whose object is an entity ref).",
             "properties": {"type": {"type": "string", "enum": ["top_entities"]}, "limit": block_limit(10)}},
        ],
    });
    let schedule = json!({
        "oneOf": [
            {"type": "null"},
            {"type": "object", "required": ["every_secs"], "additionalProperties": false,
             "properties": {"every_secs": {"type": "integer", "minimum": 1, "maximum": MAX_EVERY_SECS}}},
        ],
        "description": "Run by itself every `every_secs` seconds (checked at the monitor's interval), or null.",
    });
    s["ReportInput"] = json!({
        "type": "object",
        "required": ["name", "blocks"],
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string", "maxLength": MAX_NAME, "pattern": NAME_PATTERN},
            "blocks": {"type": "array", "minItems": 1, "maxItems": MAX_BLOCKS, "items": schema("ReportBlock")},
            "schedule": schedule.clone(),
        },
    });
    merge(&mut s["Report"], json!({
        "required": ["subject", "id", "name", "blocks", "schedule", "created_at", "last_run"],
        "properties": {
            "subject": {"type": "string", "pattern": "^Report:"},
            "id": {"type": "string", "format": "uuid"},
            "name": {"type": "string"},
            "blocks": {"type": "array", "items": {"type": "object"}},
            "schedule": schedule,
            "created_at": {"type": "integer", "format": "int64"},
            "last_run": {"oneOf": [{"type": "null"}, {"type": "object", "required": ["run", "ran_at"], "properties": {"run": {"type": "string", "pattern": "^ReportRun:"}, "ran_at": {"type": "integer"}}}]},
        },
    }));
    s["ReportRun"] = json!({
        "type": "object",
        "description": "One run of a report, kept as facts of `ReportRun:<id>`. Outputs and Markdown longer than a stored value holds (192 KiB each) are shortened; `truncated` says so.",
        "required": ["run", "id", "report", "ran_at", "output", "markdown", "truncated"],
        "properties": {
            "run": {"type": "string", "pattern": "^ReportRun:"},
            "id": {"type": "string", "format": "uuid"},
            "report": {"type": "string", "pattern": "^Report:"},
            "ran_at": {"type": "integer", "format": "int64"},
            "output": {"type": "object", "required": ["blocks"], "properties": {"blocks": {"type": "array", "items": {"type": "object", "required": ["type"]}}}},
            "markdown": {"type": "string"},
            "truncated": {"type": "boolean"},
            "tx": {"type": "integer"},
        },
    });
    let count = json!({"type": "integer", "minimum": 0, "maximum": MAX_COUNT});
    s["AlertRules"] = json!({
        "type": "object",
        "description": "A tenant's alert rules: the server's [monitor] defaults with the tenant's overrides on top.",
        "required": ["confidence", "freshness", "drift", "cost"],
        "properties": {
            "confidence": {"type": "object", "required": ["enabled", "max_share", "min_facts"], "properties": {"enabled": {"type": "boolean"}, "max_share": {"type": "number"}, "min_facts": {"type": "integer"}}},
            "freshness": {"type": "object", "required": ["enabled", "ttl_ms"], "properties": {"enabled": {"type": "boolean"}, "ttl_ms": {"type": "object", "additionalProperties": {"type": "integer"}}}},
            "drift": {"type": "object", "required": ["enabled", "window_ms", "baseline_windows", "factor", "min_count"], "properties": {"enabled": {"type": "boolean"}, "window_ms": {"type": "integer"}, "baseline_windows": {"type": "integer"}, "factor": {"type": "number"}, "min_count": {"type": "integer"}}},
            "cost": {"type": "object", "required": ["enabled", "daily_token_budget"], "properties": {"enabled": {"type": "boolean"}, "daily_token_budget": {"type": ["integer", "null"]}}},
        },
    });
    s["AlertRulesInput"] = json!({
        "type": "object",
        "additionalProperties": false,
        "description": "Overrides of the defaults; a section or field left out keeps the default. Replaces the tenant's earlier overrides. Unknown fields are refused.",
        "properties": {
            "confidence": {"type": "object", "additionalProperties": false, "properties": {
                "enabled": {"type": "boolean"},
                "max_share": {"type": "number", "minimum": 0, "maximum": 1, "description": "Fires when candidates are more than this share of the live facts."},
                "min_facts": {"allOf": [count.clone()], "description": "Live facts needed before the rule applies."},
            }},
            "freshness": {"type": "object", "additionalProperties": false, "properties": {
                "enabled": {"type": "boolean"},
                "ttl_ms": {"type": "object", "maxProperties": MAX_TTL_PREDICATES,
                           "propertyNames": {"maxLength": MAX_PREDICATE_CHARS, "pattern": NAME_PATTERN},
                           "additionalProperties": {"type": "integer", "minimum": 1, "maximum": MAX_TTL_MS},
                           "description": "Predicate -> TTL in ms: active facts of it last confirmed (the later of valid_from and the record time) longer ago fire one alert per predicate."},
            }},
            "drift": {"type": "object", "additionalProperties": false, "properties": {
                "enabled": {"type": "boolean"},
                "window_ms": {"type": "integer", "minimum": 1, "maximum": MAX_WINDOW_MS},
                "baseline_windows": {"type": "integer", "minimum": 1, "maximum": MAX_BASELINE_WINDOWS},
                "factor": {"type": "number", "minimum": 1, "maximum": MAX_FACTOR},
                "min_count": {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
            }},
            "cost": {"type": "object", "additionalProperties": false, "properties": {
                "enabled": {"type": "boolean"},
                "daily_token_budget": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_BUDGET, "description": "Model tokens per UTC day; null: no budget (the rule is off)."},
            }},
        },
    });
    let day = json!({"type": "object", "required": ["day", "tokens_in", "tokens_out", "tokens", "calls"], "properties": {
        "day": {"type": "string"}, "tokens_in": {"type": "integer"}, "tokens_out": {"type": "integer"}, "tokens": {"type": "integer"}, "calls": {"type": "integer"}}});
    s["TokenUsage"] = json!({
        "type": "object",
        "required": ["today", "daily_token_budget", "days"],
        "properties": {
            "today": day.clone(),
            "daily_token_budget": {"type": ["integer", "null"]},
            "days": {"type": "array", "items": day, "description": "The last 30 days with usage, newest first."},
        },
    });
    s["AlertEvaluation"] = json!({
        "type": "object",
        "required": ["fired", "resolved", "unchanged", "checks", "tx"],
        "properties": {
            "fired": {"type": "array", "items": schema("Alert")},
            "resolved": {"type": "array", "items": schema("Alert")},
            "unchanged": {"type": "array", "items": schema("Alert"), "description": "Open or acked alerts whose condition still holds (not fired again)."},
            "checks": {"type": "array", "items": {"type": "object", "required": ["rule", "key", "firing", "value", "limit", "message"], "properties": {
                "rule": {"type": "string"}, "key": {"type": "string"}, "firing": {"type": "boolean"}, "value": {}, "limit": {}, "message": {"type": "string"}}}},
            "tx": {"type": ["integer", "null"], "description": "The transaction that wrote the changes; null when nothing changed."},
        },
    });

    let tenant = || [param("Tenant"), param("TenantHeader")];
    let ok = |description: &str, body: Value| json!({"description": description, "content": json_content(body)});
    let ok_replayable = |description: &str, body: Value| {
        json!({"description": description, "content": json_content(body), "headers": replayed_header()})
    };
    let id_param = |what: &str| json!({
        "name": "id", "in": "path", "required": true,
        "description": format!("The {what} id (a UUID, or `{what}:<uuid>`); anything else answers 404."),
        "schema": {"type": "string"},
    });
    let op = |id: &str, summary: &str, description: &str, params: Vec<Value>, responses: Value| {
        let mut o = json!({
            "operationId": id, "tags": ["Monitoring"], "summary": summary, "description": description,
            "parameters": params, "responses": responses, "x-tempora-extension": true,
        });
        o["responses"]["400"] = resp("BadRequest");
        with_common_errors(&mut o["responses"], true);
        o
    };
    let paths = &mut doc["paths"];

    let list = &mut paths["/api/alerts"]["get"];
    list["description"] = json!(
        "The tenant's alerts, newest first: open and acked by default. Alerts are facts (`Alert:<id>`), so acking \
         supersedes the `open` state fact with an `acked` one and the earlier state stays in history. Rules \
         (confidence, freshness, drift, cost) are evaluated in the background every [monitor] interval_secs and by \
         POST /api/alerts/evaluate; an alert does not fire again while its condition holds, and is resolved when it \
         clears."
    );
    let mut ps = vec![json!({
        "name": "state", "in": "query", "required": false,
        "description": "`open`, `acked`, `resolved` or `all`; default open and acked.",
        "schema": {"type": "string", "enum": ["open", "acked", "resolved", "all"]},
    })];
    ps.extend(tenant());
    list["parameters"] = json!(ps);
    list["responses"]["200"]["content"]["application/json"]["schema"] = json!({"type": "array", "items": schema("Alert")});
    list["responses"]["400"] = resp("BadRequest");
    with_common_errors(&mut list["responses"], true);

    let with_idem = |mut v: Vec<Value>| {
        v.push(param("IdempotencyKey"));
        v
    };
    paths["/api/alerts/evaluate"]["post"] = op(
        "evaluateAlerts",
        "Evaluate the alert rules now",
        "Runs the caller's tenant's rules now: fires alerts whose condition holds and that have no open or acked alert, resolves open and acked alerts whose condition cleared, in one transaction. Every rule's measurement is in `checks`.",
        with_idem(tenant().to_vec()),
        json!({"200": ok_replayable("What fired and resolved.", schema("AlertEvaluation"))}),
    );
    let mut ack_params = vec![id_param("Alert")];
    ack_params.extend(tenant());
    paths["/api/alerts/{id}/ack"]["post"] = op(
        "ackAlert",
        "Acknowledge an alert",
        "Supersedes the alert's `open` state with `acked` (the open state stays in history). Acking an acked alert answers it as it is and writes nothing; a resolved alert cannot be acked (400 Conflict).",
        with_idem(ack_params),
        json!({"200": ok_replayable("The acked alert.", schema("Alert"))}),
    );
    let get_rules = op(
        "getAlertRules",
        "The tenant's alert rules",
        "The effective rules: the server's [monitor] defaults with the tenant's overrides.",
        tenant().to_vec(),
        json!({"200": ok("The rules.", schema("AlertRules"))}),
    );
    paths["/api/alerts/rules"]["get"] = get_rules;
    let mut put_rules = op(
        "putAlertRules",
        "Set the tenant's alert rules",
        "Stores the overrides (as the fact `AlertRules:current alert_rules.overrides`, so earlier rules stay in history) and answers the effective rules.",
        tenant().to_vec(),
        json!({"200": ok("The effective rules.", schema("AlertRules"))}),
    );
    put_rules["requestBody"] = json!({"required": true, "content": json_content(schema("AlertRulesInput"))});
    put_rules["responses"]["413"] = resp("PayloadTooLarge");
    paths["/api/alerts/rules"]["put"] = put_rules;
    let usage = op(
        "getTokenUsage",
        "Model-token usage",
        "Tokens the tenant's model calls (/api/digest, /api/ask) used today and on the last 30 days (UTC), and the cost rule's budget.",
        tenant().to_vec(),
        json!({"200": ok("Usage.", schema("TokenUsage"))}),
    );
    paths["/api/alerts/usage"]["get"] = usage;

    let reports = &mut paths["/api/reports"]["get"];
    reports["description"] = json!("The tenant's reports, oldest first. A report is blocks (stats, facts, changes, alerts, top_entities) run against the tenant's data by POST /api/reports/{id}/run or by its schedule; runs are kept as facts.");
    reports["parameters"] = json!(tenant());
    reports["responses"]["200"]["content"]["application/json"]["schema"] = json!({"type": "array", "items": schema("Report")});
    reports["responses"]["400"] = resp("BadRequest");
    with_common_errors(&mut reports["responses"], true);
    let mut create = op(
        "createReport",
        "Create a report",
        "Checks every block up front (an unknown type or a bad parameter answers 400 naming `blocks[i].field`) and stores the report as facts of `Report:<id>`.",
        with_idem(tenant().to_vec()),
        json!({"201": ok_replayable("The report.", schema("Report"))}),
    );
    create["requestBody"] = json!({"required": true, "content": json_content(schema("ReportInput"))});
    create["responses"]["413"] = resp("PayloadTooLarge");
    create["responses"]["201"]["links"] = json!({
        "GetReport": {"operationId": "getReport", "parameters": {"id": "$response.body#/id"}},
        "RunReport": {"operationId": "runReport", "parameters": {"id": "$response.body#/id"}},
        "ListReportRuns": {"operationId": "listReportRuns", "parameters": {"id": "$response.body#/id"}},
    });
    paths["/api/reports"]["post"] = create;
    let mut rp = vec![id_param("Report")];
    rp.extend(tenant());
    let get_report = op("getReport", "One report", "The report.", rp.clone(), json!({"200": ok("The report.", schema("Report"))}));
    paths["/api/reports/{id}"]["get"] = get_report;
    paths["/api/reports/{id}/run"]["post"] = op(
        "runReport",
        "Run a report now",
        "Runs every block against the tenant's data now and keeps the run as facts of `ReportRun:<id>` (output JSON and Markdown).",
        with_idem(rp.clone()),
        json!({"200": ok_replayable("The run.", schema("ReportRun"))}),
    );
    let mut runs_params = rp;
    runs_params.push(json!({"name": "limit", "in": "query", "required": false, "description": "Runs to answer, newest first.", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_RUNS, "default": 20}}));
    paths["/api/reports/{id}/runs"]["get"] = op(
        "listReportRuns",
        "A report's runs",
        "The report's runs, newest first.",
        runs_params,
        json!({"200": ok("Runs.", json!({"type": "array", "items": schema("ReportRun")}))}),
    );
}

/// `/mcp` (Streamable HTTP, docs/mcp.md) and its manifest.
fn mcp_paths(paths: &mut Value) {
    let rpc_error =
        |description: &str| json!({"description": description, "content": json_content(schema("JsonRpcResponse"))});
    let post = &mut paths["/mcp"]["post"];
    post["description"] = json!(
        "Model Context Protocol over Streamable HTTP (JSON-RPC 2.0), stateless: every POST carries one JSON-RPC \
         message and gets one `application/json` answer; no `Mcp-Session-Id` is issued. Methods: `initialize` \
         (echoes a supported `protocolVersion`: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25; else answers \
         2025-11-25), `ping`, `tools/list`, `tools/call`, and `server/discover` (protocol 2026-07-28). \
         Notifications answer 202 with an empty body. An unknown method is JSON-RPC error -32601, an unknown tool \
         or a `tools/call` without a tool name -32602; a tool that fails answers a result with `isError: true`. \
         Batches, malformed JSON and messages that are not JSON-RPC 2.0 answer 400 with a JSON-RPC error, as does \
         an unsupported `MCP-Protocol-Version` header. A foreign `Origin` answers 403. Tools: build_context (call \
         it first), remember, recall, recall_as_of, whats_changed, explain_fact, digest; their schemas are in \
         `tools/list` and `/.well-known/mcp.json`. GET answers 405 with `Allow: POST, DELETE` (no \
         server-initiated stream). `namespace` names the tenant: a tenant key is pinned to its \
         own, an admin token must name one. `Idempotency-Key` makes remember and digest replay their first answer."
    );
    // Any method: notifications of any method are accepted (202), unknown
    // request methods answer -32601.
    post["requestBody"]["content"]["application/json"]["schema"] = json!({
        "type": "object",
        "description": "One JSON-RPC 2.0 message (a request, or a notification without an id).",
        "required": ["jsonrpc", "method"],
        "properties": {
            "jsonrpc": {"type": "string", "const": "2.0"},
            "id": {"type": ["string", "integer"], "description": "Request id (0 included); omit for notifications."},
            "method": {"type": "string", "description": "initialize, ping, tools/list, tools/call, server/discover, or a notification (notifications/initialized, ...)."},
            "params": {"type": "object", "additionalProperties": true, "description": "For tools/call: { name, arguments }."},
        },
    });
    let responses = obj(&mut post["responses"]);
    responses.insert("202".into(), json!({"description": "A notification was accepted (empty body)."}));
    responses.insert("400".into(), rpc_error("Not one JSON-RPC 2.0 message (malformed JSON, a batch, a wrong shape), or an unsupported MCP-Protocol-Version: a JSON-RPC error."));
    responses.insert(
        "403".into(),
        error_response(
            "The request's Origin may not call this endpoint.",
            "Forbidden",
            "this Origin may not call the MCP endpoint",
        ),
    );
    responses.insert("413".into(), rpc_error("The body is larger than max_body_bytes."));
    responses.insert("415".into(), rpc_error("The body is not Content-Type: application/json."));
    with_common_errors(&mut post["responses"], true);

    let gated = |op: Value| {
        let mut op = op;
        op["x-tempora-extension"] = json!(true);
        op["tags"] = json!(["MCP"]);
        op["parameters"] = json!([]);
        with_common_errors(&mut op["responses"], true);
        op
    };
    let delete = gated(json!({
        "operationId": "mcpEndSession",
        "summary": "End a session",
        "description": "No session is ever issued, so there is none to end: answers 204.",
        "responses": {"204": {"description": "Nothing to end."}},
    }));
    obj(&mut paths["/mcp"]).insert("delete".into(), delete);

    obj(paths).insert(
        "/.well-known/mcp.json".into(),
        json!({"get": {
            "operationId": "mcpManifest",
            "tags": ["MCP"],
            "x-tempora-extension": true,
            "security": [],
            "summary": "The MCP manifest",
            "description": "The MCP endpoint, its transport, its auth, and the tools with their descriptions and input and output schemas (public).",
            "responses": {
                "200": {"description": "The manifest.", "content": json_content(json!({
                    "type": "object",
                    "required": ["name", "endpoint", "transport", "auth", "tools"],
                    "properties": {
                        "name": {"type": "string"},
                        "endpoint": {"type": "string"},
                        "transport": {"type": "object"},
                        "auth": {"type": "object"},
                        "tools": {"type": "array", "items": {"type": "object", "required": ["name", "description", "inputSchema", "outputSchema"]}},
                    },
                }))},
                "503": resp("Unavailable"),
            },
        }}),
    );
}

fn replayed_header() -> Value {
    json!({
        "Idempotency-Replayed": {
            "description": "`true` when this is the stored answer to an earlier request with the same Idempotency-Key.",
            "schema": {"type": "string", "enum": ["true"]},
        },
    })
}

/// OpenAPI links from a response carrying a fact id to the operations on it.
fn fact_links(id: &str) -> Value {
    json!({
        "GetFact": {"operationId": "getFact", "parameters": {"id": id}},
        "GetFactHistory": {"operationId": "getFactHistory", "parameters": {"id": id}},
        "RetractFact": {"operationId": "retractFact", "parameters": {"id": id}},
    })
}

fn extension_paths(doc: &mut Value) {
    let paths = obj(&mut doc["paths"]);
    let gated = |mut op: Value| {
        op["x-tempora-extension"] = json!(true);
        let params = obj(&mut op).entry("parameters").or_insert_with(|| json!([]));
        if let Some(ps) = params.as_array_mut() {
            ps.extend([param("Tenant"), param("TenantHeader")]);
        }
        with_common_errors(&mut op["responses"], true);
        op
    };
    let public = |mut op: Value| {
        op["x-tempora-extension"] = json!(true);
        op["security"] = json!([]);
        with_common_errors(&mut op["responses"], false);
        op
    };

    paths.insert(
        "/api/facts/batch".into(),
        json!({"post": gated(json!({
            "operationId": "assertFactBatch",
            "tags": ["Facts"],
            "summary": "Assert several facts in one transaction",
            "description": format!(
                "Assert up to {} facts in one transaction: either all land or none does (any invalid fact, or a \
                 strict-predicate conflict, rejects the whole batch with 400). The facts apply in order, so a later \
                 fact may supersede an earlier one of the same batch.",
                crate::http::facts::MAX_BATCH
            ),
            "parameters": [param("IdempotencyKey")],
            "requestBody": {
                "required": true,
                "content": {"application/json": {
                    "schema": schema("BatchInput"),
                    "example": {"facts": [
                        {"subject": "Person:sarah", "predicate": "knows", "object": "Person:tom"},
                        {"subject": "Person:tom", "predicate": "age", "object": 41},
                    ]},
                }},
            },
            "responses": {
                "201": {
                    "description": "The transaction and the asserted facts, in request order.",
                    "headers": replayed_header(),
                    "content": json_content(schema("BatchReceipt")),
                    "links": fact_links("$response.body#/facts/0/id"),
                },
                "400": resp("BadRequest"),
                "413": resp("PayloadTooLarge"),
            },
        }))}),
    );

    let id_ops = json!({
        "get": gated(json!({
            "operationId": "getFact",
            "tags": ["Facts"],
            "summary": "Read one fact",
            "description": "The current version of one fact (whatever its status), or the version as it stood at a record time (as_of / as_of_tx); 404 when it did not exist yet.",
            "parameters": [param("FactId"), param("AsOf"), param("AsOfTx")],
            "responses": {
                "200": {"description": "The fact.", "content": json_content(schema("Fact"))},
                "400": resp("BadRequest"),
            },
        })),
        "delete": gated(json!({
            "operationId": "retractFact",
            "tags": ["Facts"],
            "summary": "Retract a fact",
            "description": "Sets the fact's status to `retracted` from this transaction on. It stays readable (here, in its history, and with as_of) but is hidden from queries unless include_retracted=true; it revives nothing it had superseded.",
            "parameters": [param("FactId")],
            "responses": {
                "200": {"description": "The retracted version of the fact.", "content": json_content(schema("Fact"))},
                "400": resp("BadRequest"),
            },
        })),
    });
    paths.insert("/api/facts/{id}".into(), id_ops);

    paths.insert(
        "/api/facts/{id}/history".into(),
        json!({"get": gated(json!({
            "operationId": "getFactHistory",
            "tags": ["Facts"],
            "summary": "Every version of a fact",
            "description": "Every stored version of one fact, oldest first, with the supersession chain both ways: predecessors (facts it closed, the fact it continues) and successors (the fact that closed it, the tails that continue it).",
            "parameters": [param("FactId")],
            "responses": {
                "200": {"description": "The history.", "content": json_content(schema("FactHistory"))},
                "400": resp("BadRequest"),
            },
        }))}),
    );

    let name = json!({
        "name": "name", "in": "path", "required": true,
        "description": "The predicate.",
        "schema": {"type": "string"},
    });
    paths.insert(
        "/api/predicates/{name}".into(),
        json!({
            "get": gated(json!({
                "operationId": "getPredicate",
                "tags": ["Facts"],
                "summary": "A predicate's cardinality",
                "description": "The cardinality of a predicate in the caller's tenant (`one` unless set).",
                "parameters": [name.clone()],
                "responses": {
                    "200": {"description": "The predicate.", "content": json_content(schema("Predicate"))},
                    "400": resp("BadRequest"),
                },
            })),
            "put": gated(json!({
                "operationId": "setPredicate",
                "tags": ["Facts"],
                "summary": "Set a predicate's cardinality",
                "description": "Sets the cardinality of a predicate for the caller's tenant, from this transaction on. Facts already stored are not rewritten.",
                "parameters": [name],
                "requestBody": {
                    "required": true,
                    "content": {"application/json": {
                        "schema": schema("PredicateInput"),
                        "example": {"cardinality": "many"},
                    }},
                },
                "responses": {
                    "200": {
                        "description": "The predicate as now set.",
                        "content": json_content(schema("Predicate")),
                        "links": {
                            "GetPredicate": {"operationId": "getPredicate", "parameters": {"name": "$request.path.name"}},
                        },
                    },
                    "400": resp("BadRequest"),
                    "413": resp("PayloadTooLarge"),
                },
            })),
        }),
    );

    let health = |id: &str, summary: &str, description: &str| {
        public(json!({
            "operationId": id,
            "tags": ["Health"],
            "summary": summary,
            "description": description,
            "responses": {"200": {
                "description": "Live.",
                "content": {"application/json": {"schema": schema("Health"), "example": {"ok": true}}},
            }},
        }))
    };
    paths.insert(
        "/healthz".into(),
        json!({"get": health("getHealthz", "Liveness probe", "Public liveness probe (same as /api/health).")}),
    );
    paths.insert(
        "/livez".into(),
        json!({"get": health("getLivez", "Liveness probe", "Public liveness probe (same as /api/health).")}),
    );
    paths.insert(
        "/readyz".into(),
        json!({"get": public(json!({
            "operationId": "getReadyz",
            "tags": ["Health"],
            "summary": "Readiness probe",
            "description": "Public readiness probe: ready when the storage engine answers a read.",
            "responses": {"200": {
                "description": "Ready.",
                "content": {"application/json": {"schema": schema("Ready"), "example": {"ready": true, "last_tx": 42, "writes": "ok"}}},
            }},
        }))}),
    );
    let mut metrics = json!({
        "operationId": "getMetrics",
        "tags": ["Health"],
        "summary": "Prometheus metrics",
        "description": "Prometheus text exposition: requests by route template, method and status, latencies, engine and storage counters. Public in open mode; in keyed mode only for admin tokens (anyone else gets the 404 non-disclosure answer).",
        "x-tempora-extension": true,
        "responses": {
            "200": {
                "description": "Metrics in the Prometheus text format 0.0.4.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
        },
    });
    with_common_errors(&mut metrics["responses"], true);
    paths.insert("/metrics".into(), json!({"get": metrics}));
    let mut backup = json!({
        "operationId": "getBackup",
        "tags": ["Health"],
        "summary": "Backup of the whole store",
        "description": "A consistent backup of every tenant's facts, history, change log and service records, \
            streamed as it is made (`tempora backup` is the client; `tempora restore` puts it back; see \
            docs/operations.md). It holds the store as it stood when the request arrived; reads and writes go on \
            while it is taken, and one backup runs at a time (409 while another does). The file ends with a record count \
            and a BLAKE3 checksum; a backup that fails midway cuts the response off, so a partial file never \
            passes for a whole one. Open mode: anyone who reaches the server; keyed mode: admin tokens only \
            (anyone else gets the 404 non-disclosure answer).",
        "x-tempora-extension": true,
        "responses": {
            "200": {
                "description": "The backup file.",
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            },
        },
    });
    obj(&mut backup["responses"]).insert("401".into(), resp("Unauthorized"));
    backup["responses"]["409"] = error_response(
        "Another backup is running.",
        "Conflict",
        "a backup is already running; try again when it has finished",
    );
    with_common_errors(&mut backup["responses"], true);
    paths.insert("/api/admin/backup".into(), json!({"get": backup}));
    paths.insert(
        "/openapi.json".into(),
        json!({"get": public(json!({
            "operationId": "getOpenApi",
            "tags": ["Health"],
            "summary": "This document",
            "description": "The OpenAPI document of this server: the reference memory API plus tempora's extensions.",
            "responses": {"200": {
                "description": "The OpenAPI 3.1 document.",
                "content": json_content(json!({"type": "object"})),
            }},
        }))}),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "options", "head", "trace"];

    fn operations(doc: &Value) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for m in METHODS {
                if item.get(*m).is_some() {
                    out.push((path.clone(), m.to_string()));
                }
            }
        }
        out
    }

    /// The `(path, method)` pairs of the router, read from its source: every
    /// `.route("PATH", get(..).post(..))` of `src/http/mod.rs`.
    fn router_routes() -> Vec<(String, String)> {
        let src = include_str!("mod.rs");
        let mut out = Vec::new();
        for chunk in src.split(".route(").skip(1) {
            // rustfmt may break the call after its parenthesis.
            let chunk = chunk.trim_start().strip_prefix('"').expect("a route path literal");
            let (path, rest) = chunk.split_once('"').expect("a route path literal");
            // The handler expression runs to the parenthesis closing `.route(`.
            let mut depth = 1;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map(|(i, _)| i)
                .expect("a closed .route(");
            let expr = &rest[..end];
            for m in ["get", "post", "put", "delete", "patch"] {
                let needle = format!("{m}(");
                let found = expr.match_indices(&needle).any(|(i, _)| {
                    i == 0 || !expr[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_')
                });
                if found {
                    out.push((path.to_string(), m.to_string()));
                }
            }
        }
        assert!(out.len() >= 10, "the router source did not parse: {out:?}");
        out
    }

    #[test]
    fn the_document_holds_every_operation_of_the_reference() {
        let doc = document();
        let served = operations(doc);
        let reference = reference();
        for op in operations(&reference) {
            assert!(served.contains(&op), "/openapi.json lacks the reference operation {} {}", op.1, op.0);
        }
        // Nothing of the reference's components went missing either.
        for (kind, items) in reference["components"].as_object().unwrap() {
            for name in items.as_object().unwrap().keys() {
                assert!(doc["components"][kind].get(name).is_some(), "components.{kind}.{name} is missing");
            }
        }
        assert_eq!(doc["openapi"], reference["openapi"]);
    }

    #[test]
    fn every_api_route_of_the_router_is_documented() {
        let doc = document();
        let served = operations(doc);
        let routes = router_routes();
        for (path, method) in &routes {
            // /api/v1 is the NeuroSan API, documented by its own spec (/api/v1/docs).
            if (path.starts_with("/api") && !path.starts_with("/api/v1/"))
                || ["/healthz", "/readyz", "/livez", "/metrics", "/openapi.json"].contains(&path.as_str())
            {
                assert!(
                    served.contains(&(path.clone(), method.clone())),
                    "the router serves {} {path}, but /openapi.json does not document it",
                    method.to_uppercase()
                );
            }
        }
        // And nothing documented as implemented is missing from the router.
        for (path, method) in &served {
            let planned = doc["paths"][path][method]["x-tempora-planned"] == json!(true);
            if !planned {
                assert!(
                    routes.contains(&(path.clone(), method.clone())),
                    "{method} {path} is documented but not routed"
                );
            }
        }
    }

    #[test]
    fn every_reference_to_a_component_resolves() {
        fn walk(v: &Value, doc: &Value) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        let pointer = r.strip_prefix('#').expect("local refs only");
                        assert!(doc.pointer(pointer).is_some(), "dangling $ref {r}");
                    }
                    m.values().for_each(|x| walk(x, doc));
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, doc)),
                _ => {}
            }
        }
        let doc = document();
        walk(doc, doc);
        // Links name operations that exist.
        let ids: Vec<&str> =
            operations(doc).iter().filter_map(|(p, m)| doc["paths"][p][m]["operationId"].as_str()).collect();
        let text = doc.to_string();
        for id in ["getFact", "getFactHistory", "retractFact", "getPredicate"] {
            assert!(ids.contains(&id), "{id}");
        }
        assert!(!text.contains("abagraph_session"), "the session cookie of this server is tempora_session");
    }

    #[test]
    fn the_extensions_are_documented() {
        let doc = document();
        let list = &doc["paths"]["/api/facts"]["get"];
        let names: Vec<&str> = list["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| match p.get("$ref").and_then(Value::as_str) {
                Some(r) => doc.pointer(r.strip_prefix('#').unwrap()).unwrap()["name"].as_str().unwrap(),
                None => p["name"].as_str().unwrap(),
            })
            .collect();
        for p in [
            "subject",
            "predicate",
            "object",
            "status",
            "as_of",
            "valid_at",
            "as_of_tx",
            "include_retracted",
            "limit",
            "cursor",
            "tenant",
        ] {
            assert!(names.contains(&p), "GET /api/facts lacks parameter {p}");
        }
        assert!(list["responses"]["200"]["headers"].get("X-Next-Cursor").is_some());
        let fact = &doc["components"]["schemas"]["Fact"]["properties"];
        for f in ["tx", "created_tx", "created_at", "supersedes", "superseded_by", "continues", "continued_by"] {
            assert!(fact.get(f).is_some(), "Fact lacks {f}");
        }
        for s in ["BatchInput", "BatchReceipt", "FactHistory", "PredicateInput", "Predicate", "AssertedFact"] {
            assert!(doc["components"]["schemas"].get(s).is_some(), "schema {s}");
        }
        for p in PLANNED {
            assert_eq!(doc["paths"][p.0][p.1]["x-tempora-planned"], json!(true), "{p:?}");
        }
    }
}
