//! Conversations as memory, and their continuation.
//!
//! A turn's messages are stored in the caller's tenant in the shape every
//! conversation has (`service/conversations.rs`, `POST /api/conversations`,
//! `docs/conversations.md`), so they can be recalled like anything else
//! (`/api/search`, MCP, the `memory` agent):
//!
//! | subject | predicate | object |
//! |---|---|---|
//! | `Person:user` (the human) | `said` | the message |
//! | `Agent:<front man>` (the answer) | `said` | the message |
//! | `Conversation:<id>` | `participant` | `Person:user`, `Agent:<front man>` |
//! | `Conversation:<id>` | `network` | the network's name |
//! | `Conversation:<id>` | `turns` | how many messages it holds |
//!
//! each `said` fact valid from the moment the message was said, with
//! properties `{"conversation": "<id>", "turn": <n>, "speaker": ...}` and
//! source `Conversation:<id>`. `<n>` counts the conversation's messages from
//! 0: after the messages the context carries, or after those stored, if
//! more.
//!
//! Continuation is stateless, as neuro-san specifies: the answer's
//! `chat_context` carries the front man's whole history, led by a SYSTEM
//! message whose `structure.conversation_id` names the conversation. Sent
//! back, it is all any server needs to go on (the count of stored
//! messages only moves the numbering on, when it is ahead of the context).

use super::wire::{ChatContext, ChatHistory, ChatMessage, MessageType, Origin};
use crate::service::conversations::{self, Extra, Turn};
use crate::service::ServiceError;
use crate::service::Service;
use crate::store::is_entity_ref;
use serde_json::{json, Map, Value};

/// The source stamped on conversation facts and on what a turn remembers.
pub fn source(id: &str) -> String {
    conversations::entity(id)
}

/// The entity of the human side of every chat.
pub const HUMAN: &str = "Person:user";

/// The entity of an agent: `Agent:<name>` (its slug, if the name is not
/// one an entity may have).
pub fn agent_entity(name: &str) -> String {
    let e = format!("Agent:{name}");
    if is_entity_ref(&e) {
        e
    } else {
        let s = conversations::slug(name);
        format!("Agent:{}", if s.is_empty() { "agent" } else { &s })
    }
}

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
    conversations::new_id()
}

fn valid_id(v: &Value) -> Result<String, String> {
    match v.as_str() {
        Some(s) if conversations::is_valid_id(s) => Ok(s.to_string()),
        _ => Err(format!(
            "chat_context: conversation_id must be 1 to {} letters, digits, '-' or '_', got {v}",
            conversations::MAX_ID
        )),
    }
}

/// One message to store.
pub struct Said<'a> {
    /// The human's message (else the agent's answer).
    pub human: bool,
    /// The front man: the agent spoken to, or that answered.
    pub agent: &'a str,
    pub text: &'a str,
    /// Unix ms.
    pub at: i64,
}

/// Stores `said` as messages of conversation `id` of `network`, numbered
/// from `first` (or after the messages stored, if more), in one
/// transaction.
pub async fn store(
    st: &Service,
    tenant: &str,
    id: &str,
    network: &str,
    first: usize,
    said: &[Said<'_>],
) -> Result<(), ServiceError> {
    let turns = said
        .iter()
        .map(|s| Turn {
            speaker: if s.human { HUMAN.to_string() } else { agent_entity(s.agent) },
            text: s.text.to_string(),
            at: s.at,
        })
        .collect();
    let extra = Extra { first_turn_at_least: first as u64, about: vec![("network", json!(network))] };
    st.store_turns(tenant, id, turns, None, extra, None).await?;
    Ok(())
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
    fn agents_are_entities() {
        assert_eq!(agent_entity("memory"), "Agent:memory");
        assert_eq!(agent_entity("Trip Planner"), "Agent:trip_planner");
        assert_eq!(agent_entity(" "), "Agent:agent");
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
