//! Running one step of a task: one or two chat turns of the task's agent
//! network.
//!
//! The rules (docs/agent-protocol.md, "Steps"). A task's work is its plan:
//! the non-empty lines of its input, one per step (the model-free `memory`
//! agent understands one command per message; with
//! `additional_input.steps = "whole"` the whole input is one line). Every
//! step advances that work, whether or not it carries input, so a client
//! that loops until `is_last` (the Agent Protocol's own examples do, some
//! sending `input` with every step) always gets there:
//!
//! - A step runs the plan's next line. The step that runs the last line is
//!   the last step (`is_last`), and the task is completed.
//! - A step's own input is the prompt for that step: it runs first, in the
//!   task's conversation, then the plan's next line. A task without input
//!   has no plan: its work is the first step's input, and that step is last.
//! - A step whose input is `done` or `stop`, or a step without input when
//!   there is nothing to run, ends the task without running anything.
//! - A step after the last answers 200 with an output saying so, runs
//!   nothing, and is itself marked last.
//! - A task created with `additional_input.conversation = true` is a
//!   conversation instead: a step with input runs only that input and the
//!   plan waits; it ends with `done`/`stop`, or a step without input when no
//!   line is left.
//! - A turn that fails (the model or the memory failed) is a completed step
//!   whose `additional_output.error` says why; it does not use up a plan
//!   line, so the next step runs the same line again.
//! - `additional_input.save_as` (a file name, optionally with
//!   `relative_path`) writes the step's output as an artifact the agent
//!   created, attached to the step and the task.

use super::artifacts;
use crate::service::ServiceError;
use super::store::{self, Facts, Reader, Step, Task};
use crate::service::Service;
use crate::memory::blocking;
use crate::service::chat::turn::{self, StartError};
use crate::service::chat::wire::{ChatContext, ChatMessage, ChatRequest, MessageType};
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// What a step was asked.
pub use super::store::Request as StepRequest;

/// The plan of a task: what its steps without input run, in order.
pub fn plan(task: &Task) -> Vec<String> {
    let input = task.input.as_deref().unwrap_or("").trim();
    if input.is_empty() {
        return Vec::new();
    }
    let whole = task.additional_input.as_ref().and_then(|a| a.get("steps")).and_then(Value::as_str) == Some("whole");
    if whole {
        return vec![input.to_string()];
    }
    input.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect()
}

/// The lock a task's steps take in turn, by (tenant, task id).
type TaskLocks = HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>;

/// Steps of one task run one at a time.
static RUNNING: LazyLock<Mutex<TaskLocks>> = LazyLock::new(Default::default);

fn lock_of(tenant: &str, task: &str) -> Arc<tokio::sync::Mutex<()>> {
    let mut m = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
    m.retain(|_, l| Arc::strong_count(l) > 1);
    m.entry((tenant.to_string(), task.to_string())).or_default().clone()
}

/// What a step does, decided before anything runs.
enum Action {
    /// Run `input` (the step's own, if any), then the plan line `line` (its
    /// index and text, if any); `last` when this ends the task's work.
    Run { input: Option<String>, line: Option<(usize, String)>, last: bool },
    /// End the task without running anything.
    End(String),
    /// The task was already completed.
    AfterLast,
}

impl Action {
    /// What the step did, for the step's `name`.
    fn name(&self) -> String {
        match self {
            Action::Run { input: Some(_), line: Some((n, _)), .. } => format!("input, then plan line {}", n + 1),
            Action::Run { input: None, line: Some((n, _)), .. } => format!("plan line {}", n + 1),
            Action::Run { .. } => "input".to_string(),
            Action::End(_) => "end".to_string(),
            Action::AfterLast => "after the last step".to_string(),
        }
    }
}

/// Whether the task is a conversation (`additional_input.conversation`):
/// its steps' inputs are turns that do not advance the plan.
fn is_conversation(task: &Task) -> bool {
    task.additional_input.as_ref().and_then(|a| a.get("conversation")).and_then(Value::as_bool) == Some(true)
}

/// Decides what step `number` of `task` does, given its own input.
fn decide(task: &Task, lines: &[String], own: Option<String>, number: u64) -> Action {
    if task.status == "completed" {
        return Action::AfterLast;
    }
    if let Some(word) = own.as_deref().map(str::to_ascii_lowercase).filter(|w| matches!(w.as_str(), "done" | "stop")) {
        return Action::End(format!("The task is completed: step {number} asked to {word}."));
    }
    let next = lines.get(task.lines_run).map(|text| (task.lines_run, text.clone()));
    let last_line = task.lines_run + 1 == lines.len();
    match (own, next) {
        // A conversation's input is a turn of its own; the plan waits.
        (Some(input), _) if is_conversation(task) => Action::Run { input: Some(input), line: None, last: false },
        (input, Some(line)) => Action::Run { input, line: Some(line), last: last_line },
        // No plan (or, in a conversation, none left): the input is the work.
        (Some(input), None) => Action::Run { input: Some(input), line: None, last: true },
        (None, None) => Action::End(if lines.is_empty() {
            "The task is completed: it has no input and the step asked for nothing.".into()
        } else {
            "The task is completed: every line of its input has run.".into()
        }),
    }
}

/// Runs the next step of `task_id` and returns it, completed.
pub async fn execute(st: &Service, tenant: &str, task_id: &str, req: StepRequest) -> Result<Step, ServiceError> {
    let lock = lock_of(tenant, task_id);
    let _held = lock.lock().await;
    let reader = Reader::new(st, tenant);
    let task = reader.task(task_id).await?;
    close_interrupted(st, &reader, task_id).await?;
    let save_as = save_as(req.additional_input.as_ref())?;
    let number = reader.step_count(task_id).await? as u64 + 1;
    let own = req.input.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(String::from);
    let lines = plan(&task);
    let action = decide(&task, &lines, own, number);

    let step_id = store::new_id();
    let subject = store::step_subject(&step_id);
    let task_subject = store::task_subject(task_id);
    let name = action.name();
    // The step as asked, running.
    let mut facts = Facts::of_task(task_id);
    facts
        .set(&subject, "step.task", json!(task_subject))
        .set(&subject, "step.number", json!(number))
        .set(&subject, "step.name", json!(name))
        .set(&subject, "step.input", json!(req.input))
        .set(&subject, "step.additional_input", store::object_or_null(req.additional_input.as_ref()))
        .set(&subject, "step.status", json!("running"));
    if task.status == "created" {
        facts.set(&task_subject, "task.status", json!("running"));
    }
    store::write(st, tenant, facts).await?;

    let (output, mut extra, is_last, lines_run) = match action {
        Action::AfterLast => (
            "This task is already completed; nothing was run. Create a new task to go on.".to_string(),
            json!({"task_completed": true}),
            true,
            None,
        ),
        Action::End(why) => (why, json!({"task_completed": true}), true, None),
        Action::Run { input, line, last } => {
            let ran = run_turns(st, tenant, &task, input, line.as_ref().map(|(_, text)| text.clone())).await?;
            let mut extra = match &ran.error {
                Some(e) => json!({"agent": task.agent, "error": e}),
                None => json!({"agent": task.agent, "task_completed": last}),
            };
            if ran.answers.len() > 1 {
                extra["answers"] = json!(ran.answers.iter().map(|(what, text)| json!({"ran": what, "output": text})).collect::<Vec<_>>());
            }
            let output = ran.answers.into_iter().map(|(_, text)| text).collect::<Vec<_>>().join("\n\n");
            match ran.error {
                Some(_) => (output, extra, false, None),
                None => (output, extra, last, line.map(|(n, _)| n + 1)),
            }
        }
    };
    if let Some(n) = lines_run {
        extra["plan"] = json!({"lines": lines.len(), "lines_run": n});
    }

    let mut created = Vec::new();
    if let Some((file_name, relative_path)) = save_as {
        let chunks = artifacts::chunked(output.as_bytes());
        let a = artifacts::create(st, tenant, task_id, Some(&step_id), file_name, relative_path, chunks).await?;
        created.push(a);
    }

    let mut facts = Facts::of_task(task_id);
    facts
        .set(&subject, "step.output", json!(output))
        .set(&subject, "step.additional_output", extra.clone())
        .set(&subject, "step.is_last", json!(is_last))
        .set(&subject, "step.status", json!("completed"));
    if let Some(n) = lines_run {
        facts.set(&task_subject, "task.lines_run", json!(n));
    }
    if is_last && task.status != "completed" {
        facts.set(&task_subject, "task.status", json!("completed"));
    }
    store::write(st, tenant, facts).await?;

    Ok(Step {
        id: step_id,
        task_id: task_id.to_string(),
        number,
        name: Some(name),
        input: req.input,
        additional_input: req.additional_input.map(Value::Object),
        output: Some(output),
        additional_output: Some(extra),
        status: "completed".into(),
        is_last,
        artifacts: created,
    })
}

/// What an interrupted step says it did.
pub const INTERRUPTED: &str = "Interrupted: the server stopped while this step ran, so it did not finish. \
                               Its plan line, if any, runs again with the next step.";

/// Completes the steps of `task_id` a stopped server left running. Holding
/// the task's lock, no step of this process runs, so a `running` step is
/// one whose process died. Its plan line was not used up (`task.lines_run`
/// moves only when a step completes), so the next step runs it again.
async fn close_interrupted(st: &Service, reader: &Reader, task_id: &str) -> Result<(), ServiceError> {
    let steps = reader.steps(task_id, 0, usize::MAX).await?.items;
    let stale: Vec<&Step> = steps.iter().filter(|s| s.status == "running").collect();
    if stale.is_empty() {
        return Ok(());
    }
    let mut facts = Facts::of_task(task_id);
    for s in &stale {
        let subject = store::step_subject(&s.id);
        facts
            .set(&subject, "step.output", json!(INTERRUPTED))
            .set(&subject, "step.additional_output", json!({"error": "interrupted"}))
            .set(&subject, "step.is_last", json!(false))
            .set(&subject, "step.status", json!("completed"));
    }
    tracing::info!(task = %task_id, steps = stale.len(), "closed steps a stopped server left running");
    store::write(st, reader.tenant(), facts).await
}

/// `additional_input.save_as` (and its `relative_path`), checked.
fn save_as(extra: Option<&Map<String, Value>>) -> Result<Option<(String, Option<String>)>, ServiceError> {
    let Some(extra) = extra else { return Ok(None) };
    let name = match extra.get("save_as") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => artifacts::check_file_name(s)?,
        Some(_) => return Err(ServiceError::invalid("additional_input.save_as must be a file name (a string)")),
    };
    let path = match extra.get("relative_path") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => artifacts::check_relative_path(s)?,
        Some(_) => return Err(ServiceError::invalid("additional_input.relative_path must be a string")),
    };
    Ok(Some((name, path)))
}

/// What the turns of a step answered, in order (`"input"` or `"plan line"`
/// with the text of each), and why the last one failed, if it did.
struct Ran {
    answers: Vec<(&'static str, String)>,
    error: Option<String>,
}

/// Runs the step's own input, then its plan line, as turns of the task's
/// conversation; a failed turn stops the step, so a plan line after a
/// failed input does not run (and is not used up).
async fn run_turns(
    st: &Service,
    tenant: &str,
    task: &Task,
    input: Option<String>,
    line: Option<String>,
) -> Result<Ran, ServiceError> {
    let mut ran = Ran { answers: Vec::new(), error: None };
    for (what, text) in [("input", input), ("plan line", line)] {
        let Some(text) = text else { continue };
        let (answer, error) = run_turn(st, tenant, task, text).await?;
        ran.answers.push((what, answer));
        if error.is_some() {
            ran.error = error;
            break;
        }
    }
    Ok(ran)
}

/// One turn of the task's network, continuing the task's conversation:
/// the answer, and the error when the turn failed.
async fn run_turn(st: &Service, tenant: &str, task: &Task, text: String) -> Result<(String, Option<String>), ServiceError> {
    let engine = st.memory.store().clone();
    let key = artifacts::context_key(tenant, &task.id);
    let stored = blocking({
        let (engine, key) = (engine.clone(), key.clone());
        move || engine.aux_get(&key)
    })
    .await?;
    let chat_context: Option<ChatContext> = stored.and_then(|b| serde_json::from_slice(&b).ok());
    let req = ChatRequest {
        user_message: Some(ChatMessage::new(MessageType::Human, text)),
        chat_context,
        ..ChatRequest::default()
    };
    let turn = match turn::start(st, tenant.to_string(), &task.agent, req) {
        Ok(t) => t,
        Err(StartError::UnknownAgent(a)) => {
            let why = format!("the task's agent network {a:?} is not served any more");
            return Ok((format!("Error: {why}"), Some(why)));
        }
        Err(StartError::BadRequest(m)) => return Err(ServiceError::invalid(m)),
    };
    let last = turn.until(st.shutdown.clone()).fold(None, |_, r| async move { Some(r) }).await;
    let Some(last) = last else {
        let why = "the agent ended without an answer".to_string();
        return Ok((format!("Error: {why}"), Some(why)));
    };
    let m = last.response;
    let error =
        m.structure.as_ref().and_then(|s| s.get("error")).map(|e| e.as_str().map_or(e.to_string(), String::from));
    if error.is_none() {
        if let Some(ctx) = &m.chat_context {
            let bytes = serde_json::to_vec(ctx).map_err(|_| ServiceError::Internal)?;
            blocking(move || engine.aux_put(&key, &bytes)).await?;
        }
    }
    Ok((m.text, error))
}
