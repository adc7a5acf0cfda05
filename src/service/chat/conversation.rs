//! Conversations as memory, and their continuation.
//!
//! A turn's messages are stored as facts in the caller's tenant, so they
//! can be recalled like anything else (`/api/search`, MCP, the `memory`
//! agent):
//!
//! | subject | predicate | object |
//! |---|---|---|
//! | `Conversation:<id>` | `network` | the network's name |
//! | `Message:<id>-<n>` | `in_conversation` | `Conversation:<id>` (an edge) |
//! | `Message:<id>-<n>` | `role` | `human` or `ai` |
//! | `Message:<id>-<n>` | `agent` | the agent that spoke or was spoken to |
//! | `Message:<id>-<n>` | `text` | the message |
//!
//! each valid from the moment the message was said, with source
//! `Conversation:<id>`. `<n>` counts the conversation's messages from 0.
//!
//! Continuation is stateless, as neuro-san specifies: the answer's
//! `chat_context` carries the front man's whole history, led by a SYSTEM
//! message whose `structure.conversation_id` names the conversation. Sent
//! back, it is all any server needs to go on; nothing is looked up.

use super::wire::{ChatContext, ChatHistory, ChatMessage, MessageType, Origin};
use crate::service::ServiceError;
use crate::service::Service;
use serde_json::{json, Map, Value};
use crate::store::{FactInput, WriteOp};

/// The source stamped on conversation facts and on what a turn remembers.
pub fn source(id: &str) -> String {
    format!("Conversation:{id}")
}

/// Longest message text stored as a fact; the rest is cut (and marked).
const MAX_STORED_TEXT: usize = 16 * 1024;
const MAX_ID: usize = 64;

/// Where a turn continues from.
#[derive(Debug, Clone, PartialEq)]
pub struct Thread {
    pub id: String,
    /// The front man's HUMAN and AI messages so far, oldest first.
    pub messages: Vec<ChatMessage>,
}

impl Thread {
    /// The thread `ctx` carries for `front_man`, or a new one. A context from
    /// elsewhere (no conversation id) continues its messages under a new id.
    pub(super) fn continue_from(ctx: Option<&ChatContext>, front_man: &str) -> Result<Thread, String> {
        let histories = ctx.map(|c| c.chat_histories.as_slice()).unwrap_or_default();
        // The front man's history is the one whose origin ends with it; a
        // context with a single history is taken as is.
        let history = histories
            .iter()
            .find(|h| h.origin.last().is_some_and(|o| o.tool == front_man))
            .or_else(|| (histories.len() == 1).then(|| &histories[0]));
        let Some(history) = history else {
            return Ok(Thread { id: new_id(), messages: Vec::new() });
        };
        let mut id = None;
        let mut messages = Vec::new();
        for m in &history.messages {
            match m.kind {
                MessageType::System => {
                    if let Some(v) = m.structure.as_ref().and_then(|s| s.get("conversation_id")) {
                        id = Some(valid_id(v)?);
                    }
                }
                MessageType::Human | MessageType::Ai | MessageType::Agent | MessageType::AgentFramework => {
                    let kind = if m.kind == MessageType::Human { MessageType::Human } else { MessageType::Ai };
                    messages.push(ChatMessage::new(kind, m.text.clone()));
                }
                _ => {}
            }
        }
        Ok(Thread { id: id.unwrap_or_else(new_id), messages })
    }

    /// The context to hand back after a turn: the thread with the new
    /// exchange, led by the SYSTEM message that names it.
    pub fn context(&self, front_man: &str, instructions: &str) -> ChatContext {
        let mut system = ChatMessage::new(MessageType::System, instructions);
        let mut structure = Map::new();
        structure.insert("conversation_id".into(), json!(self.id));
        system.structure = Some(structure);
        let mut messages = vec![system];
        messages.extend(self.messages.iter().cloned());
        ChatContext { chat_histories: vec![ChatHistory { origin: vec![Origin::of(front_man)], messages }] }
    }
}

fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

fn valid_id(v: &Value) -> Result<String, String> {
    match v.as_str() {
        Some(s)
            if !s.is_empty()
                && s.len() <= MAX_ID
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            Ok(s.to_string())
        }
        _ => Err(format!("chat_context: conversation_id must be 1 to {MAX_ID} letters, digits, '-' or '_', got {v}")),
    }
}

/// One message to store.
pub struct Said<'a> {
    pub human: bool,
    pub agent: &'a str,
    pub text: &'a str,
    /// Unix ms.
    pub at: i64,
}

/// Stores `said` as messages `first..` of conversation `id` of `network`, in
/// one transaction.
pub async fn store(
    st: &Service,
    tenant: &str,
    id: &str,
    network: &str,
    first: usize,
    said: &[Said<'_>],
) -> Result<(), ServiceError> {
    let conversation = source(id);
    let fact = |subject: &str, predicate: &str, object: Value, at: i64, props: Option<Map<String, Value>>| {
        WriteOp::Assert(FactInput {
            subject: subject.to_string(),
            predicate: predicate.to_string(),
            object,
            source: Some(conversation.clone()),
            valid_from: Some(at),
            properties: props,
            ..FactInput::default()
        })
    };
    let start = said.first().map_or(0, |s| s.at);
    let mut ops = vec![fact(&conversation, "network", json!(network), start, None)];
    for (n, s) in said.iter().enumerate() {
        let message = format!("Message:{id}-{}", first + n);
        let (text, cut) = clip(s.text);
        let props = cut.then(|| {
            let mut m = Map::new();
            m.insert("truncated_from_bytes".into(), json!(s.text.len()));
            m
        });
        ops.push(fact(&message, "in_conversation", json!(conversation), s.at, None));
        ops.push(fact(&message, "role", json!(if s.human { "human" } else { "ai" }), s.at, None));
        ops.push(fact(&message, "agent", json!(s.agent), s.at, None));
        ops.push(fact(&message, "text", json!(text), s.at, props));
    }
    st.memory.write(tenant, ops, None).await?.map_err(|_| ServiceError::Internal)?;
    Ok(())
}

fn clip(text: &str) -> (&str, bool) {
    if text.len() <= MAX_STORED_TEXT {
        return (text, false);
    }
    let mut end = MAX_STORED_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_round_trips_its_id_and_messages() {
        let t = Thread {
            id: "abc-1".into(),
            messages: vec![ChatMessage::new(MessageType::Human, "hi"), ChatMessage::new(MessageType::Ai, "hello")],
        };
        let ctx = t.context("memory", "be helpful");
        assert_eq!(ctx.chat_histories[0].messages[0].kind, MessageType::System);
        let back = Thread::continue_from(Some(&ctx), "memory").unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn contexts_without_an_id_or_history_start_new_threads() {
        let fresh = Thread::continue_from(None, "memory").unwrap();
        assert!(fresh.messages.is_empty() && fresh.id.len() == 32);
        // A context written by another server: no id, messages kept.
        let ctx = ChatContext {
            chat_histories: vec![ChatHistory {
                origin: vec![Origin::of("other"), Origin::of("memory")],
                messages: vec![
                    ChatMessage::new(MessageType::System, "instructions"),
                    ChatMessage::new(MessageType::Human, "q"),
                    ChatMessage::new(MessageType::AgentToolResult, "noise"),
                    ChatMessage::new(MessageType::Ai, "a"),
                ],
            }],
        };
        let t = Thread::continue_from(Some(&ctx), "memory").unwrap();
        assert_ne!(t.id, fresh.id);
        assert_eq!(t.messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["q", "a"]);
    }

    #[test]
    fn a_forged_id_is_refused() {
        for bad in [json!("a b"), json!(""), json!(7), json!("x".repeat(65)), json!("Conversation:x")] {
            let mut ctx = Thread { id: "x".into(), messages: vec![] }.context("memory", "");
            ctx.chat_histories[0].messages[0].structure.as_mut().unwrap().insert("conversation_id".into(), bad.clone());
            let err = Thread::continue_from(Some(&ctx), "memory").unwrap_err();
            assert!(err.contains("conversation_id"), "{bad}: {err}");
        }
    }
}
