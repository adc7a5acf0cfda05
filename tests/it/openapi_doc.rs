//! `/openapi.json` is `api/tempora.openapi.json`, served as checked in
//! (src/http/openapi.rs). These tests keep the file true: it is canonical
//! JSON of OpenAPI 3.x whose `$ref`s all resolve and whose version is the
//! crate's; it is a superset of the reference, `api/abagraph.openapi.json`;
//! it documents every route the listener serves (`tempora::http::route_table`)
//! but those of [`UNDOCUMENTED`], and nothing that is not served; and where
//! it states one of the server's limits, it states the server's value.

use serde_json::{json, Value};
use std::collections::BTreeSet;
use tempora::http::openapi::{document, SOURCE};

const REFERENCE: &str = include_str!("../../api/abagraph.openapi.json");

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "options", "head", "trace"];

/// The routes the listener serves that the document leaves out on purpose,
/// as `(METHOD, path template)`. A route neither documented nor listed here
/// fails `the_document_and_the_routes_agree`, as does an entry here that is
/// documented after all or no longer routed.
const UNDOCUMENTED: &[(&str, &str)] = &[
    // The NeuroSan API has a document of its own, api/neuro-san.openapi.json,
    // served at GET /api/v1/docs (docs/agents.md).
    ("GET", "/api/v1/list"),
    ("GET", "/api/v1/docs"),
    ("GET", "/api/v1/{*rest}"),
    ("POST", "/api/v1/{*rest}"),
    // The Agent Protocol v1 is the published protocol's (docs/agent-protocol.md).
    ("GET", "/ap/v1/agent/tasks"),
    ("POST", "/ap/v1/agent/tasks"),
    ("GET", "/ap/v1/agent/tasks/{task_id}"),
    ("GET", "/ap/v1/agent/tasks/{task_id}/steps"),
    ("POST", "/ap/v1/agent/tasks/{task_id}/steps"),
    ("GET", "/ap/v1/agent/tasks/{task_id}/steps/{step_id}"),
    ("GET", "/ap/v1/agent/tasks/{task_id}/artifacts"),
    ("POST", "/ap/v1/agent/tasks/{task_id}/artifacts"),
    ("GET", "/ap/v1/agent/tasks/{task_id}/artifacts/{artifact_id}"),
    // MCP's GET only answers 405 with `Allow: POST, DELETE` (there is no
    // server-to-client stream); POST /mcp's description says so.
    ("GET", "/mcp"),
    // The operator console: a page and its assets, not API (docs/console.md).
    ("GET", "/"),
    ("GET", "/console"),
    ("GET", "/console/"),
    ("GET", "/console/{file}"),
];

fn reference() -> Value {
    serde_json::from_str(REFERENCE).expect("the reference is JSON")
}

/// `(path, method)` of every operation, method in lower case.
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

/// What a `{"$ref": "#/..."}` names, or the value itself.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => doc.pointer(r.strip_prefix('#').expect("a local $ref")).unwrap_or_else(|| panic!("dangling {r}")),
        None => v,
    }
}

/// `(in, name)` of an operation's parameters, its path's included.
fn parameters(doc: &Value, path: &str, method: &str) -> BTreeSet<(String, String)> {
    let item = &doc["paths"][path];
    [&item["parameters"], &item[method]["parameters"]]
        .into_iter()
        .filter_map(Value::as_array)
        .flatten()
        .map(|p| {
            let p = resolve(doc, p);
            (p["in"].as_str().unwrap().to_string(), p["name"].as_str().unwrap().to_string())
        })
        .collect()
}

/// One parameter of an operation, by name.
fn parameter<'a>(doc: &'a Value, path: &str, method: &str, name: &str) -> &'a Value {
    doc["paths"][path][method]["parameters"]
        .as_array()
        .unwrap_or_else(|| panic!("{method} {path} has no parameters"))
        .iter()
        .map(|p| resolve(doc, p))
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
}

#[test]
fn the_file_is_canonical_openapi_3_of_this_version() {
    let doc = document();
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "openapi: {}", doc["openapi"]);
    assert_eq!(doc["openapi"], reference()["openapi"], "the reference's OpenAPI version");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"), "info.version is the crate's version");
    // Pretty-printed, two spaces, keys sorted, a newline at the end: what
    // `python3 -m json.tool --indent 2 --sort-keys --no-ensure-ascii` writes.
    assert!(
        SOURCE == serde_json::to_string_pretty(doc).unwrap() + "\n",
        "api/tempora.openapi.json is not in its canonical form; rewrite it with \
         `python3 -m json.tool --indent 2 --sort-keys --no-ensure-ascii`"
    );
}

#[test]
fn every_ref_resolves_to_a_component() {
    fn walk(v: &Value, doc: &Value) {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref") {
                    let r = r.as_str().expect("a $ref is a string");
                    assert!(r.starts_with("#/components/"), "$ref {r} is not to a component");
                    assert!(doc.pointer(&r[1..]).is_some(), "dangling $ref {r}");
                }
                m.values().for_each(|x| walk(x, doc));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, doc)),
            _ => {}
        }
    }
    let doc = document();
    walk(doc, doc);

    // operationIds are unique, and links name operations that exist.
    let ids: Vec<&str> =
        operations(doc).iter().filter_map(|(p, m)| doc["paths"][p][m]["operationId"].as_str()).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "duplicate operationIds: {ids:?}");
    fn links<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Object(ls)) = m.get("links") {
                    out.extend(ls.values().filter_map(|l| l["operationId"].as_str()));
                }
                m.values().for_each(|x| links(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| links(x, out)),
            _ => {}
        }
    }
    let mut linked = Vec::new();
    links(&doc["paths"], &mut linked);
    assert!(!linked.is_empty(), "the fact links are gone");
    for id in linked {
        assert!(unique.contains(id), "a link names operationId {id}, which no operation has");
    }
    assert!(!SOURCE.contains("abagraph_session"), "the session cookie of this server is tempora_session");
}

#[test]
fn the_document_is_a_superset_of_the_reference() {
    let doc = document();
    let reference = reference();
    let ours = operations(doc);
    for (path, method) in operations(&reference) {
        let op = format!("{} {path}", method.to_uppercase());
        assert!(ours.contains(&(path.clone(), method.clone())), "the document lacks the reference operation {op}");
        let have = parameters(doc, &path, &method);
        for p in parameters(&reference, &path, &method) {
            assert!(have.contains(&p), "{op} lacks the reference's {} parameter {}", p.0, p.1);
        }
        let responses = &doc["paths"][&path][&method]["responses"];
        for status in reference["paths"][&path][&method]["responses"].as_object().unwrap().keys() {
            assert!(responses.get(status).is_some(), "{op} lacks the reference's response {status}");
        }
    }
    for (kind, items) in reference["components"].as_object().unwrap() {
        for name in items.as_object().unwrap().keys() {
            assert!(doc["components"][kind].get(name).is_some(), "components.{kind}.{name} is missing");
        }
    }
    for tag in reference["tags"].as_array().into_iter().flatten() {
        let tags = doc["tags"].as_array().expect("tags");
        assert!(tags.iter().any(|t| t["name"] == tag["name"]), "the reference's tag {} is missing", tag["name"]);
    }
}

#[test]
fn the_document_and_the_routes_agree() {
    let doc = document();
    let table = tempora::http::route_table();
    let routed: BTreeSet<(String, String)> = table.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    assert_eq!(routed.len(), table.len(), "a route is in the table twice: {table:?}");
    assert!(routed.len() >= 50, "the route table is nearly empty: {table:?}");
    let documented: BTreeSet<(String, String)> =
        operations(doc).into_iter().map(|(p, m)| (m.to_uppercase(), p)).collect();
    let undocumented: BTreeSet<(String, String)> =
        UNDOCUMENTED.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    assert_eq!(undocumented.len(), UNDOCUMENTED.len(), "UNDOCUMENTED lists a route twice");

    let mut wrong = Vec::new();
    for (m, p) in &routed {
        match (documented.contains(&(m.clone(), p.clone())), undocumented.contains(&(m.clone(), p.clone()))) {
            (false, false) => wrong.push(format!(
                "the listener serves {m} {p}, but api/tempora.openapi.json does not document it: add its operation \
                 to the file (or, if it is deliberately not API, to UNDOCUMENTED here, saying why)"
            )),
            (true, true) => wrong.push(format!("{m} {p} is documented: take it off UNDOCUMENTED")),
            _ => {}
        }
    }
    for (m, p) in &undocumented {
        if !routed.contains(&(m.clone(), p.clone())) {
            wrong.push(format!("UNDOCUMENTED lists {m} {p}, which is not routed"));
        }
    }
    for (m, p) in &documented {
        // A reference operation not implemented yet stays in the document,
        // marked planned (it answers 404).
        let planned = doc["paths"][p][m.to_lowercase()]["x-tempora-planned"] == json!(true);
        match (routed.contains(&(m.clone(), p.clone())), planned) {
            (false, false) => {
                wrong.push(format!("api/tempora.openapi.json documents {m} {p}, which the listener does not serve"))
            }
            (true, true) => wrong.push(format!("{m} {p} is served: drop its x-tempora-planned")),
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "the document and the routes disagree:\n{}", wrong.join("\n"));
}

#[test]
fn the_extensions_are_documented() {
    let doc = document();
    let have = parameters(doc, "/api/facts", "get");
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
        assert!(have.contains(&("query".into(), p.into())), "GET /api/facts lacks parameter {p}");
    }
    assert!(doc["paths"]["/api/facts"]["get"]["responses"]["200"]["headers"].get("X-Next-Cursor").is_some());
    let fact = &doc["components"]["schemas"]["Fact"]["properties"];
    for f in ["tx", "created_tx", "created_at", "supersedes", "superseded_by", "continues", "continued_by"] {
        assert!(fact.get(f).is_some(), "Fact lacks {f}");
    }
    for s in ["BatchInput", "BatchReceipt", "FactHistory", "PredicateInput", "Predicate", "AssertedFact"] {
        assert!(doc["components"]["schemas"].get(s).is_some(), "schema {s}");
    }
    for (path, method) in operations(doc) {
        let op = &doc["paths"][&path][&method];
        let in_reference = reference()["paths"][&path].get(&method).is_some();
        assert_eq!(
            op.get("x-tempora-extension").is_some(),
            !in_reference,
            "{method} {path}: the operations beyond the reference, and only they, carry x-tempora-extension"
        );
    }
}

/// The limits the server enforces, where the document states them. The
/// document used to be built from these constants; now a constant that
/// changes fails here until the file says the same.
#[test]
fn the_documented_limits_are_the_servers() {
    use tempora::connectors::{self, ingest};
    use tempora::digest::{self, formats::CONTENT_TYPES, mask::Strategy, pages};
    use tempora::http::{facts::MAX_BATCH, reports};
    use tempora::monitor::{reports as blocks, rules, time};
    use tempora::recall::{context, graph, walk};
    use tempora::search;

    let doc = document();
    let at = |pointer: &str| doc.pointer(pointer).unwrap_or_else(|| panic!("{pointer} is not in the document"));
    let body = |path: &str, method: &str| {
        &doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]["allOf"][1]["properties"]
    };
    let s = "/components/schemas";

    let mut checks: Vec<(String, &Value, Value)> = Vec::new();
    let mut check = |what: String, found: &'static Value, want: Value| checks.push((what, found, want));
    // The engine's input limits.
    for (field, max) in [
        ("subject", tempora_storage::MAX_SUBJECT_BYTES),
        ("predicate", tempora_storage::MAX_PREDICATE_BYTES),
        ("source", tempora_storage::MAX_SOURCE_BYTES),
    ] {
        let p = format!("{s}/FactInput/properties/{field}/maxLength");
        check(p.clone(), at(&p), json!(max));
    }
    let p = format!("{s}/BatchInput/oneOf/0/properties/facts/maxItems");
    check(p.clone(), at(&p), json!(MAX_BATCH));
    let p = format!("{s}/BatchInput/oneOf/1/maxItems");
    check(p.clone(), at(&p), json!(MAX_BATCH));
    // Recall.
    let depth = &parameter(doc, "/api/walk", "get", "depth")["schema"];
    check("GET /api/walk depth maximum".into(), &depth["maximum"], json!(walk::MAX_DEPTH));
    check("GET /api/walk depth default".into(), &depth["default"], json!(walk::DEFAULT_DEPTH));
    let nodes = &parameter(doc, "/api/walk", "get", "max_nodes")["schema"];
    check("GET /api/walk max_nodes maximum".into(), &nodes["maximum"], json!(walk::MAX_NODES));
    check("GET /api/walk max_nodes default".into(), &nodes["default"], json!(walk::DEFAULT_MAX_NODES));
    check(
        "POST /api/context seeds".into(),
        &body("/api/context", "post")["seeds"]["maxItems"],
        json!(context::MAX_SEEDS),
    );
    // Search.
    let top_k = &parameter(doc, "/api/search", "get", "top_k")["schema"];
    check("GET /api/search top_k maximum".into(), &top_k["maximum"], json!(search::MAX_TOP_K));
    check("GET /api/search top_k default".into(), &top_k["default"], json!(search::DEFAULT_TOP_K));
    let post = body("/api/search", "post");
    check("POST /api/search top_k maximum".into(), &post["top_k"]["maximum"], json!(search::MAX_TOP_K));
    check("POST /api/search top_k default".into(), &post["top_k"]["default"], json!(search::DEFAULT_TOP_K));
    check("POST /api/search seeds".into(), &post["seeds"]["maxItems"], json!(search::MAX_SEEDS));
    // Digest.
    let d = body("/api/digest", "post");
    check("POST /api/digest content_type".into(), &d["content_type"]["enum"], json!(CONTENT_TYPES));
    check("POST /api/digest mask".into(), &d["mask"]["enum"], json!(Strategy::NAMES));
    check("POST /api/digest source".into(), &d["source"]["maxLength"], json!(tempora_storage::MAX_SOURCE_BYTES));
    // Connectors.
    let c = body("/api/connectors", "post");
    let name = json!(format!("^[A-Za-z0-9_.-]{{1,{}}}$", connectors::MAX_NAME_LEN));
    check("POST /api/connectors kind".into(), &c["kind"]["enum"], json!(connectors::KINDS));
    check("POST /api/connectors mask".into(), &c["mask"]["enum"], json!(Strategy::NAMES));
    check(
        "POST /api/connectors every_secs minimum".into(),
        &c["every_secs"]["minimum"],
        json!(connectors::MIN_EVERY_SECS),
    );
    check(
        "POST /api/connectors every_secs maximum".into(),
        &c["every_secs"]["maximum"],
        json!(connectors::MAX_EVERY_SECS),
    );
    check("POST /api/connectors name".into(), &c["name"]["pattern"], name.clone());
    for what in ["events", "pull"] {
        let path = format!("/api/connectors/{{name}}/{what}");
        let op = &doc["paths"][&path]["post"];
        let n = &parameter(doc, &path, "post", "name")["schema"]["pattern"];
        check(format!("POST {path} name"), n, name.clone());
        let receipt = &op["responses"]["200"]["content"]["application/json"]["schema"]["allOf"][1];
        check(
            format!("POST {path} rejections"),
            &receipt["properties"]["rejections"]["maxItems"],
            json!(ingest::MAX_LISTED_REJECTIONS),
        );
    }
    // Conversations.
    {
        use tempora::service::conversations as conv;
        let p = format!("{s}/ConversationInput/properties/turns/maxItems");
        check(p.clone(), at(&p), json!(conv::MAX_TURNS));
        let p = format!("{s}/ConversationInput/properties/conversation/pattern");
        check(p.clone(), at(&p), json!(format!("^[A-Za-z0-9_-]{{1,{}}}$", conv::MAX_ID)));
        let p = format!("{s}/ConversationInput/properties/source/maxLength");
        check(p.clone(), at(&p), json!(tempora_storage::MAX_SOURCE_BYTES));
        let p = format!("{s}/ConversationTurn/properties/speaker/maxLength");
        check(p.clone(), at(&p), json!(conv::MAX_SPEAKER_BYTES));
    }
    // Reports.
    let runs = &parameter(doc, "/api/reports/{id}/runs", "get", "limit")["schema"];
    check("GET /api/reports/{id}/runs limit".into(), &runs["maximum"], json!(reports::MAX_RUNS));
    for schema in ["Report", "ReportInput"] {
        let p = format!("{s}/{schema}/properties/schedule/oneOf/1/properties/every_secs/maximum");
        check(p.clone(), at(&p), json!(reports::MAX_EVERY_SECS));
    }
    let p = format!("{s}/ReportInput/properties/name/maxLength");
    check(p.clone(), at(&p), json!(blocks::MAX_NAME));
    let p = format!("{s}/ReportInput/properties/blocks/maxItems");
    check(p.clone(), at(&p), json!(blocks::MAX_BLOCKS));
    for (i, kind) in blocks::BLOCK_TYPES.iter().enumerate() {
        let p = format!("{s}/ReportBlock/oneOf/{i}/properties/type/enum");
        check(p.clone(), at(&p), json!([kind]));
    }
    for i in [1, 2, 4] {
        let p = format!("{s}/ReportBlock/oneOf/{i}/properties/limit/maximum");
        check(p.clone(), at(&p), json!(blocks::MAX_LIMIT));
    }
    for field in ["subject", "predicate"] {
        let p = format!("{s}/ReportBlock/oneOf/1/properties/{field}/maxLength");
        check(p.clone(), at(&p), json!(blocks::MAX_TEXT));
    }
    let p = format!("{s}/ReportBlock/oneOf/1/properties/status/pattern");
    check(p.clone(), at(&p), json!(blocks::STATUS_PATTERN));
    let p = format!("{s}/ReportBlock/oneOf/2/properties/since/oneOf/1/pattern");
    check(p.clone(), at(&p), json!(time::DURATION_PATTERN));
    let p = format!("{s}/ReportBlock/oneOf/2/properties/since/oneOf/2/pattern");
    check(p.clone(), at(&p), json!(time::ISO_PATTERN));
    // Alert rules.
    let r = format!("{s}/AlertRulesInput/properties");
    for (p, want) in [
        ("freshness/properties/ttl_ms/maxProperties", json!(rules::MAX_TTL_PREDICATES)),
        ("freshness/properties/ttl_ms/propertyNames/maxLength", json!(rules::MAX_PREDICATE_CHARS)),
        ("freshness/properties/ttl_ms/additionalProperties/maximum", json!(rules::MAX_TTL_MS)),
        ("drift/properties/window_ms/maximum", json!(rules::MAX_WINDOW_MS)),
        ("drift/properties/baseline_windows/maximum", json!(rules::MAX_BASELINE_WINDOWS)),
        ("drift/properties/factor/maximum", json!(rules::MAX_FACTOR)),
        ("drift/properties/min_count/maximum", json!(rules::MAX_COUNT)),
        ("confidence/properties/min_facts/allOf/0/maximum", json!(rules::MAX_COUNT)),
        ("cost/properties/daily_token_budget/maximum", json!(rules::MAX_BUDGET)),
    ] {
        let p = format!("{r}/{p}");
        check(p.clone(), at(&p), want);
    }
    let wrong: Vec<String> = checks
        .iter()
        .filter(|(_, found, want)| found != &want)
        .map(|(what, found, want)| format!("{what}: the document says {found}, the server {want}"))
        .collect();
    assert!(wrong.is_empty(), "api/tempora.openapi.json is out of step with the server:\n{}", wrong.join("\n"));

    // The same limits in the prose.
    let prose = [
        (
            format!("{s}/FactInput/description"),
            format!(
                "at most {} bytes of JSON, nested at most {} levels",
                tempora_storage::MAX_VALUE_BYTES,
                tempora_storage::MAX_JSON_DEPTH
            ),
        ),
        ("/paths/~1api~1facts~1batch/post/description".into(), format!("Assert up to {MAX_BATCH} facts")),
        (format!("{s}/ReportBlock/description"), format!("(`type`: {})", blocks::BLOCK_TYPES.join(", "))),
        (
            "/paths/~1api~1walk/get/description".into(),
            format!(
                "depth at most {}, at most `max_nodes` entities (default {}, at most {}), and {} edges read per node",
                walk::MAX_DEPTH,
                walk::DEFAULT_MAX_NODES,
                walk::MAX_NODES,
                walk::MAX_EDGES_PER_NODE
            ),
        ),
        ("/paths/~1api~1graph/get/description".into(), format!("at most {} nodes", graph::FOCUS_CAP)),
        (
            "/paths/~1api~1graph/get/description".into(),
            format!("At most {} facts are read for one view", graph::MAX_SCAN),
        ),
        (
            "/paths/~1api~1context/post/description".into(),
            format!("`max_facts` (default {}, at most {})", context::DEFAULT_MAX_FACTS, context::MAX_FACTS),
        ),
        (
            "/paths/~1api~1context/post/description".into(),
            format!("`max_pages` (default {}, at most {};", context::DEFAULT_MAX_PAGES, context::MAX_PAGES),
        ),
        ("/paths/~1api~1context/post/description".into(), format!("(the first {} characters)", context::SNIPPET_CHARS)),
        (
            "/paths/~1api~1search/get/description".into(),
            format!("`top_k` defaults to {}, at most {}", search::DEFAULT_TOP_K, search::MAX_TOP_K),
        ),
        ("/paths/~1api~1digest/post/description".into(), format!("At most {} facts per digest", digest::MAX_FACTS)),
        (
            concat!(
                "/paths/~1api~1digest/post/responses/200/content/application~1json/schema/allOf/1",
                "/properties/mentions/description"
            )
            .into(),
            format!("(at most {}).", pages::MAX_MENTIONS),
        ),
        (
            "/paths/~1api~1connectors~1{name}~1events/post/description".into(),
            format!(
                "at most {} bytes) and written in transactions of about {} facts",
                ingest::MAX_CSV_BYTES,
                ingest::CHUNK_FACTS
            ),
        ),
        (
            "/paths/~1api~1connectors/post/description".into(),
            format!(
                "`every_secs` ({} (`[connectors] min_every_secs`) to {})",
                connectors::MIN_EVERY_SECS,
                connectors::MAX_EVERY_SECS
            ),
        ),
    ];
    for (pointer, fragment) in prose {
        let text = at(&pointer).as_str().unwrap_or_else(|| panic!("{pointer} is not text"));
        assert!(text.contains(&fragment), "{pointer} does not say \"{fragment}\"");
    }
    let limit = &parameter(doc, "/api/facts", "get", "limit");
    let text = limit["description"].as_str().unwrap();
    for page in [format!("1..{}", tempora_storage::MAX_PAGE), format!("default {}", tempora_storage::DEFAULT_PAGE)] {
        assert!(text.contains(&page), "GET /api/facts limit does not say \"{page}\"");
    }
    assert_eq!(limit["schema"]["minimum"], 1);
    assert_eq!(limit["schema"]["maximum"], tempora_storage::MAX_PAGE);
    assert_eq!(limit["schema"]["default"], tempora_storage::DEFAULT_PAGE);
}
