//! The packets of the NeuroDock protocol: `{"type": ..., "data": {...}}`,
//! and the checks of what clients send in them.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Packet types a client sends.
pub const AUTH: &str = "AUTH";
pub const ADD_TOOL: &str = "ADD_TOOL";
pub const QUERY: &str = "QUERY";
pub const TOOL_RESULT: &str = "TOOL_RESULT";
/// Packet types the server sends.
pub const AUTH_OK: &str = "AUTH_OK";
pub const TOOL_ADDED: &str = "TOOL_ADDED";
pub const RESPONSE: &str = "RESPONSE";
pub const TOOL_CALL: &str = "TOOL_CALL";
pub const ERROR: &str = "ERROR";

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

/// One packet, its type and data.
#[derive(Debug, Clone, PartialEq)]
pub struct Packet {
    pub kind: String,
    pub data: Map<String, Value>,
}

/// Reads a packet: an object with a string `type` and an object `data`
/// (absent or null reads as `{}`).
pub fn parse(v: Value) -> Result<Packet, String> {
    let Value::Object(mut o) = v else { return Err("a packet is a JSON object".into()) };
    let kind = match o.remove("type") {
        Some(Value::String(s)) if !s.is_empty() => s,
        Some(other) => return Err(format!("type must be a string, got {}", crate::json::kind_name(&other))),
        None => return Err("the packet has no type".into()),
    };
    let data = match o.remove("data") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(other) => return Err(format!("data must be an object, got {}", crate::json::kind_name(&other))),
    };
    Ok(Packet { kind, data })
}

pub fn packet(kind: &str, data: Value) -> Value {
    json!({"type": kind, "data": data})
}

/// An `ERROR` packet: `code` is one word, `about` the type of the packet it
/// answers, when known.
pub fn error(code: &str, message: impl Into<String>, about: Option<&str>) -> Value {
    let mut data = json!({"code": code, "message": message.into()});
    if let Some(a) = about {
        data["about"] = json!(a);
    }
    packet(ERROR, data)
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

pub fn check_name(name: &str) -> Result<(), String> {
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

/// Checks the data of an `ADD_TOOL` packet.
pub fn check_tool(data: &Map<String, Value>) -> Result<ToolSpec, String> {
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
    if super::tools::is_builtin(&name) {
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
pub fn check_args(spec: &ToolSpec, args: &Map<String, Value>) -> Result<(), String> {
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

/// Puts the tools' results into the message: `%N` is replaced by the N-th
/// result (from 0) as compact JSON; results the message does not refer to
/// lead it, one per line, in order. A `%` not followed by the number of a
/// result is left as it is.
pub fn compose(message: &str, results: &[Value]) -> String {
    let mut used = vec![false; results.len()];
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let digits = after.chars().take_while(|c| c.is_ascii_digit()).count();
        match after[..digits].parse::<usize>().ok().filter(|n| *n < results.len()) {
            Some(n) => {
                out.push_str(&results[n].to_string());
                used[n] = true;
                rest = &after[digits..];
            }
            None => {
                out.push('%');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let mut lead = String::new();
    for (r, u) in results.iter().zip(&used) {
        if !u {
            lead.push_str(&r.to_string());
            lead.push('\n');
        }
    }
    lead + &out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_n_is_replaced_and_the_rest_lead() {
        let r = [json!({"result": "a", "tool": "x"}), json!({"result": 2, "tool": "y"})];
        assert_eq!(compose("now %0 and %0; 100%", &r), format!("{}\nnow {} and {}; 100%", r[1], r[0], r[0]));
        assert_eq!(compose("%1 then %7", &r), format!("{}\n{} then %7", r[0], r[1]));
        assert_eq!(compose("plain", &[]), "plain");
    }

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
}
