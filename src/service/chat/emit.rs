//! What a turn streams, filtered as the request asked: MINIMAL passes the
//! final message only, MAXIMAL every message, each echoing the request
//! (without its `sly_data`: private data goes upstream only through the
//! front man's allow list).

use super::wire::{ChatMessage, ChatRequest, ChatResponse, FilterType, MessageType, Origin};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Longest tool result text streamed in a message.
const MAX_RESULT_TEXT: usize = 8 * 1024;

#[derive(Clone)]
pub struct Emitter {
    tx: mpsc::Sender<ChatResponse>,
    /// The request to echo (MAXIMAL only).
    echo: Option<Arc<ChatRequest>>,
}

impl Emitter {
    pub fn new(tx: mpsc::Sender<ChatResponse>, req: &ChatRequest) -> Emitter {
        let echo =
            (req.filter() == FilterType::Maximal).then(|| Arc::new(ChatRequest { sly_data: None, ..req.clone() }));
        Emitter { tx, echo }
    }

    /// A message on the way to the answer; MAXIMAL only.
    pub async fn intermediate(&self, message: ChatMessage) {
        if let Some(echo) = &self.echo {
            // A receiver that went away cancels the turn elsewhere.
            let _ = self.tx.send(ChatResponse { request: Some((**echo).clone()), response: message }).await;
        }
    }

    /// The last message of the turn, always sent.
    pub async fn last(&self, message: ChatMessage) {
        let request = self.echo.as_ref().map(|e| (**e).clone());
        let _ = self.tx.send(ChatResponse { request, response: message }).await;
    }

    pub async fn tool_call(&self, origin: &[Origin], tool: &str, args: &Value) {
        if self.echo.is_some() {
            let m = ChatMessage::new(MessageType::Agent, format!("Invoking {tool} with {args}"));
            self.intermediate(ChatMessage { origin: origin.to_vec(), ..m }).await;
        }
    }

    pub async fn tool_result(&self, origin: &[Origin], tool: &str, result: &Value) {
        if self.echo.is_some() {
            let mut text = result.to_string();
            if text.len() > MAX_RESULT_TEXT {
                let mut end = MAX_RESULT_TEXT;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text.push_str("...(cut)");
            }
            let mut tool_origin = origin.to_vec();
            tool_origin.push(Origin::of(tool));
            let m = ChatMessage {
                origin: origin.to_vec(),
                tool_result_origin: tool_origin,
                ..ChatMessage::new(MessageType::AgentToolResult, text)
            };
            self.intermediate(m).await;
        }
    }
}
