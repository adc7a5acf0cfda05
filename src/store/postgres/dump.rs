//! The whole store to and from the backup file format (`tempora backup`,
//! `tempora restore`), so data moves between the embedded engine and
//! PostgreSQL with ids, tx and history unchanged.
//!
//! There is one backup format, the embedded engine's
//! (`tempora_storage::backup`), and the engine's logical items
//! (`tempora_storage::logical`) stand between it and the tables:
//!
//! - A backup reads the tables in one `REPEATABLE READ READ ONLY`
//!   transaction (one state of the database, whatever commits meanwhile),
//!   builds an engine store of them in a scratch directory
//!   (`logical::Importer`) and writes that store's backup.
//! - A restore restores the file into a scratch directory (the whole file is
//!   checked first, and an older store format migrated forward), then loads
//!   that store's export (`Engine::export`) into the tables in one
//!   transaction, into a database that holds no tempora data yet.
//!
//! Here: the backup, and scratch stores; `load.rs`: the restore;
//! `slots.rs`: the exclusion slot of each restored fact; `store.rs`: the
//! store's side. Scratch directories are made in the system's temporary
//! directory (`$TMPDIR`) and removed afterwards. Not in a backup, as on
//! the engine: the claims of scheduled runs (`claims`), and each server's
//! search index.

use super::rows::{self, COLUMNS};
use super::shared::{db, Shared};
use crate::store::embedded::{backup as file, Engine, EngineConfig};
use crate::store::{BackupSummary, EngineError, Fact, PredicateInfo, Result, StorageError, Tx, DEFAULT_THRESHOLD};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tempora_storage::logical::{Importer, LoggedTx, Reply, Tenant};
use tempora_storage::record::{Clock, LogEntry};
use tokio::sync::mpsc;
use tokio_postgres::IsolationLevel;

mod load;
mod slots;
mod store;

/// What a dump needs of the PostgreSQL store: its shared parts (the pool)
/// and the runtime its connections live on. The store's side is in
/// `dump/store.rs`, so that this file, which the store calls, refers to
/// nothing of the store's own module (no import cycle, tests/it/layering.rs).
pub(super) trait Store {
    fn shared(&self) -> Arc<Shared>;
    fn runtime(&self) -> &tokio::runtime::Handle;
}

/// Rows read per round trip.
const PAGE: i32 = 1000;
/// Change-log rows read per round trip: a row holds every event of its
/// transaction (a batch of a thousand facts makes a thousand), and a page
/// of a thousand such rows held 400 MB.
const CHANGES_PAGE: i32 = 16;
/// Items per message between the database task and the thread that
/// builds or reads the engine store, and the most events of change-log
/// entries one message holds.
const BATCH: usize = 1000;
const BATCH_EVENTS: usize = 8192;
/// The page cache of a scratch store.
const SCRATCH_CACHE: u64 = 64 << 20;

// ---- backup: the tables to a file ----------------------------------------------

/// One item read from the tables.
// Nearly every item is a version: boxing them would allocate once more per
// fact to shrink the few others.
#[allow(clippy::large_enum_variant)]
enum Item {
    Clock(Clock),
    Tenant(Tenant),
    Predicate(u32, PredicateInfo),
    Version(Fact),
    Change(LoggedTx),
    Reply(Reply),
    Aux(Vec<u8>, Vec<u8>),
    /// Everything was read: without it, the read stopped part way.
    End,
}

/// A consistent copy of the whole store, in the embedded engine's backup format.
pub(super) fn backup(store: &impl Store, out: &mut dyn std::io::Write) -> Result<BackupSummary> {
    let scratch = Scratch::new("backup");
    let (send, mut items) = mpsc::channel::<Result<Vec<Item>>>(4);
    let shared = store.shared();
    store.runtime().spawn(async move {
        if let Err(e) = read_tables(&shared, &send).await {
            let _ = send.send(Err(e)).await;
        }
    });
    let mut importer = Importer::create(scratch.path())?;
    let (mut clock, mut ended) = (None, false);
    while let Some(batch) = items.blocking_recv() {
        for item in batch? {
            match item {
                Item::Clock(c) => clock = Some(c),
                Item::Tenant(t) => importer.tenant(&t)?,
                Item::Predicate(t, p) => importer.predicate(t, &p)?,
                Item::Version(f) => importer.version(&f)?,
                Item::Change(c) => importer.change(&c)?,
                Item::Reply(r) => importer.reply(&r)?,
                Item::Aux(k, v) => importer.aux(&k, &v)?,
                Item::End => ended = true,
            }
        }
    }
    let (Some(clock), true) = (clock, ended) else {
        return Err(EngineError::Storage(StorageError::Unreachable(
            "the store stopped before the backup's read of the database ended".into(),
        )));
    };
    importer.finish(clock)?;
    let engine = Engine::open(scratch_config(scratch.path()))?;
    let made = engine.backup(out);
    engine.close();
    made
}

/// Every table a backup holds, read in one transaction, sent in batches.
async fn read_tables(shared: &Shared, send: &mpsc::Sender<Result<Vec<Item>>>) -> Result<()> {
    let mut client = shared.client().await?;
    // One snapshot for every statement: the database as one commit left it.
    let t = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(db)?;
    let mut out = Batches { send, items: Vec::with_capacity(BATCH), events: 0 };
    let clock = t.query_one("SELECT last_tx, last_recorded_at FROM clock", &[]).await.map_err(db)?;
    out.push(Item::Clock(Clock { last_tx: clock.get::<_, i64>(0) as Tx, last_recorded_at: clock.get(1) })).await?;

    // The engine has a tenant once it commits a transaction, and a
    // threshold once one was set: a row made for a write that was refused
    // is left out, and a threshold at the default never set stays unset.
    let tenants = t
        .query(
            r#"SELECT t.id, t.name, t.threshold,
                      t.threshold <> $1 OR EXISTS (SELECT 1 FROM changes c
                          WHERE c.tenant_id = t.id AND c.events @> '[{"Threshold": {}}]'::jsonb)
               FROM tenants t WHERE EXISTS (SELECT 1 FROM changes c WHERE c.tenant_id = t.id)
               ORDER BY t.id"#,
            &[&DEFAULT_THRESHOLD],
        )
        .await
        .map_err(db)?;
    let mut names: HashMap<i32, String> = HashMap::with_capacity(tenants.len());
    for r in &tenants {
        let (id, name, threshold, set): (i32, String, f64, bool) = (r.get(0), r.get(1), r.get(2), r.get(3));
        names.insert(id, name.clone());
        out.push(Item::Tenant(Tenant { id: id as u32, name, threshold: set.then_some(threshold) })).await?;
    }
    let name = |id: i32| {
        names.get(&id).cloned().ok_or_else(|| rows::corrupt(format!("a row names tenant {id}, which has no change")))
    };
    let predicates =
        t.query("SELECT tenant_id, name, cardinality FROM predicates ORDER BY tenant_id, name", &[]).await.map_err(db)?;
    for r in &predicates {
        let cardinality = rows::cardinality_of(r.get(2))?;
        out.push(Item::Predicate(r.get::<_, i32>(0) as u32, PredicateInfo { name: r.get(1), cardinality })).await?;
    }
    let versions = format!("SELECT tenant_id, {COLUMNS} FROM fact_versions");
    each_row(&t, &versions, PAGE, &mut out, |r| Ok(Item::Version(rows::fact(&name(r.get(0))?, r)?))).await?;
    let changes = "SELECT tenant_id, tx, recorded_at, events FROM changes";
    each_row(&t, changes, CHANGES_PAGE, &mut out, |r| {
        let tenant: i32 = r.get(0);
        name(tenant)?;
        let events = serde_json::from_value(r.get(3))
            .map_err(|e| rows::corrupt(format!("a change-log row does not read: {e}")))?;
        let entry = LogEntry { recorded_at: r.get(2), events };
        Ok(Item::Change(LoggedTx { tenant: tenant as u32, tx: r.get::<_, i64>(1) as Tx, entry }))
    })
    .await?;
    let replies = "SELECT t.name, i.key, i.reply FROM idempotency i JOIN tenants t ON t.id = i.tenant_id";
    each_row(&t, replies, PAGE, &mut out, |r| Ok(Item::Reply(Reply { tenant: r.get(0), key: r.get(1), reply: r.get(2) })))
        .await?;
    each_row(&t, "SELECT key, value FROM aux", PAGE, &mut out, |r| Ok(Item::Aux(r.get(0), r.get(1)))).await?;
    out.push(Item::End).await?;
    out.flush().await?;
    t.commit().await.map_err(db)
}

/// Runs `sql` through a portal, `page` rows at a time, handing each row to `item`.
async fn each_row(
    t: &tokio_postgres::Transaction<'_>,
    sql: &str,
    page: i32,
    out: &mut Batches<'_>,
    mut item: impl FnMut(&tokio_postgres::Row) -> Result<Item>,
) -> Result<()> {
    let portal = t.bind(sql, &[]).await.map_err(db)?;
    loop {
        let rows = t.query_portal(&portal, page).await.map_err(db)?;
        for r in &rows {
            out.push(item(r)?).await?;
        }
        if rows.len() < page as usize {
            return Ok(());
        }
    }
}

/// Items on their way to the thread that builds the store, a batch at a time.
struct Batches<'a> {
    send: &'a mpsc::Sender<Result<Vec<Item>>>,
    items: Vec<Item>,
    /// Change-log events in `items`.
    events: usize,
}

impl Batches<'_> {
    async fn push(&mut self, item: Item) -> Result<()> {
        if let Item::Change(c) = &item {
            self.events += c.entry.events.len();
        }
        self.items.push(item);
        if self.items.len() >= BATCH || self.events >= BATCH_EVENTS {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        self.events = 0;
        let batch = std::mem::replace(&mut self.items, Vec::with_capacity(BATCH));
        // The receiving thread stops taking batches only when it failed; it reports why.
        self.send.send(Ok(batch)).await.map_err(|_| EngineError::Closed("the backup was abandoned".into()))
    }
}
// ---- scratch stores -------------------------------------------------------------

/// A directory for a scratch store, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        Scratch(std::env::temp_dir().join(format!("tempora-{what}-{}-{nanos}-{n}", std::process::id())))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A scratch store is read once and written by no one: a small cache, not warmed.
fn scratch_config(dir: &Path) -> EngineConfig {
    EngineConfig::at(dir).cache_bytes(SCRATCH_CACHE).warm_cache(false)
}
