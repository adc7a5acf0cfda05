//! `GET /api/admin/backup`: a consistent backup of the whole store (every
//! tenant), streamed as it is made. Admins only in keyed mode; anyone who can
//! reach the server in open mode. The file format and what "consistent"
//! means are in `crate::store::backup`; `tempora backup` is the client.

use super::error::ApiError;
use super::extract::Caller;
use super::AppState;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::io::Write;
use std::time::Duration;
use crate::service::ServiceError;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;

/// Bytes sent per body chunk.
const CHUNK: usize = 256 << 10;
/// A running backup keeps the old values of what writes change ahead of it,
/// and no other backup can start, so a client that stops reading must not
/// hold it open for long: a chunk not taken within this ends the backup.
const STALL: Duration = Duration::from_secs(30);

pub async fn backup(State(st): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    if !st.service.may_see_all(Some(&caller)) {
        // A tenant key learns nothing about a route it may not use.
        return Err(ApiError::not_found());
    }
    let (tx, mut rx) = mpsc::channel::<Result<Bytes, ServiceError>>(4);
    let service = st.service.clone();
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let mut out = ChannelWriter { tx: tx.clone(), buf: Vec::with_capacity(CHUNK), runtime: runtime.clone() };
        match service.backup(&mut out) {
            Ok(s) => tracing::info!(
                records = s.records,
                bytes = s.bytes,
                last_tx = s.last_tx,
                secs = started.elapsed().as_secs_f64(),
                "backup sent"
            ),
            Err(e) => {
                tracing::error!(error = %e, "backup failed");
                // Before the first chunk this becomes the answer; after it,
                // an error item makes the server abort the response, so the
                // client cannot take a partial file for a whole one.
                let _ = runtime.block_on(tx.send(Err(e)));
            }
        }
    });
    // The status waits for the first chunk (the header and the first 256 KiB
    // of records), so a backup that cannot start says why.
    let first = match rx.recv().await {
        Some(Ok(chunk)) => chunk,
        Some(Err(e)) => return Err(e.into()),
        None => return Err(ApiError::internal()),
    };
    let rest = tokio_stream::wrappers::ReceiverStream::new(rx);
    let name = format!("attachment; filename=\"tempora-{}.backup\"", now_secs());
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_DISPOSITION, name),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        Body::from_stream(tokio_stream::once(Ok(first)).chain(rest)),
    )
        .into_response())
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// A `Write` that hands full chunks to the response body, waiting at most
/// [`STALL`] for the client to take each.
struct ChannelWriter {
    tx: mpsc::Sender<Result<Bytes, ServiceError>>,
    buf: Vec<u8>,
    runtime: tokio::runtime::Handle,
}

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        match self.runtime.block_on(tokio::time::timeout(STALL, self.tx.send(Ok(chunk)))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(std::io::Error::other("the client went away")),
            Err(_) => Err(std::io::Error::other("the client stopped reading")),
        }
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}
