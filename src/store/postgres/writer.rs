//! The write path on PostgreSQL: one writer task per process that commits
//! the writes queued to it in groups, one database transaction per group.
//!
//! A group locks the store's `clock` row first, so groups of every replica
//! commit one after another, in tx order; while one group's transaction
//! commits, the writes arriving meanwhile form the next group. Inside the
//! transaction each write runs under a savepoint: a write refused by the
//! rules (a strict conflict, a bad interval) is rolled back alone and the
//! others commit. What a write does is decided by the same pure planner as
//! the embedded engine's (`tempora_storage::takeover`); this module only
//! finds the facts it needs and writes what it decides. Nobody is answered
//! before the commit that covers their write.

use super::rows::{self, db_tx, json_text, FactParams, COLUMNS};
use super::shared::{again, unreachable_error, Shared};
use crate::store::{
    validate_write, Asserted, Cardinality, EngineError, Fact, FactId, FactInput, Idempotency, Millis, OpOutcome,
    PredicateInfo, Status, StorageError, Tx, WriteDone, WriteOp, WriteOutcome, DEFAULT_THRESHOLD,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tempora_storage::record::LogEvent;
use tempora_storage::takeover::{self, Stamp};
use tokio::sync::mpsc;
use std::sync::{LazyLock, Mutex};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement, Transaction};
use uuid::Uuid;

/// One queued write.
pub struct Job {
    pub tenant: String,
    pub ops: Vec<WriteOp>,
    pub idempotency: Option<Idempotency>,
    pub done: WriteDone,
}

/// Most writes in one group, and operations after which a group takes no
/// more (a single write is never split).
const MAX_GROUP_JOBS: usize = 512;
const MAX_GROUP_OPS: usize = 2048;
/// How long a group's transaction may take before its writes are answered
/// with an error (the request deadline is longer).
const GROUP_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs until the queue closes: takes the next group, commits it, answers.
pub async fn run(shared: Arc<Shared>, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut conn: Option<(Client, Prepared)> = None;
    while let Some(first) = queue.recv().await {
        let mut jobs = vec![first];
        let mut ops = jobs[0].ops.len();
        while jobs.len() < MAX_GROUP_JOBS && ops < MAX_GROUP_OPS {
            match queue.try_recv() {
                Ok(j) => {
                    ops += j.ops.len();
                    jobs.push(j);
                }
                Err(_) => break,
            }
        }
        commit_group(&shared, &mut conn, jobs).await;
    }
}

/// What each write of a group came to, by position.
enum Answer {
    Done(Result<WriteOutcome, EngineError>),
    Replayed(Vec<u8>),
}

async fn commit_group(shared: &Shared, conn: &mut Option<(Client, Prepared)>, mut jobs: Vec<Job>) {
    use std::sync::atomic::Ordering::Relaxed;
    shared.io.requests.fetch_add(jobs.len() as u64, Relaxed);
    if conn.as_ref().is_none_or(|(c, _)| c.is_closed()) {
        *conn = match shared.connect().await {
            Ok(c) => Some((c, Prepared::default())),
            Err(e) => {
                shared.health.down(&e);
                return fail_all(jobs, &e);
            }
        };
    }
    let Some((client, prepared)) = conn.as_mut() else { return };
    let applied = tokio::time::timeout(GROUP_TIMEOUT, apply_group(client, prepared, &mut jobs)).await;
    let answers = match applied {
        Ok(Ok(answers)) => answers,
        Ok(Err(e)) => {
            // The transaction did not commit (or may not have): nothing of the
            // group is acknowledged. A broken connection is made anew next time.
            let e = unreachable_error(&e);
            shared.health.down(&e);
            if client.is_closed() {
                *conn = None;
            }
            return fail_all(jobs, &e);
        }
        Err(_) => {
            *conn = None;
            let e = StorageError::Unreachable(format!(
                "the database did not commit a write group within {} s",
                GROUP_TIMEOUT.as_secs()
            ));
            shared.health.down(&e);
            return fail_all(jobs, &e);
        }
    };
    shared.health.up();
    shared.io.groups.fetch_add(1, Relaxed);
    shared.io.syncs.fetch_add(1, Relaxed);
    let mut committed = Vec::new();
    for (job, answer) in jobs.into_iter().zip(answers) {
        match answer {
            Answer::Done(Ok(outcome)) => {
                committed.push((job.tenant.clone(), outcome.tx));
                (job.done)(Ok(Ok(outcome)));
            }
            Answer::Done(Err(e)) => (job.done)(Err(e)),
            Answer::Replayed(bytes) => (job.done)(Ok(Err(bytes))),
        }
    }
    if !committed.is_empty() {
        shared.notify_committed(&committed);
    }
}

fn fail_all(jobs: Vec<Job>, e: &StorageError) {
    for job in jobs {
        (job.done)(Err(EngineError::Storage(again(e))));
    }
}

/// The statements of the write path that name every column, written out
/// once (their text is also their key among the prepared statements).
static PUT_VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO fact_versions (tenant_id, {COLUMNS}) VALUES ($1, {})
         ON CONFLICT (tenant_id, id, tx) DO UPDATE SET {}",
        placeholders(),
        updates()
    )
});
static PUT_LATEST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO facts (tenant_id, {COLUMNS}, slot) VALUES ($1, {}, $20)
         ON CONFLICT (tenant_id, id) DO UPDATE SET {}, slot = EXCLUDED.slot",
        placeholders(),
        updates()
    )
});
/// The facts of a pair a takeover may close: the live ones, then the
/// superseded ones still valid after `$4` (by id, and by end, as the
/// embedded engine lists them).
static PAIR_FACTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {COLUMNS}, slot FROM facts
         WHERE tenant_id = $1 AND subject = $2 AND predicate = $3
           AND (status IN ('active', 'candidate')
                OR (status = 'superseded' AND (valid_until IS NULL OR valid_until > $4)))
         ORDER BY status = 'superseded', CASE WHEN status = 'superseded' THEN valid_until END, id"
    )
});
static FACT_BY_ID: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {COLUMNS}, slot FROM facts WHERE tenant_id = $1 AND id = $2"));

/// `$2, ..., $19`: the fact's columns after the tenant.
fn placeholders() -> String {
    (2..=19).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// `column = EXCLUDED.column` for every column of a fact.
fn updates() -> String {
    COLUMNS.split(", ").map(|c| format!("{c} = EXCLUDED.{c}")).collect::<Vec<_>>().join(", ")
}

/// Statements the writer's connection has prepared, by their text: each
/// is parsed and planned by the server once per connection, not per use.
#[derive(Default)]
struct Prepared(Mutex<HashMap<String, Statement>>);

/// A group's transaction, running statements through [`Prepared`].
struct Db<'a> {
    tx: Transaction<'a>,
    prepared: &'a Prepared,
}

impl Db<'_> {
    async fn statement(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        let known = self.prepared.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(sql).cloned();
        if let Some(s) = known {
            return Ok(s);
        }
        let s = self.tx.prepare(sql).await?;
        self.prepared.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(sql.to_string(), s.clone());
        Ok(s)
    }

    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.tx.execute(&s, params).await
    }

    async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.tx.query(&s, params).await
    }

    async fn query_one(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.tx.query_one(&s, params).await
    }

    async fn query_opt(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>, tokio_postgres::Error> {
        let s = self.statement(sql).await?;
        self.tx.query_opt(&s, params).await
    }

    async fn batch_execute(&self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.tx.batch_execute(sql).await
    }
}

/// A tenant as the group sees it: its row, and what the group has done to
/// its counts (applied to the row at the end).
#[derive(Clone)]
struct TenantState {
    id: i32,
    threshold: f64,
    last_tx: Option<(Tx, Millis)>,
    counts: [i64; 4],
    subjects: i64,
    predicates: i64,
    sources: HashMap<String, [i64; 4]>,
    cardinalities: HashMap<String, Cardinality>,
}

fn slot_of(status: Status) -> usize {
    match status {
        Status::Active => 0,
        Status::Candidate => 1,
        Status::Superseded => 2,
        Status::Retracted => 3,
    }
}

impl TenantState {
    fn count(&mut self, source: Option<&str>, from: Option<Status>, to: Status) {
        if let Some(f) = from {
            self.counts[slot_of(f)] -= 1;
        }
        self.counts[slot_of(to)] += 1;
        if let Some(s) = source {
            let c = self.sources.entry(s.to_string()).or_default();
            if let Some(f) = from {
                c[slot_of(f)] -= 1;
            }
            c[slot_of(to)] += 1;
        }
    }
}

/// Applies the group in one transaction and commits it.
async fn apply_group(
    client: &mut Client,
    prepared: &Prepared,
    jobs: &mut [Job],
) -> Result<Vec<Answer>, tokio_postgres::Error> {
    let tx = Db { tx: client.transaction().await?, prepared };
    // The store's clock, locked until the commit: groups of every replica
    // take tx numbers and commit one after another.
    let clock = tx.query_one("SELECT last_tx, last_recorded_at FROM clock FOR UPDATE", &[]).await?;
    let (mut last_tx, last_at): (i64, i64) = (clock.get(0), clock.get(1));
    let now: i64 = tx.query_one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", &[]).await?.get(0);
    // Record time never goes back, whatever the database's clock does.
    let now = now.max(last_at);

    let mut tenants: HashMap<String, TenantState> = HashMap::new();
    let mut answers = Vec::with_capacity(jobs.len());
    for job in jobs.iter_mut() {
        // A write without a tenant has nowhere to be recorded, not even its
        // refusal: it is answered before the tenant's row would be made.
        if job.tenant.is_empty() {
            answers.push(Answer::Done(Err(EngineError::Invalid("tenant must not be empty".into()))));
            continue;
        }
        if !tenants.contains_key(&job.tenant) {
            let state = tenant_state(&tx, &job.tenant).await?;
            tenants.insert(job.tenant.clone(), state);
        }
        let state = tenants.get_mut(&job.tenant).expect("inserted above");
        let idem = job.idempotency.take();
        if let Some(i) = &idem {
            let stored = tx
                .query_opt("SELECT reply FROM idempotency WHERE tenant_id = $1 AND key = $2", &[&state.id, &i.key])
                .await?;
            if let Some(row) = stored {
                answers.push(Answer::Replayed(row.get(0)));
                continue;
            }
        }
        let before = state.clone();
        tx.batch_execute("SAVEPOINT write").await?;
        let this_tx = (last_tx + 1) as Tx;
        // A refused input is an answer like any other: stored under its
        // idempotency key below, and replayed.
        let result = match validate_write(&job.tenant, &job.ops) {
            Ok(()) => apply_write(&tx, &job.tenant, state, &job.ops, Stamp { tx: this_tx, now }).await,
            Err(e) => Err(Refused::Rule(e)),
        };
        let result = match result {
            Ok(outcome) => {
                last_tx += 1;
                state.last_tx = Some((outcome.tx, outcome.recorded_at));
                tx.batch_execute("RELEASE SAVEPOINT write").await?;
                Ok(outcome)
            }
            // Refused by the rules or the input: this write alone is undone.
            Err(Refused::Rule(e)) => {
                tx.batch_execute("ROLLBACK TO SAVEPOINT write").await?;
                *state = before;
                Err(e)
            }
            Err(Refused::Database(e)) => return Err(e),
        };
        if let Some(i) = idem {
            if let Some(reply) = (i.render)(&result) {
                tx.execute(
                    "INSERT INTO idempotency (tenant_id, key, reply, tx) VALUES ($1, $2, $3, $4)",
                    &[&state.id, &i.key, &reply, &last_tx],
                )
                .await?;
            }
        }
        answers.push(Answer::Done(result));
    }
    for state in tenants.values() {
        save_tenant(&tx, state).await?;
    }
    if last_tx > clock.get::<_, i64>(0) {
        tx.execute("UPDATE clock SET last_tx = $1, last_recorded_at = $2", &[&last_tx, &now]).await?;
        // Wakes the other replicas' followers; the change table is the truth.
        tx.execute("SELECT pg_notify('tempora_changes', $1)", &[&last_tx.to_string()]).await?;
    }
    tx.tx.commit().await?;
    Ok(answers)
}

/// Why a write was not applied.
enum Refused {
    /// The input or the rules refused it: the write alone is undone.
    Rule(EngineError),
    /// The database failed: the group is undone.
    Database(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for Refused {
    fn from(e: tokio_postgres::Error) -> Self {
        Refused::Database(e)
    }
}

impl From<EngineError> for Refused {
    fn from(e: EngineError) -> Self {
        Refused::Rule(e)
    }
}

async fn tenant_state(tx: &Db<'_>, name: &str) -> Result<TenantState, tokio_postgres::Error> {
    tx.execute(
        "INSERT INTO tenants (name, threshold) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        &[&name, &DEFAULT_THRESHOLD],
    )
    .await?;
    let row = tx.query_one("SELECT id, threshold FROM tenants WHERE name = $1", &[&name]).await?;
    Ok(TenantState {
        id: row.get(0),
        threshold: row.get(1),
        last_tx: None,
        counts: [0; 4],
        subjects: 0,
        predicates: 0,
        sources: HashMap::new(),
        cardinalities: HashMap::new(),
    })
}

async fn save_tenant(tx: &Db<'_>, s: &TenantState) -> Result<(), tokio_postgres::Error> {
    let (last_tx, last_at) = match s.last_tx {
        Some((t, at)) => (Some(db_tx(t)), Some(at)),
        None => (None, None),
    };
    tx.execute(
        "UPDATE tenants SET threshold = $2,
             last_tx = coalesce($3, last_tx), last_recorded_at = coalesce($4, last_recorded_at),
             active = active + $5, candidate = candidate + $6, superseded = superseded + $7,
             retracted = retracted + $8, subjects = subjects + $9, predicate_count = predicate_count + $10
         WHERE id = $1",
        &[
            &s.id,
            &s.threshold,
            &last_tx,
            &last_at,
            &s.counts[0],
            &s.counts[1],
            &s.counts[2],
            &s.counts[3],
            &s.subjects,
            &s.predicates,
        ],
    )
    .await?;
    for (source, c) in &s.sources {
        if c.iter().all(|n| *n == 0) {
            continue;
        }
        // The row first, then the deltas: a delta may be negative, which
        // an inserted row's checks would refuse.
        tx.execute(
            "INSERT INTO source_stats (tenant_id, source) VALUES ($1, $2) ON CONFLICT (tenant_id, source) DO NOTHING",
            &[&s.id, source],
        )
        .await?;
        tx.execute(
            "UPDATE source_stats SET active = active + $3, candidate = candidate + $4,
                 superseded = superseded + $5, retracted = retracted + $6
             WHERE tenant_id = $1 AND source = $2",
            &[&s.id, source, &c[0], &c[1], &c[2], &c[3]],
        )
        .await?;
    }
    Ok(())
}

/// Applies one write (one tx) of `tenant`.
async fn apply_write(
    tx: &Db<'_>,
    tenant: &str,
    state: &mut TenantState,
    ops: &[WriteOp],
    at: Stamp,
) -> Result<WriteOutcome, Refused> {
    let mut outcomes = Vec::with_capacity(ops.len());
    let mut events = Vec::with_capacity(ops.len());
    for op in ops {
        let outcome = match op {
            WriteOp::Assert(input) => {
                let a = assert(tx, tenant, state, input, at).await?;
                events.push(LogEvent::asserted(&a));
                OpOutcome::Asserted(a)
            }
            WriteOp::Retract(id) => {
                let (fact, changed) = retract(tx, tenant, state, *id, at).await?;
                if changed {
                    events.push(LogEvent::retracted(&fact));
                }
                OpOutcome::Retracted { fact, changed }
            }
            WriteOp::SetCardinality { predicate, cardinality } => {
                tx.execute(
                    "INSERT INTO predicates (tenant_id, name, cardinality) VALUES ($1, $2, $3)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET cardinality = EXCLUDED.cardinality",
                    &[&state.id, predicate, &cardinality.as_str()],
                )
                .await?;
                state.cardinalities.insert(predicate.clone(), *cardinality);
                events.push(LogEvent::Cardinality { predicate: predicate.clone(), cardinality: *cardinality });
                OpOutcome::CardinalitySet(PredicateInfo { name: predicate.clone(), cardinality: *cardinality })
            }
            WriteOp::SetThreshold(t) => {
                state.threshold = *t;
                events.push(LogEvent::Threshold { threshold: *t });
                OpOutcome::ThresholdSet(*t)
            }
        };
        outcomes.push(outcome);
    }
    let events = serde_json::to_value(&events).map_err(|e| EngineError::Storage(StorageError::Backend(e.to_string())))?;
    tx.execute(
        "INSERT INTO changes (tenant_id, tx, recorded_at, events) VALUES ($1, $2, $3, $4)",
        &[&state.id, &db_tx(at.tx), &at.now, &events],
    )
    .await?;
    Ok(WriteOutcome { tx: at.tx, recorded_at: at.now, outcomes })
}

async fn cardinality(tx: &Db<'_>, state: &mut TenantState, predicate: &str) -> Result<Cardinality, Refused> {
    if let Some(c) = state.cardinalities.get(predicate) {
        return Ok(*c);
    }
    let row = tx
        .query_opt("SELECT cardinality FROM predicates WHERE tenant_id = $1 AND name = $2", &[&state.id, &predicate])
        .await?;
    let c = match row {
        Some(r) => rows::cardinality_of(r.get(0))?,
        None => Cardinality::default(),
    };
    state.cardinalities.insert(predicate.to_string(), c);
    Ok(c)
}

async fn assert(
    tx: &Db<'_>,
    tenant: &str,
    state: &mut TenantState,
    input: &FactInput,
    at: Stamp,
) -> Result<Asserted, Refused> {
    let fact = takeover::new_fact(tenant, input, Uuid::now_v7(), at, state.threshold)?;
    let cardinality = cardinality(tx, state, &fact.predicate).await?;
    let found = tx.query(&PAIR_FACTS, &[&state.id, &fact.subject, &fact.predicate, &fact.valid_from]).await?;
    let existing = found.iter().map(|r| rows::fact(tenant, r)).collect::<Result<Vec<Fact>, _>>()?;
    // A closed fact and its tail keep the slot the fact was written with:
    // the tail's valid time lies inside the closed fact's, so it can meet no
    // value the fact did not already stand beside, even when the predicate's
    // cardinality changed since (a fact asserted under `many` may share its
    // pair with others, and so may its remainder).
    let slots: HashMap<FactId, String> = existing.iter().zip(&found).map(|(f, r)| (f.id, r.get("slot"))).collect();
    let had_live = existing.iter().any(|f| f.status.is_live());
    let plan = takeover::plan_assert(fact, existing, cardinality, Uuid::now_v7)?;

    let mut superseded = Vec::with_capacity(plan.closings.len());
    let mut continued = Vec::new();
    for c in plan.closings {
        let kept = &slots[&c.old.id];
        write_version(tx, state.id, &c.closed, kept).await?;
        state.count(c.old.source.as_deref(), Some(c.old.status), c.closed.status);
        if let Some(t) = &c.tail {
            write_version(tx, state.id, t, kept).await?;
            state.count(t.source.as_deref(), None, t.status);
        }
        superseded.push(c.closed);
        continued.extend(c.tail);
    }
    let new = plan.fact;
    // A subject or predicate is new to the tenant only if no fact of it
    // exists; not looked up when one visibly does.
    if !had_live && superseded.is_empty() {
        let known = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM facts WHERE tenant_id = $1 AND subject = $2),
                        EXISTS (SELECT 1 FROM facts WHERE tenant_id = $1 AND predicate = $3)",
                &[&state.id, &new.subject, &new.predicate],
            )
            .await?;
        state.subjects += i64::from(!known.get::<_, bool>(0));
        state.predicates += i64::from(!known.get::<_, bool>(1));
    }
    write_version(tx, state.id, &new, &slot(cardinality, &new)).await?;
    state.count(new.source.as_deref(), None, new.status);
    Ok(Asserted { fact: new, superseded, continued })
}

async fn retract(
    tx: &Db<'_>,
    tenant: &str,
    state: &mut TenantState,
    id: FactId,
    at: Stamp,
) -> Result<(Fact, bool), Refused> {
    let Some(row) = tx.query_opt(&FACT_BY_ID, &[&state.id, &id]).await? else {
        return Err(EngineError::NotFound(format!("no fact with id {id}")).into());
    };
    let old = rows::fact(tenant, &row)?;
    match takeover::retract(&old, at) {
        None => Ok((old, false)),
        Some(gone) => {
            write_version(tx, state.id, &gone, row.get("slot")).await?;
            state.count(old.source.as_deref(), Some(old.status), gone.status);
            Ok((gone, true))
        }
    }
}

/// Writes `f` as its fact's version at `f.tx` and as the fact's latest.
/// Within one transaction a later write may close a fact an earlier one
/// made: the version at that tx is then replaced, as in the engine.
async fn write_version(
    tx: &Db<'_>,
    tenant_id: i32,
    f: &Fact,
    slot: &str,
) -> Result<(), tokio_postgres::Error> {
    let p = FactParams::new(f);
    let values = p.params(f);
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&tenant_id];
    params.extend_from_slice(&values);
    tx.execute(&PUT_VERSION, &params).await?;
    params.push(&slot);
    tx.execute(&PUT_LATEST, &params).await?;
    Ok(())
}

/// What an active fact holds exclusively (see the schema's `facts.slot`).
fn slot(cardinality: Cardinality, f: &Fact) -> String {
    match cardinality {
        Cardinality::Many => {
            use sha2::Digest;
            format!("m{:x}", sha2::Sha256::digest(json_text(&f.object).as_bytes()))
        }
        Cardinality::One | Cardinality::Strict => String::new(),
    }
}
