//! One agent network: its metadata and its agents, front man first, built
//! from a parsed network file and checked field by field.
//!
//! Every error names the file and the path of the field
//! (`registries/hello.hocon: tools[1].function.parameters: expected an
//! object, got a string`), and all errors of a file are reported at once so
//! one edit can fix them. Keys this server does not use are ignored with a
//! warning: neuro-san files carry keys for features that live in Python.

use crate::json::kind_name;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

/// A network as served: its name is its file's path in the manifest without
/// the `.hocon` extension (`deep/math_guy`).
#[derive(Clone, Debug)]
pub struct AgentNetwork {
    pub name: String,
    /// The file it was read from; `None` for the built-in `memory` network.
    pub path: Option<PathBuf>,
    pub metadata: NetworkMetadata,
    /// The network-wide LLM settings; an agent's own `llm_config` overrides
    /// them key by key ([`AgentNetwork::effective_llm_config`]).
    pub llm_config: Option<LlmConfig>,
    /// The agents in file order; the first is the front man, the only one
    /// that talks to the caller.
    pub agents: Vec<AgentSpec>,
    /// Keys ignored and agents that cannot run here; never fatal.
    pub warnings: Vec<String>,
    /// neuro-san's `max_iterations`: model calls an agent may make before it
    /// must answer. `None` is the server's default.
    pub max_iterations: Option<u32>,
    /// neuro-san's `max_execution_seconds`: the longest one turn may run.
    pub max_execution_seconds: Option<u64>,
}

/// Bounds of `max_iterations` and `max_execution_seconds`.
pub const MAX_ITERATIONS_RANGE: std::ops::RangeInclusive<u64> = 1..=100;
pub const MAX_EXECUTION_SECONDS_RANGE: std::ops::RangeInclusive<u64> = 1..=3600;

#[derive(Clone, Debug, Default, Serialize)]
pub struct NetworkMetadata {
    pub description: String,
    pub tags: Vec<String>,
    pub sample_queries: Vec<String>,
    /// The whole `metadata` object as written (free-form in neuro-san, e.g.
    /// `rai_scores`): connectivity answers carry it.
    pub raw: Map<String, Value>,
}

#[derive(Clone, Debug)]
pub struct AgentSpec {
    pub name: String,
    pub function: FunctionSpec,
    pub instructions: Option<String>,
    pub tools: Vec<ToolRef>,
    /// As written; see [`AgentSpec::display_as`] for the value with its default.
    pub display_as: Option<String>,
    /// `allow.to_upstream.sly_data`: the private-data keys this agent may hand
    /// back to its caller. Empty means none (neuro-san is secure by default).
    pub allow_upstream_sly_data: BTreeSet<String>,
    pub llm_config: Option<LlmConfig>,
    /// The agent's own free-form `metadata`, if any.
    pub metadata: Option<Map<String, Value>>,
    pub kind: AgentKind,
}

/// What answers when an agent is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentKind {
    /// An LLM with `instructions`, calling its `tools`.
    Llm,
    /// A built-in memory tool of the `memory` network, run by the server.
    Memory(MemoryTool),
    /// A neuro-san CodedTool (`class`): Python code this server cannot run.
    /// Loaded so the network can be listed and inspected; calling it fails.
    CodedTool { class: String },
    /// A neuro-san toolbox tool (`toolbox`): also Python, also not runnable.
    Toolbox { tool: String },
}

/// The tools of the built-in `memory` network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryTool {
    Remember,
    Recall,
    BuildContext,
    History,
    WhatsChanged,
}

impl MemoryTool {
    pub const ALL: [MemoryTool; 5] = [
        MemoryTool::Remember,
        MemoryTool::Recall,
        MemoryTool::BuildContext,
        MemoryTool::History,
        MemoryTool::WhatsChanged,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MemoryTool::Remember => "remember",
            MemoryTool::Recall => "recall",
            MemoryTool::BuildContext => "build_context",
            MemoryTool::History => "history",
            MemoryTool::WhatsChanged => "whats_changed",
        }
    }
}

/// An agent's `function`: what callers (and calling LLMs) see of it. The
/// shape of neuro-san's `/api/v1/{agent}/function` answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FunctionSpec {
    pub description: String,
    /// A JSON-schema-like object (`type`, `properties`, `required`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sly_data_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sly_data_output_schema: Option<Value>,
}

/// An entry of an agent's `tools`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ToolRef {
    /// Another agent in the same file.
    Local(String),
    /// Another network on this server, written `/name` (stored without the slash).
    External(String),
}

impl fmt::Display for ToolRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolRef::Local(name) => f.write_str(name),
            ToolRef::External(name) => write!(f, "/{name}"),
        }
    }
}

/// LLM settings. Only what an OpenAI-compatible chat endpoint needs; the API
/// key is never in the file: `api_key_env` names the environment variable
/// that holds it, so files can be shared and committed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LlmConfig {
    /// neuro-san's provider class (`openai`, `anthropic`, `ollama`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Any OpenAI-compatible endpoint (`http://localhost:11434/v1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

impl LlmConfig {
    /// `self` with every key it leaves unset taken from `base`.
    pub fn over(&self, base: &LlmConfig) -> LlmConfig {
        LlmConfig {
            class: self.class.clone().or_else(|| base.class.clone()),
            model_name: self.model_name.clone().or_else(|| base.model_name.clone()),
            temperature: self.temperature.or(base.temperature),
            max_tokens: self.max_tokens.or(base.max_tokens),
            top_p: self.top_p.or(base.top_p),
            base_url: self.base_url.clone().or_else(|| base.base_url.clone()),
            api_key_env: self.api_key_env.clone().or_else(|| base.api_key_env.clone()),
        }
    }
}

/// One node of neuro-san's `/api/v1/{agent}/connectivity` answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConnectivityInfo {
    pub origin: String,
    /// Local agent names and `/network` references, as written.
    pub tools: Vec<String>,
    pub display_as: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A field that is wrong, with where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkError {
    pub file: String,
    /// `tools[1].function.parameters`; empty for the file as a whole.
    pub field: String,
    pub message: String,
}

impl fmt::Display for NetworkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        }
    }
}

impl AgentSpec {
    /// `display_as` as written, else neuro-san's default for the kind.
    pub fn display_as(&self) -> &str {
        match (&self.display_as, &self.kind) {
            (Some(d), _) => d,
            (None, AgentKind::Llm) => "llm_agent",
            (None, AgentKind::Memory(_) | AgentKind::CodedTool { .. }) => "coded_tool",
            (None, AgentKind::Toolbox { .. }) => "langchain_tool",
        }
    }

    /// Whether this server can run the agent (not Python code).
    pub fn is_runnable(&self) -> bool {
        matches!(self.kind, AgentKind::Llm | AgentKind::Memory(_))
    }
}

impl AgentNetwork {
    /// The agent that talks to the caller. Every network has one: building
    /// rejects an empty `tools` list.
    pub fn front_man(&self) -> &AgentSpec {
        &self.agents[0]
    }

    /// The front man's function: the answer to `/api/v1/{network}/function`.
    pub fn function(&self) -> &FunctionSpec {
        &self.front_man().function
    }

    pub fn agent(&self, name: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|a| a.name == name)
    }

    /// Per agent, in file order, the tools it can call: the answer to
    /// `/api/v1/{network}/connectivity` (with [`NetworkMetadata::raw`] as its
    /// network-level `metadata`).
    pub fn connectivity(&self) -> Vec<ConnectivityInfo> {
        self.agents
            .iter()
            .map(|a| ConnectivityInfo {
                origin: a.name.clone(),
                tools: a.tools.iter().map(ToString::to_string).collect(),
                display_as: a.display_as().to_string(),
                metadata: a.metadata.clone(),
            })
            .collect()
    }

    /// Agents this server cannot run (Python `class` and `toolbox` tools).
    /// The rest of the network works; a call reaching one of these fails.
    pub fn unsupported_agents(&self) -> Vec<&str> {
        self.agents.iter().filter(|a| !a.is_runnable()).map(|a| a.name.as_str()).collect()
    }

    /// The networks this one calls (`/name` references), each once.
    pub fn external_references(&self) -> BTreeSet<&str> {
        self.agents
            .iter()
            .flat_map(|a| a.tools.iter())
            .filter_map(|t| match t {
                ToolRef::External(name) => Some(name.as_str()),
                ToolRef::Local(_) => None,
            })
            .collect()
    }

    /// The LLM settings an agent runs with: its own over the network's.
    pub fn effective_llm_config(&self, agent: &AgentSpec) -> Option<LlmConfig> {
        match (&agent.llm_config, &self.llm_config) {
            (Some(own), Some(base)) => Some(own.over(base)),
            (own, base) => own.clone().or_else(|| base.clone()),
        }
    }

    /// The description `/list` shows: `metadata.description`, else the front
    /// man's function description.
    pub fn description(&self) -> &str {
        if self.metadata.description.trim().is_empty() {
            self.function().description.trim()
        } else {
            &self.metadata.description
        }
    }

    /// Builds a network from a parsed file. `file` is how errors name it.
    pub fn from_value(name: &str, file: &str, path: Option<PathBuf>, value: &Value) -> Result<Self, Vec<NetworkError>> {
        let mut c = Check { file, errors: Vec::new(), warnings: Vec::new() };
        if let Err(message) = validate_network_name(name) {
            c.err("", format!("invalid network name '{name}': {message}"));
        }
        let Some(root) = value.as_object() else {
            c.err("", format!("expected an object at the root, got {}", kind_name(value)));
            return Err(c.errors);
        };
        let mut metadata = NetworkMetadata::default();
        let mut llm_config = None;
        let mut agents = Vec::new();
        let mut saw_tools = false;
        let (mut max_iterations, mut max_execution_seconds) = (None, None);
        for (key, v) in root {
            match key.as_str() {
                "max_iterations" => max_iterations = c.bounded(key, v, MAX_ITERATIONS_RANGE).map(|n| n as u32),
                "max_execution_seconds" => max_execution_seconds = c.bounded(key, v, MAX_EXECUTION_SECONDS_RANGE),
                "metadata" => metadata = c.metadata(v),
                "llm_config" => llm_config = c.llm_config(v, "llm_config"),
                "tools" => {
                    saw_tools = true;
                    agents = c.agents(v);
                }
                other => c.warn(other, "not used by this server, ignored"),
            }
        }
        if !saw_tools {
            c.err("tools", "required: the list of agents, front man first");
        }
        c.check_graph(&agents);
        if c.errors.is_empty() {
            Ok(AgentNetwork {
                name: name.to_string(),
                path,
                metadata,
                llm_config,
                agents,
                warnings: c.warnings,
                max_iterations,
                max_execution_seconds,
            })
        } else {
            Err(c.errors)
        }
    }
}

/// Network names are manifest paths without `.hocon`: segments of letters,
/// digits, `_`, `-` and `.` joined by `/` (`deep/math_guy`).
pub fn validate_network_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 {
        return Err("must be 1 to 128 characters".into());
    }
    for segment in name.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err("path segments cannot be empty, '.' or '..'".into());
        }
        if !segment.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            return Err("only letters, digits, '_', '-', '.' and '/' are allowed".into());
        }
    }
    Ok(())
}

/// Agent names become LLM tool names, which OpenAI-compatible APIs restrict
/// to `^[a-zA-Z0-9_-]{1,64}$`.
pub fn validate_agent_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("must be 1 to 64 characters".into());
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')) {
        return Err("only letters, digits, '_' and '-' are allowed (it is a tool name for the LLM)".into());
    }
    Ok(())
}


fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Collects errors and warnings while reading one file.
struct Check<'a> {
    file: &'a str,
    errors: Vec<NetworkError>,
    warnings: Vec<String>,
}

impl Check<'_> {
    fn err(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(NetworkError {
            file: self.file.to_string(),
            field: field.to_string(),
            message: message.into(),
        });
    }

    /// A whole number within `range`.
    fn bounded(&mut self, field: &str, v: &Value, range: std::ops::RangeInclusive<u64>) -> Option<u64> {
        match v.as_u64() {
            Some(n) if range.contains(&n) => Some(n),
            _ => {
                self.err(field, format!("expected a whole number from {} to {}, got {v}", range.start(), range.end()));
                None
            }
        }
    }

    fn warn(&mut self, field: &str, message: &str) {
        self.warnings.push(format!("{}: {field}: {message}", self.file));
    }

    fn expected(&mut self, field: &str, what: &str, got: &Value) {
        self.err(field, format!("expected {what}, got {}", kind_name(got)));
    }

    fn object<'v>(&mut self, v: &'v Value, field: &str) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.expected(field, "an object", other);
                None
            }
        }
    }

    fn string(&mut self, v: &Value, field: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            other => {
                self.expected(field, "a string", other);
                None
            }
        }
    }

    fn strings(&mut self, v: &Value, field: &str) -> Vec<String> {
        let Value::Array(items) = v else {
            self.expected(field, "an array of strings", v);
            return Vec::new();
        };
        items.iter().enumerate().filter_map(|(i, item)| self.string(item, &format!("{field}[{i}]"))).collect()
    }

    fn number(&mut self, v: &Value, field: &str) -> Option<f64> {
        match v.as_f64() {
            Some(n) => Some(n),
            None => {
                self.expected(field, "a number", v);
                None
            }
        }
    }

    fn metadata(&mut self, v: &Value) -> NetworkMetadata {
        let Some(map) = self.object(v, "metadata") else { return NetworkMetadata::default() };
        let mut m = NetworkMetadata { raw: map.clone(), ..NetworkMetadata::default() };
        if let Some(d) = map.get("description") {
            m.description = self.string(d, "metadata.description").unwrap_or_default();
        }
        if let Some(t) = map.get("tags") {
            m.tags = self.strings(t, "metadata.tags");
        }
        if let Some(q) = map.get("sample_queries") {
            m.sample_queries = self.strings(q, "metadata.sample_queries");
        }
        m
    }

    fn llm_config(&mut self, v: &Value, field: &str) -> Option<LlmConfig> {
        let map = self.object(v, field)?;
        let mut cfg = LlmConfig::default();
        for (key, v) in map {
            let f = join(field, key);
            match key.as_str() {
                "class" => cfg.class = self.string(v, &f),
                "model_name" => cfg.model_name = self.string(v, &f),
                "temperature" => cfg.temperature = self.number(v, &f),
                "top_p" => {
                    cfg.top_p = self.number(v, &f);
                    if cfg.top_p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
                        self.err(&f, "must be between 0 and 1");
                    }
                }
                "max_tokens" => match v.as_u64().filter(|n| *n > 0) {
                    Some(n) => cfg.max_tokens = Some(n),
                    None => self.expected(&f, "a positive integer", v),
                },
                "base_url" => {
                    cfg.base_url = self.string(v, &f);
                    if cfg.base_url.as_deref().is_some_and(|u| !u.starts_with("http://") && !u.starts_with("https://"))
                    {
                        self.err(&f, "must start with http:// or https://");
                    }
                }
                "api_key_env" => {
                    cfg.api_key_env = self.string(v, &f);
                    if cfg.api_key_env.as_deref().is_some_and(|e| !is_env_name(e)) {
                        self.err(&f, "expected the name of an environment variable ([A-Za-z_][A-Za-z0-9_]*)");
                    }
                }
                k if k.contains("api_key") || k.contains("secret") || k == "key" || k.ends_with("_token") => self.err(
                    &f,
                    "secrets are never read from network files: put the key in an environment variable and name \
                     that variable in api_key_env",
                ),
                _ => self.warn(&f, "not used by this server, ignored"),
            }
        }
        Some(cfg)
    }

    fn agents(&mut self, v: &Value) -> Vec<AgentSpec> {
        let Value::Array(items) = v else {
            self.expected("tools", "an array of agents", v);
            return Vec::new();
        };
        if items.is_empty() {
            self.err("tools", "must list at least one agent: the first is the front man");
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut agents = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let field = format!("tools[{i}]");
            let Some(agent) = self.agent(item, &field, i == 0) else { continue };
            // A missing name is reported already; two of them are not duplicates.
            if agent.name.is_empty() {
                agents.push(agent);
                continue;
            }
            if let Some(first) = seen.insert(agent.name.clone(), i) {
                self.err(&join(&field, "name"), format!("duplicate agent name '{}' (also tools[{first}])", agent.name));
            }
            agents.push(agent);
        }
        agents
    }

    fn agent(&mut self, v: &Value, field: &str, front_man: bool) -> Option<AgentSpec> {
        let map = self.object(v, field)?;
        let name = match map.get("name") {
            Some(n) => self.string(n, &join(field, "name")),
            None => {
                self.err(&join(field, "name"), "required");
                None
            }
        };
        if let Some(n) = &name {
            if let Err(message) = validate_agent_name(n) {
                self.err(&join(field, "name"), format!("invalid agent name '{n}': {message}"));
            }
        }
        let mut spec = AgentSpec {
            name: name.unwrap_or_default(),
            function: FunctionSpec::default(),
            instructions: None,
            tools: Vec::new(),
            display_as: None,
            allow_upstream_sly_data: BTreeSet::new(),
            llm_config: None,
            metadata: None,
            kind: AgentKind::Llm,
        };
        let mut has_function = false;
        for (key, v) in map {
            let f = join(field, key);
            match key.as_str() {
                "name" => {}
                "function" => {
                    has_function = true;
                    spec.function = self.function(v, &f);
                }
                "instructions" => spec.instructions = self.string(v, &f),
                "tools" => spec.tools = self.tool_refs(v, &f),
                "display_as" => spec.display_as = self.string(v, &f),
                "allow" => spec.allow_upstream_sly_data = self.allow(v, &f),
                "llm_config" => spec.llm_config = self.llm_config(v, &f),
                "metadata" => spec.metadata = self.object(v, &f).cloned(),
                "class" => {
                    if let Some(class) = self.string(v, &f) {
                        spec.kind = AgentKind::CodedTool { class };
                    }
                }
                "toolbox" => {
                    if let Some(tool) = self.string(v, &f) {
                        spec.kind = AgentKind::Toolbox { tool };
                    }
                }
                "command" => self.warn(&f, "deprecated in neuro-san and not used by this server, ignored"),
                _ => self.warn(&f, "not used by this server, ignored"),
            }
        }
        if map.contains_key("class") && map.contains_key("toolbox") {
            self.err(field, "an agent has either class or toolbox, not both");
        }
        match &spec.kind {
            AgentKind::Llm => {
                // A wrongly typed value was reported already; only absence or emptiness is left.
                let missing = match map.get("instructions") {
                    None => true,
                    Some(Value::String(s)) => s.trim().is_empty(),
                    Some(_) => false,
                };
                if missing {
                    self.err(&join(field, "instructions"), "required for an LLM agent (one without class or toolbox)");
                }
            }
            AgentKind::CodedTool { .. } | AgentKind::Toolbox { .. } => {
                let key = if matches!(spec.kind, AgentKind::CodedTool { .. }) { "class" } else { "toolbox" };
                if front_man {
                    self.err(&join(field, key), "the front man must be an LLM agent, not a coded or toolbox tool");
                } else {
                    self.warn(
                        &join(field, key),
                        "Python tools cannot run on this server: the network loads, calls to this agent fail",
                    );
                }
            }
            AgentKind::Memory(_) => {}
        }
        if front_man {
            if !has_function {
                self.err(&join(field, "function"), "required for the front man: its description is what callers see");
            } else if spec.function.description.trim().is_empty() {
                self.err(&join(field, "function.description"), "required for the front man: callers see it");
            }
        }
        Some(spec)
    }

    fn function(&mut self, v: &Value, field: &str) -> FunctionSpec {
        let mut function = FunctionSpec::default();
        let Some(map) = self.object(v, field) else { return function };
        for (key, v) in map {
            let f = join(field, key);
            match key.as_str() {
                "description" => function.description = self.string(v, &f).unwrap_or_default(),
                "parameters" => function.parameters = self.schema(v, &f),
                "sly_data_schema" => function.sly_data_schema = self.schema(v, &f),
                "sly_data_output_schema" => function.sly_data_output_schema = self.schema(v, &f),
                _ => self.warn(&f, "not used by this server, ignored"),
            }
        }
        function
    }

    /// A JSON-schema-like object: checked only as far as callers rely on it
    /// (an object, `properties` an object, `required` names among them).
    fn schema(&mut self, v: &Value, field: &str) -> Option<Value> {
        let map = self.object(v, field)?;
        if let Some(t) = map.get("type") {
            if t.as_str() != Some("object") {
                self.err(&join(field, "type"), format!("expected \"object\", got {t}"));
            }
        }
        let properties = match map.get("properties") {
            Some(p) => self.object(p, &join(field, "properties")),
            None => None,
        };
        if let Some(props) = properties {
            for (name, p) in props {
                self.object(p, &format!("{field}.properties.{name}"));
            }
        }
        if let Some(r) = map.get("required") {
            let f = join(field, "required");
            for (i, name) in self.strings(r, &f).iter().enumerate() {
                if !properties.is_some_and(|p| p.contains_key(name)) {
                    self.err(&format!("{f}[{i}]"), format!("'{name}' is not among the properties"));
                }
            }
        }
        Some(v.clone())
    }

    fn tool_refs(&mut self, v: &Value, field: &str) -> Vec<ToolRef> {
        let Value::Array(items) = v else {
            self.expected(field, "an array of agent names", v);
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let f = format!("{field}[{i}]");
            let Value::String(s) = item else {
                self.err(
                    &f,
                    format!(
                        "expected a string (an agent of this file, or /network), got {} (MCP tool definitions are not \
                         supported)",
                        kind_name(item)
                    ),
                );
                continue;
            };
            if s.contains("://") {
                self.err(
                    &f,
                    format!(
                        "'{s}': remote agents and MCP servers are not supported; name a network on this server \
                        as /name"
                    ),
                );
            } else if let Some(external) = s.strip_prefix('/') {
                match validate_network_name(external) {
                    Ok(()) => out.push(ToolRef::External(external.to_string())),
                    Err(message) => self.err(&f, format!("invalid network reference '{s}': {message}")),
                }
            } else {
                out.push(ToolRef::Local(s.clone()));
            }
        }
        out
    }

    fn allow(&mut self, v: &Value, field: &str) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        let Some(map) = self.object(v, field) else { return keys };
        for (key, v) in map {
            let f = join(field, key);
            if key != "to_upstream" {
                self.warn(&f, "not used by this server, ignored (only to_upstream.sly_data is)");
                continue;
            }
            let Some(upstream) = self.object(v, &f) else { continue };
            for (key, v) in upstream {
                let f = join(&f, key);
                if key != "sly_data" {
                    self.warn(&f, "not used by this server, ignored");
                    continue;
                }
                match v {
                    Value::Array(_) => keys.extend(self.strings(v, &f)),
                    Value::Object(m) => {
                        for (name, allowed) in m {
                            match allowed {
                                Value::Bool(true) => {
                                    keys.insert(name.clone());
                                }
                                Value::Bool(false) => {}
                                other => self.expected(&format!("{f}.{name}"), "a boolean", other),
                            }
                        }
                    }
                    other => self.expected(&f, "a list of keys or an object of key = true/false", other),
                }
            }
        }
        keys
    }

    /// Local references must name agents of the file; agents nobody can reach
    /// from the front man are worth a warning.
    fn check_graph(&mut self, agents: &[AgentSpec]) {
        let index: HashMap<&str, usize> = agents.iter().enumerate().map(|(i, a)| (a.name.as_str(), i)).collect();
        for (i, agent) in agents.iter().enumerate() {
            for (j, tool) in agent.tools.iter().enumerate() {
                if let ToolRef::Local(name) = tool {
                    if !index.contains_key(name.as_str()) {
                        self.err(
                            &format!("tools[{i}].tools[{j}]"),
                            format!("no agent named '{name}' in this file (a network on this server is /{name})"),
                        );
                    }
                }
            }
        }
        if agents.is_empty() {
            return;
        }
        let mut reached = HashSet::from([0usize]);
        let mut queue = VecDeque::from([0usize]);
        while let Some(i) = queue.pop_front() {
            for tool in &agents[i].tools {
                if let ToolRef::Local(name) = tool {
                    if let Some(&j) = index.get(name.as_str()) {
                        if reached.insert(j) {
                            queue.push_back(j);
                        }
                    }
                }
            }
        }
        for (i, agent) in agents.iter().enumerate() {
            if !reached.contains(&i) {
                self.warn(
                    &format!("tools[{i}]"),
                    &format!("agent '{}' is not reachable from the front man", agent.name),
                );
            }
        }
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests;
