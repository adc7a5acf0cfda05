//! A restore: a backup file into the tables. The file is restored into a
//! scratch store first (checked whole, migrated if older); that store's
//! export goes to a task holding one transaction on the database, which
//! loads it table by table with `COPY`, in the order the tables' references
//! need, and commits once all of it is there.

use super::slots::{base_slot, live_slots};
use super::{file, scratch_config, Scratch, Store, BATCH, BATCH_EVENTS};
use crate::store::postgres::rows::{self, FactParams, COLUMNS};
use crate::store::postgres::shared::{db, Shared};
use crate::store::embedded::Engine;
use crate::store::{
    BackupSummary, Cardinality, EngineError, Fact, Millis, PredicateInfo, Result, SourceStats, StorageError,
    TenantStats, Tx, DEFAULT_THRESHOLD,
};
use std::collections::HashMap;
use std::pin::Pin;
use tempora_storage::logical::{Export, LoggedTx, Reply};
use tempora_storage::record::Clock;
use tokio::sync::mpsc;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

/// Loads a backup into the store's database; see `PostgresStore::restore`.
pub(super) fn restore(store: &impl Store, input: &mut dyn std::io::Read) -> Result<BackupSummary> {
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
            cardinalities.insert((ids[&t.name], p.name.clone()), p.cardinality);
            predicates.push((ids[&t.name], p));
        }
    }
    put(Load::Predicates(predicates))?;

    let tenant_of = |name: &str| {
        ids.get(name).copied().ok_or_else(|| {
            let e = StorageError::Corrupt(format!("a fact names tenant {name:?}, which the store lacks"));
            Unsent::Failed(EngineError::Storage(e))
        })
    };
    let versions = export.versions().map(|f| {
        let f = f?;
        Ok((tenant_of(&f.tenant)?, f))
    });
    in_batches(&put, versions, |_| 1, Load::Versions)?;
    let cardinality = |t: i32, p: &str| cardinalities.get(&(t, p.to_string())).copied().unwrap_or_default();
    send_latest(export, &put, &tenant_of, &cardinality)?;

    let mut last: HashMap<u32, (Tx, Millis)> = HashMap::new();
    let changes = export.changes().map(|c| {
        let c = c?;
        last.insert(c.tenant, (c.tx, c.entry.recorded_at));
        Ok(c)
    });
    in_batches(&put, changes, |c| c.entry.events.len(), Load::Changes)?;

    let mut sources = Vec::new();
    for t in export.tenants() {
        sources.extend(export.source_stats(t.id)?.into_iter().map(|(s, counts)| (ids[&t.name], s, counts)));
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
                let stats = TenantStats::default();
                put(Load::Tenants(vec![TenantRow { id: next_id, name: r.tenant.clone(), threshold: DEFAULT_THRESHOLD, stats }]))?;
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

    in_batches(&put, export.aux().map(|a| Ok(a?)), |_| 1, Load::Aux)?;
    let last = last.into_iter().map(|(t, (tx, at))| (t as i32, tx, at)).collect();
    put(Load::Finish { clock: export.clock(), last })
}

type Sent = std::result::Result<(), Unsent>;

/// `items`, sent as `wrap`ped messages of up to [`BATCH`] items, or of
/// items whose `weight` (change-log events) adds up to [`BATCH_EVENTS`].
fn in_batches<T>(
    put: &impl Fn(Load) -> Sent,
    items: impl Iterator<Item = std::result::Result<T, Unsent>>,
    weight: fn(&T) -> usize,
    wrap: fn(Vec<T>) -> Load,
) -> Sent {
    let (mut chunk, mut weighs) = (Vec::with_capacity(BATCH), 0);
    for item in items {
        let item = item?;
        weighs += weight(&item);
        chunk.push(item);
        if chunk.len() >= BATCH || weighs >= BATCH_EVENTS {
            put(wrap(std::mem::take(&mut chunk)))?;
            weighs = 0;
        }
    }
    put(wrap(chunk))
}

/// The latest version of every fact, with its slot. The live facts of a
/// subject and predicate come together, and their slots are decided
/// together (`slots::live_slots`).
fn send_latest(
    export: &Export<'_>,
    put: &impl Fn(Load) -> Sent,
    tenant_of: &impl Fn(&str) -> std::result::Result<i32, Unsent>,
    cardinality: &impl Fn(i32, &str) -> Cardinality,
) -> Sent {
    let mut chunk = Vec::with_capacity(BATCH);
    let mut pair: Vec<Fact> = Vec::new();
    let flush_pair = |pair: &mut Vec<Fact>, chunk: &mut Vec<(i32, Fact, String)>| -> Sent {
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
    put(Load::Latest(chunk))
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
