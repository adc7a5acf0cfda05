//! tempora on PostgreSQL: the store that several tempora processes can
//! share (docs/scale-out.md).
//!
//! - [`schema`]: the versioned schema (`migrations/postgres/`), applied at
//!   start under an advisory lock.
//! - [`writer`]: the group commit: queued writes, one database transaction
//!   per group, the takeover rules of `tempora_storage::takeover`.
//! - [`read`]: the engine's reads, in SQL.
//! - [`follow`]: the commits of every replica, announced to this one's
//!   change-feed subscribers, search index and monitor.
//! - [`rows`]: facts as rows.
//! - [`dump`]: the whole store to and from the backup file format.
//!
//! The [`MemoryStore`] seam is synchronous (the service calls it from its
//! blocking pool), the PostgreSQL client asynchronous. The store runs its
//! own small runtime: a call hands its future to it and waits on a plain
//! channel, so it may be made from any thread, and the database's
//! connections never depend on the threads of the caller's runtime.

mod dump;
mod follow;
mod group;
pub mod read;
pub mod rows;
pub mod schema;
mod shared;
mod statements;
mod tls;
pub mod writer;

use super::{
    AsOf, BackupSummary, CacheFill, Change, CommitListener, EngineError, Fact, FactHistory, FactId, FactPage,
    FactQuery, Idempotency, IoStats, LoggedChange, Millis, MemoryStore, PredicateInfo, Result, SourceStats,
    StorageError, TenantStats, Tx, WriteDone, WriteOp, DEFAULT_THRESHOLD,
};
use shared::{db, lock, Counters, Health, Shared};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;
use tokio::sync::mpsc;

/// Connections the reads share, per process.
const POOL_SIZE: usize = 16;
/// How long opening a connection, or waiting for a free one, may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const POOL_WAIT: Duration = Duration::from_secs(10);

/// The PostgreSQL store.
pub struct PostgresStore {
    shared: Arc<Shared>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    handle: tokio::runtime::Handle,
    queue: Mutex<Option<mpsc::UnboundedSender<writer::Job>>>,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    schema_version: i32,
}

/// Opens the store at `url` (`postgres://user[:password]@host[:port]/db`,
/// or the key=value form), bringing its schema up to date.
pub fn open(url: &str) -> Result<Arc<PostgresStore>> {
    // The URL's TLS parameters (sslmode, sslrootcert, ...) are tls.rs's.
    let (mut config, tls) = tls::parse(url).map_err(EngineError::Invalid)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("tempora");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tempora-postgres")
        .enable_all()
        .build()
        .map_err(|e| EngineError::Storage(StorageError::Io(e)))?;
    let manager = deadpool_postgres::Manager::from_connect(
        config.clone(),
        tls.pool_connect(),
        deadpool_postgres::ManagerConfig { recycling_method: deadpool_postgres::RecyclingMethod::Fast },
    );
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(POOL_SIZE)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(POOL_WAIT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .recycle_timeout(Some(CONNECT_TIMEOUT))
        .build()
        .map_err(|e| EngineError::Invalid(format!("the store's connection pool: {e}")))?;
    let shared = Arc::new(Shared {
        config,
        tls,
        pool,
        io: Counters::default(),
        health: Health::default(),
        listeners: RwLock::new(Vec::new()),
    });
    let handle = runtime.handle().clone();
    let migrated = wait(&handle, {
        let shared = Arc::clone(&shared);
        async move {
            let mut client = shared.connect().await.map_err(EngineError::Storage)?;
            schema::migrate(&mut client).await.map_err(|e| match e {
                schema::SchemaError::Newer { .. } => EngineError::FormatTooNew(e.to_string()),
                other => EngineError::Storage(StorageError::Unreachable(other.to_string())),
            })
        }
    });
    let migrated = match migrated {
        Ok(Ok(m)) => m,
        Ok(Err(e)) | Err(e) => {
            // Not dropped: dropping a runtime waits for its threads, which
            // panics when the caller is async (`tempora serve` is), and the
            // error (the database refusing, TLS failing) would be lost.
            runtime.shutdown_background();
            return Err(e);
        }
    };
    tracing::info!(schema = migrated.to, from = migrated.from, "PostgreSQL store open");
    let (queue, jobs) = mpsc::unbounded_channel();
    let writer = handle.spawn(writer::run(Arc::clone(&shared), jobs));
    handle.spawn(follow::run(Arc::clone(&shared)));
    Ok(Arc::new(PostgresStore {
        shared,
        runtime: Mutex::new(Some(runtime)),
        handle,
        queue: Mutex::new(Some(queue)),
        writer: Mutex::new(Some(writer)),
        schema_version: migrated.to,
    }))
}

/// Runs `fut` on the store's runtime and waits for it on this thread.
fn wait<T: Send + 'static>(handle: &tokio::runtime::Handle, fut: impl Future<Output = T> + Send + 'static) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().map_err(|_| EngineError::Closed("the PostgreSQL store has stopped".into()))
}

impl PostgresStore {
    /// Runs a read with a pooled connection.
    fn read<T, F, Fut>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(deadpool_postgres::Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send,
    {
        let shared = Arc::clone(&self.shared);
        wait(&self.handle, async move {
            let client = shared.client().await?;
            f(client).await
        })?
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        if let Some(rt) = lock(&self.runtime).take() {
            rt.shutdown_background();
        }
    }
}

impl MemoryStore for PostgresStore {
    fn write_then(&self, tenant: &str, ops: Vec<WriteOp>, idempotency: Option<Idempotency>, done: WriteDone) -> Result<()> {
        let queue = lock(&self.queue);
        let Some(q) = queue.as_ref() else {
            return Err(EngineError::Closed("the store is closed".into()));
        };
        q.send(writer::Job { tenant: tenant.to_string(), ops, idempotency, done })
            .map_err(|_| EngineError::Closed("the store's writer has stopped".into()))
    }

    fn idempotent_reply(&self, tenant: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (tenant, key) = (tenant.to_string(), key.to_vec());
        self.read(move |c| async move {
            let row = c
                .query_opt(
                    "SELECT i.reply FROM idempotency i JOIN tenants t ON t.id = i.tenant_id
                     WHERE t.name = $1 AND i.key = $2",
                    &[&tenant, &key],
                )
                .await
                .map_err(db)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn get(&self, tenant: &str, id: FactId, as_of: Option<AsOf>) -> Result<Option<Fact>> {
        let tenant = tenant.to_string();
        self.read(move |mut c| async move { read::get(&mut c, &tenant, id, as_of).await })
    }

    fn history(&self, tenant: &str, id: FactId) -> Result<FactHistory> {
        let tenant = tenant.to_string();
        self.read(move |c| async move { read::history(&c, &tenant, id).await })
    }

    fn query(&self, tenant: &str, q: &FactQuery) -> Result<FactPage> {
        let (tenant, q) = (tenant.to_string(), q.clone());
        self.read(move |mut c| async move { read::query(&mut c, &tenant, &q).await })
    }

    fn query_within(&self, _tenant: &str, _q: &FactQuery, _budget: usize) -> Result<Option<FactPage>> {
        // Every read is a round trip to the database: none is short enough
        // for an async thread to wait on, so all go to the blocking pool.
        Ok(None)
    }

    fn incoming(&self, tenant: &str, entity: &str, as_of: Option<AsOf>) -> Result<FactPage> {
        let q = FactQuery { object: Some(serde_json::Value::String(entity.to_string())), as_of, ..Default::default() };
        self.query(tenant, &q)
    }

    fn subject_history(&self, tenant: &str, subject: &str, as_of: Option<AsOf>) -> Result<Vec<Fact>> {
        let (tenant, subject) = (tenant.to_string(), subject.to_string());
        self.read(move |mut c| async move { read::subject_history(&mut c, &tenant, &subject, as_of).await })
    }

    fn changes(&self, tenant: &str, after_tx: Tx, limit: usize) -> Result<Vec<Change>> {
        let tenant = tenant.to_string();
        self.read(move |c| async move { read::changes(&c, &tenant, after_tx, limit).await })
    }

    fn change_log(&self, tenant: &str, after_tx: Tx, limit: usize) -> Result<Vec<LoggedChange>> {
        let tenant = tenant.to_string();
        self.read(move |c| async move { read::change_log(&c, &tenant, after_tx, limit).await })
    }

    fn tenant_last_write(&self, tenant: &str) -> Result<Option<(Tx, Millis)>> {
        let tenant = tenant.to_string();
        self.read(move |c| async move { read::tenant_last_write(&c, &tenant).await })
    }

    fn last_tx(&self) -> (Tx, Millis) {
        self.read(|c| async move { read::last_tx(&c).await }).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the store's last transaction");
            (0, 0)
        })
    }

    fn add_commit_listener(&self, listener: CommitListener) {
        self.shared.listeners.write().unwrap_or_else(PoisonError::into_inner).push(listener);
    }

    fn predicate(&self, tenant: &str, name: &str) -> Result<PredicateInfo> {
        let (tenant, name) = (tenant.to_string(), name.to_string());
        self.read(move |c| async move { read::predicate(&c, &tenant, &name).await })
    }

    fn predicates(&self, tenant: &str) -> Result<Vec<PredicateInfo>> {
        let tenant = tenant.to_string();
        self.read(move |c| async move { read::predicates(&c, &tenant).await })
    }

    fn threshold(&self, tenant: &str) -> f64 {
        let tenant = tenant.to_string();
        match self.read(move |c| async move { read::threshold(&c, &tenant).await }) {
            Ok(t) => t.unwrap_or(DEFAULT_THRESHOLD),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a tenant's threshold; using the default");
                DEFAULT_THRESHOLD
            }
        }
    }

    fn stats(&self, tenant: &str) -> TenantStats {
        let tenant = tenant.to_string();
        self.read(move |c| async move { read::stats(&c, &tenant).await }).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read a tenant's counts");
            TenantStats::default()
        })
    }

    fn source_stats(&self, tenant: &str, source: &str) -> Result<SourceStats> {
        let (tenant, source) = (tenant.to_string(), source.to_string());
        self.read(move |c| async move { read::source_stats(&c, &tenant, &source).await })
    }

    fn tenants(&self) -> Vec<String> {
        self.read(|c| async move { read::tenants(&c).await }).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot list the tenants");
            Vec::new()
        })
    }

    fn aux_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let key = key.to_vec();
        self.read(move |c| async move {
            let row = c.query_opt("SELECT value FROM aux WHERE key = $1", &[&key]).await.map_err(db)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn aux_put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.aux_put_many(vec![(key.to_vec(), value.to_vec())])
    }

    fn aux_put_many(&self, records: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        self.read(move |mut c| async move {
            let tx = c.transaction().await.map_err(db)?;
            let put = tx
                .prepare("INSERT INTO aux (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value")
                .await
                .map_err(db)?;
            for (k, v) in &records {
                tx.execute(&put, &[k, v]).await.map_err(db)?;
            }
            tx.commit().await.map_err(db)
        })
    }

    fn aux_delete_many(&self, keys: Vec<Vec<u8>>) -> Result<()> {
        self.read(move |c| async move {
            c.execute("DELETE FROM aux WHERE key = ANY($1)", &[&keys]).await.map_err(db)?;
            Ok(())
        })
    }

    fn aux_scan(&self, prefix: &[u8], f: &mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<()> {
        // Page by page, in key order, so a long scan holds no connection
        // between pages and the callback runs on this thread.
        const PAGE: i64 = 1000;
        let mut after: Option<Vec<u8>> = None;
        loop {
            let (p, from) = (prefix.to_vec(), after.clone());
            let page: Vec<(Vec<u8>, Vec<u8>)> = self.read(move |c| async move {
                // Past the last key of the page before, within the prefix.
                let from = from.unwrap_or_default();
                let rows = c
                    .query(
                        "SELECT key, value FROM aux
                         WHERE key >= $1 AND key > $3 AND substring(key FROM 1 FOR length($1)) = $1
                         ORDER BY key LIMIT $2",
                        &[&p, &PAGE, &from],
                    )
                    .await
                    .map_err(db)?;
                Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
            })?;
            let n = page.len();
            for (k, v) in &page {
                if !f(k, v) {
                    return Ok(());
                }
            }
            if (n as i64) < PAGE {
                return Ok(());
            }
            after = page.last().map(|(k, _)| k.clone());
        }
    }

    fn claim(&self, key: &[u8]) -> Result<bool> {
        let key = key.to_vec();
        self.read(move |c| async move {
            let taken = c
                .execute("INSERT INTO claims (key) VALUES ($1) ON CONFLICT (key) DO NOTHING", &[&key])
                .await
                .map_err(db)?;
            // Claims name runs that are due once; a day on, none is asked again.
            if taken == 1 && key.first().is_some_and(|b| b % 64 == 0) {
                c.execute("DELETE FROM claims WHERE claimed_at < now() - interval '1 day'", &[]).await.map_err(db)?;
            }
            Ok(taken == 1)
        })
    }

    fn reachable(&self) -> std::result::Result<(), StorageError> {
        // A round trip, bounded: a readiness probe must answer even when
        // the database does not.
        let probe = self.read(|c| async move {
            tokio::time::timeout(CONNECT_TIMEOUT, c.simple_query("SELECT 1"))
                .await
                .map_err(|_| EngineError::Storage(StorageError::Unreachable("the database did not answer".into())))?
                .map_err(db)
                .map(drop)
        });
        match probe {
            Ok(()) => Ok(()),
            Err(EngineError::Storage(e)) => {
                self.shared.health.down(&e);
                Err(e)
            }
            Err(other) => Err(StorageError::Unreachable(other.to_string())),
        }
    }

    fn writable(&self) -> std::result::Result<(), StorageError> {
        match self.shared.health.state() {
            Some(why) => Err(StorageError::Unreachable(why)),
            None => Ok(()),
        }
    }

    fn failure(&self) -> Option<String> {
        // Unreachable is not a failure the store latches: it goes on when
        // the database comes back.
        None
    }

    fn io_stats(&self) -> IoStats {
        let io = &self.shared.io;
        IoStats {
            groups: io.groups.load(Ordering::Relaxed),
            requests: io.requests.load(Ordering::Relaxed),
            syncs: io.syncs.load(Ordering::Relaxed),
            sync_micros: 0,
        }
    }

    fn size_on_disk(&self) -> Option<u64> {
        self.read(|c| async move {
            let row = c.query_one("SELECT pg_database_size(current_database())", &[]).await.map_err(db)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
        .ok()
    }

    fn cache_fill(&self) -> Option<CacheFill> {
        None
    }

    fn format_found(&self) -> u32 {
        self.schema_version as u32
    }

    fn backup(&self, out: &mut dyn std::io::Write) -> Result<BackupSummary> {
        dump::backup(self, out)
    }

    fn close(&self) {
        // Queued writes are committed; new ones are refused.
        drop(lock(&self.queue).take());
        let writer = lock(&self.writer).take();
        if let Some(writer) = writer {
            let _ = wait(&self.handle, async move {
                let _ = writer.await;
            });
        }
    }
}
