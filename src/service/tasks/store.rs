//! Tasks, steps and artifact metadata as facts of the caller's tenant.
//!
//! | subject | predicate | object |
//! |---|---|---|
//! | `Task:<id>` | `task.agent` | the agent network the task runs on |
//! | `Task:<id>` | `task.input` | the task's input (absent when null) |
//! | `Task:<id>` | `task.additional_input` | the task's `additional_input` object |
//! | `Task:<id>` | `task.status` | `created`, `running` or `completed` |
//! | `Task:<id>` | `task.lines_run` | how many lines of the input's plan have run |
//! | `Step:<id>` | `step.task` | `Task:<id>` (an edge) |
//! | `Step:<id>` | `step.number` | 1, 2, ... within the task |
//! | `Step:<id>` | `step.input`, `step.additional_input` | what the step was asked |
//! | `Step:<id>` | `step.name` | what the step ran (`plan line 2`, `input`, `end`) |
//! | `Step:<id>` | `step.output`, `step.additional_output` | what it answered |
//! | `Step:<id>` | `step.status` | `running`, then `completed` |
//! | `Step:<id>` | `step.is_last` | whether the step ended the task |
//! | `Artifact:<id>` | `artifact.task` | `Task:<id>` (an edge) |
//! | `Artifact:<id>` | `artifact.step` | `Step:<id>`, for artifacts a step created |
//! | `Artifact:<id>` | `artifact.file_name`, `artifact.relative_path` | its name and place |
//! | `Artifact:<id>` | `artifact.agent_created` | true for artifacts a step created |
//! | `Artifact:<id>` | `artifact.size`, `artifact.chunks` | its length in bytes and in chunks |
//!
//! All with source `Task:<id>`. Every predicate is cardinality one, so a
//! status change supersedes the older status: the task's history is the
//! subject's history, and any moment of it can be read with `as_of`.

use crate::service::error::ServiceError;
use crate::service::Service;
use crate::memory::blocking;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use crate::store::{MemoryStore, EngineError, Fact, FactInput, FactQuery, WriteOp, MAX_PAGE};

type EngineResult<T> = Result<T, EngineError>;

pub fn task_subject(id: &str) -> String {
    format!("Task:{id}")
}
pub fn step_subject(id: &str) -> String {
    format!("Step:{id}")
}
pub fn artifact_subject(id: &str) -> String {
    format!("Artifact:{id}")
}

/// A new id: a UUID (v7, so ids sort by creation time).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().hyphenated().to_string()
}

/// Ids are UUIDs; anything else cannot name a task, step or artifact.
pub fn valid_id(id: &str) -> bool {
    uuid::Uuid::parse_str(id).is_ok()
}

/// The facts to write for one subject, as one batch.
pub struct Facts {
    task: String,
    pub ops: Vec<WriteOp>,
}

impl Facts {
    pub fn of_task(task_id: &str) -> Facts {
        Facts { task: task_subject(task_id), ops: Vec::new() }
    }
    pub fn set(&mut self, subject: &str, predicate: &str, object: Value) -> &mut Self {
        if !object.is_null() {
            self.ops.push(WriteOp::Assert(FactInput {
                source: Some(self.task.clone()),
                ..FactInput::new(subject, predicate, object)
            }));
        }
        self
    }
}

pub async fn write(st: &crate::service::Service, tenant: &str, facts: Facts) -> Result<(), ServiceError> {
    if facts.ops.is_empty() {
        return Ok(());
    }
    st.write(tenant, facts.ops).await?;
    Ok(())
}

/// The current facts of a subject, by predicate.
pub type Record = HashMap<String, Value>;

fn current(engine: &dyn MemoryStore, tenant: &str, subject: &str) -> EngineResult<Record> {
    let page = engine
        .query(tenant, &FactQuery { subject: Some(subject.to_string()), limit: MAX_PAGE, ..Default::default() })?;
    Ok(page.facts.into_iter().map(|f| (f.predicate, f.object)).collect())
}

/// Every current fact with `predicate` (and `object`, when given), oldest
/// transaction first: the order things were created in.
fn all_with(engine: &dyn MemoryStore, tenant: &str, predicate: &str, object: Option<Value>) -> EngineResult<Vec<Fact>> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine.query(
            tenant,
            &FactQuery {
                predicate: Some(predicate.to_string()),
                object: object.clone(),
                limit: MAX_PAGE,
                cursor,
                ..Default::default()
            },
        )?;
        out.extend(page.facts);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    out.sort_by(|a, b| (a.created_tx, &a.subject).cmp(&(b.created_tx, &b.subject)));
    Ok(out)
}

fn id_of(subject: &str) -> String {
    subject.split_once(':').map_or(subject, |(_, id)| id).to_string()
}

fn text(r: &Record, p: &str) -> Option<String> {
    r.get(p).and_then(Value::as_str).map(String::from)
}

#[derive(Debug, Clone)]
pub struct Task {
    pub id: String,
    pub agent: String,
    pub input: Option<String>,
    pub additional_input: Option<Value>,
    pub status: String,
    pub lines_run: usize,
    pub artifacts: Vec<Artifact>,
}

#[derive(Debug, Clone)]
pub struct Step {
    pub id: String,
    pub task_id: String,
    pub number: u64,
    pub name: Option<String>,
    pub input: Option<String>,
    pub additional_input: Option<Value>,
    pub output: Option<String>,
    pub additional_output: Option<Value>,
    pub status: String,
    pub is_last: bool,
    pub artifacts: Vec<Artifact>,
}

#[derive(Debug, Clone)]
pub struct Artifact {
    pub id: String,
    pub task_id: String,
    pub step_id: Option<String>,
    pub file_name: String,
    pub relative_path: Option<String>,
    pub agent_created: bool,
    pub size: u64,
    pub chunks: u64,
}

impl Task {
    pub fn json(&self) -> Value {
        json!({
            "task_id": self.id,
            "input": self.input,
            "additional_input": self.additional_input,
            "artifacts": self.artifacts.iter().map(Artifact::json).collect::<Vec<_>>(),
            "status": self.status,
        })
    }
}

impl Step {
    pub fn json(&self) -> Value {
        json!({
            "task_id": self.task_id,
            "step_id": self.id,
            "name": self.name,
            "input": self.input,
            "additional_input": self.additional_input,
            "status": self.status,
            "output": self.output,
            "additional_output": self.additional_output,
            "artifacts": self.artifacts.iter().map(Artifact::json).collect::<Vec<_>>(),
            "is_last": self.is_last,
        })
    }
}

impl Artifact {
    pub fn json(&self) -> Value {
        json!({
            "artifact_id": self.id,
            "agent_created": self.agent_created,
            "file_name": self.file_name,
            "relative_path": self.relative_path,
        })
    }
}

fn artifact_from(id: String, r: &Record) -> Option<Artifact> {
    Some(Artifact {
        task_id: id_of(r.get("artifact.task")?.as_str()?),
        step_id: text(r, "artifact.step").map(|s| id_of(&s)),
        file_name: text(r, "artifact.file_name")?,
        relative_path: text(r, "artifact.relative_path"),
        agent_created: r.get("artifact.agent_created").and_then(Value::as_bool).unwrap_or(false),
        size: r.get("artifact.size").and_then(Value::as_u64).unwrap_or(0),
        chunks: r.get("artifact.chunks").and_then(Value::as_u64).unwrap_or(0),
        id,
    })
}

/// The artifacts whose `edge` points at `target`, oldest first. An
/// artifact's facts are written together, so one without its name is not
/// there yet.
fn artifacts_of(engine: &dyn MemoryStore, tenant: &str, edge: &str, target: &str) -> EngineResult<Vec<Artifact>> {
    let mut out = Vec::new();
    for f in all_with(engine, tenant, edge, Some(json!(target)))? {
        let r = current(engine, tenant, &f.subject)?;
        out.extend(artifact_from(id_of(&f.subject), &r));
    }
    Ok(out)
}

fn read_task(engine: &dyn MemoryStore, tenant: &str, id: &str) -> EngineResult<Option<Task>> {
    let subject = task_subject(id);
    let r = current(engine, tenant, &subject)?;
    let Some(agent) = text(&r, "task.agent") else { return Ok(None) };
    Ok(Some(Task {
        id: id.to_string(),
        agent,
        input: text(&r, "task.input"),
        additional_input: r.get("task.additional_input").cloned(),
        status: text(&r, "task.status").unwrap_or_else(|| "created".into()),
        lines_run: r.get("task.lines_run").and_then(Value::as_u64).unwrap_or(0) as usize,
        artifacts: artifacts_of(engine, tenant, "artifact.task", &subject)?,
    }))
}

fn read_step(engine: &dyn MemoryStore, tenant: &str, id: &str) -> EngineResult<Option<Step>> {
    let subject = step_subject(id);
    let r = current(engine, tenant, &subject)?;
    let Some(task) = text(&r, "step.task") else { return Ok(None) };
    Ok(Some(Step {
        id: id.to_string(),
        task_id: id_of(&task),
        number: r.get("step.number").and_then(Value::as_u64).unwrap_or(0),
        name: text(&r, "step.name"),
        input: text(&r, "step.input"),
        additional_input: r.get("step.additional_input").cloned(),
        output: text(&r, "step.output"),
        additional_output: r.get("step.additional_output").cloned(),
        status: text(&r, "step.status").unwrap_or_else(|| "created".into()),
        is_last: r.get("step.is_last").and_then(Value::as_bool).unwrap_or(false),
        artifacts: artifacts_of(engine, tenant, "artifact.step", &subject)?,
    }))
}

/// The network a new task runs on: `additional_input.agent`, or `memory`.
fn agent_of(st: &Service, extra: Option<&Map<String, Value>>) -> Result<String, ServiceError> {
    if let Some(steps) = extra.and_then(|e| e.get("steps")) {
        if !matches!(steps.as_str(), Some("lines" | "whole")) {
            return Err(ServiceError::invalid(format!(
                "additional_input.steps must be \"lines\" or \"whole\", got {steps}"
            )));
        }
    }
    if let Some(c) = extra.and_then(|e| e.get("conversation")) {
        if !matches!(c, Value::Bool(_) | Value::Null) {
            return Err(ServiceError::invalid(format!("additional_input.conversation must be true or false, got {c}")));
        }
    }
    let agent = match extra.and_then(|e| e.get("agent")) {
        None | Some(Value::Null) => "memory".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ServiceError::invalid(format!("additional_input.agent must be a string, got {other}")))
        }
    };
    if st.agents.get(&agent).is_none() {
        return Err(ServiceError::invalid(format!("no agent network named {agent:?}")));
    }
    Ok(agent)
}

/// What a task or a step is asked: its input and `additional_input`.
#[derive(Debug, Default, Clone)]
pub struct Request {
    pub input: Option<String>,
    pub additional_input: Option<Map<String, Value>>,
}

impl crate::service::Service {
    /// Creates a task on the network `additional_input.agent` names (by
    /// default `memory`), with its input as the plan of its steps.
    pub async fn create_task(&self, tenant: &str, req: Request) -> Result<Task, ServiceError> {
        if req.input.as_ref().is_some_and(|i| i.len() > crate::service::chat::turn::MAX_USER_TEXT) {
            return Err(ServiceError::invalid(format!(
                "input is longer than {} bytes",
                crate::service::chat::turn::MAX_USER_TEXT
            )));
        }
        let agent = agent_of(self, req.additional_input.as_ref())?;
        let id = new_id();
        let subject = task_subject(&id);
        let mut facts = Facts::of_task(&id);
        facts
            .set(&subject, "task.agent", json!(agent))
            .set(&subject, "task.input", json!(req.input))
            .set(&subject, "task.additional_input", object_or_null(req.additional_input.as_ref()))
            .set(&subject, "task.status", json!("created"));
        write(self, tenant, facts).await?;
        Reader::new(self, tenant).task(&id).await
    }
}

/// The Agent Protocol's answer for an id that is not there (or not the
/// caller's): it names what was looked for.
fn not_found(what: &str, id: &str) -> ServiceError {
    ServiceError::NotFound(format!("Unable to find {what} with the provided id: {id}"))
}

/// Reads run on the blocking pool.
pub struct Reader {
    engine: Arc<dyn MemoryStore>,
    tenant: String,
}

/// One page of a list, and the total.
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: usize,
}

impl Reader {
    pub fn new(st: &crate::service::Service, tenant: &str) -> Reader {
        Reader { engine: st.memory.store().clone(), tenant: tenant.to_string() }
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn MemoryStore, &str) -> EngineResult<T> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let (engine, tenant) = (self.engine.clone(), self.tenant.clone());
        Ok(blocking(move || f(&*engine, &tenant)).await?)
    }

    pub async fn task(&self, id: &str) -> Result<Task, ServiceError> {
        if !valid_id(id) {
            return Err(not_found("task", id));
        }
        let owned = id.to_string();
        self.run(move |e, t| read_task(e, t, &owned)).await?.ok_or_else(|| not_found("task", id))
    }

    /// A step of `task_id` (another task's step is not found).
    pub async fn step(&self, task_id: &str, id: &str) -> Result<Step, ServiceError> {
        if !valid_id(id) {
            return Err(not_found("step", id));
        }
        let owned = id.to_string();
        match self.run(move |e, t| read_step(e, t, &owned)).await? {
            Some(s) if s.task_id == task_id => Ok(s),
            _ => Err(not_found("step", id)),
        }
    }

    /// An artifact of `task_id` (another task's artifact is not found).
    pub async fn artifact(&self, task_id: &str, id: &str) -> Result<Artifact, ServiceError> {
        if !valid_id(id) {
            return Err(not_found("artifact", id));
        }
        let owned = id.to_string();
        let found =
            self.run(move |e, t| Ok(artifact_from(owned.clone(), &current(e, t, &artifact_subject(&owned))?))).await?;
        match found {
            Some(a) if a.task_id == task_id => Ok(a),
            _ => Err(not_found("artifact", id)),
        }
    }

    pub async fn tasks(&self, skip: usize, take: usize) -> Result<Page<Task>, ServiceError> {
        self.run(move |e, t| {
            let all = all_with(e, t, "task.agent", None)?;
            let mut items = Vec::new();
            for f in all.iter().skip(skip).take(take) {
                items.extend(read_task(e, t, &id_of(&f.subject))?);
            }
            Ok(Page { items, total: all.len() })
        })
        .await
    }

    pub async fn steps(&self, task_id: &str, skip: usize, take: usize) -> Result<Page<Step>, ServiceError> {
        let task = task_subject(task_id);
        self.run(move |e, t| {
            let all = all_with(e, t, "step.task", Some(json!(task)))?;
            let mut items = Vec::new();
            for f in all.iter().skip(skip).take(take) {
                items.extend(read_step(e, t, &id_of(&f.subject))?);
            }
            Ok(Page { items, total: all.len() })
        })
        .await
    }

    /// How many steps the task has.
    pub async fn step_count(&self, task_id: &str) -> Result<usize, ServiceError> {
        let task = task_subject(task_id);
        self.run(move |e, t| Ok(all_with(e, t, "step.task", Some(json!(task)))?.len())).await
    }

    pub async fn artifacts(&self, task_id: &str, skip: usize, take: usize) -> Result<Page<Artifact>, ServiceError> {
        let task = task_subject(task_id);
        self.run(move |e, t| {
            let all = artifacts_of(e, t, "artifact.task", &task)?;
            let total = all.len();
            Ok(Page { items: all.into_iter().skip(skip).take(take).collect(), total })
        })
        .await
    }
}

/// An object or nothing: `additional_input` as the protocol allows it.
pub fn object_or_null(v: Option<&Map<String, Value>>) -> Value {
    v.map_or(Value::Null, |m| Value::Object(m.clone()))
}
