//! The packets of the NeuroDock protocol: `{"type": ..., "data": {...}}`,
//! and the checks of what clients send in them.

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

/// A `TOOL_ADDED` answer. `tool` is the definition the server holds (a
/// built-in's own when `builtin_note` says the tool is built in);
/// `ignored` names the fields of the `ADD_TOOL` it did not read, and is
/// left out when there are none.
pub fn tool_added(name: &str, tool: Value, builtin_note: Option<String>, ignored: &[String]) -> Value {
    let mut data = json!({"name": name, "tool": tool, "builtin": builtin_note.is_some()});
    if let Some(note) = builtin_note {
        data["note"] = json!(note);
    }
    if !ignored.is_empty() {
        data["ignored"] = json!(ignored);
    }
    packet(TOOL_ADDED, data)
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
}
