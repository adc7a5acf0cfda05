//! Client tools: the tools a NeuroDock client registers (`ADD_TOOL`) and
//! the server calls back on it, and the built-in ones every client may call.
//! Registered tools are facts of the tenant, so they survive restarts and
//! show in memory.
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

use serde::{Deserialize, Serialize};
use crate::agents::MemoryTool;
use crate::service::{Service, ServiceError};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use crate::store::{MemoryStore, EngineError, Fact, FactInput, FactQuery, StatusFilter, WriteOp};

/// Argument types (`arguments[].type`); a tool's `response` may also be `void`.
pub const TYPES: [&str; 10] =
    ["string", "int", "integer", "float", "double", "number", "bool", "boolean", "object", "array"];
pub const MAX_TOOL_NAME: usize = 64;
pub const MAX_DESCRIPTION: usize = 4096;
pub const MAX_ARGUMENTS: usize = 32;
/// How long a client has to answer a `TOOL_CALL`, unless the tool sets
/// `timeout_ms` (within [`MIN_TOOL_TIMEOUT_MS`, `MAX_TOOL_TIMEOUT_MS`]).
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 30_000;
pub const MIN_TOOL_TIMEOUT_MS: u64 = 100;
pub const MAX_TOOL_TIMEOUT_MS: u64 = 300_000;

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
    if check_name(name).is_err() {
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
        timeout_ms: get("timeout_ms").as_u64().unwrap_or(DEFAULT_TOOL_TIMEOUT_MS),
    }))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Argument {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A tool as `ADD_TOOL` defines it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub arguments: Vec<Argument>,
    #[serde(default)]
    pub required: Vec<String>,
    pub response: String,
    pub timeout_ms: u64,
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TOOL_NAME
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a tool or argument name is 1 to {MAX_TOOL_NAME} of A-Z a-z 0-9 _ -, starting with a letter or _: {name:?}"
        ))
    }
}

/// Checks the definition of a tool (the data of an `ADD_TOOL` packet).
pub fn check_tool(data: &Map<String, Value>) -> crate::service::Result<ToolSpec> {
    tool_of(data).map_err(ServiceError::Invalid)
}

fn tool_of(data: &Map<String, Value>) -> Result<ToolSpec, String> {
    for k in data.keys() {
        if !["name", "description", "arguments", "required", "response", "timeout_ms"].contains(&k.as_str()) {
            return Err(format!("unknown tool field {k:?}"));
        }
    }
    let name = match data.get("name") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err("name must be a string".into()),
    };
    check_name(&name)?;
    if is_builtin(&name) {
        return Err(format!("{name} is a built-in tool"));
    }
    let description = match data.get("description") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= MAX_DESCRIPTION => s.clone(),
        _ => return Err(format!("description must be a non-empty string of at most {MAX_DESCRIPTION} bytes")),
    };
    let arguments: Vec<Argument> = match data.get("arguments") {
        None | Some(Value::Null) => Vec::new(),
        Some(v @ Value::Array(a)) if a.len() <= MAX_ARGUMENTS => serde_json::from_value(v.clone())
            .map_err(|e| format!("arguments: each is {{\"type\", \"name\"[, \"description\"]}}: {e}"))?,
        Some(_) => return Err(format!("arguments must be an array of at most {MAX_ARGUMENTS}")),
    };
    for (i, a) in arguments.iter().enumerate() {
        check_name(&a.name)?;
        if !TYPES.contains(&a.kind.as_str()) {
            return Err(format!("argument {} has type {:?}: expected one of {}", a.name, a.kind, TYPES.join(", ")));
        }
        if arguments[..i].iter().any(|b| b.name == a.name) {
            return Err(format!("argument {} is listed twice", a.name));
        }
    }
    let required: Vec<String> = match data.get("required") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => serde_json::from_value(v.clone()).map_err(|_| "required must be an array of strings".to_string())?,
    };
    for r in &required {
        if !arguments.iter().any(|a| &a.name == r) {
            return Err(format!("required names {r:?}, which is not an argument"));
        }
    }
    let response = match data.get("response") {
        None | Some(Value::Null) => "void".to_string(),
        Some(Value::String(s)) if s == "void" || TYPES.contains(&s.as_str()) => s.clone(),
        Some(other) => return Err(format!("response must be void or one of {}, got {other}", TYPES.join(", "))),
    };
    let timeout_ms = match data.get("timeout_ms") {
        None | Some(Value::Null) => DEFAULT_TOOL_TIMEOUT_MS,
        Some(v) => match v.as_u64() {
            Some(n) if (MIN_TOOL_TIMEOUT_MS..=MAX_TOOL_TIMEOUT_MS).contains(&n) => n,
            _ => {
                return Err(format!(
                    "timeout_ms must be an integer within [{MIN_TOOL_TIMEOUT_MS}, {MAX_TOOL_TIMEOUT_MS}]"
                ))
            }
        },
    };
    Ok(ToolSpec { name, description, arguments, required, response, timeout_ms })
}

/// Whether `v` is a value of the argument type `kind` (`void` takes anything).
pub fn is_of_type(kind: &str, v: &Value) -> bool {
    match kind {
        "string" => v.is_string(),
        "int" | "integer" => v.is_i64() || v.is_u64(),
        "float" | "double" | "number" => v.is_number(),
        "bool" | "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        _ => true,
    }
}

/// Checks call arguments against a tool's definition.
pub fn check_args(spec: &ToolSpec, args: &Map<String, Value>) -> crate::service::Result<()> {
    args_of(spec, args).map_err(ServiceError::Invalid)
}

fn args_of(spec: &ToolSpec, args: &Map<String, Value>) -> Result<(), String> {
    for r in &spec.required {
        if !args.contains_key(r) {
            return Err(format!("tool {} needs argument {r}", spec.name));
        }
    }
    for (k, v) in args {
        let Some(a) = spec.arguments.iter().find(|a| &a.name == k) else {
            return Err(format!("tool {} has no argument {k}", spec.name));
        };
        if !is_of_type(&a.kind, v) {
            return Err(format!("argument {k} of tool {} must be of type {}", spec.name, a.kind));
        }
    }
    Ok(())
}

impl Service {
    /// Stores a client's tool as facts of the tenant (only what changed).
    pub async fn register_client_tool(&self, tenant: &str, spec: &ToolSpec) -> crate::service::Result<()> {
        let store = std::sync::Arc::clone(self.memory.store());
        let (t, sp) = (tenant.to_string(), spec.clone());
        let ops = crate::memory::blocking(move || register_ops(&*store, &t, &sp)).await?;
        if !ops.is_empty() {
            self.write(tenant, ops).await?;
        }
        Ok(())
    }

    /// A tool the tenant's clients registered, if any.
    pub async fn client_tool(&self, tenant: &str, name: &str) -> crate::service::Result<Option<ToolSpec>> {
        let store = std::sync::Arc::clone(self.memory.store());
        let (t, n) = (tenant.to_string(), name.to_string());
        Ok(crate::memory::blocking(move || load(&*store, &t, &n)).await?)
    }
}

/// Runs a built-in tool; `source` is stamped on what `remember` writes.
pub async fn run_builtin(
    st: &Service,
    tenant: &str,
    name: &str,
    args: Map<String, Value>,
    source: Option<&str>,
) -> crate::service::Result<Value> {
    let tool = match name {
        "get_current_date" => return Ok(json!(current_date(now_ms()))),
        "remember" => MemoryTool::Remember,
        "recall" => MemoryTool::Recall,
        other => return Err(ServiceError::NotFound(format!("no built-in tool {other}"))),
    };
    crate::service::chat::tools::run(st, tenant, tool, args, source).await
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
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_are_checked() {
        let ok = json!({"name": "a_tool", "description": "d", "arguments": [{"type": "string", "name": "q"}], "required": ["q"], "response": "void"});
        let t = check_tool(ok.as_object().unwrap()).unwrap();
        assert_eq!(t.timeout_ms, DEFAULT_TOOL_TIMEOUT_MS);
        for bad in [
            json!({"name": "bad name", "description": "d"}),
            json!({"name": "t", "description": ""}),
            json!({"name": "t", "description": "d", "arguments": [{"type": "complex", "name": "q"}]}),
            json!({"name": "t", "description": "d", "required": ["q"]}),
            json!({"name": "t", "description": "d", "response": "blob"}),
            json!({"name": "get_current_date", "description": "d"}),
            json!({"name": "t", "description": "d", "extra": 1}),
        ] {
            assert!(check_tool(bad.as_object().unwrap()).is_err(), "{bad}");
        }
        assert!(check_args(&t, json!({"q": "x"}).as_object().unwrap()).is_ok());
        assert!(check_args(&t, json!({"q": 1}).as_object().unwrap()).is_err());
        assert!(check_args(&t, json!({}).as_object().unwrap()).is_err());
    }

    #[test]
    fn dates_read_like_date() {
        assert_eq!(super::current_date(1_740_079_805_000), "Thu Feb 20 19:30:05 UTC 2025");
        assert_eq!(super::current_date(0), "Thu Jan  1 00:00:00 UTC 1970");
    }
}
