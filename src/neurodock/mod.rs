//! The NeuroDock protocol on the TCP listener: JSON packets, raw or gzip,
//! to register tools and to query the `memory` agent network
//! (`docs/neurodock.md`).

pub mod error;
pub mod framing;
pub mod packets;
pub mod session;

use crate::service::Service;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

/// Most connections served at once; one more is told so and closed.
pub const MAX_CONNECTIONS: usize = 1024;

/// Serves connections until `stop` turns true, then waits for them to end
/// (each ends at once, telling its client the server is shutting down).
pub async fn serve(listener: TcpListener, st: Service, mut stop: watch::Receiver<bool>) -> std::io::Result<()> {
    let shared = Arc::new(session::Shared::new(st));
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let conn_stop = stop.clone();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((mut stream, _peer)) => match Arc::clone(&slots).try_acquire_owned() {
                    Ok(slot) => {
                        let (shared, stop) = (Arc::clone(&shared), conn_stop.clone());
                        conns.spawn(async move {
                            session::handle(shared, stream, stop).await;
                            drop(slot);
                        });
                    }
                    Err(_) => {
                        conns.spawn(async move {
                            let m = format!("more than {MAX_CONNECTIONS} connections");
                            let bytes = framing::encode(&packets::error("TooManyConnections", m, None), false);
                            let _ = stream.write_all(&bytes).await;
                            let _ = stream.shutdown().await;
                        });
                    }
                },
                Err(e) => {
                    // Out of file descriptors and the like: wait a little.
                    tracing::warn!(error = %e, "tcp accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(done) = conns.join_next(), if !conns.is_empty() => {
                if let Err(e) = done {
                    if e.is_panic() {
                        tracing::error!("a neurodock connection panicked");
                    }
                }
            }
            _ = async { let _ = stop.wait_for(|s| *s).await; } => break,
        }
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
    Ok(())
}
