//! A HOCON reader for agent network files, producing `serde_json::Value`.
//!
//! It covers what neuro-san network files use, not the whole HOCON
//! specification: comments (`#`, `//`); optional root braces; quoted and
//! unquoted keys with `=`, `:` or no separator before an object; dotted key
//! paths; merging of repeated object keys; arrays separated by commas or
//! newlines; quoted, unquoted and triple-quoted strings; numbers, booleans and
//! null; concatenation of values on one line; `${path}` and `${?path}`
//! substitutions resolved against the whole document; and `include "file"`,
//! `include file("file")`, `include required(...)`.
//!
//! Deliberate differences from the specification, each for a reason:
//! - A substitution never falls back to an environment variable: a network
//!   file's values are served to clients (descriptions, parameters), so an
//!   environment variable must not leak into them by a typo in a path.
//! - A missing include is an error, not silently ignored: a silently missing
//!   `aaosa.hocon` only shows up later as an obscure missing substitution.
//! - `+=`, self-referential substitutions (`a = ${a} [1]`), `url(...)` and
//!   `classpath(...)` includes, and duration/size units are not supported.
//! - Substitution paths are always resolved from the document root, also in
//!   included files (network files include fragments at the root).
//!
//! Everything is bounded: file size, nesting depth, include depth, and the size
//! of the resolved document (substitutions can otherwise multiply it).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Number, Value};

/// Bounds on what one document may cost to read.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest file (or string) accepted, in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of objects and arrays, across includes.
    pub max_depth: usize,
    /// Deepest chain of includes.
    pub max_include_depth: usize,
    /// Upper bound on the resolved document: values plus string bytes.
    pub max_resolved_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bytes: 1 << 20, max_depth: 64, max_include_depth: 8, max_resolved_size: 16 << 20 }
    }
}

/// How to read a document.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub limits: Limits,
    /// Directories searched for an include after the including file's own
    /// directory. neuro-san resolves includes against its working directory
    /// (`include "registries/aaosa.hocon"`), so a registry passes its own
    /// directory and that directory's parent here.
    pub include_dirs: Vec<PathBuf>,
    /// Files under this directory are named relative to it in errors
    /// (`deep/math_guy.hocon` rather than a full path).
    pub display_base: Option<PathBuf>,
}

impl Options {
    fn display(&self, path: &Path) -> String {
        let shown = self.display_base.as_deref().and_then(|base| path.strip_prefix(base).ok()).unwrap_or(path);
        shown.display().to_string()
    }
}

/// Where in which file something went wrong, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoconError {
    pub file: String,
    /// 1-based; 0 when the error is about the file as a whole (unreadable, too large).
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl fmt::Display for HoconError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
        }
    }
}

impl std::error::Error for HoconError {}

/// Reads the file at `path`; includes are found relative to it first.
pub fn parse_file(path: &Path, options: &Options) -> Result<Value, HoconError> {
    let display = options.display(path);
    let text = read_bounded(path, &display, options, None)?;
    parse_document(&text, &display, path.parent().map(Path::to_path_buf), options)
}

/// Reads `text` named `name` in errors; includes are searched in
/// `options.include_dirs` only.
pub fn parse_str(text: &str, name: &str, options: &Options) -> Result<Value, HoconError> {
    if text.len() > options.limits.max_bytes {
        return Err(HoconError {
            file: name.to_string(),
            line: 0,
            column: 0,
            message: format!("document is larger than the limit of {} bytes", options.limits.max_bytes),
        });
    }
    parse_document(text, name, None, options)
}

fn parse_document(text: &str, name: &str, dir: Option<PathBuf>, options: &Options) -> Result<Value, HoconError> {
    let file: Arc<str> = Arc::from(name);
    let mut root = BTreeMap::new();
    let mut parser = Parser::new(text, file, dir, options, 0, 0);
    parser.parse_root(&mut root)?;
    let root = Raw::Obj(root);
    let mut resolver =
        Resolver { root: &root, memo: HashMap::new(), stack: Vec::new(), size: 0, options, file: Arc::from(name) };
    match resolver.resolve(&root)? {
        Some(value) => Ok(value),
        None => Ok(Value::Object(Map::new())),
    }
}

fn read_bounded(path: &Path, display: &str, options: &Options, at: Option<&Pos>) -> Result<String, HoconError> {
    let fail = |message: String| match at {
        Some(pos) => pos.error(message),
        None => HoconError { file: display.to_string(), line: 0, column: 0, message },
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("cannot read {display}: {e}")))?;
    if meta.len() > options.limits.max_bytes as u64 {
        return Err(fail(format!("{display} is larger than the limit of {} bytes", options.limits.max_bytes)));
    }
    let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read {display}: {e}")))?;
    String::from_utf8(bytes).map_err(|_| fail(format!("{display} is not valid UTF-8")))
}

// --- the unresolved tree -------------------------------------------------------

#[derive(Clone, Debug)]
struct Pos {
    file: Arc<str>,
    line: u32,
    column: u32,
}

impl Pos {
    fn error(&self, message: impl Into<String>) -> HoconError {
        HoconError { file: self.file.to_string(), line: self.line, column: self.column, message: message.into() }
    }
}

/// A value as written, before substitutions are resolved.
#[derive(Clone, Debug)]
enum Raw {
    Obj(BTreeMap<String, Raw>),
    Arr(Vec<Raw>),
    Val(Value),
    /// Pieces written next to each other on one line, or a lone substitution.
    Concat(Vec<Piece>, Pos),
}

#[derive(Clone, Debug)]
enum Piece {
    /// Whitespace between two pieces: kept when the result is a string.
    Space(String),
    /// A quoted string (never read as a number or boolean).
    Text(String),
    /// An unquoted run of characters.
    Unquoted(String),
    Subst {
        path: Vec<String>,
        optional: bool,
        pos: Pos,
    },
    Value(Raw),
}

/// Later definitions win, except that two objects merge key by key.
fn merge_into(map: &mut BTreeMap<String, Raw>, key: String, value: Raw) {
    match (map.get_mut(&key), value) {
        (Some(Raw::Obj(existing)), Raw::Obj(new)) => {
            for (k, v) in new {
                merge_into(existing, k, v);
            }
        }
        (_, value) => {
            map.insert(key, value);
        }
    }
}

// --- parsing -------------------------------------------------------------------

/// Characters that end an unquoted string or key (the HOCON "forbidden" set).
fn is_forbidden(c: char) -> bool {
    matches!(
        c,
        '$' | '"' | '{' | '}' | '[' | ']' | ':' | '=' | ',' | '+' | '#' | '`' | '^' | '?' | '!' | '@' | '*' | '&'
    ) || c == '\\'
}

fn is_space(c: char) -> bool {
    c != '\n' && c.is_whitespace()
}

struct Parser<'a> {
    chars: Vec<char>,
    at: usize,
    line: u32,
    column: u32,
    file: Arc<str>,
    dir: Option<PathBuf>,
    options: &'a Options,
    depth: usize,
    include_depth: usize,
}

impl<'a> Parser<'a> {
    fn new(
        text: &str,
        file: Arc<str>,
        dir: Option<PathBuf>,
        options: &'a Options,
        depth: usize,
        include_depth: usize,
    ) -> Self {
        // A byte-order mark is not content.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        Parser { chars: text.chars().collect(), at: 0, line: 1, column: 1, file, dir, options, depth, include_depth }
    }

    fn pos(&self) -> Pos {
        Pos { file: self.file.clone(), line: self.line, column: self.column }
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, HoconError> {
        Err(self.pos().error(message))
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.at + offset).copied()
    }

    fn starts_with(&self, s: &str) -> bool {
        s.chars().enumerate().all(|(i, c)| self.peek_at(i) == Some(c))
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn at_comment(&self) -> bool {
        self.peek() == Some('#') || self.starts_with("//")
    }

    fn skip_comment(&mut self) {
        while let Some(c) = self.peek() {
            if c == '\n' {
                break;
            }
            self.bump();
        }
    }

    /// Skips spaces and comments on this line; returns whether any was skipped.
    fn skip_line_space(&mut self) -> bool {
        let start = self.at;
        loop {
            match self.peek() {
                Some(c) if is_space(c) => {
                    self.bump();
                }
                _ if self.at_comment() => self.skip_comment(),
                _ => break,
            }
        }
        self.at != start
    }

    /// Skips spaces, comments and newlines.
    fn skip_all_space(&mut self) {
        loop {
            self.skip_line_space();
            if self.peek() == Some('\n') {
                self.bump();
            } else {
                break;
            }
        }
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "end of file".to_string(),
            Some('\n') => "end of line".to_string(),
            Some(c) => format!("'{c}'"),
        }
    }

    fn enter(&mut self) -> Result<(), HoconError> {
        self.depth += 1;
        if self.depth > self.options.limits.max_depth {
            return self.err(format!("nesting deeper than the limit of {}", self.options.limits.max_depth));
        }
        Ok(())
    }

    /// The whole document: fields with or without root braces. A braced
    /// object may also follow includes at the root, as neuro-san files do.
    fn parse_root(&mut self, root: &mut BTreeMap<String, Raw>) -> Result<(), HoconError> {
        loop {
            self.skip_all_space();
            match self.peek() {
                None => return Ok(()),
                Some('{') => {
                    self.bump();
                    self.enter()?;
                    self.parse_fields(root, Some('}'))?;
                    self.depth -= 1;
                }
                Some('[') => return self.err("expected an object at the root, got an array"),
                Some(',') => {
                    self.bump();
                }
                Some(_) => self.parse_field(root)?,
            }
        }
    }

    /// Fields up to `close` (or the end of the document when `None`).
    fn parse_fields(&mut self, map: &mut BTreeMap<String, Raw>, close: Option<char>) -> Result<(), HoconError> {
        loop {
            self.skip_all_space();
            match (self.peek(), close) {
                (None, None) => return Ok(()),
                (None, Some(c)) => return self.err(format!("expected '{c}' to close the object, got end of file")),
                (Some(c), Some(close)) if c == close => {
                    self.bump();
                    return Ok(());
                }
                _ => {}
            }
            self.parse_field(map)?;
            // A field ends at a comma, a newline, or the closing brace.
            self.skip_line_space();
            match self.peek() {
                Some(',') | Some('\n') => {
                    self.bump();
                }
                None => {}
                Some(c) if Some(c) == close => {}
                _ => return self.err(format!("expected ',' or a new line after a field, got {}", self.describe())),
            }
        }
    }

    fn parse_field(&mut self, map: &mut BTreeMap<String, Raw>) -> Result<(), HoconError> {
        if self.starts_with("include") && self.peek_at(7).is_some_and(|c| is_space(c) || c == '"') {
            return self.parse_include(map);
        }
        let path = self.parse_key()?;
        self.skip_line_space();
        let value = match self.peek() {
            Some('=') | Some(':') => {
                self.bump();
                self.skip_all_space();
                self.parse_value()?
            }
            Some('{') => self.parse_value()?,
            Some('+') if self.peek_at(1) == Some('=') => return self.err("'+=' is not supported"),
            _ => {
                return self.err(format!(
                    "expected '=', ':' or '{{' after the key '{}', got {}",
                    path.join("."),
                    self.describe()
                ))
            }
        };
        // `a.b.c = v` is `a { b { c = v } }`.
        let mut value = value;
        for key in path[1..].iter().rev() {
            let mut inner = BTreeMap::new();
            inner.insert(key.clone(), value);
            value = Raw::Obj(inner);
        }
        merge_into(map, path[0].clone(), value);
        Ok(())
    }

    /// A key path: quoted or unquoted segments joined by dots.
    fn parse_key(&mut self) -> Result<Vec<String>, HoconError> {
        let mut path = Vec::new();
        let mut current = String::new();
        let mut any = false;
        loop {
            match self.peek() {
                Some('"') => {
                    if self.starts_with("\"\"\"") {
                        return self.err("a key cannot be a triple-quoted string");
                    }
                    current.push_str(&self.parse_quoted()?);
                    any = true;
                }
                Some('.') => {
                    if !any {
                        return self.err("expected a key segment before '.'");
                    }
                    self.bump();
                    path.push(std::mem::take(&mut current));
                    any = false;
                }
                Some(c) if !is_forbidden(c) && !c.is_whitespace() && c != '.' && !self.starts_with("//") => {
                    current.push(c);
                    self.bump();
                    any = true;
                }
                _ => break,
            }
        }
        if !any {
            return self.err(format!("expected a key, got {}", self.describe()));
        }
        path.push(current);
        Ok(path)
    }

    fn parse_include(&mut self, map: &mut BTreeMap<String, Raw>) -> Result<(), HoconError> {
        let pos = self.pos();
        for _ in 0..7 {
            self.bump();
        }
        self.skip_line_space();
        // include "x" | include file("x") | include required("x") | include required(file("x"))
        let mut closers = 0;
        loop {
            if self.peek() == Some('"') {
                break;
            }
            let word: String = self.chars[self.at..].iter().take_while(|c| c.is_ascii_alphabetic()).collect();
            match word.as_str() {
                "file" | "required" => {
                    for _ in 0..word.len() {
                        self.bump();
                    }
                    if self.peek() != Some('(') {
                        return self.err(format!("expected '(' after {word}, got {}", self.describe()));
                    }
                    self.bump();
                    closers += 1;
                }
                "url" | "classpath" => return self.err(format!("include {word}(...) is not supported, only files")),
                _ => return self.err(format!("expected a quoted file name after include, got {}", self.describe())),
            }
        }
        let name = self.parse_quoted()?;
        for _ in 0..closers {
            if self.peek() != Some(')') {
                return self.err(format!("expected ')' to close the include, got {}", self.describe()));
            }
            self.bump();
        }
        if self.include_depth + 1 > self.options.limits.max_include_depth {
            return Err(pos
                .error(format!("includes nested deeper than the limit of {}", self.options.limits.max_include_depth)));
        }
        let path = self.find_include(&name).ok_or_else(|| pos.error(format!("included file \"{name}\" not found")))?;
        let display = self.options.display(&path);
        let text = read_bounded(&path, &display, self.options, Some(&pos))?;
        let mut inner = Parser::new(
            &text,
            Arc::from(display.as_str()),
            path.parent().map(Path::to_path_buf),
            self.options,
            self.depth,
            self.include_depth + 1,
        );
        let mut fields = BTreeMap::new();
        inner.parse_root(&mut fields)?;
        for (k, v) in fields {
            merge_into(map, k, v);
        }
        Ok(())
    }

    fn find_include(&self, name: &str) -> Option<PathBuf> {
        let candidate = Path::new(name);
        if candidate.is_absolute() {
            return candidate.is_file().then(|| candidate.to_path_buf());
        }
        self.dir.iter().chain(self.options.include_dirs.iter()).map(|d| d.join(candidate)).find(|p| p.is_file())
    }

    /// A value: one or more pieces on the line (a concatenation).
    fn parse_value(&mut self) -> Result<Raw, HoconError> {
        let pos = self.pos();
        let mut pieces: Vec<Piece> = Vec::new();
        loop {
            match self.peek() {
                None | Some('\n') | Some(',') | Some('}') | Some(']') => break,
                _ if self.at_comment() => break,
                Some(c) if is_space(c) => {
                    let mut space = String::new();
                    while let Some(c) = self.peek().filter(|c| is_space(*c)) {
                        space.push(c);
                        self.bump();
                    }
                    pieces.push(Piece::Space(space));
                }
                Some('"') if self.starts_with("\"\"\"") => pieces.push(Piece::Text(self.parse_triple()?)),
                Some('"') => pieces.push(Piece::Text(self.parse_quoted()?)),
                Some('$') if self.peek_at(1) == Some('{') => pieces.push(self.parse_subst()?),
                Some('{') => {
                    self.bump();
                    self.enter()?;
                    let mut map = BTreeMap::new();
                    self.parse_fields(&mut map, Some('}'))?;
                    self.depth -= 1;
                    pieces.push(Piece::Value(Raw::Obj(map)));
                }
                Some('[') => pieces.push(Piece::Value(self.parse_array()?)),
                Some(c) if is_forbidden(c) => {
                    return self.err(format!("unexpected '{c}' in a value (quote the string if it is meant literally)"))
                }
                Some(_) => {
                    let mut text = String::new();
                    while let Some(c) = self.peek() {
                        if is_forbidden(c) || c.is_whitespace() || self.starts_with("//") {
                            break;
                        }
                        text.push(c);
                        self.bump();
                    }
                    pieces.push(Piece::Unquoted(text));
                }
            }
        }
        while matches!(pieces.last(), Some(Piece::Space(_))) {
            pieces.pop();
        }
        match pieces.len() {
            0 => Err(pos.error(format!("expected a value, got {}", self.describe()))),
            1 => Ok(match pieces.remove(0) {
                Piece::Text(s) => Raw::Val(Value::String(s)),
                Piece::Unquoted(s) => Raw::Val(unquoted_scalar(s)),
                Piece::Value(raw) => raw,
                subst @ Piece::Subst { .. } => Raw::Concat(vec![subst], pos),
                Piece::Space(_) => Raw::Val(Value::String(String::new())),
            }),
            _ => Ok(Raw::Concat(pieces, pos)),
        }
    }

    fn parse_array(&mut self) -> Result<Raw, HoconError> {
        self.bump();
        self.enter()?;
        let mut items = Vec::new();
        loop {
            self.skip_all_space();
            match self.peek() {
                None => return self.err("expected ']' to close the array, got end of file"),
                Some(']') => {
                    self.bump();
                    break;
                }
                Some(',') => return self.err("expected a value in the array, got ','"),
                _ => {}
            }
            items.push(self.parse_value()?);
            self.skip_line_space();
            match self.peek() {
                Some(',') | Some('\n') => {
                    self.bump();
                }
                Some(']') => {}
                _ => return self.err(format!("expected ',' or ']' after an array element, got {}", self.describe())),
            }
        }
        self.depth -= 1;
        Ok(Raw::Arr(items))
    }

    fn parse_subst(&mut self) -> Result<Piece, HoconError> {
        let pos = self.pos();
        self.bump();
        self.bump();
        let optional = self.peek() == Some('?');
        if optional {
            self.bump();
        }
        self.skip_line_space();
        let path = self.parse_key()?;
        self.skip_line_space();
        if self.peek() != Some('}') {
            return self.err(format!("expected '}}' to close the substitution, got {}", self.describe()));
        }
        self.bump();
        Ok(Piece::Subst { path, optional, pos })
    }

    /// A JSON-style quoted string on one line.
    fn parse_quoted(&mut self) -> Result<String, HoconError> {
        let start = self.pos();
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return Err(start.error("unterminated string: expected a closing '\"'")),
                Some('"') => return Ok(out),
                Some('\\') => {
                    let c = self.bump();
                    match c {
                        Some('"') => out.push('"'),
                        Some('\\') => out.push('\\'),
                        Some('/') => out.push('/'),
                        Some('b') => out.push('\u{8}'),
                        Some('f') => out.push('\u{c}'),
                        Some('n') => out.push('\n'),
                        Some('r') => out.push('\r'),
                        Some('t') => out.push('\t'),
                        Some('u') => out.push(self.parse_unicode_escape()?),
                        _ => {
                            return self
                                .err("invalid escape: expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX")
                        }
                    }
                }
                Some(c) => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, HoconError> {
        let mut v = 0;
        for _ in 0..4 {
            let d = self.peek().and_then(|c| c.to_digit(16));
            match d {
                Some(d) => {
                    v = v * 16 + d;
                    self.bump();
                }
                None => return self.err("invalid \\u escape: expected four hex digits"),
            }
        }
        Ok(v)
    }

    fn parse_unicode_escape(&mut self) -> Result<char, HoconError> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) {
            if !self.starts_with("\\u") {
                return self.err("invalid \\u escape: a high surrogate must be followed by a low one");
            }
            self.bump();
            self.bump();
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return self.err("invalid \\u escape: expected a low surrogate");
            }
            let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
            return char::from_u32(c).map_or_else(|| self.err("invalid \\u escape"), Ok);
        }
        char::from_u32(hi).map_or_else(|| self.err("invalid \\u escape: a lone surrogate"), Ok)
    }

    /// `"""..."""`, verbatim; quotes right before the closing three belong
    /// to the string, as the specification says.
    fn parse_triple(&mut self) -> Result<String, HoconError> {
        let start = self.pos();
        for _ in 0..3 {
            self.bump();
        }
        let mut out = String::new();
        loop {
            if self.starts_with("\"\"\"") {
                let mut run = 0;
                while self.peek_at(run) == Some('"') {
                    run += 1;
                }
                for _ in 0..run - 3 {
                    out.push('"');
                }
                for _ in 0..run {
                    self.bump();
                }
                return Ok(out);
            }
            match self.bump() {
                None => return Err(start.error("unterminated triple-quoted string: expected a closing '\"\"\"'")),
                Some(c) => out.push(c),
            }
        }
    }
}

/// An unquoted value on its own: a number, boolean or null if it reads as
/// one, else the string itself.
fn unquoted_scalar(s: String) -> Value {
    match s.as_str() {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        _ => {}
    }
    if looks_numeric(&s) {
        if let Ok(i) = s.parse::<i64>() {
            return Value::Number(i.into());
        }
        if let Some(n) = s.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(s)
}

/// JSON's number grammar (so `inf`, `NaN` and `1_000` stay strings).
fn looks_numeric(s: &str) -> bool {
    let b = s.strip_prefix('-').unwrap_or(s).as_bytes();
    let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if int_len == 0 {
        return false;
    }
    let mut rest = &b[int_len..];
    if let Some(r) = rest.strip_prefix(b".") {
        let n = r.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &r[n..];
    }
    if let Some(r) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
        let r = r.strip_prefix(b"+").or_else(|| r.strip_prefix(b"-")).unwrap_or(r);
        let n = r.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &r[n..];
    }
    rest.is_empty()
}

// --- resolving substitutions ---------------------------------------------------

struct Resolver<'a> {
    root: &'a Raw,
    /// Resolved substitution targets, so a fragment used many times is
    /// resolved once.
    memo: HashMap<Vec<String>, Option<Value>>,
    /// Substitutions being resolved, innermost last: a repeat is a cycle.
    stack: Vec<Vec<String>>,
    size: usize,
    options: &'a Options,
    /// The document, for errors without a better position.
    file: Arc<str>,
}

impl Resolver<'_> {
    fn charge(&mut self, value: &Value, pos: Option<&Pos>) -> Result<(), HoconError> {
        self.size += weight(value);
        if self.size > self.options.limits.max_resolved_size {
            let message =
                format!("the resolved document is larger than the limit of {}", self.options.limits.max_resolved_size);
            return Err(match pos {
                Some(pos) => pos.error(message),
                None => HoconError { file: self.file.to_string(), line: 0, column: 0, message },
            });
        }
        Ok(())
    }

    /// `None` is an optional substitution that found nothing: the field or
    /// element holding it disappears.
    fn resolve(&mut self, raw: &Raw) -> Result<Option<Value>, HoconError> {
        match raw {
            Raw::Val(v) => {
                self.charge(v, None)?;
                Ok(Some(v.clone()))
            }
            Raw::Obj(map) => {
                let mut out = Map::new();
                for (k, v) in map {
                    if let Some(v) = self.resolve(v)? {
                        out.insert(k.clone(), v);
                    }
                }
                self.size += 1;
                Ok(Some(Value::Object(out)))
            }
            Raw::Arr(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    if let Some(v) = self.resolve(item)? {
                        out.push(v);
                    }
                }
                self.size += 1;
                Ok(Some(Value::Array(out)))
            }
            Raw::Concat(pieces, pos) => self.concat(pieces, pos),
        }
    }

    fn concat(&mut self, pieces: &[Piece], pos: &Pos) -> Result<Option<Value>, HoconError> {
        // Resolve each piece; spaces are kept for the string case.
        let mut parts: Vec<(bool, Value)> = Vec::new(); // (is_space, value)
        let mut any_found = false;
        for piece in pieces {
            match piece {
                Piece::Space(s) => parts.push((true, Value::String(s.clone()))),
                Piece::Text(s) | Piece::Unquoted(s) => {
                    any_found = true;
                    parts.push((false, Value::String(s.clone())));
                }
                Piece::Value(raw) => {
                    if let Some(v) = self.resolve(raw)? {
                        any_found = true;
                        parts.push((false, v));
                    }
                }
                Piece::Subst { path, optional, pos } => {
                    if let Some(v) = self.lookup(path, *optional, pos)? {
                        any_found = true;
                        parts.push((false, v));
                    }
                }
            }
        }
        if !any_found {
            return Ok(None);
        }
        let values: Vec<&Value> = parts.iter().filter(|(space, _)| !space).map(|(_, v)| v).collect();
        if values.len() == 1 && parts.len() == 1 {
            return Ok(Some(values[0].clone()));
        }
        if values.iter().all(|v| v.is_object()) {
            let mut out = Map::new();
            for v in values {
                if let Value::Object(m) = v {
                    merge_json(&mut out, m.clone());
                }
            }
            return Ok(Some(Value::Object(out)));
        }
        if values.iter().all(|v| v.is_array()) {
            let mut out = Vec::new();
            for v in values {
                if let Value::Array(a) = v {
                    out.extend(a.iter().cloned());
                }
            }
            return Ok(Some(Value::Array(out)));
        }
        let mut text = String::new();
        for (_, v) in &parts {
            match v {
                Value::String(s) => text.push_str(s),
                Value::Number(n) => text.push_str(&n.to_string()),
                Value::Bool(b) => text.push_str(if *b { "true" } else { "false" }),
                Value::Null => text.push_str("null"),
                Value::Object(_) | Value::Array(_) => {
                    return Err(pos.error(format!(
                        "cannot concatenate {} with a string (a value on one line joins strings, objects or arrays, \
                         not a mix)",
                        if v.is_object() { "an object" } else { "an array" }
                    )))
                }
            }
        }
        let out = Value::String(text);
        self.charge(&out, Some(pos))?;
        Ok(Some(out))
    }

    fn lookup(&mut self, path: &[String], optional: bool, pos: &Pos) -> Result<Option<Value>, HoconError> {
        let shown = format!("${{{}{}}}", if optional { "?" } else { "" }, path.join("."));
        if let Some(hit) = self.memo.get(path) {
            let hit = hit.clone();
            if let Some(v) = &hit {
                self.charge(v, Some(pos))?;
            }
            return self.found(hit, optional, &shown, pos);
        }
        if self.stack.iter().any(|p| p == path) {
            let mut chain: Vec<String> = self.stack.iter().map(|p| p.join(".")).collect();
            chain.push(path.join("."));
            return Err(pos.error(format!("substitution cycle: {}", chain.join(" -> "))));
        }
        if self.stack.len() >= self.options.limits.max_depth {
            return Err(
                pos.error(format!("substitutions nested deeper than the limit of {}", self.options.limits.max_depth))
            );
        }
        self.stack.push(path.to_vec());
        let result = self.walk(path);
        self.stack.pop();
        let value = result?;
        self.memo.insert(path.to_vec(), value.clone());
        self.found(value, optional, &shown, pos)
    }

    fn found(&self, value: Option<Value>, optional: bool, shown: &str, pos: &Pos) -> Result<Option<Value>, HoconError> {
        match value {
            Some(v) => Ok(Some(v)),
            None if optional => Ok(None),
            None => Err(pos.error(format!(
                "substitution {shown} not found: no such path in the document (environment variables are not read)"
            ))),
        }
    }

    /// Finds `path` in the unresolved tree, resolving only what it passes through.
    fn walk(&mut self, path: &[String]) -> Result<Option<Value>, HoconError> {
        let mut node = self.root;
        for (i, key) in path.iter().enumerate() {
            match node {
                Raw::Obj(map) => match map.get(key) {
                    Some(next) => node = next,
                    None => return Ok(None),
                },
                Raw::Concat(..) => {
                    // The prefix is itself a substitution or concatenation:
                    // resolve it and walk the rest in the result.
                    let Some(value) = self.resolve(node)? else { return Ok(None) };
                    return Ok(path[i..].iter().try_fold(&value, |v, k| v.get(k)).cloned());
                }
                Raw::Arr(_) | Raw::Val(_) => return Ok(None),
            }
        }
        self.resolve(node)
    }
}

fn merge_json(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Value::Object(existing)), Value::Object(new)) => merge_json(existing, new),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

/// A rough size: one per value plus the bytes of strings and keys.
fn weight(value: &Value) -> usize {
    match value {
        Value::String(s) => 1 + s.len(),
        Value::Array(a) => 1 + a.iter().map(weight).sum::<usize>(),
        Value::Object(m) => 1 + m.iter().map(|(k, v)| k.len() + weight(v)).sum::<usize>(),
        _ => 1,
    }
}

#[cfg(test)]
mod tests;
