//! The structured formats a digest reads: JSON, JSON Lines, CSV and
//! Markdown (front matter and `key: value` lines). Each yields records: a
//! map of field to value, or the reason the record could not be read.
//! Nothing here masks or validates names; `super` does.

use crate::json::kind_name;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Jsonl,
    Csv,
    Markdown,
    Text,
}

/// The accepted `content_type` values, exactly.
pub const CONTENT_TYPES: [&str; 6] =
    ["application/json", "application/x-ndjson", "application/jsonl", "text/csv", "text/markdown", "text/plain"];

impl Format {
    pub fn from_content_type(ct: &str) -> Result<Format, String> {
        Ok(match ct {
            "application/json" => Format::Json,
            "application/x-ndjson" | "application/jsonl" => Format::Jsonl,
            "text/csv" => Format::Csv,
            "text/markdown" => Format::Markdown,
            "text/plain" => Format::Text,
            other => return Err(format!("content_type must be one of {}, got {other:?}", CONTENT_TYPES.join(", "))),
        })
    }
}

/// One record of the content.
#[derive(Debug, Clone)]
pub struct Record {
    /// 1-based line of the content it starts on, where the format has lines.
    pub line: Option<usize>,
    pub fields: Result<Map<String, Value>, String>,
    /// The field that names the subject when the record has no `id`,
    /// `subject` or `@id` (CSV: the first column).
    pub id_fallback: Option<String>,
}

impl Record {
    fn ok(line: Option<usize>, fields: Map<String, Value>) -> Record {
        Record { line, fields: Ok(fields), id_fallback: None }
    }
    fn err(line: Option<usize>, reason: String) -> Record {
        Record { line, fields: Err(reason), id_fallback: None }
    }
}

/// A JSON document: an object (one record) or an array (one record per
/// element; an element that is not an object is a rejected record). Any
/// other document is an error of the whole request.
pub fn json(content: &str) -> Result<Vec<Record>, String> {
    let doc: Value = serde_json::from_str(content).map_err(|e| format!("content is not valid JSON: {e}"))?;
    match doc {
        Value::Object(o) => Ok(vec![Record::ok(None, o)]),
        Value::Array(items) => Ok(items
            .into_iter()
            .map(|v| match v {
                Value::Object(o) => Record::ok(None, o),
                other => Record::err(None, format!("not a JSON object but {}", kind_name(&other))),
            })
            .collect()),
        other => Err(format!("a JSON document must be an object or an array of objects, not {}", kind_name(&other))),
    }
}


/// JSON Lines: each line that is not blank is one record.
pub fn jsonl(content: &str) -> Vec<Record> {
    content
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| match serde_json::from_str::<Value>(l) {
            Ok(Value::Object(o)) => Record::ok(Some(i + 1), o),
            Ok(other) => Record::err(Some(i + 1), format!("not a JSON object but {}", kind_name(&other))),
            Err(e) => Record::err(Some(i + 1), format!("not valid JSON: {e}")),
        })
        .collect()
}

/// CSV (RFC 4180: commas, `"` quoting with `""` for a quote, CRLF or LF).
/// The first row is the header (the predicates); every later row that is
/// not blank is a record. A row with a different number of fields than the
/// header is rejected. Cells are strings; `super` infers numbers and
/// booleans after masking. An empty cell states nothing.
pub fn csv(content: &str) -> Vec<Record> {
    let rows = csv_rows(content);
    let mut it = rows.into_iter();
    let Some((_, header)) = it.next() else { return Vec::new() };
    let header: Vec<String> = header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let h = h.trim().trim_start_matches('\u{feff}').trim();
            if h.is_empty() {
                format!("column{}", i + 1)
            } else {
                h.to_string()
            }
        })
        .collect();
    let mut out = Vec::new();
    for (line, row) in it {
        if row.len() == 1 && row[0].trim().is_empty() {
            continue;
        }
        if row.len() != header.len() {
            out.push(Record::err(
                Some(line),
                format!("row has {} fields, the header has {}", row.len(), header.len()),
            ));
            continue;
        }
        let mut fields = Map::new();
        for (h, cell) in header.iter().zip(row) {
            if !cell.trim().is_empty() {
                fields.insert(h.clone(), Value::String(cell));
            }
        }
        out.push(Record { line: Some(line), fields: Ok(fields), id_fallback: header.first().cloned() });
    }
    out
}

/// Rows of fields, each with the 1-based line it starts on. An unterminated
/// quote runs to the end of the content.
fn csv_rows(content: &str) -> Vec<(usize, Vec<String>)> {
    let mut rows = Vec::new();
    let mut row: Vec<String> = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut line = 1;
    let mut row_line = 1;
    let mut chars = content.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.trim().is_empty() => {
                field.clear();
                quoted = true;
            }
            ',' => row.push(std::mem::take(&mut field)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push((row_line, std::mem::take(&mut row)));
                line += 1;
                row_line = line;
            }
            _ => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push((row_line, row));
    }
    rows
}

/// What a Markdown document states: its front matter and its `key: value`
/// lines (each one record, in order), and its first heading.
#[derive(Debug, Clone, Default)]
pub struct Markdown {
    pub front: Vec<(usize, String, Value)>,
    pub lines: Vec<(usize, String, Value)>,
    pub heading: Option<String>,
}

/// Front matter: the content starts with a `---` line and the block ends at
/// the next `---` (or `...`) line; inside, `key: value` lines (values as in
/// [`scalar`]; `key: [a, b]` and `key:` followed by `- item` lines are
/// lists; `#` lines are comments). After it, outside fenced code blocks, a
/// line `key: value` (optionally a list item or with the key in bold) whose
/// key is 1 to 4 words of letters, digits, `_` or `-` starting with a letter
/// is a record. Keys are lower-cased and their spaces become `_`.
pub fn markdown(content: &str) -> Markdown {
    let mut out = Markdown::default();
    let lines: Vec<&str> = content.lines().collect();
    let mut i = 0;
    if lines.first().map(|l| l.trim_end()) == Some("---") {
        let end = lines.iter().skip(1).position(|l| matches!(l.trim_end(), "---" | "..."));
        if let Some(end) = end.map(|e| e + 1) {
            let mut k = 1;
            while k < end {
                let l = lines[k];
                let t = l.trim();
                if t.is_empty() || t.starts_with('#') || l.starts_with(' ') || l.starts_with('\t') {
                    k += 1;
                    continue;
                }
                if let Some((key, value)) = t.split_once(':') {
                    let key = normalize_key(key);
                    let value = value.trim();
                    if !key.is_empty() {
                        if value.is_empty() {
                            let mut items = Vec::new();
                            while k + 1 < end && lines[k + 1].trim_start().starts_with("- ") {
                                k += 1;
                                items.push(scalar(lines[k].trim_start()[2..].trim()));
                            }
                            if !items.is_empty() {
                                out.front.push((k + 1 - items.len(), key, Value::Array(items)));
                            }
                        } else {
                            out.front.push((k + 1, key, list_or_scalar(value)));
                        }
                    }
                }
                k += 1;
            }
            i = end + 1;
        }
    }
    let mut fenced = false;
    for (n, l) in lines.iter().enumerate().skip(i) {
        let t = l.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(h) = t.strip_prefix('#') {
            let h = h.trim_start_matches('#');
            if out.heading.is_none() && h.starts_with(' ') && !h.trim().is_empty() {
                out.heading = Some(h.trim().to_string());
            }
            continue;
        }
        if let Some((key, value)) = key_value_line(t) {
            out.lines.push((n + 1, key, value));
        }
    }
    out
}

fn key_value_line(t: &str) -> Option<(String, Value)> {
    let t = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")).or_else(|| t.strip_prefix("+ ")).unwrap_or(t).trim();
    let (key, value) = if let Some(rest) = t.strip_prefix("**").or_else(|| t.strip_prefix("__")) {
        // **Key:** value, or **Key**: value
        let close = rest.find("**").or_else(|| rest.find("__"))?;
        let (inner, after) = (&rest[..close], &rest[close + 2..]);
        match (inner.strip_suffix(':'), after.strip_prefix(':')) {
            (Some(k), _) => (k, after),
            (None, Some(v)) => (inner, v),
            _ => return None,
        }
    } else {
        let (k, v) = t.split_once(':')?;
        (k, v)
    };
    // A space must follow the colon: `Person:sarah`, URLs and times are not keys.
    if !(value.starts_with(' ') || value.starts_with('\t')) {
        return None;
    }
    let value = value.trim();
    let words: Vec<&str> = key.split_whitespace().collect();
    let key_ok = !words.is_empty()
        && words.len() <= 4
        && key.len() <= 64
        && key.trim_start().starts_with(|c: char| c.is_ascii_alphabetic())
        && words.iter().all(|w| w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    if !key_ok || value.is_empty() {
        return None;
    }
    Some((normalize_key(key), scalar(value)))
}

fn normalize_key(k: &str) -> String {
    k.split_whitespace().collect::<Vec<_>>().join("_").to_lowercase()
}

fn list_or_scalar(v: &str) -> Value {
    match v.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        Some(inner) if !inner.trim().is_empty() => {
            Value::Array(inner.split(',').map(|x| scalar(x.trim())).collect())
        }
        _ => scalar(v),
    }
}

/// A Markdown/YAML-ish value: quoted text is a string, `true`/`false` are
/// booleans, a plain decimal number is a number (see [`infer`]), `null` and
/// `~` are null; anything else is the text.
pub fn scalar(v: &str) -> Value {
    let v = v.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return Value::String(v[1..v.len() - 1].to_string());
        }
    }
    if v == "null" || v == "~" {
        return Value::Null;
    }
    infer(v)
}

/// Text that is a plain decimal number (no leading zeros, no `+`, at most
/// 15 significant digits) becomes a number, `true`/`false` a boolean;
/// anything else stays text. So `02134` and `+14155550132` stay text.
pub fn infer(v: &str) -> Value {
    match v {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        _ => {}
    }
    let body = v.strip_prefix('-').unwrap_or(v);
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    let int_ok = !int.is_empty() && int.bytes().all(|c| c.is_ascii_digit()) && (int == "0" || !int.starts_with('0'));
    let frac_ok = frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()));
    if int_ok && frac_ok && int.len() + frac.map_or(0, str::len) <= 15 {
        if frac.is_none() {
            if let Ok(n) = v.parse::<i64>() {
                return Value::from(n);
            }
        } else if let Some(n) = v.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn csv_quoting_and_shapes() {
        let r = csv("id,name,note\r\n1,\"Chen, Sarah\",\"said \"\"hi\"\"\"\n\n2,Bob\n3,Tom,\"two\nlines\"\n");
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].fields.as_ref().unwrap()["name"], "Chen, Sarah");
        assert_eq!(r[0].fields.as_ref().unwrap()["note"], "said \"hi\"");
        assert_eq!(r[0].line, Some(2));
        assert!(r[1].fields.as_ref().unwrap_err().contains("2 fields"));
        assert_eq!(r[1].line, Some(4));
        assert_eq!(r[2].fields.as_ref().unwrap()["note"], "two\nlines");
        assert_eq!(r[2].id_fallback.as_deref(), Some("id"));
    }

    #[test]
    fn markdown_front_matter_and_lines() {
        let md = "---\nsubject: Person:sarah\ntags: [a, b]\nroles:\n  - lead\n  - dev\n---\n# Notes on Sarah\n\nEmployer: Org:acme\n- **Start date:** 2024-01-15\nPerson:sarah likes tea\nsee https://x.y\n```\ncode: skipped\n```\n";
        let m = markdown(md);
        assert_eq!(m.heading.as_deref(), Some("Notes on Sarah"));
        let front: Vec<(String, Value)> = m.front.iter().map(|(_, k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(front, vec![
            ("subject".into(), json!("Person:sarah")),
            ("tags".into(), json!(["a", "b"])),
            ("roles".into(), json!(["lead", "dev"])),
        ]);
        let lines: Vec<(usize, String, Value)> = m.lines.clone();
        assert_eq!(lines, vec![(10, "employer".into(), json!("Org:acme")), (11, "start_date".into(), json!("2024-01-15"))]);
    }

    #[test]
    fn inference() {
        assert_eq!(infer("42"), json!(42));
        assert_eq!(infer("-1.5"), json!(-1.5));
        assert_eq!(infer("02134"), json!("02134"));
        assert_eq!(infer("+1415"), json!("+1415"));
        assert_eq!(infer("true"), json!(true));
        assert_eq!(infer("1e5"), json!("1e5"));
        assert_eq!(scalar("'quoted'"), json!("quoted"));
    }
}
