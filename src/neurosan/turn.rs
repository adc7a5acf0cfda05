//! One chat turn of an agent network: the request is checked, the front man
//! runs on its own task, and what it says streams back as [`ChatResponse`]s,
//! already filtered (MINIMAL: the final answer only; MAXIMAL: everything,
//! each echoing the request). HTTP writes them as JSON lines, gRPC as
//! messages; dropping the [`Turn`] (a client that went away) cancels the
//! work.

use super::wire::{ChatRequest, ChatResponse};
use crate::http::AppState;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

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
/// final AGENT_FRAMEWORK message (or an error message).
pub struct Turn {
    rx: mpsc::Receiver<ChatResponse>,
}

impl futures_util::Stream for Turn {
    type Item = ChatResponse;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ChatResponse>> {
        self.rx.poll_recv(cx)
    }
}

/// Starts a turn of `agent` for `tenant`.
pub fn start(st: &AppState, tenant: String, agent: &str, req: ChatRequest) -> Result<Turn, StartError> {
    let _ = (st, tenant, agent, req);
    unimplemented!()
}
