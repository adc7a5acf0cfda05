//! Tools: the built-in ones, and those clients register, stored as facts of
//! the tenant so they survive restarts and show in memory.
//!
//! | subject | predicate | object |
//! |---|---|---|
//! | `Tool:<name>` | `tool.description` | the description |
//! | `Tool:<name>` | `tool.arguments` | the arguments, `[{"type", "name"}]` |
//! | `Tool:<name>` | `tool.required` | the required argument names |
//! | `Tool:<name>` | `tool.response` | the response type (`void` when not given) |
//! | `Tool:<name>` | `tool.timeout_ms` | how long a call may take |
//!
//! with source `neurodock`. Registering again changes only what changed.

use super::packets::ToolSpec;
use crate::agents::MemoryTool;
use crate::service::Service;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use crate::store::{MemoryStore, EngineError, Fact, FactInput, FactQuery, StatusFilter, WriteOp};

pub const ENTITY_TYPE: &str = "Tool";
pub const PREFIX: &str = "tool.";
pub const SOURCE: &str = "neurodock";
const SETTINGS: [&str; 5] = ["description", "arguments", "required", "response", "timeout_ms"];

/// The built-in tools, callable by every client.
pub const BUILTIN: [&str; 3] = ["get_current_date", "remember", "recall"];

pub fn is_builtin(name: &str) -> bool {
    BUILTIN.contains(&name)
}

pub fn entity(name: &str) -> String {
    format!("{ENTITY_TYPE}:{name}")
}

fn setting(spec: &ToolSpec, p: &str) -> Value {
    match p {
        "description" => json!(spec.description),
        "arguments" => json!(spec.arguments),
        "required" => json!(spec.required),
        "response" => json!(spec.response),
        "timeout_ms" => json!(spec.timeout_ms),
        _ => Value::Null,
    }
}

fn settings(engine: &dyn MemoryStore, tenant: &str, name: &str) -> Result<BTreeMap<String, Fact>, EngineError> {
    let q = FactQuery { subject: Some(entity(name)), status: StatusFilter::Current, limit: 100, ..Default::default() };
    let mut out = BTreeMap::new();
    for f in engine.query(tenant, &q)?.facts {
        let Some(s) = f.predicate.strip_prefix(PREFIX) else { continue };
        if SETTINGS.contains(&s) && f.valid_until.is_none() {
            out.insert(s.to_string(), f);
        }
    }
    Ok(out)
}

/// The write that makes the stored tool equal `spec`; empty when unchanged.
pub fn register_ops(engine: &dyn MemoryStore, tenant: &str, spec: &ToolSpec) -> Result<Vec<WriteOp>, EngineError> {
    let current = settings(engine, tenant, &spec.name)?;
    let subject = entity(&spec.name);
    let mut ops = Vec::new();
    for p in SETTINGS {
        let v = setting(spec, p);
        if current.get(p).is_some_and(|f| f.object == v) {
            continue;
        }
        ops.push(WriteOp::Assert(FactInput::new(&subject, format!("{PREFIX}{p}"), v).source(SOURCE)));
    }
    Ok(ops)
}

/// A stored tool of the tenant; `None` when never registered.
pub fn load(engine: &dyn MemoryStore, tenant: &str, name: &str) -> Result<Option<ToolSpec>, EngineError> {
    if super::packets::check_name(name).is_err() {
        return Ok(None);
    }
    let s = settings(engine, tenant, name)?;
    let Some(description) = s.get("description").and_then(|f| f.object.as_str()) else { return Ok(None) };
    let get = |p: &str| s.get(p).map(|f| f.object.clone()).unwrap_or(Value::Null);
    Ok(Some(ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        arguments: serde_json::from_value(get("arguments")).unwrap_or_default(),
        required: serde_json::from_value(get("required")).unwrap_or_default(),
        response: get("response").as_str().unwrap_or("void").to_string(),
        timeout_ms: get("timeout_ms").as_u64().unwrap_or(super::packets::DEFAULT_TOOL_TIMEOUT_MS),
    }))
}

/// Runs a built-in tool; `source` is stamped on what `remember` writes.
pub async fn run_builtin(
    st: &Service,
    tenant: &str,
    name: &str,
    args: Map<String, Value>,
    source: Option<&str>,
) -> Result<Value, String> {
    let tool = match name {
        "get_current_date" => return Ok(json!(current_date(now_ms()))),
        "remember" => MemoryTool::Remember,
        "recall" => MemoryTool::Recall,
        other => return Err(format!("no built-in tool {other}")),
    };
    crate::neurosan::tools::run(st, tenant, tool, args, source).await.map_err(|e| format!("{}: {e}", e.code()))
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The date as `date(1)` writes it, in UTC: `Thu Feb 20 19:30:05 UTC 2025`.
pub fn current_date(ms: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let s = secs.rem_euclid(86_400);
    let (y, m, d) = crate::civil::civil_from_days(days);
    let weekday = DAYS[(days + 4).rem_euclid(7) as usize];
    format!("{weekday} {} {d:2} {:02}:{:02}:{:02} UTC {y}", MONTHS[(m - 1) as usize], s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_read_like_date() {
        assert_eq!(super::current_date(1_740_079_805_000), "Thu Feb 20 19:30:05 UTC 2025");
        assert_eq!(super::current_date(0), "Thu Jan  1 00:00:00 UTC 1970");
    }
}
