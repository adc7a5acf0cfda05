//! `GET /api/stream`: the change feed over Server-Sent Events.
//!
//! Frames are the service's change feed (`service/changes.rs`), read from
//! the store's change log: `Last-Event-ID` resumes without gaps. A
//! subscriber whose client reads so slowly that it falls more than
//! `sse_buffer` notices behind is dropped (it can reconnect with
//! `Last-Event-ID`).
//!
//! Each frame is one event of a transaction: `data: {"op","tx","fact"}` (an
//! assert that closed facts adds `superseded`, one that left tails adds
//! `continued`). The `id:` field (= tx) is set on the last frame of each
//! transaction only, so a client's last event id always names a transaction
//! it has seen whole.

use super::error::ApiError;
use super::extract::Caller;
use super::AppState;
use crate::service::changes::{Follower, Next};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use crate::service::model::{Change, ChangeEvent, Tx};

pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// Counts live subscribers; the count drops when a stream is dropped.
pub struct SubscriberGuard(Arc<AtomicUsize>);

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub async fn stream(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    q: super::query::QueryPairs,
) -> Result<Response, ApiError> {
    let tenant = caller.tenant()?.to_string();
    // Both are checked, though Last-Event-ID wins: a malformed parameter is
    // an error even when it is not the one used.
    let after_tx = q.int("after_tx")?.map(|t| t.max(0) as Tx);
    let last_event = match headers.get("last-event-id") {
        Some(v) => last_event_id(v.as_bytes())?,
        None => None,
    };
    let resume: Option<Tx> = last_event.or(after_tx);
    let count = Arc::clone(&st.sse_subscribers);
    if count.fetch_add(1, Ordering::SeqCst) >= st.limits.max_sse_subscribers {
        count.fetch_sub(1, Ordering::SeqCst);
        return Err(ApiError::rate_limited("too many stream subscribers; try again later"));
    }
    let guard = SubscriberGuard(count);
    let follower = st.service.follow(&tenant, resume, st.limits.sse_buffer);
    let mut resp =
        Sse::new(frames(follower, guard)).keep_alive(KeepAlive::new().interval(KEEPALIVE).text("keepalive")).into_response();
    resp.headers_mut().insert("cache-control", axum::http::HeaderValue::from_static("no-cache"));
    resp.headers_mut().insert("x-accel-buffering", axum::http::HeaderValue::from_static("no"));
    Ok(resp)
}

/// `Last-Event-ID`: a transaction number (up to 18 digits, what this
/// server sends as SSE ids), or empty for none (as in the SSE spec).
fn last_event_id(v: &[u8]) -> Result<Option<Tx>, ApiError> {
    let v: &[u8] = {
        let start = v.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(v.len());
        let end = v.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |i| i + 1);
        &v[start..end]
    };
    if v.is_empty() {
        return Ok(None);
    }
    let bad = || ApiError::schema("Last-Event-ID must be a transaction number");
    if v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    std::str::from_utf8(v).ok().and_then(|d| d.parse().ok()).map(Some).ok_or_else(bad)
}

/// The follower's changes as SSE frames; the stream ends when the follower
/// does (shutdown), after a comment when it was dropped for lagging.
fn frames(follower: Follower, guard: SubscriberGuard) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = (follower, VecDeque::<Event>::new(), guard);
    stream::unfold(state, |(mut follower, mut pending, guard)| async move {
        loop {
            if let Some(ev) = pending.pop_front() {
                return Some((Ok(ev), (follower, pending, guard)));
            }
            match follower.next().await? {
                Ok(Next::Change(c)) => pending.extend(change_frames(&c)),
                Ok(Next::Dropped) => pending.push_back(Event::default().comment(
                    "dropped: this subscriber fell too far behind; reconnect with Last-Event-ID to resume",
                )),
                Err(e) => {
                    tracing::error!(error = %e, "change feed read failed; closing the stream");
                    return None;
                }
            }
        }
    })
}

/// One SSE frame per event of a transaction; the last one carries `id: tx`.
pub fn change_frames(c: &Change) -> Vec<Event> {
    let n = c.events.len();
    c.events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let data = match e {
                ChangeEvent::Assert { fact, superseded, continued } => {
                    let mut v = json!({"op": "assert", "tx": c.tx, "fact": fact});
                    if !superseded.is_empty() {
                        v["superseded"] = json!(superseded.iter().map(|f| f.id).collect::<Vec<_>>());
                    }
                    if !continued.is_empty() {
                        v["continued"] = json!(continued.iter().map(|f| f.id).collect::<Vec<_>>());
                    }
                    v
                }
                ChangeEvent::Retract { fact } => json!({"op": "retract", "tx": c.tx, "fact": fact}),
                ChangeEvent::Cardinality(p) => json!({"op": "predicate", "tx": c.tx, "predicate": p}),
                ChangeEvent::Threshold(t) => json!({"op": "threshold", "tx": c.tx, "threshold": t}),
            };
            let ev = Event::default().data(data.to_string());
            if i + 1 == n {
                ev.id(c.tx.to_string())
            } else {
                ev
            }
        })
        .collect()
}
