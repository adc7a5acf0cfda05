//! The `memory` network's front man when no model is configured: a message
//! is parsed by [`super::commands`] into one memory operation, the matching
//! tool runs, and the answer is written from its result. Deterministic, so
//! the agent server is useful (and testable) with no LLM at all.

use super::commands::{self, Command};
use super::tools;
use crate::agents::MemoryTool;
use crate::service::ServiceError;
use crate::service::Service;
use serde_json::{json, Value};
use crate::store::{Fact, FactQuery, StatusFilter, WriteOp};

/// Most facts listed in one answer; the rest are counted.
const MAX_LISTED: usize = 25;
/// Most conversation messages quoted in an answer to a question.
const MAX_SAID: usize = 5;

/// One tool the front man ran, for MAXIMAL streams.
#[derive(Debug, Clone)]
pub struct Step {
    pub tool: &'static str,
    pub args: Value,
    pub result: Value,
}

#[derive(Debug, Clone)]
pub struct Answer {
    pub text: String,
    pub steps: Vec<Step>,
}

/// Answers `text` for `tenant`; `now` is unix ms, `source` is stamped on
/// what is remembered (the conversation).
pub async fn answer(st: &Service, tenant: &str, text: &str, now: i64, source: &str) -> Result<Answer, ServiceError> {
    let command = match commands::parse(text, now) {
        Ok(c) => c,
        Err(usage) => return Ok(Answer { text: format!("Sorry, {usage}."), steps: Vec::new() }),
    };
    let mut steps = Vec::new();
    let call = |tool: MemoryTool, args: Value| {
        let args = args.as_object().cloned().unwrap_or_default();
        async move {
            let result = tools::run(st, tenant, tool, args.clone(), Some(source)).await?;
            Ok::<_, ServiceError>(Step { tool: tool.name(), args: Value::Object(args), result })
        }
    };
    let text = match command {
        Command::Remember { subject, predicate, object } => {
            let step =
                call(MemoryTool::Remember, json!({"subject": subject, "predicate": predicate, "object": object}))
                    .await?;
            let fact = &step.result["fact"];
            let mut out = format!("Remembered: {}.", triple(&subject, &predicate, &object));
            if fact["status"] == "candidate" {
                out.push_str(" It is held as a candidate: its confidence is below the tenant's threshold.");
            }
            let replaced = step.result["superseded"].as_array().map_or(0, Vec::len);
            if replaced > 0 {
                out.push_str(&format!(" It replaces {replaced} earlier fact{}, kept in history.", plural(replaced)));
            }
            steps.push(step);
            out
        }
        Command::Forget { subject, predicate, object } => {
            let forgotten = forget(st, tenant, &subject, &predicate, object.as_ref()).await?;
            let out = if forgotten.is_empty() {
                format!("I had nothing current for {subject} {predicate}; nothing was forgotten.")
            } else {
                let mut out = format!("Forgot {} fact{} (kept in history):", forgotten.len(), plural(forgotten.len()));
                list(&mut out, &forgotten);
                out
            };
            // No tool of the network retracts: the front man does it itself,
            // so MAXIMAL shows no tool call for it.
            out
        }
        Command::About { entity } => {
            let (about, pointing) = about(st, tenant, &entity).await?;
            let out = if about.is_empty() && pointing.is_empty() {
                format!("I don't know anything about {entity} yet.")
            } else {
                let mut out = format!("What I know about {entity}:");
                list(&mut out, &about);
                if !pointing.is_empty() {
                    out.push_str(&format!("\nPointing at {entity}:"));
                    list(&mut out, &pointing);
                }
                out
            };
            steps.push(Step {
                tool: MemoryTool::Recall.name(),
                args: json!({"subject": entity}),
                result: json!({"facts": about, "pointing": pointing}),
            });
            out
        }
        Command::History { subject, predicate } => {
            let step = call(MemoryTool::History, json!({"subject": subject, "predicate": predicate})).await?;
            let versions: Vec<Fact> = serde_json::from_value(step.result["versions"].clone()).unwrap_or_default();
            let out = if versions.is_empty() {
                format!("I have no history for {subject}.")
            } else {
                let mut out = format!("History of {subject}, oldest first:");
                for f in versions.iter().rev().take(MAX_LISTED).rev() {
                    out.push_str(&format!(
                        "\n- {} [{}; valid from {}{}; recorded {}]",
                        fact_text(f),
                        f.status.as_str(),
                        iso(f.valid_from),
                        f.valid_until.map(|u| format!(" until {}", iso(u))).unwrap_or_default(),
                        iso(f.recorded_at)
                    ));
                }
                if versions.len() > MAX_LISTED {
                    out.push_str(&format!("\n({} older versions not shown)", versions.len() - MAX_LISTED));
                }
                out
            };
            steps.push(step);
            out
        }
        Command::ChangedSince { since } => {
            let step = call(MemoryTool::WhatsChanged, json!({"since": since, "limit": 100})).await?;
            let mut lines = Vec::new();
            for change in step.result["changes"].as_array().into_iter().flatten() {
                for e in change["events"].as_array().into_iter().flatten() {
                    let Ok(f) = serde_json::from_value::<Fact>(e["fact"].clone()) else { continue };
                    match e["op"].as_str() {
                        Some("assert") => lines.push(format!("- asserted {}", fact_text(&f))),
                        Some("retract") => lines.push(format!("- retracted {}", fact_text(&f))),
                        _ => {}
                    }
                }
            }
            let out = if lines.is_empty() {
                format!("Nothing changed since {}.", iso(since))
            } else {
                let n = lines.len();
                let mut out = format!("{n} change{} since {}:", plural(n), iso(since));
                for l in lines.iter().take(MAX_LISTED) {
                    out.push('\n');
                    out.push_str(l);
                }
                if n > MAX_LISTED {
                    out.push_str(&format!("\n({} more)", n - MAX_LISTED));
                }
                if step.result["next_cursor"].is_number() {
                    out.push_str("\n(and more changes after these)");
                }
                out
            };
            steps.push(step);
            out
        }
        Command::Context { task } => {
            let step = call(MemoryTool::BuildContext, json!({"goal": task})).await?;
            let summary = step.result["summary"].as_str().unwrap_or_default().to_string();
            let facts: Vec<Fact> = serde_json::from_value(step.result["facts"].clone()).unwrap_or_default();
            let mut out = if summary.is_empty() { format!("Context for {task}:") } else { summary };
            list(&mut out, &facts);
            steps.push(step);
            out
        }
        Command::Question { text } => {
            let step = call(MemoryTool::Recall, json!({"question": text})).await?;
            let facts: Vec<Fact> = serde_json::from_value(step.result["facts"].clone()).unwrap_or_default();
            // What was said in conversations is recallable too, but it is
            // what someone said, not what memory holds: listed apart.
            let (said, facts): (Vec<Fact>, Vec<Fact>) = facts.into_iter().partition(is_conversation);
            let out = if facts.is_empty() && said.is_empty() {
                "I don't know anything about that yet.".to_string()
            } else {
                let mut out = String::new();
                if !facts.is_empty() {
                    out.push_str("From memory:");
                    list(&mut out, &facts);
                }
                if !said.is_empty() {
                    out.push_str(if facts.is_empty() { "Said in conversations:" } else { "\nSaid in conversations:" });
                    list(&mut out, &said[..said.len().min(MAX_SAID)]);
                }
                out
            };
            steps.push(step);
            out
        }
    };
    Ok(Answer { text, steps })
}

/// Retracts the current facts of `subject predicate` (with `object` only,
/// when given), in one transaction.
async fn forget(
    st: &Service,
    tenant: &str,
    subject: &str,
    predicate: &str,
    object: Option<&Value>,
) -> Result<Vec<Fact>, ServiceError> {
    let q = FactQuery {
        subject: Some(subject.to_string()),
        predicate: Some(predicate.to_string()),
        object: object.cloned(),
        limit: crate::store::MAX_PAGE,
        ..FactQuery::default()
    };
    let current = st.memory.query(tenant, q).await?.facts;
    if current.is_empty() {
        return Ok(current);
    }
    let ops = current.iter().map(|f| WriteOp::Retract(f.id)).collect();
    st.memory.write(tenant, ops, None).await?.map_err(|_| ServiceError::Internal)?;
    Ok(current)
}

/// The entity's current facts, and the current facts whose object is it.
async fn about(st: &Service, tenant: &str, entity: &str) -> Result<(Vec<Fact>, Vec<Fact>), ServiceError> {
    let page = |q: FactQuery| {
        st.memory.query(tenant, FactQuery { limit: MAX_LISTED + 1, status: StatusFilter::Current, ..q })
    };
    let about = page(FactQuery { subject: Some(entity.to_string()), ..FactQuery::default() }).await?.facts;
    let pointing =
        page(FactQuery { object: Some(Value::String(entity.to_string())), ..FactQuery::default() }).await?.facts;
    Ok((about, pointing))
}

fn list(out: &mut String, facts: &[Fact]) {
    for f in facts.iter().take(MAX_LISTED) {
        out.push_str("\n- ");
        out.push_str(&fact_text(f));
        if f.confidence < 1.0 {
            out.push_str(&format!(" (confidence {:.2})", f.confidence));
        }
    }
    if facts.len() > MAX_LISTED {
        out.push_str("\n(and more)");
    }
}

/// What someone said (`said`, `service/conversations.rs`), or a fact
/// about a conversation.
fn is_conversation(f: &Fact) -> bool {
    f.predicate == crate::service::conversations::SAID || f.subject.starts_with("Conversation:")
}

pub fn fact_text(f: &Fact) -> String {
    triple(&f.subject, &f.predicate, &f.object)
}

fn triple(s: &str, p: &str, o: &Value) -> String {
    match o {
        Value::String(text) => format!("{s} {p} {text}"),
        other => format!("{s} {p} {other}"),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

use crate::monitor::time::iso;
