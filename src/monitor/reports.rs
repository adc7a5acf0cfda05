//! Reports: named lists of blocks, run against the tenant's data.
//!
//! A report is `Report:<id>` with `report.name`, `report.blocks` (the
//! checked blocks, a JSON array), `report.schedule` (`{"every_secs": n}` or
//! null), `report.created_at` and, once it ran, `report.last_run`
//! (`{"run": "ReportRun:<id>", "ran_at": ms}`). A run is `ReportRun:<id>`
//! with `run.report`, `run.ran_at`, `run.output` (`{"blocks": [...]}`),
//! `run.markdown` and `run.truncated`, written in one transaction with the
//! report's new `report.last_run`.

use super::alerts;
use super::rules::Rules;
use super::time::{self, now_ms};
use super::{assert_op, is_monitor_subject, subject_facts, REPORT_PREFIX, RUN_PREFIX};
use crate::recall::collect;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use crate::store::{MemoryStore, EngineError, Fact, FactQuery, Status, StatusFilter, StatusSet, Tx, WriteOp, MAX_PAGE};
use uuid::Uuid;

pub const NAME: &str = "report.name";
pub const BLOCKS: &str = "report.blocks";
pub const SCHEDULE: &str = "report.schedule";
pub use super::facts::CREATED_AT;
pub const LAST_RUN: &str = "report.last_run";
pub const RUN_REPORT: &str = "run.report";
pub use super::facts::RAN_AT;
pub const OUTPUT: &str = "run.output";
pub const MARKDOWN: &str = "run.markdown";
pub const TRUNCATED: &str = "run.truncated";

pub const MAX_NAME: usize = 200;
/// Subjects and predicates of a facts block, in characters.
pub const MAX_TEXT: usize = 256;

/// Not blank, no control characters, at most `max` characters.
pub use super::facts::name_ok;
pub const MAX_BLOCKS: usize = 20;
pub const MAX_LIMIT: i64 = 1000;
/// Stored size budgets, under the engine's 256 KiB per value.
pub const MAX_OUTPUT_BYTES: usize = 192 * 1024;
pub const MAX_MARKDOWN_BYTES: usize = 192 * 1024;
/// Deeper fact objects are shown as their JSON text in a run's output (the
/// engine stores values at most 32 levels deep).
const MAX_OBJECT_DEPTH: usize = 16;
/// Facts a top-entities block reads.
const MAX_GRAPH_SCAN: usize = 100_000;
pub const BLOCK_TYPES: [&str; 5] = ["stats", "facts", "changes", "alerts", "top_entities"];

/// A checked block, as stored (`since` stays as given, so `24h` is relative
/// to each run).
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Stats,
    Facts { subject: Option<String>, predicate: Option<String>, status: Option<String>, limit: usize },
    Changes { since: Value, limit: usize },
    Alerts,
    TopEntities { limit: usize },
}

impl Block {
    pub fn to_json(&self) -> Value {
        match self {
            Block::Stats => json!({"type": "stats"}),
            Block::Alerts => json!({"type": "alerts"}),
            Block::TopEntities { limit } => json!({"type": "top_entities", "limit": limit}),
            Block::Changes { since, limit } => json!({"type": "changes", "since": since, "limit": limit}),
            Block::Facts { subject, predicate, status, limit } => {
                let mut v = json!({"type": "facts", "limit": limit});
                for (k, x) in [("subject", subject), ("predicate", predicate), ("status", status)] {
                    if let Some(x) = x {
                        v[k] = json!(x);
                    }
                }
                v
            }
        }
    }

    /// Checks one block; the error names `blocks[i]` and the field.
    pub fn parse(i: usize, v: &Value) -> Result<Block, String> {
        let at = |field: &str, msg: &str| format!("blocks[{i}].{field}: {msg}");
        let Value::Object(o) = v else { return Err(format!("blocks[{i}]: must be an object with a type")) };
        let ty = match o.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(_) => return Err(at("type", "must be a string")),
            None => return Err(at("type", &format!("is required (one of {})", BLOCK_TYPES.join(", ")))),
        };
        let allowed: &[&str] = match ty {
            "stats" | "alerts" => &["type"],
            "facts" => &["type", "subject", "predicate", "status", "limit"],
            "changes" => &["type", "since", "limit"],
            "top_entities" => &["type", "limit"],
            other => return Err(at("type", &format!("unknown block type {other:?} (expected one of {})", BLOCK_TYPES.join(", ")))),
        };
        if let Some(k) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(at(k, &format!("unknown field for a {ty} block (allowed: {})", allowed.join(", "))));
        }
        let limit = |default: usize| -> Result<usize, String> {
            match o.get("limit") {
                None => Ok(default),
                Some(n) => match n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e15).map(|f| f as i64)) {
                    Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n as usize),
                    _ => Err(at("limit", &format!("must be an integer within 1..={MAX_LIMIT}"))),
                },
            }
        };
        let text = |field: &str| -> Result<Option<String>, String> {
            match o.get(field) {
                None => Ok(None),
                Some(Value::String(s)) if name_ok(s, MAX_TEXT) => Ok(Some(s.clone())),
                Some(_) => Err(at(
                    field,
                    &format!("must be a string, not blank, without control characters, at most {MAX_TEXT} characters"),
                )),
            }
        };
        Ok(match ty {
            "stats" => Block::Stats,
            "alerts" => Block::Alerts,
            "top_entities" => Block::TopEntities { limit: limit(10)? },
            "changes" => {
                let since = o.get("since").cloned().unwrap_or_else(|| json!("24h"));
                time::resolve_since(&since, now_ms()).map_err(|e| at("since", &e))?;
                Block::Changes { since, limit: limit(50)? }
            }
            _ => {
                let status = match o.get("status") {
                    None => None,
                    Some(Value::String(s)) => {
                        status_filter(s).map_err(|e| at("status", &e))?;
                        Some(s.clone())
                    }
                    Some(_) => return Err(at("status", "must be a string")),
                };
                Block::Facts { subject: text("subject")?, predicate: text("predicate")?, status, limit: limit(20)? }
            }
        })
    }
}

/// `all` or `any` (every status, retracted included), or a comma-separated
/// list of statuses (no spaces).
fn status_filter(s: &str) -> Result<StatusFilter, String> {
    if s == "all" || s == "any" {
        return Ok(StatusFilter::Among(StatusSet::all()));
    }
    let mut set = StatusSet::default();
    for part in s.split(',') {
        set = set.with(part.parse::<Status>()?);
    }
    Ok(StatusFilter::Among(set))
}

pub const STATUS_PATTERN: &str =
    "^(all|any|(active|candidate|superseded|retracted)(,(active|candidate|superseded|retracted))*)$";

/// Checks the blocks of a report.
pub fn parse_blocks(blocks: &[Value]) -> Result<Vec<Block>, String> {
    if blocks.is_empty() {
        return Err("blocks: give at least one block".into());
    }
    if blocks.len() > MAX_BLOCKS {
        return Err(format!("blocks: at most {MAX_BLOCKS} blocks"));
    }
    blocks.iter().enumerate().map(|(i, b)| Block::parse(i, b)).collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub id: Uuid,
    pub name: String,
    pub blocks: Vec<Block>,
    pub every_secs: Option<u64>,
    pub created_at: i64,
    pub last_run: Option<Value>,
}

impl Report {
    pub fn subject(&self) -> String {
        format!("{REPORT_PREFIX}{}", self.id)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "subject": self.subject(),
            "id": self.id,
            "name": self.name,
            "blocks": self.blocks.iter().map(Block::to_json).collect::<Vec<_>>(),
            "schedule": self.every_secs.map(|s| json!({"every_secs": s})),
            "created_at": self.created_at,
            "last_run": self.last_run,
        })
    }

    /// When a scheduled report is next due.
    pub fn due_at(&self) -> Option<i64> {
        let every = self.every_secs? as i64 * 1000;
        let last = self.last_run.as_ref().and_then(|r| r["ran_at"].as_i64()).unwrap_or(self.created_at);
        Some(last.saturating_add(every))
    }

    /// The ops creating the report.
    pub fn create_ops(&self) -> Vec<WriteOp> {
        let s = self.subject();
        vec![
            assert_op(&s, NAME, json!(self.name)),
            assert_op(&s, BLOCKS, json!(self.blocks.iter().map(Block::to_json).collect::<Vec<_>>())),
            assert_op(&s, SCHEDULE, self.every_secs.map(|n| json!({"every_secs": n})).unwrap_or(Value::Null)),
            assert_op(&s, CREATED_AT, json!(self.created_at)),
        ]
    }
}

pub fn get(engine: &dyn MemoryStore, tenant: &str, id: Uuid) -> Result<Option<Report>, EngineError> {
    let facts = subject_facts(engine, tenant, &format!("{REPORT_PREFIX}{id}"))?;
    let Some(name) = facts.get(NAME).and_then(|f| f.object.as_str()) else { return Ok(None) };
    let blocks = facts
        .get(BLOCKS)
        .and_then(|f| f.object.as_array())
        .map(|a| a.iter().enumerate().filter_map(|(i, b)| Block::parse(i, b).ok()).collect())
        .unwrap_or_default();
    Ok(Some(Report {
        id,
        name: name.to_string(),
        blocks,
        every_secs: facts.get(SCHEDULE).and_then(|f| f.object["every_secs"].as_u64()),
        created_at: facts.get(CREATED_AT).and_then(|f| f.object.as_i64()).unwrap_or_else(|| facts[NAME].created_at),
        last_run: facts.get(LAST_RUN).map(|f| f.object.clone()),
    }))
}

/// Every report of the tenant, oldest first. No cap: the scheduler picks
/// the due reports from this list, and a report past a cap would never run.
pub fn list(engine: &dyn MemoryStore, tenant: &str) -> Result<Vec<Report>, EngineError> {
    let q = FactQuery { predicate: Some(NAME.to_string()), ..Default::default() };
    let (names, _) = collect(engine, tenant, &q, usize::MAX)?;
    let mut out = Vec::new();
    for f in names {
        let Some(id) = f.subject.strip_prefix(REPORT_PREFIX).and_then(|s| Uuid::parse_str(s).ok()) else { continue };
        if let Some(r) = get(engine, tenant, id)? {
            out.push(r);
        }
    }
    out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// One run, stored or about to be.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: Uuid,
    pub report: String,
    pub ran_at: i64,
    pub output: Value,
    pub markdown: String,
    pub truncated: bool,
}

impl Run {
    pub fn to_json(&self, tx: Option<Tx>) -> Value {
        let mut v = json!({
            "run": format!("{RUN_PREFIX}{}", self.id),
            "id": self.id,
            "report": self.report,
            "ran_at": self.ran_at,
            "output": self.output,
            "markdown": self.markdown,
            "truncated": self.truncated,
        });
        if let Some(tx) = tx {
            v["tx"] = json!(tx);
        }
        v
    }

    /// The run's facts and the report's new `last_run`.
    pub fn ops(&self) -> Vec<WriteOp> {
        let s = format!("{RUN_PREFIX}{}", self.id);
        vec![
            assert_op(&s, RUN_REPORT, json!(self.report)),
            assert_op(&s, RAN_AT, json!(self.ran_at)),
            assert_op(&s, OUTPUT, self.output.clone()),
            assert_op(&s, MARKDOWN, json!(self.markdown)),
            assert_op(&s, TRUNCATED, json!(self.truncated)),
            assert_op(&self.report, LAST_RUN, json!({"run": s, "ran_at": self.ran_at})),
        ]
    }
}

/// The runs of a report, newest first, at most `limit`.
pub fn runs(engine: &dyn MemoryStore, tenant: &str, report: &Report, limit: usize) -> Result<Vec<Run>, EngineError> {
    let q = FactQuery {
        predicate: Some(RUN_REPORT.to_string()),
        object: Some(json!(report.subject())),
        ..Default::default()
    };
    // Every reference (one small fact per run), so that the newest are among
    // them: run ids sort by time, and reading the first 10,000 once showed a
    // report scheduled every minute only its first week of runs. Only the
    // newest `limit` runs are read whole.
    let (mut refs, _) = collect(engine, tenant, &q, usize::MAX)?;
    refs.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.subject.cmp(&a.subject)));
    refs.truncate(limit);
    let mut out = Vec::new();
    for f in refs {
        let Some(id) = f.subject.strip_prefix(RUN_PREFIX).and_then(|s| Uuid::parse_str(s).ok()) else { continue };
        let facts = subject_facts(engine, tenant, &f.subject)?;
        out.push(Run {
            id,
            report: report.subject(),
            ran_at: facts.get(RAN_AT).and_then(|f| f.object.as_i64()).unwrap_or(f.created_at),
            output: facts.get(OUTPUT).map(|f| f.object.clone()).unwrap_or(Value::Null),
            markdown: facts.get(MARKDOWN).and_then(|f| f.object.as_str()).unwrap_or_default().to_string(),
            truncated: facts.get(TRUNCATED).and_then(|f| f.object.as_bool()).unwrap_or(false),
        });
    }
    out.sort_by(|a, b| b.ran_at.cmp(&a.ran_at).then(b.id.cmp(&a.id)));
    Ok(out)
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn fact_json(f: &Fact) -> Value {
    let object = if depth(&f.object) > MAX_OBJECT_DEPTH { json!(f.object.to_string()) } else { f.object.clone() };
    json!({
        "id": f.id,
        "subject": f.subject,
        "predicate": f.predicate,
        "object": object,
        "confidence": f.confidence,
        "status": f.status,
        "valid_from": f.valid_from,
        "valid_until": f.valid_until,
        "recorded_at": f.recorded_at,
    })
}

/// The tenant's first change recorded at or after `since`: a binary search
/// over transaction numbers (record times grow with them).
fn first_tx_since(engine: &dyn MemoryStore, tenant: &str, since: i64) -> Result<Tx, EngineError> {
    let (mut lo, mut hi) = (0u64, engine.last_tx().0);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match engine.changes(tenant, mid, 1)?.first() {
            Some(c) if c.recorded_at < since => lo = c.tx,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

fn run_block(engine: &dyn MemoryStore, tenant: &str, defaults: &Rules, block: &Block, now: i64) -> Result<Value, EngineError> {
    Ok(match block {
        Block::Stats => {
            let s = alerts::own_stats(engine, tenant, defaults)?;
            json!({"type": "stats", "facts": {"active": s.active, "candidate": s.candidate, "superseded": s.superseded, "retracted": s.retracted, "total": s.total()}, "entities": s.subjects, "predicates": s.predicates})
        }
        Block::Facts { subject, predicate, status, limit } => {
            let q = FactQuery {
                subject: subject.clone(),
                predicate: predicate.clone(),
                status: status.as_deref().map(status_filter).transpose().map_err(EngineError::Invalid)?.unwrap_or_default(),
                limit: MAX_PAGE,
                ..Default::default()
            };
            // The monitor's own subjects only when asked for by subject.
            let mut facts = Vec::new();
            let mut more = false;
            let mut q = q;
            loop {
                let page = engine.query(tenant, &q)?;
                facts.extend(page.facts.into_iter().filter(|f| subject.is_some() || !is_monitor_subject(&f.subject)));
                if facts.len() > *limit {
                    more = true;
                    break;
                }
                match page.next_cursor {
                    Some(c) if facts.len() < MAX_GRAPH_SCAN => q.cursor = Some(c),
                    Some(_) => {
                        more = true;
                        break;
                    }
                    None => break,
                }
            }
            facts.truncate(*limit);
            json!({"type": "facts", "query": block.to_json(), "count": facts.len(), "more": more, "facts": facts.iter().map(fact_json).collect::<Vec<_>>()})
        }
        Block::Changes { since, limit } => {
            let since_ms = time::resolve_since(since, now).map_err(EngineError::Invalid)?;
            let mut after = first_tx_since(engine, tenant, since_ms)?;
            let mut items = Vec::new();
            let mut more = false;
            'read: loop {
                let changes = engine.changes(tenant, after, 200)?;
                if changes.is_empty() {
                    break;
                }
                for ch in &changes {
                    after = ch.tx;
                    if ch.recorded_at < since_ms {
                        continue;
                    }
                    for ev in &ch.events {
                        let item = match ev {
                            crate::store::ChangeEvent::Assert { fact, superseded, .. } => {
                                if is_monitor_subject(&fact.subject) {
                                    continue;
                                }
                                json!({"tx": ch.tx, "recorded_at": ch.recorded_at, "op": "assert", "fact": fact_json(fact), "superseded": superseded.iter().map(|f| f.id).collect::<Vec<_>>()})
                            }
                            crate::store::ChangeEvent::Retract { fact } => {
                                if is_monitor_subject(&fact.subject) {
                                    continue;
                                }
                                json!({"tx": ch.tx, "recorded_at": ch.recorded_at, "op": "retract", "fact": fact_json(fact)})
                            }
                            crate::store::ChangeEvent::Cardinality(p) => {
                                json!({"tx": ch.tx, "recorded_at": ch.recorded_at, "op": "predicate", "predicate": p.name, "cardinality": p.cardinality})
                            }
                            crate::store::ChangeEvent::Threshold(t) => {
                                json!({"tx": ch.tx, "recorded_at": ch.recorded_at, "op": "threshold", "threshold": t})
                            }
                        };
                        if items.len() == *limit {
                            more = true;
                            break 'read;
                        }
                        items.push(item);
                    }
                }
            }
            json!({"type": "changes", "since": since_ms, "count": items.len(), "more": more, "changes": items})
        }
        Block::Alerts => {
            let open: Vec<Value> = alerts::unresolved(engine, tenant)?.iter().map(|a| a.to_json()).collect();
            json!({"type": "alerts", "count": open.len(), "alerts": open})
        }
        Block::TopEntities { limit } => {
            let q = FactQuery::default();
            let (facts, truncated) = collect(engine, tenant, &q, MAX_GRAPH_SCAN)?;
            let mut degree: BTreeMap<String, u64> = BTreeMap::new();
            for f in facts.iter().filter(|f| !is_monitor_subject(&f.subject)) {
                let Some(target) = f.object_entity() else { continue };
                if is_monitor_subject(target) {
                    continue;
                }
                *degree.entry(f.subject.clone()).or_default() += 1;
                *degree.entry(target.to_string()).or_default() += 1;
            }
            let total = degree.len();
            let mut ranked: Vec<(String, u64)> = degree.into_iter().collect();
            ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            ranked.truncate(*limit);
            let entities: Vec<Value> = ranked
                .into_iter()
                .map(|(id, d)| {
                    let ty = id.split_once(':').map(|(t, _)| t.to_string()).unwrap_or_default();
                    json!({"id": id, "type": ty, "degree": d})
                })
                .collect();
            json!({"type": "top_entities", "total": total, "truncated": truncated, "entities": entities})
        }
    })
}

/// Markdown table cell text: one line, pipes escaped, bounded.
fn cell(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut s: String = s.replace('|', "\\|").replace(['\n', '\r'], " ");
    if s.len() > 120 {
        let mut end = 117;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

fn block_markdown(i: usize, b: &Value, md: &mut String) {
    use std::fmt::Write;
    let n = i + 1;
    match b["type"].as_str().unwrap_or_default() {
        "stats" => {
            let f = &b["facts"];
            let _ = writeln!(md, "## {n}. Stats\n\n| facts | count |\n|---|---:|");
            for k in ["active", "candidate", "superseded", "retracted", "total"] {
                let _ = writeln!(md, "| {k} | {} |", f[k]);
            }
            let _ = writeln!(md, "\nEntities: {}. Predicates: {}.\n", b["entities"], b["predicates"]);
        }
        "facts" => {
            let q = &b["query"];
            let mut filters: Vec<String> = ["subject", "predicate", "status"]
                .iter()
                .filter_map(|k| q[*k].as_str().map(|v| format!("{k} = `{v}`")))
                .collect();
            if filters.is_empty() {
                filters.push("all current facts".into());
            }
            let _ = writeln!(md, "## {n}. Facts ({})\n", filters.join(", "));
            if b["count"] == 0 {
                let _ = writeln!(md, "No facts match.\n");
                return;
            }
            let _ = writeln!(md, "| subject | predicate | object | confidence | status |\n|---|---|---|---:|---|");
            for f in b["facts"].as_array().into_iter().flatten() {
                let _ = writeln!(md, "| {} | {} | {} | {} | {} |", cell(&f["subject"]), cell(&f["predicate"]), cell(&f["object"]), f["confidence"], cell(&f["status"]));
            }
            if b["more"] == true {
                let _ = writeln!(md, "\nMore facts match than the block's limit of {}.", q["limit"]);
            }
            md.push('\n');
        }
        "changes" => {
            let since = b["since"].as_i64().unwrap_or(0);
            let _ = writeln!(md, "## {n}. Changes since {}\n", time::iso(since));
            if b["count"] == 0 {
                let _ = writeln!(md, "No changes.\n");
                return;
            }
            for c in b["changes"].as_array().into_iter().flatten() {
                let at = time::iso(c["recorded_at"].as_i64().unwrap_or(0));
                let what = match c["op"].as_str().unwrap_or_default() {
                    "assert" | "retract" => {
                        let f = &c["fact"];
                        let sup = c["superseded"].as_array().map(|a| a.len()).unwrap_or(0);
                        let tail = if sup > 0 { format!(" (supersedes {sup})") } else { String::new() };
                        format!("{} `{}` `{}` `{}`{tail}", c["op"].as_str().unwrap_or_default(), cell(&f["subject"]), cell(&f["predicate"]), cell(&f["object"]))
                    }
                    "predicate" => format!("predicate `{}` set to {}", cell(&c["predicate"]), cell(&c["cardinality"])),
                    _ => format!("confidence threshold set to {}", c["threshold"]),
                };
                let _ = writeln!(md, "- tx {} at {at}: {what}", c["tx"]);
            }
            if b["more"] == true {
                md.push_str("- ... more changes than the block's limit\n");
            }
            md.push('\n');
        }
        "alerts" => {
            let _ = writeln!(md, "## {n}. Open alerts\n");
            if b["count"] == 0 {
                let _ = writeln!(md, "No open alerts.\n");
                return;
            }
            for a in b["alerts"].as_array().into_iter().flatten() {
                let fired = time::iso(a["fired_at"].as_i64().unwrap_or(0));
                let _ = writeln!(md, "- **{}** `{}` ({}, fired {fired}): {}", cell(&a["rule"]), cell(&a["key"]), cell(&a["state"]), cell(&a["message"]));
            }
            md.push('\n');
        }
        _ => {
            let _ = writeln!(md, "## {n}. Top entities\n");
            if b["entities"].as_array().is_none_or(|e| e.is_empty()) {
                let _ = writeln!(md, "No entities.\n");
                return;
            }
            let _ = writeln!(md, "| entity | type | degree |\n|---|---|---:|");
            for e in b["entities"].as_array().into_iter().flatten() {
                let _ = writeln!(md, "| {} | {} | {} |", cell(&e["id"]), cell(&e["type"]), e["degree"]);
            }
            md.push('\n');
        }
    }
}

fn size(v: &Value) -> usize {
    serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX)
}

/// The list each block type keeps its items in.
fn items_key(b: &Value) -> Option<&'static str> {
    match b["type"].as_str()? {
        "facts" => Some("facts"),
        "changes" => Some("changes"),
        "alerts" => Some("alerts"),
        "top_entities" => Some("entities"),
        _ => None,
    }
}

/// Halves the longest item list until the output fits; marks what it cut.
fn fit_output(blocks: &mut [Value]) -> bool {
    let mut cut = false;
    while size(&json!({"blocks": &*blocks})) > MAX_OUTPUT_BYTES {
        let longest = blocks
            .iter()
            .enumerate()
            .filter_map(|(i, b)| Some((i, b[items_key(b)?].as_array()?.len())))
            .max_by_key(|(_, n)| *n);
        let Some((i, n)) = longest.filter(|(_, n)| *n > 0) else { break };
        let k = items_key(&blocks[i]).expect("a list block");
        if let Some(a) = blocks[i][k].as_array_mut() {
            a.truncate(n / 2);
        }
        blocks[i]["truncated"] = json!(true);
        cut = true;
    }
    cut
}

fn fit_markdown(md: &mut String) -> bool {
    if md.len() <= MAX_MARKDOWN_BYTES {
        return false;
    }
    let note = "\n\n_The report was cut here: it is longer than a stored run holds._\n";
    let mut end = MAX_MARKDOWN_BYTES - note.len();
    while !md.is_char_boundary(end) {
        end -= 1;
    }
    md.truncate(end);
    md.push_str(note);
    true
}

/// Runs every block against the tenant's data now.
pub fn run(engine: &dyn MemoryStore, tenant: &str, defaults: &Rules, report: &Report) -> Result<Run, EngineError> {
    let ran_at = now_ms();
    let id = super::new_id();
    let mut blocks = Vec::with_capacity(report.blocks.len());
    for b in &report.blocks {
        blocks.push(run_block(engine, tenant, defaults, b, ran_at)?);
    }
    let mut truncated = fit_output(&mut blocks);
    let mut md = format!(
        "# {}\n\nRun `{RUN_PREFIX}{id}` of `{}` at {} (tenant `{tenant}`).\n\n",
        report.name.replace('\n', " "),
        report.subject(),
        time::iso(ran_at)
    );
    for (i, b) in blocks.iter().enumerate() {
        block_markdown(i, b, &mut md);
        if b["truncated"] == true {
            md.push_str("_This block was shortened to fit a stored run._\n\n");
        }
    }
    truncated |= fit_markdown(&mut md);
    let mut output = Map::new();
    output.insert("blocks".into(), Value::Array(blocks));
    Ok(Run { id, report: report.subject(), ran_at, output: Value::Object(output), markdown: md, truncated })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The newest runs come first however many a report has had: run ids
    /// sort by time, and the first 10,000 read once hid every later run.
    #[test]
    fn the_newest_runs_are_listed_past_ten_thousand() {
        use crate::store::embedded::{Durability, Engine, EngineConfig};
        let engine = Engine::open(EngineConfig::temporary().durability(Durability::Relaxed)).unwrap();
        let report = Report {
            id: Uuid::from_u128(1),
            name: "daily".into(),
            blocks: Vec::new(),
            every_secs: Some(60),
            created_at: 0,
            last_run: None,
        };
        let subject = |n: u128| format!("{RUN_PREFIX}{}", Uuid::from_u128(n));
        let run = |n: u128| assert_op(&subject(n), RUN_REPORT, json!(report.subject()));
        for chunk in (1..=10_000u128).collect::<Vec<_>>().chunks(5_000) {
            engine.write("t", chunk.iter().map(|&n| run(n)).collect()).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        engine.write("t", (10_001..=10_005u128).map(run).collect()).unwrap();
        let ids: Vec<Uuid> = runs(&engine, "t", &report, 3).unwrap().iter().map(|r| r.id).collect();
        assert_eq!(ids, [10_005u128, 10_004, 10_003].map(Uuid::from_u128));
    }

    #[test]
    fn blocks_are_checked_with_their_index_and_field() {
        let ok = parse_blocks(&[json!({"type": "stats"}), json!({"type": "facts", "predicate": "p", "limit": 5})]).unwrap();
        assert_eq!(ok[1], Block::Facts { subject: None, predicate: Some("p".into()), status: None, limit: 5 });
        let e = parse_blocks(&[json!({"type": "stats"}), json!({"type": "pie"})]).unwrap_err();
        assert!(e.starts_with("blocks[1].type"), "{e}");
        let e = parse_blocks(&[json!({"type": "facts", "limit": 0})]).unwrap_err();
        assert!(e.starts_with("blocks[0].limit"), "{e}");
        let e = parse_blocks(&[json!({"type": "changes", "since": "whenever"})]).unwrap_err();
        assert!(e.starts_with("blocks[0].since"), "{e}");
        let e = parse_blocks(&[json!({"type": "alerts", "limit": 3})]).unwrap_err();
        assert!(e.starts_with("blocks[0].limit"), "{e}");
        let e = parse_blocks(&[json!({"type": "facts", "status": "bogus"})]).unwrap_err();
        assert!(e.starts_with("blocks[0].status"), "{e}");
        assert!(parse_blocks(&[]).is_err());
    }

    #[test]
    fn long_outputs_are_cut_to_fit() {
        let big: Vec<Value> = (0..5000).map(|i| json!({"subject": format!("S:{i}"), "object": "x".repeat(100)})).collect();
        let mut blocks = vec![json!({"type": "facts", "facts": big}), json!({"type": "stats"})];
        assert!(fit_output(&mut blocks));
        assert!(size(&json!({"blocks": blocks})) <= MAX_OUTPUT_BYTES);
        assert_eq!(blocks[0]["truncated"], true);
        let mut md = "é".repeat(MAX_MARKDOWN_BYTES);
        assert!(fit_markdown(&mut md));
        assert!(md.len() <= MAX_MARKDOWN_BYTES && md.ends_with("holds._\n"));
    }
}
