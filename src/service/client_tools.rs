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
//! Types are stored by their canonical names, whichever alias the client
//! used. A built-in tool declared with its own shape is acknowledged and
//! not stored; with another shape it is refused.

use serde::{Deserialize, Serialize};
use crate::agents::MemoryTool;
use crate::service::{Service, ServiceError};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use crate::store::{MemoryStore, EngineError, Fact, FactInput, FactQuery, StatusFilter, WriteOp};

/// The argument types by their canonical names (JSON Schema's): what is
/// stored and answered, whichever accepted name the client used.
pub const TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "object", "array"];
/// Every accepted type name (compared in lower case) and the canonical type
/// it stands for. Clients written from the seed name types loosely (the
/// seed refers to an enum it does not list), so common spellings are taken.
const TYPE_NAMES: [(&str, &str); 17] = [
    ("string", "string"),
    ("str", "string"),
    ("text", "string"),
    ("integer", "integer"),
    ("int", "integer"),
    ("long", "integer"),
    ("short", "integer"),
    ("number", "number"),
    ("float", "number"),
    ("double", "number"),
    ("boolean", "boolean"),
    ("bool", "boolean"),
    ("object", "object"),
    ("dict", "object"),
    ("map", "object"),
    ("array", "array"),
    ("list", "array"),
];
/// A `response` that accepts any result (the default).
pub const VOID: &str = "void";
/// An argument of a built-in tool that takes any JSON value (`remember`'s
/// `object`). Clients cannot declare it; any declared type matches it.
pub const ANY: &str = "any";
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
/// The fields of `ADD_TOOL` data, and of one of its arguments; others are
/// ignored (and reported), so a client may carry data of its own.
const TOOL_FIELDS: [&str; 6] = ["name", "description", "arguments", "required", "response", "timeout_ms"];
const ARGUMENT_FIELDS: [&str; 3] = ["type", "name", "description"];

pub const GET_CURRENT_DATE: &str = "get_current_date";

/// An argument of a built-in tool: its name and canonical type (or [`ANY`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuiltinArgument {
    pub name: &'static str,
    pub kind: &'static str,
}

const fn arg(name: &'static str, kind: &'static str) -> BuiltinArgument {
    BuiltinArgument { name, kind }
}

/// A built-in tool's definition, as `ADD_TOOL` would declare it. The server
/// runs these itself ([`run_builtin`]); a client may declare one with the
/// same shape (it is told so, and nothing is stored), not with another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Builtin {
    pub name: &'static str,
    pub description: &'static str,
    pub arguments: &'static [BuiltinArgument],
    pub required: &'static [&'static str],
    pub response: &'static str,
}

/// The built-in tools, callable by every client. `remember` and `recall`
/// take the arguments of the MCP tools of the same names (`service/tools`),
/// less `namespace`: a tool runs in the caller's tenant whatever it says.
pub const BUILTIN: [Builtin; 3] = [
    Builtin {
        name: GET_CURRENT_DATE,
        description: "Get the current date, in UTC, as date(1) writes it",
        arguments: &[],
        required: &[],
        response: "string",
    },
    Builtin {
        name: "remember",
        description: "Store one fact: subject predicate object",
        arguments: &[
            arg("subject", "string"),
            arg("predicate", "string"),
            arg("object", ANY),
            arg("confidence", "number"),
            arg("source", "string"),
            arg("valid_from", "integer"),
            arg("valid_until", "integer"),
            arg("properties", "object"),
        ],
        required: &["subject", "predicate", "object"],
        response: "object",
    },
    Builtin {
        name: "recall",
        description: "Search memory with a question in words",
        arguments: &[
            arg("question", "string"),
            arg("top_k", "integer"),
            arg("seeds", "array"),
            arg("subject", "string"),
            arg("predicate", "string"),
            arg("include_candidates", "boolean"),
            arg("valid_from", "integer"),
            arg("valid_until", "integer"),
            arg("reference_time", "integer"),
            arg("signals", "array"),
            arg("neighbours", "integer"),
        ],
        required: &["question"],
        response: "object",
    },
];

pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTIN.iter().find(|b| b.name == name)
}

pub fn is_builtin(name: &str) -> bool {
    builtin(name).is_some()
}

/// The built-in tools' names, for messages: `get_current_date, remember, recall`.
pub fn builtin_names() -> String {
    BUILTIN.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
}

impl Builtin {
    /// The definition as a client would send it in `ADD_TOOL`.
    pub fn definition(&self) -> Value {
        let mut d = self.shape();
        d["name"] = json!(self.name);
        d["description"] = json!(self.description);
        d
    }

    /// What must match for a client's declaration to be this tool.
    pub fn shape(&self) -> Value {
        let arguments: Vec<Value> = self.arguments.iter().map(|a| json!({"type": a.kind, "name": a.name})).collect();
        json!({"arguments": arguments, "required": self.required, "response": self.response})
    }

    /// Told to a client that declared this tool with its shape.
    pub fn note(&self) -> String {
        format!(
            "{} is built in: the server runs it itself; this definition matches it, so nothing was stored",
            self.name
        )
    }

    /// The first way `spec` differs from this tool's shape, if any.
    /// Descriptions and `timeout_ms` do not count: the server runs the tool.
    fn difference(&self, spec: &ToolSpec) -> Option<String> {
        self.argument_difference(spec).or_else(|| self.required_difference(spec)).or_else(|| {
            (!fits(self.response, &spec.response)).then(|| {
                format!("response is {} where the built-in answers {}", spec.response, self.response)
            })
        })
    }

    fn argument_difference(&self, spec: &ToolSpec) -> Option<String> {
        if let Some(a) = spec.arguments.iter().find(|a| !self.arguments.iter().any(|b| b.name == a.name)) {
            return Some(format!("argument {} is not one of the built-in's", a.name));
        }
        // Optional arguments may be left out (the client does not pass
        // them: a declaration written before the built-in gained one still
        // matches); required ones may not.
        if let Some(b) = self
            .arguments
            .iter()
            .find(|b| self.required.contains(&b.name) && !spec.arguments.iter().any(|a| a.name == b.name))
        {
            return Some(format!("argument {} is missing", b.name));
        }
        // A client's argument may be narrower than the built-in's (an
        // integer where it takes a number), never wider: the built-in must
        // accept every value the client's declaration allows.
        spec.arguments.iter().find_map(|a| {
            let b = self.arguments.iter().find(|b| b.name == a.name)?;
            let wider = !fits(&a.kind, b.kind);
            wider.then(|| format!("argument {} is {} where the built-in takes {}", a.name, a.kind, b.kind))
        })
    }

    fn required_difference(&self, spec: &ToolSpec) -> Option<String> {
        let declared: BTreeSet<&str> = spec.required.iter().map(String::as_str).collect();
        let own: BTreeSet<&str> = self.required.iter().copied().collect();
        (declared != own).then(|| {
            format!("required is {} where the built-in requires {}", json!(declared), json!(own))
        })
    }

    /// Why a declaration of this tool with another shape is refused.
    fn refusal(&self, difference: &str) -> String {
        format!(
            "{} is a built-in tool, run by the server, with the shape {}; this definition differs ({difference}). \
             Declare it with that shape, or choose another name for a tool of your own",
            self.name,
            self.shape()
        )
    }
}

/// Whether every value of type `narrow` is a value of type `wide`
/// (`any` and `void` take every value; every integer is a number).
fn fits(narrow: &str, wide: &str) -> bool {
    narrow == wide || wide == ANY || wide == VOID || (narrow == "integer" && wide == "number")
}

/// The canonical type a type name stands for (case does not matter).
pub fn canonical_type(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    TYPE_NAMES.iter().find(|(n, _)| *n == lower).map(|(_, canonical)| *canonical)
}

/// Every accepted type name, for messages:
/// `string (or str, text), integer (or int, long, short), ...`.
fn accepted_types() -> String {
    let each = TYPES.iter().map(|t| {
        let aliases: Vec<&str> = TYPE_NAMES.iter().filter(|(n, c)| c == t && n != t).map(|(n, _)| *n).collect();
        if aliases.is_empty() {
            t.to_string()
        } else {
            format!("{t} (or {})", aliases.join(", "))
        }
    });
    each.collect::<Vec<_>>().join(", ")
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
        response: get("response").as_str().unwrap_or(VOID).to_string(),
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

/// What an `ADD_TOOL` asks for, once checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    /// A tool of the client's own: stored, and called back on the client.
    Client(ToolSpec),
    /// A built-in tool declared with its own shape: nothing is stored and
    /// the server keeps running it.
    Builtin(&'static Builtin),
}

/// A checked `ADD_TOOL`: what it registers, and the fields it carried that
/// the server does not know (`category`, `arguments[0].unit`), which were
/// left unread.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedTool {
    pub registration: Registration,
    pub ignored: Vec<String>,
}

impl CheckedTool {
    pub fn name(&self) -> &str {
        match &self.registration {
            Registration::Client(spec) => &spec.name,
            Registration::Builtin(b) => b.name,
        }
    }
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
pub fn check_tool(data: &Map<String, Value>) -> crate::service::Result<CheckedTool> {
    tool_of(data).map_err(ServiceError::Invalid)
}

fn tool_of(data: &Map<String, Value>) -> Result<CheckedTool, String> {
    let mut ignored = unknown_fields(data, &TOOL_FIELDS, "");
    let spec = ToolSpec {
        name: name_of(data)?,
        description: description_of(data)?,
        arguments: arguments_of(data, &mut ignored)?,
        required: Vec::new(),
        response: response_of(data)?,
        timeout_ms: timeout_of(data)?,
    };
    let spec = ToolSpec { required: required_of(data, &spec.arguments)?, ..spec };
    let registration = match builtin(&spec.name) {
        None => Registration::Client(spec),
        Some(b) => match b.difference(&spec) {
            None => Registration::Builtin(b),
            Some(d) => return Err(b.refusal(&d)),
        },
    };
    Ok(CheckedTool { registration, ignored })
}

/// The keys of `o` that are not `known`, each led by `prefix`.
fn unknown_fields(o: &Map<String, Value>, known: &[&str], prefix: &str) -> Vec<String> {
    o.keys().filter(|k| !known.contains(&k.as_str())).map(|k| format!("{prefix}{k}")).collect()
}

fn name_of(data: &Map<String, Value>) -> Result<String, String> {
    let Some(Value::String(name)) = data.get("name") else { return Err("name must be a string".into()) };
    check_name(name)?;
    Ok(name.clone())
}

fn description_of(data: &Map<String, Value>) -> Result<String, String> {
    match data.get("description") {
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= MAX_DESCRIPTION => Ok(s.clone()),
        _ => Err(format!("description must be a non-empty string of at most {MAX_DESCRIPTION} bytes")),
    }
}

fn arguments_of(data: &Map<String, Value>, ignored: &mut Vec<String>) -> Result<Vec<Argument>, String> {
    let list = match data.get("arguments") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) if a.len() <= MAX_ARGUMENTS => a,
        Some(_) => return Err(format!("arguments must be an array of at most {MAX_ARGUMENTS}")),
    };
    let mut out: Vec<Argument> = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let a = argument_of(i, v, ignored)?;
        if out.iter().any(|b| b.name == a.name) {
            return Err(format!("argument {} is listed twice", a.name));
        }
        out.push(a);
    }
    Ok(out)
}

/// The `i`-th argument; fields it has besides `type`, `name` and
/// `description` go to `ignored`.
fn argument_of(i: usize, v: &Value, ignored: &mut Vec<String>) -> Result<Argument, String> {
    let Value::Object(o) = v else {
        return Err(format!("arguments[{i}] must be an object {{\"type\", \"name\"[, \"description\"]}}"));
    };
    ignored.extend(unknown_fields(o, &ARGUMENT_FIELDS, &format!("arguments[{i}].")));
    let Some(Value::String(name)) = o.get("name") else { return Err(format!("arguments[{i}].name must be a string")) };
    check_name(name)?;
    let kind = match o.get("type") {
        Some(Value::String(t)) => canonical_type(t)
            .ok_or_else(|| format!("argument {name} has type {t:?}: expected one of {}", accepted_types()))?,
        _ => return Err(format!("argument {name}: type must be a string, one of {}", accepted_types())),
    };
    let description = match o.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(format!("argument {name}: description must be a string")),
    };
    Ok(Argument { kind: kind.to_string(), name: name.clone(), description })
}

fn required_of(data: &Map<String, Value>, arguments: &[Argument]) -> Result<Vec<String>, String> {
    let required: Vec<String> = match data.get("required") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|_| "required must be an array of strings".to_string())?,
    };
    if let Some(r) = required.iter().find(|r| !arguments.iter().any(|a| &a.name == *r)) {
        return Err(format!("required names {r:?}, which is not an argument"));
    }
    Ok(required)
}

fn response_of(data: &Map<String, Value>) -> Result<String, String> {
    let refused = || format!("response must be {VOID} or one of {}", accepted_types());
    match data.get("response") {
        None | Some(Value::Null) => Ok(VOID.to_string()),
        Some(Value::String(s)) if s.eq_ignore_ascii_case(VOID) => Ok(VOID.to_string()),
        Some(Value::String(s)) => canonical_type(s).map(String::from).ok_or_else(|| format!("{}, got {s:?}", refused())),
        Some(other) => Err(format!("{}, got {other}", refused())),
    }
}

fn timeout_of(data: &Map<String, Value>) -> Result<u64, String> {
    let range = MIN_TOOL_TIMEOUT_MS..=MAX_TOOL_TIMEOUT_MS;
    match data.get("timeout_ms") {
        None | Some(Value::Null) => Ok(DEFAULT_TOOL_TIMEOUT_MS),
        Some(v) => v
            .as_u64()
            .filter(|n| range.contains(n))
            .ok_or_else(|| format!("timeout_ms must be an integer within [{MIN_TOOL_TIMEOUT_MS}, {MAX_TOOL_TIMEOUT_MS}]")),
    }
}

/// Whether `v` is a value of the argument type `kind` (`void` takes anything).
/// Any accepted name of a type works, so tools stored before type names
/// were made canonical (`int`, `float`) are checked alike.
pub fn is_of_type(kind: &str, v: &Value) -> bool {
    match canonical_type(kind) {
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
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
        GET_CURRENT_DATE => return Ok(json!(current_date(now_ms()))),
        n if n == MemoryTool::Remember.name() => MemoryTool::Remember,
        n if n == MemoryTool::Recall.name() => MemoryTool::Recall,
        other => return Err(ServiceError::NotFound(format!("no built-in tool {other}: they are {}", builtin_names()))),
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

    fn check(v: Value) -> Result<CheckedTool, String> {
        let Value::Object(o) = v else { panic!("an object") };
        tool_of(&o)
    }

    fn client(v: Value) -> ToolSpec {
        match check(v.clone()) {
            Ok(CheckedTool { registration: Registration::Client(spec), .. }) => spec,
            other => panic!("{v} is not a client tool: {other:?}"),
        }
    }

    #[test]
    fn tools_are_checked() {
        let t = client(json!({"name": "a_tool", "description": "d", "arguments": [{"type": "string", "name": "q"}], "required": ["q"], "response": "void"}));
        assert_eq!(t.timeout_ms, DEFAULT_TOOL_TIMEOUT_MS);
        for bad in [
            json!({"name": "bad name", "description": "d"}),
            json!({"name": "t", "description": ""}),
            json!({"name": "t", "description": "d", "arguments": [{"type": "complex", "name": "q"}]}),
            json!({"name": "t", "description": "d", "arguments": [{"type": "string", "name": "q"}, {"type": "int", "name": "q"}]}),
            json!({"name": "t", "description": "d", "arguments": ["q"]}),
            json!({"name": "t", "description": "d", "required": ["q"]}),
            json!({"name": "t", "description": "d", "response": "blob"}),
            json!({"name": "t", "description": "d", "timeout_ms": 99}),
            json!({"name": "t", "description": "d", "timeout_ms": 300_001}),
        ] {
            assert!(check(bad.clone()).is_err(), "{bad}");
        }
        assert!(check_args(&t, json!({"q": "x"}).as_object().unwrap()).is_ok());
        assert!(check_args(&t, json!({"q": 1}).as_object().unwrap()).is_err());
        assert!(check_args(&t, json!({}).as_object().unwrap()).is_err());
    }

    #[test]
    fn type_names_ignore_case_and_aliases_are_stored_canonically() {
        let t = client(json!({"name": "t", "description": "d", "response": "Text", "arguments": [
            {"type": "STR", "name": "a"}, {"type": "text", "name": "b"}, {"type": "long", "name": "c"},
            {"type": "Short", "name": "d"}, {"type": "INT", "name": "e"}, {"type": "list", "name": "f"},
            {"type": "Dict", "name": "g"}, {"type": "map", "name": "h"}, {"type": "Float", "name": "i"},
            {"type": "double", "name": "j"}, {"type": "BOOL", "name": "k"}, {"type": "Integer", "name": "l"}
        ]}));
        let kinds: Vec<&str> = t.arguments.iter().map(|a| a.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["string", "string", "integer", "integer", "integer", "array", "object", "object", "number", "number", "boolean", "integer"]
        );
        assert_eq!(t.response, "string");
        assert_eq!(client(json!({"name": "t", "description": "d", "response": "VOID"})).response, VOID);
        assert_eq!(client(json!({"name": "t", "description": "d"})).response, VOID);
        // The canonical name is what is stored, so it is what calls are checked against.
        assert!(check_args(&t, json!({"c": 3, "f": [1], "g": {}}).as_object().unwrap()).is_ok());
        assert!(check_args(&t, json!({"c": "3"}).as_object().unwrap()).is_err());
        assert!(check_args(&t, json!({"g": []}).as_object().unwrap()).is_err());
    }

    #[test]
    fn an_unknown_type_is_refused_with_every_accepted_name() {
        let complex = json!({"name": "t", "description": "d", "arguments": [{"type": "complex", "name": "z"}]});
        let e = check(complex).unwrap_err();
        assert!(e.contains("\"complex\""), "{e}");
        for name in TYPE_NAMES.iter().map(|(n, _)| n) {
            assert!(e.contains(name), "{name} missing from: {e}");
        }
        let e = check(json!({"name": "t", "description": "d", "response": "blob"})).unwrap_err();
        assert!(e.contains("void") && e.contains("dict") && e.contains("\"blob\""), "{e}");
        // `any` only describes built-ins; a client cannot declare it.
        assert!(check(json!({"name": "t", "description": "d", "arguments": [{"type": "any", "name": "z"}]})).is_err());
    }

    #[test]
    fn unknown_fields_are_ignored_and_reported_known_ones_still_checked() {
        let c = check(json!({"name": "t", "description": "d", "category": "time", "version": 2,
            "arguments": [{"type": "string", "name": "city", "unit": "c"}]}))
        .unwrap();
        assert_eq!(c.ignored, ["category", "version", "arguments[0].unit"]);
        assert_eq!(c.name(), "t");
        let Registration::Client(spec) = c.registration else { panic!("a client tool") };
        assert_eq!(spec.arguments, [Argument { kind: "string".into(), name: "city".into(), description: None }]);
        assert!(check(json!({"name": "t", "description": "d"})).unwrap().ignored.is_empty());
        for bad in [
            json!({"name": 5, "description": "d"}),
            json!({"name": "t", "description": 5}),
            json!({"name": "t", "description": "d", "arguments": {"type": "string"}}),
            json!({"name": "t", "description": "d", "arguments": [{"type": 1, "name": "q"}]}),
            json!({"name": "t", "description": "d", "arguments": [{"type": "string", "name": "q", "description": 1}]}),
            json!({"name": "t", "description": "d", "required": "q"}),
            json!({"name": "t", "description": "d", "response": 1}),
            json!({"name": "t", "description": "d", "timeout_ms": "fast"}),
        ] {
            assert!(check(bad.clone()).is_err(), "{bad}");
        }
    }

    fn builtin_of(v: Value) -> &'static Builtin {
        match check(v.clone()) {
            Ok(CheckedTool { registration: Registration::Builtin(b), .. }) => b,
            other => panic!("{v} is not taken as a built-in: {other:?}"),
        }
    }

    #[test]
    fn a_builtin_declared_with_its_shape_is_taken_as_the_builtin() {
        // The seed's example, verbatim.
        let seed = json!({"name": "get_current_date", "description": "Get the current date", "required": [], "response": "string"});
        assert_eq!(builtin_of(seed).name, GET_CURRENT_DATE);
        // No response means any result, which the built-in's string is.
        builtin_of(json!({"name": "get_current_date", "description": "x", "arguments": [], "response": "VOID"}));
        // Order, descriptions, narrower argument types and aliases do not matter.
        let remember = builtin_of(json!({"name": "remember", "description": "keep a fact", "response": "dict",
            "required": ["object", "subject", "predicate"], "arguments": [
                {"type": "str", "name": "predicate"}, {"type": "string", "name": "subject"},
                {"type": "map", "name": "object"}, {"type": "integer", "name": "confidence"},
                {"type": "text", "name": "source"}, {"type": "long", "name": "valid_from"},
                {"type": "int", "name": "valid_until"}, {"type": "object", "name": "properties", "description": "x"}
            ]}));
        assert_eq!(remember.name, "remember");
        let recall = builtin_of(json!({"name": "recall", "description": "d", "required": ["question"], "arguments": [
            {"type": "string", "name": "question"}, {"type": "integer", "name": "top_k"}, {"type": "list", "name": "seeds"},
            {"type": "string", "name": "subject"}, {"type": "string", "name": "predicate"},
            {"type": "bool", "name": "include_candidates"}
        ]}));
        assert_eq!(recall.definition()["name"], "recall");
        // Optional arguments may be left out.
        builtin_of(json!({"name": "recall", "description": "d", "required": ["question"], "arguments": [
            {"type": "string", "name": "question"}, {"type": "integer", "name": "reference_time"}
        ]}));
        assert!(recall.note().starts_with("recall is built in"));
    }

    #[test]
    fn a_builtin_declared_with_another_shape_is_refused_with_its_shape() {
        for (bad, why) in [
            (json!({"name": "get_current_date", "description": "d", "response": "integer"}), "response is integer"),
            (json!({"name": "get_current_date", "description": "d", "arguments": [{"type": "string", "name": "tz"}]}), "argument tz"),
            (json!({"name": "recall", "description": "d", "arguments": [{"type": "integer", "name": "top_k"}], "required": []}), "argument question is missing"),
            (json!({"name": "recall", "description": "d", "required": [], "arguments": [
                {"type": "string", "name": "question"}, {"type": "integer", "name": "top_k"}, {"type": "array", "name": "seeds"},
                {"type": "string", "name": "subject"}, {"type": "string", "name": "predicate"},
                {"type": "boolean", "name": "include_candidates"}]}), "required is []"),
            (json!({"name": "recall", "description": "d", "required": ["question"], "arguments": [
                {"type": "string", "name": "question"}, {"type": "number", "name": "top_k"}, {"type": "array", "name": "seeds"},
                {"type": "string", "name": "subject"}, {"type": "string", "name": "predicate"},
                {"type": "boolean", "name": "include_candidates"}]}), "argument top_k is number where the built-in takes integer"),
        ] {
            let e = check(bad.clone()).unwrap_err();
            let name = bad["name"].as_str().unwrap();
            let shape = builtin(name).unwrap().shape().to_string();
            assert!(e.contains(&format!("{name} is a built-in tool")), "{e}");
            assert!(e.contains(&shape), "{e}");
            assert!(e.contains(why), "{e}");
            assert!(e.contains("choose another name"), "{e}");
        }
    }

    /// The declared shapes of `remember` and `recall` are the MCP tools'
    /// input schemas (less `namespace`), so they cannot drift apart.
    #[test]
    fn builtins_match_the_memory_tools_schemas() {
        for b in BUILTIN.iter().filter(|b| b.name != GET_CURRENT_DATE) {
            let def = crate::service::tools::schemas::find(b.name).expect("an MCP tool of the same name");
            let props = def.input["properties"].as_object().unwrap();
            let names: BTreeSet<&str> = props.keys().map(String::as_str).filter(|n| *n != "namespace").collect();
            assert_eq!(names, b.arguments.iter().map(|a| a.name).collect(), "{}", b.name);
            for a in b.arguments {
                let kind = props[a.name].get("type").and_then(Value::as_str).unwrap_or(ANY);
                assert_eq!(kind, a.kind, "{}.{}", b.name, a.name);
            }
            assert_eq!(def.input["required"], json!(b.required), "{}", b.name);
            assert_eq!(def.output["type"], b.response, "{}", b.name);
        }
        assert_eq!(builtin_names(), "get_current_date, remember, recall");
    }

    #[test]
    fn stored_type_names_of_any_spelling_check_alike() {
        for (kind, ok, bad) in [
            ("int", json!(3), json!(3.5)),
            ("float", json!(3.5), json!("3")),
            ("bool", json!(true), json!(1)),
            ("Dict", json!({}), json!([])),
            ("void", json!(null), json!(null)),
        ] {
            assert!(is_of_type(kind, &ok), "{kind} {ok}");
            assert!(kind == "void" || !is_of_type(kind, &bad), "{kind} {bad}");
        }
    }

    #[test]
    fn dates_read_like_date() {
        assert_eq!(super::current_date(1_740_079_805_000), "Thu Feb 20 19:30:05 UTC 2025");
        assert_eq!(super::current_date(0), "Thu Jan  1 00:00:00 UTC 1970");
    }
}
