//! The set of networks served: the built-in `memory` network plus those a
//! manifest lists, swapped as a whole on reload.
//!
//! Readers take an `Arc<Snapshot>` and keep it as long as they like: a reload
//! builds a complete new snapshot first and then replaces the pointer, so no
//! reader ever sees a half-loaded set, and a request that started on the old
//! networks finishes on them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::hocon;
use super::network::{
    validate_network_name, AgentKind, AgentNetwork, AgentSpec, FunctionSpec, MemoryTool, NetworkMetadata, ToolRef,
};

/// The manifest's file name inside the network directory, as in neuro-san.
pub const MANIFEST: &str = "manifest.hocon";
/// The built-in network's name; no file may take it.
pub const MEMORY_NETWORK: &str = "memory";
/// More entries than this in one manifest is a mistake, not a registry.
const MAX_MANIFEST_ENTRIES: usize = 1000;

/// A file that could not be served, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoadError {
    /// The file as the manifest names it (`deep/math_guy.hocon`), or `manifest.hocon`.
    pub file: String,
    /// Includes the field path or line and column.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

/// What a load or reload did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReloadReport {
    /// Networks now served, `memory` included, sorted.
    pub loaded: Vec<String>,
    pub errors: Vec<LoadError>,
    pub warnings: Vec<String>,
}

impl ReloadReport {
    /// Logs what loaded, what did not and why.
    pub fn log(&self) {
        for e in &self.errors {
            tracing::error!(file = %e.file, error = %e.message, "agent network not loaded");
        }
        for w in &self.warnings {
            tracing::warn!(warning = %w, "agent network");
        }
        tracing::info!(networks = ?self.loaded, "agent networks loaded");
    }
}

/// One entry of `/list`: the shape of neuro-san's `AgentInfo`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetworkInfo {
    pub agent_name: String,
    pub description: String,
    pub tags: Vec<String>,
}

/// The networks served at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    networks: BTreeMap<String, Arc<AgentNetwork>>,
    /// Served but not listed (`public = false` in the manifest): callable by
    /// name, e.g. by other networks, without being advertised.
    unlisted: BTreeSet<String>,
    errors: Vec<LoadError>,
    warnings: Vec<String>,
}

impl Snapshot {
    pub fn get(&self, name: &str) -> Option<Arc<AgentNetwork>> {
        self.networks.get(name).cloned()
    }

    /// Listed networks, by name.
    pub fn list(&self) -> Vec<NetworkInfo> {
        self.networks
            .values()
            .filter(|n| !self.unlisted.contains(&n.name))
            .map(|n| NetworkInfo {
                agent_name: n.name.clone(),
                description: n.description().to_string(),
                tags: n.metadata.tags.clone(),
            })
            .collect()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.networks.keys().map(String::as_str)
    }

    /// The errors of the load that made this snapshot.
    pub fn errors(&self) -> &[LoadError] {
        &self.errors
    }

    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn report(&self) -> ReloadReport {
        ReloadReport {
            loaded: self.networks.keys().cloned().collect(),
            errors: self.errors.clone(),
            warnings: self.warnings.clone(),
        }
    }
}

/// The served networks, cheap to clone and share between tasks.
#[derive(Clone, Debug)]
pub struct Registry {
    dir: Option<PathBuf>,
    current: Arc<RwLock<Arc<Snapshot>>>,
    /// Serialises reloads so two of them do not read the directory at once.
    reloading: Arc<Mutex<()>>,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::builtin_only()
    }
}

impl Registry {
    /// Only the built-in `memory` network: no directory configured.
    pub fn builtin_only() -> Registry {
        Registry::new(None).0
    }

    /// Loads the networks of `dir/manifest.hocon`. Never fails as a whole:
    /// bad files are left out and reported, `memory` is always served.
    pub fn load(dir: impl Into<PathBuf>) -> (Registry, ReloadReport) {
        Registry::new(Some(dir.into()))
    }

    pub fn new(dir: Option<PathBuf>) -> (Registry, ReloadReport) {
        let snapshot = match &dir {
            Some(dir) => load_dir(dir).unwrap_or_else(|error| {
                let mut s = builtin_snapshot();
                s.errors.push(error);
                s
            }),
            None => builtin_snapshot(),
        };
        let report = snapshot.report();
        let registry =
            Registry { dir, current: Arc::new(RwLock::new(Arc::new(snapshot))), reloading: Arc::new(Mutex::new(())) };
        (registry, report)
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The current set; hold it for the length of a request.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        // A panic elsewhere cannot leave the pointer half-written: use it.
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn get(&self, name: &str) -> Option<Arc<AgentNetwork>> {
        self.snapshot().get(name)
    }

    pub fn list(&self) -> Vec<NetworkInfo> {
        self.snapshot().list()
    }

    /// Reads the directory again and swaps the new set in. A manifest that
    /// cannot be read keeps the current networks (an edit in progress should
    /// not take every network down); otherwise the new set is exactly what
    /// the files now say, bad files left out.
    pub fn reload(&self) -> ReloadReport {
        let _guard = self.reloading.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(dir) = &self.dir else { return self.snapshot().report() };
        match load_dir(dir) {
            Ok(snapshot) => {
                let report = snapshot.report();
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(snapshot);
                report
            }
            Err(error) => {
                let mut report = self.snapshot().report();
                report.errors.insert(0, error);
                report
            }
        }
    }
}

/// A manifest entry: neuro-san accepts `"x.hocon": true` and the long form
/// `"x.hocon": { serve = true, public = false }`.
struct Entry {
    file: String,
    public: bool,
}

fn hocon_options(dir: &Path) -> hocon::Options {
    // neuro-san resolves includes against its working directory, usually the
    // parent of `registries/`; the directory and its parent cover both styles.
    let mut include_dirs = vec![dir.to_path_buf()];
    if let Some(parent) = dir.parent() {
        include_dirs.push(parent.to_path_buf());
    }
    hocon::Options { include_dirs, display_base: Some(dir.to_path_buf()), ..hocon::Options::default() }
}

/// A HOCON error as the message of a file's `LoadError`: the position alone
/// when it is in that file, else the included file's name and position too.
fn parse_error(file: &str, e: hocon::HoconError) -> String {
    if e.file == file && e.line == 0 {
        e.message
    } else if e.file == file {
        format!("line {}, column {}: {}", e.line, e.column, e.message)
    } else {
        e.to_string()
    }
}

fn read_manifest(dir: &Path, options: &hocon::Options) -> Result<(Vec<Entry>, Vec<LoadError>), LoadError> {
    let fail = |message: String| LoadError { file: MANIFEST.to_string(), message };
    let value = hocon::parse_file(&dir.join(MANIFEST), options).map_err(|e| fail(parse_error(MANIFEST, e)))?;
    let Value::Object(map) = value else { return Err(fail("expected an object".into())) };
    if map.len() > MAX_MANIFEST_ENTRIES {
        return Err(fail(format!("more than {MAX_MANIFEST_ENTRIES} entries")));
    }
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    for (file, v) in map {
        let (serve, public) = match &v {
            Value::Bool(b) => (*b, true),
            Value::Object(m) => {
                let flag = |key: &str| m.get(key).map(|f| f.as_bool().ok_or(key.to_string())).transpose();
                match (flag("serve"), flag("public")) {
                    (Ok(serve), Ok(public)) => (serve.unwrap_or(true), public.unwrap_or(true)),
                    (Err(key), _) | (_, Err(key)) => {
                        errors.push(fail(format!("{file}.{key}: expected a boolean")));
                        continue;
                    }
                }
            }
            other => {
                errors
                    .push(fail(format!("{file}: expected true, false or an object {{ serve, public }}, got {other}")));
                continue;
            }
        };
        if serve {
            entries.push(Entry { file, public });
        }
    }
    Ok((entries, errors))
}

fn load_dir(dir: &Path) -> Result<Snapshot, LoadError> {
    let options = hocon_options(dir);
    let (entries, mut errors) = read_manifest(dir, &options)?;
    let mut snapshot = builtin_snapshot();
    let mut loaded: BTreeMap<String, (AgentNetwork, String, bool)> = BTreeMap::new();
    for entry in entries {
        match load_file(dir, &entry.file, &options) {
            Ok(network) => {
                snapshot.warnings.extend(network.warnings.iter().cloned());
                loaded.insert(network.name.clone(), (network, entry.file, entry.public));
            }
            Err(mut e) => errors.append(&mut e),
        }
    }
    // A network calling a network that is not served cannot run. Dropping it
    // can break another one that calls it, so repeat until nothing changes.
    loop {
        let mut broken = Vec::new();
        for (name, (network, file, _)) in &loaded {
            for reference in network.external_references() {
                if reference != MEMORY_NETWORK && !loaded.contains_key(reference) {
                    broken.push((name.clone(), file.clone(), reference.to_string()));
                }
            }
        }
        if broken.is_empty() {
            break;
        }
        // Every missing reference of a network is in this pass, so each is reported once.
        for (name, file, reference) in broken {
            loaded.remove(&name);
            {
                errors.push(LoadError {
                    file,
                    message: format!(
                        "tools: /{reference} is not a network served here (not in the manifest, or not loaded)"
                    ),
                });
            }
        }
    }
    for (name, (network, _, public)) in loaded {
        if !public {
            snapshot.unlisted.insert(name.clone());
        }
        snapshot.networks.insert(name, Arc::new(network));
    }
    errors.sort_by(|a, b| a.file.cmp(&b.file));
    snapshot.errors = errors;
    Ok(snapshot)
}

fn load_file(dir: &Path, file: &str, options: &hocon::Options) -> Result<AgentNetwork, Vec<LoadError>> {
    let fail = |message: String| vec![LoadError { file: file.to_string(), message }];
    let Some(name) = file.strip_suffix(".hocon") else {
        return Err(fail("manifest entries are .hocon files".into()));
    };
    // The name is also the path under the directory: this check keeps it there.
    validate_network_name(name).map_err(|m| fail(format!("invalid network name '{name}': {m}")))?;
    if name == MEMORY_NETWORK {
        return Err(fail("the name 'memory' belongs to the built-in memory network and cannot be replaced".into()));
    }
    let path = dir.join(file);
    let value = hocon::parse_file(&path, options).map_err(|e| fail(parse_error(file, e)))?;
    AgentNetwork::from_value(name, file, Some(path), &value).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| LoadError {
                file: e.file,
                message: if e.field.is_empty() { e.message } else { format!("{}: {}", e.field, e.message) },
            })
            .collect()
    })
}

fn builtin_snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    s.networks.insert(MEMORY_NETWORK.to_string(), Arc::new(memory_network()));
    s
}

/// The built-in network: a front man answering from and writing to the
/// caller's memory through the memory tools. The tools' parameters are the
/// MCP tools' arguments without `namespace`: a network always works on the
/// caller's own namespace.
pub fn memory_network() -> AgentNetwork {
    let tools: Vec<AgentSpec> = MemoryTool::ALL.iter().map(|&t| memory_tool(t)).collect();
    let front_man = AgentSpec {
        name: MEMORY_NETWORK.to_string(),
        function: FunctionSpec {
            description: "I answer from your memory and remember what you tell me: facts about people, projects and \
                things, what was true when, and what changed."
                .to_string(),
            // Other networks call this one as `/memory`: their LLM needs to know what to pass.
            parameters: Some(json!({
                "type": "object",
                "properties": {
                    "inquiry": {
                        "type": "string",
                        "description": "What to remember, or the question to answer from memory."
                    }
                },
                "required": ["inquiry"]
            })),
            ..FunctionSpec::default()
        },
        instructions: Some(MEMORY_INSTRUCTIONS.to_string()),
        tools: tools.iter().map(|t| ToolRef::Local(t.name.clone())).collect(),
        display_as: None,
        allow_upstream_sly_data: BTreeSet::new(),
        llm_config: None,
        metadata: None,
        kind: AgentKind::Llm,
    };
    let mut agents = vec![front_man];
    agents.extend(tools);
    AgentNetwork {
        name: MEMORY_NETWORK.to_string(),
        path: None,
        metadata: NetworkMetadata {
            description: "The caller's bitemporal memory: remembers facts, recalls them, builds context for a task, \
                shows history and what changed."
                .to_string(),
            tags: vec!["memory".to_string(), "builtin".to_string()],
            sample_queries: vec![
                "Remember that Sarah works at Acme.".to_string(),
                "Where does Sarah work?".to_string(),
                "What changed since yesterday?".to_string(),
            ],
            raw: Map::new(),
        },
        llm_config: None,
        agents,
        warnings: Vec::new(),
        max_iterations: None,
        max_execution_seconds: None,
    }
}

const MEMORY_INSTRUCTIONS: &str = "\
You are the caller's memory. Answer only from what the memory tools return, never from general knowledge, and say \
when memory does not know. When the caller tells you something worth keeping, store it with remember as a fact \
`subject predicate object`, naming entities `Type:id` (Person:sarah works_at Org:acme). Use recall to look facts \
up, build_context at the start of a larger task, history for how a subject's facts changed over time, and \
whats_changed to catch up on recent changes. Mention conflicting or unconfirmed facts when the tools report them.";

fn memory_tool(tool: MemoryTool) -> AgentSpec {
    let (description, parameters) = match tool {
        MemoryTool::History => (
            "Every stored version of the facts about a subject, including superseded and retracted ones, oldest \
             first: how what memory knows about it changed over time."
                .to_string(),
            json!({
                "type": "object",
                "required": ["subject"],
                "properties": {
                    "subject": {"type": "string", "description": "The entity, `Type:id` (e.g. Person:sarah)."},
                    "predicate": {"type": "string", "description": "Only facts with this predicate."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "At most this many \
                        versions."}
                }
            }),
        ),
        _ => mcp_tool(tool.name()),
    };
    AgentSpec {
        name: tool.name().to_string(),
        function: FunctionSpec { description, parameters: Some(parameters), ..FunctionSpec::default() },
        instructions: None,
        tools: Vec::new(),
        display_as: None,
        allow_upstream_sly_data: BTreeSet::new(),
        llm_config: None,
        metadata: None,
        kind: AgentKind::Memory(tool),
    }
}

/// The description and arguments of the MCP tool of the same name, so both
/// surfaces describe a tool the same way.
fn mcp_tool(name: &str) -> (String, Value) {
    let Some(def) = crate::service::tools::schemas::tools().into_iter().find(|t| t.name == name) else {
        return (String::new(), json!({"type": "object", "properties": {}}));
    };
    let mut input = def.input;
    if let Some(props) = input.get_mut("properties").and_then(Value::as_object_mut) {
        props.remove("namespace");
    }
    if let Some(required) = input.get_mut("required").and_then(Value::as_array_mut) {
        required.retain(|r| r != "namespace");
    }
    (def.description.to_string(), input)
}

#[cfg(test)]
mod tests;
