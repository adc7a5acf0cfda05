//! Splitting an ingest body into records as its bytes arrive, so a delivery
//! of any size is read with memory bounded by one record, never the whole
//! body.
//!
//! Two framings:
//! - **JSON** (`application/json`): a sequence of top-level JSON values
//!   separated by whitespace. A top-level array is unwrapped into its
//!   elements, so one object, an array of objects, and objects one after
//!   another (JSON Lines sent as `application/json`) all work.
//! - **JSON Lines** (`application/x-ndjson`, `application/jsonl`): one
//!   record per line; a broken line is that line's error and the next line
//!   starts afresh.
//!
//! A record longer than the limit is skipped (its bytes are scanned, not
//! kept) and reported as an error.

use crate::json::kind_name;
use serde_json::{Map, Value};

/// One record cut from the body: its 1-based number, the line it starts on,
/// and its fields or why it is unusable.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    pub record: usize,
    pub line: usize,
    pub fields: Result<Map<String, Value>, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Json,
    Lines,
}

impl Framing {
    /// The framing a content type asks for; `None` for types not read here.
    pub fn from_content_type(ct: &str) -> Option<Framing> {
        let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/json" | "text/json" | "" => Some(Framing::Json),
            "application/x-ndjson"
            | "application/ndjson"
            | "application/jsonl"
            | "application/x-jsonlines"
            | "application/jsonlines"
            | "application/json-lines"
            | "text/jsonl" => Some(Framing::Lines),
            _ => None,
        }
    }
}

/// The incremental splitter: feed it bytes with [`Splitter::push`], then
/// call [`Splitter::finish`].
#[derive(Debug)]
pub struct Splitter {
    framing: Framing,
    max_record: usize,
    records: usize,
    /// The line the next byte is on.
    line: usize,
    // The record being cut.
    buf: Vec<u8>,
    start_line: usize,
    oversized: bool,
    /// Inside a value (JSON framing), or inside a non-blank line (lines).
    active: bool,
    depth: usize,
    in_string: bool,
    escape: bool,
    /// A top-level scalar is being skipped (JSON framing).
    scalar: bool,
    /// Inside the top-level array being unwrapped (JSON framing).
    in_array: bool,
}

impl Splitter {
    pub fn new(framing: Framing, max_record: usize) -> Splitter {
        Splitter {
            framing,
            max_record,
            records: 0,
            line: 1,
            buf: Vec::new(),
            start_line: 1,
            oversized: false,
            active: false,
            depth: 0,
            in_string: false,
            escape: false,
            scalar: false,
            in_array: false,
        }
    }

    /// Records cut so far.
    pub fn records(&self) -> usize {
        self.records
    }

    /// Cuts the records `bytes` completes, appending them to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Cut>) {
        match self.framing {
            Framing::Lines => self.push_lines(bytes, out),
            Framing::Json => self.push_json(bytes, out),
        }
    }

    /// The end of the body: a record left open is cut (lines) or reported
    /// as cut short (JSON).
    pub fn finish(&mut self, out: &mut Vec<Cut>) {
        match self.framing {
            Framing::Lines => {
                if self.active {
                    self.emit_line(out);
                }
            }
            Framing::Json => {
                if self.active {
                    let err = if self.scalar {
                        self.scalar_error()
                    } else {
                        "the body ends inside this record (unbalanced braces or an unclosed string)".to_string()
                    };
                    self.emit_error(err, out);
                }
            }
        }
    }

    fn keep(&mut self, b: u8) {
        if self.oversized {
            return;
        }
        if self.buf.len() >= self.max_record {
            self.oversized = true;
            self.buf = Vec::new();
            return;
        }
        self.buf.push(b);
    }

    fn begin(&mut self) {
        self.active = true;
        self.start_line = self.line;
        self.buf.clear();
        self.oversized = false;
    }

    fn emit(&mut self, out: &mut Vec<Cut>) {
        self.records += 1;
        let fields = if self.oversized {
            Err(format!("the record is longer than the limit of {} bytes", self.max_record))
        } else {
            parse_object(&self.buf)
        };
        out.push(Cut { record: self.records, line: self.start_line, fields });
        self.reset();
    }

    fn emit_error(&mut self, reason: String, out: &mut Vec<Cut>) {
        self.records += 1;
        out.push(Cut { record: self.records, line: self.start_line, fields: Err(reason) });
        self.reset();
    }

    fn reset(&mut self) {
        self.active = false;
        self.buf.clear();
        self.oversized = false;
        self.depth = 0;
        self.in_string = false;
        self.escape = false;
        self.scalar = false;
    }

    // ---------------------------------------------------------------- lines

    fn push_lines(&mut self, bytes: &[u8], out: &mut Vec<Cut>) {
        for &b in bytes {
            if b == b'\n' {
                if self.active {
                    self.emit_line(out);
                }
                self.line += 1;
                continue;
            }
            if !self.active {
                if b.is_ascii_whitespace() {
                    continue;
                }
                self.begin();
            }
            self.keep(b);
        }
    }

    fn emit_line(&mut self, out: &mut Vec<Cut>) {
        while self.buf.last().is_some_and(|b| b.is_ascii_whitespace()) {
            self.buf.pop();
        }
        self.emit(out);
    }

    // ---------------------------------------------------------------- JSON

    fn push_json(&mut self, bytes: &[u8], out: &mut Vec<Cut>) {
        for &b in bytes {
            if self.active {
                self.json_inside(b, out);
            } else {
                self.json_between(b, out);
            }
            if b == b'\n' {
                self.line += 1;
            }
        }
    }

    /// A byte between records.
    fn json_between(&mut self, b: u8, out: &mut Vec<Cut>) {
        match b {
            _ if b.is_ascii_whitespace() => {}
            b'[' if !self.in_array => self.in_array = true,
            b']' if self.in_array => self.in_array = false,
            b',' if self.in_array => {}
            b'{' | b'[' => {
                self.begin();
                self.depth = 1;
                self.keep(b);
            }
            b'}' | b']' | b',' | b':' => {
                self.start_line = self.line;
                self.emit_error(format!("unexpected {:?} between records", b as char), out);
            }
            _ => {
                // A scalar where a record belongs: skip to its end.
                self.begin();
                self.scalar = true;
                self.in_string = b == b'"';
                self.keep(b);
            }
        }
    }

    /// A byte inside a record (or a skipped scalar).
    fn json_inside(&mut self, b: u8, out: &mut Vec<Cut>) {
        if self.in_string {
            self.keep(b);
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        if self.scalar {
            if b.is_ascii_whitespace() || matches!(b, b',' | b']' | b'}' | b'[' | b'{') {
                let err = self.scalar_error();
                self.emit_error(err, out);
                // The delimiter belongs to what follows.
                self.json_between(b, out);
            } else {
                self.keep(b);
                if b == b'"' {
                    self.in_string = true;
                }
            }
            return;
        }
        self.keep(b);
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth -= 1;
                if self.depth == 0 {
                    self.emit(out);
                }
            }
            _ => {}
        }
    }

    fn scalar_error(&self) -> String {
        let shown: String = String::from_utf8_lossy(&self.buf).chars().take(40).collect();
        format!("a record must be a JSON object, got {shown}")
    }
}

fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Array(_)) => Err("a record must be a JSON object, got an array".into()),
        Ok(other) => Err(format!("a record must be a JSON object, got {}", kind_name(&other))),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    fn split(framing: Framing, body: &str, chunk: usize) -> Vec<Cut> {
        let mut s = Splitter::new(framing, 64);
        let mut out = Vec::new();
        for part in body.as_bytes().chunks(chunk.max(1)) {
            s.push(part, &mut out);
        }
        s.finish(&mut out);
        out
    }

    fn summary(cuts: &[Cut]) -> Vec<(usize, Result<String, String>)> {
        cuts.iter()
            .map(|c| {
                (
                    c.line,
                    c.fields
                        .clone()
                        .map(|m| Value::Object(m).to_string())
                        .map_err(|e| e.to_string()),
                )
            })
            .collect()
    }

    #[test]
    fn json_bodies_split_the_same_at_any_chunk_size() {
        let body = "[{\"a\":1},\n {\"b\":\"x]}\\\"\"}, 7, {\"c\":{\"d\":[1,2]}}]\n{\"e\":true}";
        let whole = split(Framing::Json, body, body.len());
        for chunk in 1..body.len() {
            assert_eq!(split(Framing::Json, body, chunk), whole, "chunk size {chunk}");
        }
        let s = summary(&whole);
        assert_eq!(s.len(), 5, "{s:?}");
        assert_eq!(s[0], (1, Ok("{\"a\":1}".into())));
        assert_eq!(s[1], (2, Ok("{\"b\":\"x]}\\\"\"}".into())));
        assert!(s[2].1.as_ref().unwrap_err().contains("must be a JSON object, got 7"), "{s:?}");
        assert_eq!(s[3].1, Ok("{\"c\":{\"d\":[1,2]}}".into()));
        assert_eq!(s[4], (3, Ok("{\"e\":true}".into())));
    }

    #[test]
    fn a_single_object_is_one_record() {
        let cuts = split(Framing::Json, " {\"id\": \"Person:sarah\"} ", 3);
        assert_eq!(cuts.len(), 1);
        assert!(cuts[0].fields.is_ok());
    }

    #[test]
    fn broken_json_is_reported_and_the_rest_goes_on() {
        let cuts = split(Framing::Json, "{\"a\":} {\"b\":2} } {\"c\":", 5);
        let s = summary(&cuts);
        assert!(s[0].1.as_ref().unwrap_err().starts_with("not valid JSON"), "{s:?}");
        assert_eq!(s[1].1, Ok("{\"b\":2}".into()));
        assert!(s[2].1.as_ref().unwrap_err().contains("unexpected '}'"), "{s:?}");
        assert!(s[3].1.as_ref().unwrap_err().contains("body ends inside"), "{s:?}");
    }

    #[test]
    fn lines_are_records_and_a_bad_line_is_only_its_own_error() {
        let body = "{\"a\":1}\n\n{\"b\":\n[1]\r\n{\"c\":3}";
        for chunk in 1..body.len() {
            let s = summary(&split(Framing::Lines, body, chunk));
            assert_eq!(s.len(), 4, "{s:?}");
            assert_eq!(s[0], (1, Ok("{\"a\":1}".into())));
            assert_eq!(s[1].0, 3);
            assert!(s[1].1.is_err());
            assert_eq!(s[2].0, 4);
            assert!(s[2].1.as_ref().unwrap_err().contains("got an array"));
            assert_eq!(s[3], (5, Ok("{\"c\":3}".into())));
        }
    }

    #[test]
    fn an_oversized_record_is_skipped_without_being_kept() {
        let big = format!("{{\"x\":\"{}\"}}", "y".repeat(200));
        for framing in [Framing::Json, Framing::Lines] {
            let body = format!("{big}\n{{\"ok\":1}}\n");
            let cuts = split(framing, &body, 7);
            assert_eq!(cuts.len(), 2);
            assert!(cuts[0].fields.as_ref().unwrap_err().contains("longer than the limit of 64 bytes"));
            assert_eq!(cuts[1].line, 2);
            assert!(cuts[1].fields.is_ok());
        }
    }

    #[test]
    fn content_types_pick_the_framing() {
        assert_eq!(Framing::from_content_type("application/json; charset=utf-8"), Some(Framing::Json));
        assert_eq!(Framing::from_content_type("application/x-ndjson"), Some(Framing::Lines));
        assert_eq!(Framing::from_content_type("application/jsonl"), Some(Framing::Lines));
        assert_eq!(Framing::from_content_type("text/csv"), None);
    }
}
