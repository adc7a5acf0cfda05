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
//! Scratch directories are made in the system's temporary directory
//! (`$TMPDIR`) and removed afterwards. Not in a backup, as on the engine:
//! the claims of scheduled runs (`claims`), and each server's search index.

use super::rows::{self, json_text, FactParams, COLUMNS};
use super::shared::{db, Shared};
use crate::store::embedded::{backup as file, Engine, EngineConfig};
use crate::store::{
    BackupSummary, Cardinality, EngineError, Fact, Millis, PredicateInfo, Result, SourceStats, Status, StorageError,
    TenantStats, Tx, DEFAULT_THRESHOLD,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tempora_storage::logical::{Export, Importer, LoggedTx, Reply, Tenant};
use tempora_storage::record::{Clock, LogEntry};
use tokio::sync::mpsc;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::IsolationLevel;

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
/// Items per message between the database task and the thread that
/// builds or reads the engine store.
const BATCH: usize = 1000;
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
    let mut out = Batches { send, items: Vec::with_capacity(BATCH) };
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
    each_row(&t, &versions, &mut out, |r| Ok(Item::Version(rows::fact(&name(r.get(0))?, r)?))).await?;
    each_row(&t, "SELECT tenant_id, tx, recorded_at, events FROM changes", &mut out, |r| {
        let tenant: i32 = r.get(0);
        name(tenant)?;
        let events = serde_json::from_value(r.get(3))
            .map_err(|e| rows::corrupt(format!("a change-log row does not read: {e}")))?;
        let entry = LogEntry { recorded_at: r.get(2), events };
        Ok(Item::Change(LoggedTx { tenant: tenant as u32, tx: r.get::<_, i64>(1) as Tx, entry }))
    })
    .await?;
    let replies = "SELECT t.name, i.key, i.reply FROM idempotency i JOIN tenants t ON t.id = i.tenant_id";
    each_row(&t, replies, &mut out, |r| Ok(Item::Reply(Reply { tenant: r.get(0), key: r.get(1), reply: r.get(2) })))
        .await?;
    each_row(&t, "SELECT key, value FROM aux", &mut out, |r| Ok(Item::Aux(r.get(0), r.get(1)))).await?;
    out.push(Item::End).await?;
    out.flush().await?;
    t.commit().await.map_err(db)
}

/// Runs `sql` through a portal, a page at a time, handing each row to `item`.
async fn each_row(
    t: &tokio_postgres::Transaction<'_>,
    sql: &str,
    out: &mut Batches<'_>,
    mut item: impl FnMut(&tokio_postgres::Row) -> Result<Item>,
) -> Result<()> {
    let portal = t.bind(sql, &[]).await.map_err(db)?;
    loop {
        let page = t.query_portal(&portal, PAGE).await.map_err(db)?;
        for r in &page {
            out.push(item(r)?).await?;
        }
        if page.len() < PAGE as usize {
            return Ok(());
        }
    }
}

/// Items on their way to the thread that builds the store, a batch at a time.
struct Batches<'a> {
    send: &'a mpsc::Sender<Result<Vec<Item>>>,
    items: Vec<Item>,
}

impl Batches<'_> {
    async fn push(&mut self, item: Item) -> Result<()> {
        self.items.push(item);
        if self.items.len() >= BATCH {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        let batch = std::mem::replace(&mut self.items, Vec::with_capacity(BATCH));
        // The receiving thread stops taking batches only when it failed; it reports why.
        self.send.send(Ok(batch)).await.map_err(|_| EngineError::Closed("the backup was abandoned".into()))
    }
}

// ---- restore: a file into the tables -------------------------------------------

/// Loads a backup into the store's database; see `PostgresStore::restore`.
fn restore(store: &impl Store, input: &mut dyn std::io::Read) -> Result<BackupSummary> {
    let scratch = Scratch::new("restore");
    let summary = file::restore(input, scratch.path())?;
    // Opened as a store: an older store format is migrated forward here.
    let engine = Engine::open(scratch_config(scratch.path()))?;
    let loaded = load(store, &engine);
    engine.close();
    loaded.map(|()| summary)
}

/// A tenant's row.
struct TenantRow {
    id: i32,
    name: String,
    threshold: f64,
    stats: TenantStats,
}

/// What the reading thread sends the transaction that loads the tables,
/// in the order the tables' references need.
enum Load {
    Tenants(Vec<TenantRow>),
    Predicates(Vec<(i32, PredicateInfo)>),
    Versions(Vec<(i32, Fact)>),
    /// Each fact's latest version, with its slot.
    Latest(Vec<(i32, Fact, String)>),
    Changes(Vec<LoggedTx>),
    Sources(Vec<(i32, String, SourceStats)>),
    Replies(Vec<(i32, Reply)>),
    Aux(Vec<(Vec<u8>, Vec<u8>)>),
    /// Everything was sent: the clock and each tenant's last transaction.
    Finish { clock: Clock, last: Vec<(i32, Tx, Millis)> },
}

/// Why sending stopped.
enum Unsent {
    /// The loading transaction stopped taking items; it says why.
    Stopped,
    Failed(EngineError),
}

impl From<EngineError> for Unsent {
    fn from(e: EngineError) -> Self {
        Unsent::Failed(e)
    }
}

/// The export of `engine` into the tables, in one transaction.
fn load(store: &impl Store, engine: &Engine) -> Result<()> {
    let export = engine.export()?;
    let (send, items) = mpsc::channel::<Load>(4);
    let (done, written) = std::sync::mpsc::sync_channel(1);
    let shared = store.shared();
    store.runtime().spawn(async move {
        let _ = done.send(write_tables(&shared, items).await);
    });
    let sent = send_all(&export, &send);
    drop(send);
    let written = written.recv().map_err(|_| EngineError::Closed("the PostgreSQL store has stopped".into()))?;
    match sent {
        Ok(()) | Err(Unsent::Stopped) => written,
        // The transaction ends without committing once the items stop.
        Err(Unsent::Failed(e)) => Err(e),
    }
}

/// Sends every item of `export`, in the order of [`Load`].
fn send_all(export: &Export<'_>, send: &mpsc::Sender<Load>) -> std::result::Result<(), Unsent> {
    let put = |msg: Load| send.blocking_send(msg).map_err(|_| Unsent::Stopped);
    let mut ids: HashMap<String, i32> = HashMap::new();
    let mut tenants = Vec::new();
    for t in export.tenants() {
        let id = i32::try_from(t.id).map_err(|_| EngineError::Invalid(format!("tenant id {} is too large", t.id)))?;
        ids.insert(t.name.clone(), id);
        let threshold = t.threshold.unwrap_or(DEFAULT_THRESHOLD);
        tenants.push(TenantRow { id, name: t.name.clone(), threshold, stats: export.stats(t.id)? });
    }
    put(Load::Tenants(tenants))?;

    let mut cardinalities: HashMap<(i32, String), Cardinality> = HashMap::new();
    let mut predicates = Vec::new();
    for t in export.tenants() {
        for p in export.predicates(t.id)? {
            cardinalities.insert((t.id as i32, p.name.clone()), p.cardinality);
            predicates.push((t.id as i32, p));
        }
    }
    put(Load::Predicates(predicates))?;

    let tenant_of = |name: &str| {
        ids.get(name).copied().ok_or_else(|| {
            Unsent::Failed(EngineError::Storage(StorageError::Corrupt(format!("a fact names tenant {name:?}, which the store lacks"))))
        })
    };
    let mut chunk = Vec::with_capacity(BATCH);
    for f in export.versions() {
        let f = f?;
        chunk.push((tenant_of(&f.tenant)?, f));
        if chunk.len() >= BATCH {
            put(Load::Versions(std::mem::take(&mut chunk)))?;
        }
    }
    put(Load::Versions(chunk))?;

    // The live facts of a pair come together: their slots are decided together.
    let cardinality = |t: i32, p: &str| cardinalities.get(&(t, p.to_string())).copied().unwrap_or_default();
    let mut chunk = Vec::with_capacity(BATCH);
    let mut pair: Vec<Fact> = Vec::new();
    let flush_pair = |pair: &mut Vec<Fact>, chunk: &mut Vec<(i32, Fact, String)>| -> std::result::Result<(), Unsent> {
        let Some(first) = pair.first() else { return Ok(()) };
        let t = tenant_of(&first.tenant)?;
        let slots = live_slots(pair, cardinality(t, &first.predicate))?;
        chunk.extend(pair.drain(..).zip(slots).map(|(f, s)| (t, f, s)));
        Ok(())
    };
    for f in export.latest() {
        let f = f?;
        if pair.first().is_some_and(|p| (&p.tenant, &p.subject, &p.predicate) != (&f.tenant, &f.subject, &f.predicate)) {
            flush_pair(&mut pair, &mut chunk)?;
        }
        if f.status.is_live() {
            pair.push(f);
        } else {
            flush_pair(&mut pair, &mut chunk)?;
            let t = tenant_of(&f.tenant)?;
            let slot = base_slot(cardinality(t, &f.predicate), &f);
            chunk.push((t, f, slot));
        }
        if chunk.len() >= BATCH {
            put(Load::Latest(std::mem::take(&mut chunk)))?;
        }
    }
    flush_pair(&mut pair, &mut chunk)?;
    put(Load::Latest(chunk))?;

    let mut last: HashMap<u32, (Tx, Millis)> = HashMap::new();
    let mut chunk = Vec::with_capacity(BATCH);
    for c in export.changes() {
        let c = c?;
        last.insert(c.tenant, (c.tx, c.entry.recorded_at));
        chunk.push(c);
        if chunk.len() >= BATCH {
            put(Load::Changes(std::mem::take(&mut chunk)))?;
        }
    }
    put(Load::Changes(chunk))?;

    let mut sources = Vec::new();
    for t in export.tenants() {
        sources.extend(export.source_stats(t.id)?.into_iter().map(|(s, counts)| (t.id as i32, s, counts)));
    }
    put(Load::Sources(sources))?;

    // A reply of a tenant that never committed (its first write was
    // refused) needs a row of its own, numbered after the others.
    let mut next_id = ids.values().copied().max().unwrap_or(0) + 1;
    let mut chunk = Vec::with_capacity(BATCH);
    for r in export.replies() {
        let r = r?;
        let id = match ids.get(&r.tenant) {
            Some(id) => *id,
            None => {
                put(Load::Replies(std::mem::take(&mut chunk)))?;
                let row = TenantRow { id: next_id, name: r.tenant.clone(), threshold: DEFAULT_THRESHOLD, stats: TenantStats::default() };
                put(Load::Tenants(vec![row]))?;
                ids.insert(r.tenant.clone(), next_id);
                next_id += 1;
                next_id - 1
            }
        };
        chunk.push((id, r));
        if chunk.len() >= BATCH {
            put(Load::Replies(std::mem::take(&mut chunk)))?;
        }
    }
    put(Load::Replies(chunk))?;

    let mut chunk = Vec::with_capacity(BATCH);
    for a in export.aux() {
        chunk.push(a?);
        if chunk.len() >= BATCH {
            put(Load::Aux(std::mem::take(&mut chunk)))?;
        }
    }
    put(Load::Aux(chunk))?;
    let last = last.into_iter().map(|(t, (tx, at))| (t as i32, tx, at)).collect();
    put(Load::Finish { clock: export.clock(), last })
}

/// What a fact holds exclusively in `facts` (the schema's `slot`), as the
/// writer sets it for a fact asserted under `cardinality`: the whole pair
/// ('') under one and strict, its value under many.
fn base_slot(cardinality: Cardinality, f: &Fact) -> String {
    match cardinality {
        Cardinality::Many => object_slot(f),
        Cardinality::One | Cardinality::Strict => String::new(),
    }
}

/// The slot of `f`'s value: 'm' and the SHA-256 of its object's JSON text,
/// as the writer makes it.
fn object_slot(f: &Fact) -> String {
    use sha2::Digest;
    format!("m{:x}", sha2::Sha256::digest(json_text(&f.object).as_bytes()))
}

/// The slots of the live facts of one subject and predicate, whose
/// predicate is now `cardinality`. The store does not say what the
/// cardinality was when each fact was asserted, and values asserted under
/// many may stand side by side after the predicate became one (each
/// continues after a bounded takeover): of active facts that would hold the
/// whole pair over overlapping valid time, the one that starts first keeps
/// it, and each other holds its value instead. Refuses two active facts
/// holding the same value over overlapping time, which the database's
/// constraint would refuse too (the rules never leave them).
fn live_slots(pair: &[Fact], cardinality: Cardinality) -> Result<Vec<String>> {
    let until = |f: &Fact| f.valid_until.unwrap_or(Millis::MAX);
    let mut slots: Vec<String> = pair.iter().map(|f| base_slot(cardinality, f)).collect();
    let mut active: Vec<usize> = (0..pair.len()).filter(|&i| pair[i].status == Status::Active).collect();
    active.sort_by_key(|&i| pair[i].valid_from);
    // A fact keeps '' only if it starts after every fact that kept it ends.
    let mut end = Millis::MIN;
    for &i in &active {
        if slots[i].is_empty() {
            if pair[i].valid_from < end {
                slots[i] = object_slot(&pair[i]);
            } else {
                end = until(&pair[i]);
            }
        }
    }
    active.sort_by(|&a, &b| slots[a].cmp(&slots[b]).then(pair[a].valid_from.cmp(&pair[b].valid_from)));
    // In order of slot and start, each fact must start after the one
    // before it in its slot ends.
    for w in active.windows(2) {
        let (a, b) = (&pair[w[0]], &pair[w[1]]);
        if slots[w[0]] == slots[w[1]] && b.valid_from < until(a) {
            return Err(EngineError::Invalid(format!(
                "facts {} and {} of {} {} are both active with the value {} over overlapping valid time, \
                 which PostgreSQL's one_active_value constraint refuses",
                a.id, b.id, a.subject, a.predicate, a.object
            )));
        }
    }
    Ok(slots)
}

/// The tables a restore fills, in the order it fills them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    Versions,
    Facts,
    Changes,
    Sources,
    Replies,
    Aux,
}

/// The columns of a fact version after `tenant_id`, as [`COLUMNS`] names them.
const FACT_TYPES: [Type; 18] = [
    Type::UUID,
    Type::INT8,
    Type::TEXT,
    Type::TEXT,
    Type::TEXT,
    Type::FLOAT8,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::INT8,
    Type::TEXT,
    Type::INT8,
    Type::INT8,
    Type::UUID_ARRAY,
    Type::UUID,
    Type::UUID,
    Type::UUID_ARRAY,
];

impl Table {
    fn copy(self) -> (String, Vec<Type>) {
        let fact = |extra: &[Type]| [&[Type::INT4][..], &FACT_TYPES, extra].concat();
        match self {
            Table::Versions => (format!("COPY fact_versions (tenant_id, {COLUMNS}) FROM STDIN BINARY"), fact(&[])),
            Table::Facts => (format!("COPY facts (tenant_id, {COLUMNS}, slot) FROM STDIN BINARY"), fact(&[Type::TEXT])),
            Table::Changes => (
                "COPY changes (tenant_id, tx, recorded_at, events) FROM STDIN BINARY".into(),
                vec![Type::INT4, Type::INT8, Type::INT8, Type::JSONB],
            ),
            Table::Sources => (
                "COPY source_stats (tenant_id, source, active, candidate, superseded, retracted) FROM STDIN BINARY".into(),
                vec![Type::INT4, Type::TEXT, Type::INT8, Type::INT8, Type::INT8, Type::INT8],
            ),
            Table::Replies => (
                "COPY idempotency (tenant_id, key, reply, tx) FROM STDIN BINARY".into(),
                vec![Type::INT4, Type::BYTEA, Type::BYTEA, Type::INT8],
            ),
            Table::Aux => ("COPY aux (key, value) FROM STDIN BINARY".into(), vec![Type::BYTEA, Type::BYTEA]),
        }
    }
}

/// The COPY under way, if any: one table at a time.
#[derive(Default)]
struct Copying(Option<(Table, Pin<Box<BinaryCopyInWriter>>)>);

impl Copying {
    /// The writer of `table`'s COPY, ending the one of another table first.
    async fn open(&mut self, t: &tokio_postgres::Transaction<'_>, table: Table) -> Result<Pin<&mut BinaryCopyInWriter>> {
        if self.0.as_ref().is_none_or(|(open, _)| *open != table) {
            self.end().await?;
            let (sql, types) = table.copy();
            let sink = t.copy_in(&sql).await.map_err(db)?;
            self.0 = Some((table, Box::pin(BinaryCopyInWriter::new(sink, &types))));
        }
        Ok(self.0.as_mut().expect("opened above").1.as_mut())
    }

    async fn end(&mut self) -> Result<()> {
        if let Some((_, mut w)) = self.0.take() {
            w.as_mut().finish().await.map_err(db)?;
        }
        Ok(())
    }
}

/// Loads what [`send_all`] sends in one transaction, committed on `Finish`.
async fn write_tables(shared: &Shared, mut items: mpsc::Receiver<Load>) -> Result<()> {
    let mut client = shared.client().await?;
    let t = client.transaction().await.map_err(db)?;
    // Until the commit nothing else writes them: a server's write group waits
    // at the clock, its service records at aux. Reads go on.
    t.batch_execute(
        "LOCK TABLE clock, tenants, predicates, source_stats, fact_versions, facts, changes, idempotency, aux \
         IN EXCLUSIVE MODE",
    )
    .await
    .map_err(db)?;
    refuse_a_store(&t).await?;
    let mut copy = Copying::default();
    while let Some(msg) = items.recv().await {
        match msg {
            Load::Tenants(rows) => {
                copy.end().await?;
                for r in rows {
                    let s = &r.stats;
                    let counts = [s.active, s.candidate, s.superseded, s.retracted, s.subjects, s.predicates].map(|n| n as i64);
                    t.execute(
                        "INSERT INTO tenants (id, name, threshold, active, candidate, superseded, retracted, subjects,
                             predicate_count) OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                        &[&r.id, &r.name, &r.threshold, &counts[0], &counts[1], &counts[2], &counts[3], &counts[4], &counts[5]],
                    )
                    .await
                    .map_err(db)?;
                }
            }
            Load::Predicates(rows) => {
                copy.end().await?;
                for (tenant, p) in rows {
                    t.execute(
                        "INSERT INTO predicates (tenant_id, name, cardinality) VALUES ($1, $2, $3)",
                        &[&tenant, &p.name, &p.cardinality.as_str()],
                    )
                    .await
                    .map_err(db)?;
                }
            }
            Load::Versions(facts) => {
                let mut w = copy.open(&t, Table::Versions).await?;
                for (tenant, f) in &facts {
                    let p = FactParams::new(f);
                    let row: Vec<&(dyn ToSql + Sync)> = std::iter::once(tenant as &(dyn ToSql + Sync)).chain(p.params(f)).collect();
                    w.as_mut().write(&row).await.map_err(db)?;
                }
            }
            Load::Latest(facts) => {
                let mut w = copy.open(&t, Table::Facts).await?;
                for (tenant, f, slot) in &facts {
                    let p = FactParams::new(f);
                    let row: Vec<&(dyn ToSql + Sync)> =
                        std::iter::once(tenant as &(dyn ToSql + Sync)).chain(p.params(f)).chain(std::iter::once(slot as &(dyn ToSql + Sync))).collect();
                    w.as_mut().write(&row).await.map_err(db)?;
                }
            }
            Load::Changes(changes) => {
                let mut w = copy.open(&t, Table::Changes).await?;
                for c in &changes {
                    let events = serde_json::to_value(&c.entry.events)
                        .map_err(|e| EngineError::Storage(StorageError::Backend(e.to_string())))?;
                    let (tenant, tx) = (c.tenant as i32, rows::db_tx(c.tx));
                    let row: [&(dyn ToSql + Sync); 4] = [&tenant, &tx, &c.entry.recorded_at, &events];
                    w.as_mut().write(&row).await.map_err(db)?;
                }
            }
            Load::Sources(sources) => {
                let mut w = copy.open(&t, Table::Sources).await?;
                for (tenant, source, s) in &sources {
                    let counts = [s.active, s.candidate, s.superseded, s.retracted].map(|n| n as i64);
                    let row: [&(dyn ToSql + Sync); 6] = [tenant, source, &counts[0], &counts[1], &counts[2], &counts[3]];
                    w.as_mut().write(&row).await.map_err(db)?;
                }
            }
            Load::Replies(replies) => {
                let mut w = copy.open(&t, Table::Replies).await?;
                // The engine does not keep the tx a reply was stored with;
                // nothing reads it back.
                let unknown = 0i64;
                for (tenant, r) in &replies {
                    let row: [&(dyn ToSql + Sync); 4] = [tenant, &r.key, &r.reply, &unknown];
                    w.as_mut().write(&row).await.map_err(db)?;
                }
            }
            Load::Aux(records) => {
                let mut w = copy.open(&t, Table::Aux).await?;
                for (k, v) in &records {
                    let row: [&(dyn ToSql + Sync); 2] = [k, v];
                    w.as_mut().write(&row).await.map_err(db)?;
                }
            }
            Load::Finish { clock, last } => {
                copy.end().await?;
                for (tenant, tx, at) in &last {
                    t.execute(
                        "UPDATE tenants SET last_tx = $2, last_recorded_at = $3 WHERE id = $1",
                        &[tenant, &rows::db_tx(*tx), at],
                    )
                    .await
                    .map_err(db)?;
                }
                let last_tx = rows::db_tx(clock.last_tx);
                t.execute("UPDATE clock SET last_tx = $1, last_recorded_at = $2", &[&last_tx, &clock.last_recorded_at])
                    .await
                    .map_err(db)?;
                // Tenants made later are numbered after the restored ones.
                t.execute("SELECT setval(pg_get_serial_sequence('tenants', 'id'), max(id)) FROM tenants HAVING count(*) > 0", &[])
                    .await
                    .map_err(db)?;
                // Followers of servers already on the database look now.
                t.execute("SELECT pg_notify('tempora_changes', $1)", &[&last_tx.to_string()]).await.map_err(db)?;
                return t.commit().await.map_err(db);
            }
        }
    }
    Err(EngineError::Closed("the restore stopped before all of the store was sent; nothing was written".into()))
}

/// Refuses a database that already holds tempora data: a restore makes a
/// store, it never merges into or overwrites one.
async fn refuse_a_store(t: &tokio_postgres::Transaction<'_>) -> Result<()> {
    let r = t
        .query_one(
            "SELECT (SELECT last_tx FROM clock), (SELECT count(*) FROM tenants),
                    EXISTS (SELECT 1 FROM fact_versions) OR EXISTS (SELECT 1 FROM changes)
                    OR EXISTS (SELECT 1 FROM idempotency) OR EXISTS (SELECT 1 FROM aux)",
            &[],
        )
        .await
        .map_err(db)?;
    let (last_tx, tenants, rows): (i64, i64, bool) = (r.get(0), r.get(1), r.get(2));
    if last_tx > 0 || tenants > 0 || rows {
        return Err(EngineError::Invalid(format!(
            "the database already holds a tempora store ({tenants} tenants, up to tx {last_tx}): restore into an \
             empty database (a restore never overwrites a store); nothing was changed"
        )));
    }
    Ok(())
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
