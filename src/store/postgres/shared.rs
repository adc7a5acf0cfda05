//! What the store's parts share: the connection settings and pool, the
//! commit listeners, the health seen by the last call, and the counters.

use crate::store::{CommitListener, EngineError, Result, StorageError, Tx};
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};
use tokio_postgres::Client;

/// A database error as the store reports it. The server not answering, or
/// answering that it cannot serve now (shutting down, starting up, out of
/// connections or resources), is `Unreachable`: the request was not applied
/// (or, for a commit cut off, its outcome is unknown) and may be retried.
/// Any other error the server answers is the store's own fault.
pub fn unreachable_error(e: &tokio_postgres::Error) -> StorageError {
    let Some(db) = e.as_db_error() else { return StorageError::Unreachable(super::tls::describe(e)) };
    let code = db.code().code();
    let message = format!("{} (SQLSTATE {code})", db.message());
    // 08: connection exception; 53: insufficient resources; 57: operator
    // intervention (shutdown, crash recovery, cannot connect now).
    if ["08", "53", "57"].iter().any(|class| code.starts_with(class)) {
        StorageError::Unreachable(message)
    } else {
        StorageError::Backend(message)
    }
}

/// The same error again, for each of several requests it failed.
pub fn again(e: &StorageError) -> StorageError {
    match e {
        StorageError::Backend(m) => StorageError::Backend(m.clone()),
        StorageError::Unreachable(m) => StorageError::Unreachable(m.clone()),
        other => StorageError::Unreachable(other.to_string()),
    }
}

/// [`unreachable_error`] as the seam's error.
pub fn db(e: tokio_postgres::Error) -> EngineError {
    EngineError::Storage(unreachable_error(&e))
}

/// Locks one of the store's small shared values; nothing panics while
/// holding one, and a poisoned lock's value is whole, so it is taken as is.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the writer task and the store's calls share.
pub struct Shared {
    pub(super) config: tokio_postgres::Config,
    /// The connector of every connection (tls.rs).
    pub(super) tls: super::tls::Tls,
    pub(super) pool: deadpool_postgres::Pool,
    pub(crate) io: Counters,
    pub(crate) health: Health,
    pub(super) listeners: RwLock<Vec<CommitListener>>,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub groups: AtomicU64,
    pub requests: AtomicU64,
    pub syncs: AtomicU64,
}

/// Whether the database answered the last time it was asked.
#[derive(Default)]
pub(crate) struct Health {
    down: Mutex<Option<String>>,
}

impl Health {
    pub fn down(&self, e: &StorageError) {
        let mut d = lock(&self.down);
        if d.is_none() {
            tracing::warn!(error = %e, "the database is unreachable");
        }
        *d = Some(e.to_string());
    }
    pub fn up(&self) {
        if lock(&self.down).take().is_some() {
            tracing::info!("the database is reachable again");
        }
    }
    pub(super) fn state(&self) -> Option<String> {
        lock(&self.down).clone()
    }
}

impl Shared {
    /// A connection of its own (the writer's), its driver on this runtime.
    pub(crate) async fn connect(&self) -> std::result::Result<Client, StorageError> {
        let (client, conn) = self.tls.connect(&self.config).await.map_err(|e| unreachable_error(&e))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "a database connection ended");
            }
        });
        Ok(client)
    }

    pub(crate) fn notify_committed(&self, committed: &[(String, Tx)]) {
        for l in self.listeners.read().unwrap_or_else(PoisonError::into_inner).iter() {
            l(committed);
        }
    }

    /// A pooled connection for a read.
    pub(super) async fn client(&self) -> Result<deadpool_postgres::Object> {
        match self.pool.get().await {
            Ok(c) => {
                self.health.up();
                Ok(c)
            }
            Err(e) => {
                let e = StorageError::Unreachable(e.to_string());
                self.health.down(&e);
                Err(EngineError::Storage(e))
            }
        }
    }
}

