//! One chat turn of an agent network: the request is checked, the front man
//! runs on its own task, and what it says streams back as [`ChatResponse`]s,
//! already filtered (MINIMAL: the final answer only; MAXIMAL: everything,
//! each echoing the request). HTTP writes them as JSON lines, gRPC as
//! messages.
//!
//! A turn always ends with one AGENT_FRAMEWORK message: the answer, with
//! the `chat_context` to continue from and the `sly_data` the front man
//! allows upstream, or the error that ended it (its `structure.error` set),
//! with the context as it was before the turn so the client can retry.
//! Dropping the [`Turn`] (a client that went away) cancels the work: model
//! calls in flight are dropped and nothing more is stored.

use super::conversation::{self, Said, Thread};
use super::emit::Emitter;
use super::think::{self, Failure};
use super::wire::{ChatContext, ChatMessage, ChatRequest, ChatResponse, MessageType, Origin};
use crate::service::Service;
use serde_json::{json, Map, Value};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// The longest a turn may run, model calls and nested agents included,
/// unless the network sets `max_execution_seconds`.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest user message, in bytes.
pub const MAX_USER_TEXT: usize = 64 * 1024;

/// Why a turn did not start. Anything that goes wrong after it started is
/// the last message of the stream instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StartError {
    /// No network of that name (HTTP 404, gRPC UNIMPLEMENTED).
    #[error("no agent network named {0:?}")]
    UnknownAgent(String),
    /// The request cannot be run (HTTP 400, gRPC INVALID_ARGUMENT).
    #[error("{0}")]
    BadRequest(String),
}

/// The responses of a running turn, in order; the stream ends after the
/// final AGENT_FRAMEWORK message.
pub struct Turn {
    rx: mpsc::Receiver<ChatResponse>,
}

impl futures_util::Stream for Turn {
    type Item = ChatResponse;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ChatResponse>> {
        self.rx.poll_recv(cx)
    }
}

impl Turn {
    /// The turn's responses until `stop` turns true: a server shutting down
    /// ends the stream with an AGENT_FRAMEWORK error message (and drops the
    /// turn), so a long turn does not hold the shutdown up. Both surfaces
    /// stream this.
    pub fn until(self, stop: tokio::sync::watch::Receiver<bool>) -> impl futures_util::Stream<Item = ChatResponse> {
        futures_util::stream::unfold((Some(self), stop), |(turn, mut stop)| async move {
            let mut turn = turn?;
            let next = tokio::select! {
                next = futures_util::StreamExt::next(&mut turn) => Some(next),
                _ = stop.wait_for(|s| *s) => None,
            };
            match next {
                Some(Some(r)) => Some((r, (Some(turn), stop))),
                Some(None) => None,
                None => {
                    let why = "the server is shutting down";
                    let mut m = ChatMessage::new(MessageType::AgentFramework, format!("Error: {why}"));
                    m.structure = Some(Map::from_iter([("error".to_string(), json!(why))]));
                    Some((ChatResponse { request: None, response: m }, (None, stop)))
                }
            }
        })
    }
}

/// Starts a turn of `agent` for `tenant`.
pub fn start(st: &Service, tenant: String, agent: &str, req: ChatRequest) -> Result<Turn, StartError> {
    let network = st.agents.get(agent).ok_or_else(|| StartError::UnknownAgent(agent.to_string()))?;
    let text = req.user_message.as_ref().map(|m| m.text.trim().to_string()).unwrap_or_default();
    if text.is_empty() {
        return Err(StartError::BadRequest("user_message.text must not be empty".into()));
    }
    if text.len() > MAX_USER_TEXT {
        return Err(StartError::BadRequest(format!("user_message.text is longer than {MAX_USER_TEXT} bytes")));
    }
    let front = network.front_man().name.clone();
    let thread = Thread::continue_from(req.chat_context.as_ref(), &front).map_err(StartError::BadRequest)?;
    let (tx, rx) = mpsc::channel(32);
    let emit = Emitter::new(tx.clone(), &req);
    let st = st.clone();
    let sly_in = req.sly_data.unwrap_or_default();
    let (guard, context) = (emit.clone(), thread.context(&front, &instructions_of(network.front_man())));
    let mut work = tokio::spawn(async move { run(&st, &tenant, network, thread, text, sly_in, &emit).await });
    tokio::spawn(async move {
        tokio::select! {
            // The client went away: drop the work where it stands.
            _ = tx.closed() => {
                work.abort();
                tracing::debug!(agent = %front, "turn cancelled: the client went away");
            }
            done = &mut work => if let Err(e) = done.map_err(|e| e.is_panic()) {
                // A bug must still end the stream with a last line.
                if e {
                    tracing::error!(agent = %front, "turn panicked");
                    fail(&guard, &[Origin::of(&front)], &context, "internal error").await;
                }
            }
        }
    });
    Ok(Turn { rx })
}

async fn run(
    st: &Service,
    tenant: &str,
    network: std::sync::Arc<crate::agents::AgentNetwork>,
    thread: Thread,
    text: String,
    sly_in: Map<String, Value>,
    emit: &Emitter,
) {
    let front = network.front_man().clone();
    let origin = vec![Origin::of(&front.name)];
    let instructions = instructions_of(&front);
    let source = conversation::source(&thread.id);
    let started = now_ms();
    let turn = think::Turn {
        st,
        tenant,
        source: &source,
        emit,
        now: started,
        tokens_in: AtomicU64::new(0),
        tokens_out: AtomicU64::new(0),
    };
    let limit = network.max_execution_seconds.map_or(TURN_TIMEOUT, Duration::from_secs);
    let answered =
        tokio::time::timeout(limit, turn.front_man(network.clone(), &thread.messages, text.clone(), origin.clone(), 1))
            .await
            .unwrap_or_else(|_| Err(Failure::Memory(format!("the turn did not finish within {} s", limit.as_secs()))));
    let (tokens_in, tokens_out) = (turn.tokens_in.load(Ordering::Relaxed), turn.tokens_out.load(Ordering::Relaxed));
    if tokens_in + tokens_out > 0 {
        crate::monitor::usage::record_async(st.memory.store().clone(), tenant.to_string(), tokens_in, tokens_out)
            .await;
    }
    let answer = match answered {
        Ok(a) => a,
        Err(f) => return fail_in(emit, &origin, &thread, &front.name, &instructions, &f.to_string()).await,
    };
    let said = [
        Said { human: true, agent: &front.name, text: &text, at: started },
        Said { human: false, agent: &front.name, text: &answer, at: now_ms().max(started) },
    ];
    if let Err(e) = conversation::store(st, tenant, &thread.id, &network.name, thread.messages.len(), &said).await {
        let why = format!("the answer could not be stored: {e}");
        return fail_in(emit, &origin, &thread, &front.name, &instructions, &why).await;
    }
    emit.intermediate(ChatMessage { origin: origin.clone(), ..ChatMessage::new(MessageType::Ai, answer.clone()) })
        .await;
    let mut next = thread;
    next.messages.push(ChatMessage::new(MessageType::Human, text));
    next.messages.push(ChatMessage::new(MessageType::Ai, answer.clone()));
    let sly_out: Map<String, Value> =
        sly_in.into_iter().filter(|(k, _)| front.allow_upstream_sly_data.contains(k)).collect();
    emit.last(ChatMessage {
        origin,
        chat_context: Some(next.context(&front.name, &instructions)),
        sly_data: (!sly_out.is_empty()).then_some(sly_out),
        ..ChatMessage::new(MessageType::AgentFramework, answer)
    })
    .await;
}

/// Ends the turn with an error message; the context is the one the turn
/// started from, so the client can retry.
async fn fail_in(emit: &Emitter, origin: &[Origin], thread: &Thread, front: &str, instructions: &str, why: &str) {
    fail(emit, origin, &thread.context(front, instructions), why).await
}

async fn fail(emit: &Emitter, origin: &[Origin], context: &ChatContext, why: &str) {
    let front = origin.first().map_or("", |o| o.tool.as_str());
    tracing::info!(agent = %front, error = %why, "turn failed");
    let mut structure = Map::new();
    structure.insert("error".into(), json!(why));
    structure.insert("tool".into(), json!(front));
    emit.last(ChatMessage {
        origin: origin.to_vec(),
        structure: Some(structure),
        chat_context: Some(context.clone()),
        ..ChatMessage::new(MessageType::AgentFramework, format!("Error: {why}"))
    })
    .await;
}

/// The SYSTEM message a context leads with: the front man's instructions.
fn instructions_of(front: &crate::agents::AgentSpec) -> String {
    front.instructions.clone().unwrap_or_else(|| front.function.description.clone())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
