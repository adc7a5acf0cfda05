//! The write path on PostgreSQL: one writer task per process that commits
//! the writes queued to it in groups, one database transaction per group.
//!
//! A group locks the store's `clock` row first, so groups of every replica
//! commit one after another, in tx order; while one group's transaction
//! commits, the writes arriving meanwhile form the next group. The group
//! reads what its writes need in a few statements, applies them one after
//! another in memory ([`super::group`]): a write refused by the rules (a
//! strict conflict, a bad interval) is undone alone and the others commit;
//! then writes back what they did in a few more. What a write does is
//! decided by the same pure planner as the embedded engine's
//! (`tempora_storage::takeover`); this module only applies its decisions.
//! Nobody is answered before the commit that covers their write.

use super::group::{Group, Loaded, FIND_TENANTS};
use super::statements::{Around, Batch, Db, Prepared};
use super::rows::json_text;
use super::shared::{again, unreachable_error, Shared};
use crate::store::{
    validate_write, Asserted, Cardinality, EngineError, Fact, FactId, FactInput, Idempotency, OpOutcome,
    PredicateInfo, StorageError, Tx, WriteDone, WriteOp, WriteOutcome,
};
use std::sync::Arc;
use std::time::Duration;
use tempora_storage::record::LogEvent;
use tempora_storage::takeover::{self, Stamp};
use tokio::sync::mpsc;
use tokio_postgres::Client;
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
        *conn = match writer_connection(shared).await {
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
            // The connection may be inside the group's transaction: made
            // anew, which ends it.
            *conn = None;
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

/// The writer's own connection. Its statements take arrays whose lengths
/// vary with the group; planned anew for each call (PostgreSQL's choice for
/// them otherwise) they cost the database more than running them did. A
/// generic plan is as good for them: every one reads through the keys'
/// indexes whatever the arrays hold.
async fn writer_connection(shared: &Shared) -> Result<Client, StorageError> {
    let client = shared.connect().await?;
    client.batch_execute("SET plan_cache_mode = force_generic_plan").await.map_err(|e| unreachable_error(&e))?;
    Ok(client)
}

fn fail_all(jobs: Vec<Job>, e: &StorageError) {
    for job in jobs {
        (job.done)(Err(EngineError::Storage(again(e))));
    }
}

/// Applies the group in one transaction and commits it. The group waits on
/// the database three times: for the clock and the tenants, for the rows
/// its writes need, and for the writes and the commit.
async fn apply_group(
    client: &mut Client,
    prepared: &Prepared,
    jobs: &mut [Job],
) -> Result<Vec<Answer>, tokio_postgres::Error> {
    let db = Db { client, prepared };
    // The store's clock, locked until the commit: groups of every replica
    // take tx numbers and commit one after another. Record time is read
    // by the statement after the lock's, so only once the lock is held: no
    // group can commit a time a reader has already looked past.
    let names: Vec<String> = {
        let set: std::collections::HashSet<&str> = jobs.iter().map(|j| j.tenant.as_str()).filter(|t| !t.is_empty()).collect();
        set.into_iter().map(str::to_string).collect()
    };
    let mut start = Batch::default();
    let clock = start.push("SELECT last_tx, last_recorded_at FROM clock FOR UPDATE", vec![]);
    let now = start.push("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", vec![]);
    let tenants = start.push(FIND_TENANTS, vec![Box::new(names)]);
    let mut rows = db.send(Around::Begin, start).await?;
    let tenants = std::mem::take(&mut rows[tenants]);
    let (Some(clock), Some(now)) = (rows[clock].first(), rows[now].first()) else {
        db.rollback().await?;
        return Ok(corrupt_all(jobs, "the store's clock row is missing".into()));
    };
    let (first_tx, last_at): (i64, i64) = (clock.get(0), clock.get(1));
    let now: i64 = now.get(0);
    // Record time never goes back, whatever the database's clock does.
    let now = now.max(last_at);

    let wants: Vec<_> = jobs
        .iter()
        .map(|j| (j.tenant.as_str(), j.ops.as_slice(), j.idempotency.as_ref().map(|i| i.key.as_slice())))
        .collect();
    let mut group = match Group::load(&db, wants, now, tenants).await {
        Ok(g) => g,
        Err(Loaded::Database(e)) => return Err(e),
        // A row that does not read back: every write of the group is
        // answered with it, and nothing is written.
        Err(Loaded::Corrupt(e)) => {
            db.rollback().await?;
            return Ok(corrupt_all(jobs, e.to_string()));
        }
    };
    let mut last_tx = first_tx;
    let mut answers = Vec::with_capacity(jobs.len());
    for job in jobs.iter_mut() {
        // A write without a tenant has nowhere to be recorded, not even its
        // refusal: it is answered before the tenant's row would be made.
        if job.tenant.is_empty() {
            answers.push(Answer::Done(Err(EngineError::Invalid("tenant must not be empty".into()))));
            continue;
        }
        let tenant_id = group.tenants[&job.tenant].id;
        let idem = job.idempotency.take();
        if let Some(reply) = idem.as_ref().and_then(|i| group.reply(tenant_id, &i.key)) {
            answers.push(Answer::Replayed(reply.clone()));
            continue;
        }
        let mark = group.mark(&job.tenant);
        let at = Stamp { tx: (last_tx + 1) as Tx, now };
        // A refused input is an answer like any other: stored under its
        // idempotency key below, and replayed.
        let result = validate_write(&job.tenant, &job.ops).and_then(|()| apply_write(&mut group, &job.tenant, &job.ops, at));
        match &result {
            Ok(outcome) => {
                last_tx += 1;
                group.tenants.get_mut(&job.tenant).expect("loaded").last_tx = Some((outcome.tx, outcome.recorded_at));
            }
            // Refused by the rules or the input: this write alone is undone.
            Err(_) => group.undo_to(mark),
        }
        if let Some(i) = idem {
            if let Some(reply) = (i.render)(&result) {
                group.store_reply(tenant_id, i.key, reply, last_tx);
            }
        }
        answers.push(Answer::Done(result));
    }
    let mut writes = group.flush();
    if last_tx > first_tx {
        // The notice wakes the other replicas' followers; the change table
        // is the truth. One statement with the clock's update.
        writes.push(
            "WITH c AS (UPDATE clock SET last_tx = $1, last_recorded_at = $2 RETURNING last_tx)
             SELECT pg_notify('tempora_changes', last_tx::text) FROM c",
            vec![Box::new(last_tx), Box::new(now)],
        );
    }
    db.send(Around::Commit, writes).await?;
    Ok(answers)
}

/// Every write of a group answered with a store that does not read back;
/// nothing is written.
fn corrupt_all(jobs: &[Job], e: String) -> Vec<Answer> {
    jobs.iter().map(|_| Answer::Done(Err(EngineError::Storage(StorageError::Corrupt(e.clone()))))).collect()
}

/// Applies one write (one tx) of `tenant` to the group.
fn apply_write(group: &mut Group, tenant: &str, ops: &[WriteOp], at: Stamp) -> Result<WriteOutcome, EngineError> {
    let tenant_id = group.tenants[tenant].id;
    let mut outcomes = Vec::with_capacity(ops.len());
    let mut events = Vec::with_capacity(ops.len());
    for op in ops {
        let outcome = match op {
            WriteOp::Assert(input) => {
                let a = assert(group, tenant, input, at)?;
                events.push(LogEvent::asserted(&a));
                OpOutcome::Asserted(a)
            }
            WriteOp::Retract(id) => {
                let (fact, changed) = retract(group, tenant, *id, at)?;
                if changed {
                    events.push(LogEvent::retracted(&fact));
                }
                OpOutcome::Retracted { fact, changed }
            }
            WriteOp::SetCardinality { predicate, cardinality } => {
                group.set_cardinality(tenant, predicate, *cardinality);
                events.push(LogEvent::Cardinality { predicate: predicate.clone(), cardinality: *cardinality });
                OpOutcome::CardinalitySet(PredicateInfo { name: predicate.clone(), cardinality: *cardinality })
            }
            WriteOp::SetThreshold(t) => {
                group.tenants.get_mut(tenant).expect("loaded").threshold = *t;
                events.push(LogEvent::Threshold { threshold: *t });
                OpOutcome::ThresholdSet(*t)
            }
        };
        outcomes.push(outcome);
    }
    let events = serde_json::to_value(&events).map_err(|e| EngineError::Storage(StorageError::Backend(e.to_string())))?;
    group.log(tenant_id, at.tx, at.now, events);
    Ok(WriteOutcome { tx: at.tx, recorded_at: at.now, outcomes })
}

fn assert(group: &mut Group, tenant: &str, input: &FactInput, at: Stamp) -> Result<Asserted, EngineError> {
    let state = &group.tenants[tenant];
    let (tenant_id, threshold) = (state.id, state.threshold);
    let fact = takeover::new_fact(tenant, input, Uuid::now_v7(), at, threshold)?;
    let cardinality = state.cardinality(&fact.predicate);
    let pair = (tenant_id, fact.subject.clone(), fact.predicate.clone());
    let existing = group.pair_facts(&pair, fact.valid_from);
    let plan = takeover::plan_assert(fact, existing, cardinality, Uuid::now_v7)?;

    let mut superseded = Vec::with_capacity(plan.closings.len());
    let mut continued = Vec::new();
    for c in plan.closings {
        // A closed fact and its tail keep the slot the fact was written
        // with: the tail's valid time lies inside the closed fact's, so it
        // can meet no value the fact did not already stand beside, even
        // when the predicate's cardinality changed since (a fact asserted
        // under `many` may share its pair with others, and so may its
        // remainder).
        let kept = group.slot_of(c.old.id);
        group.write(tenant_id, c.closed.clone(), kept.clone());
        let state = group.tenants.get_mut(tenant).expect("loaded");
        state.count(c.old.source.as_deref(), Some(c.old.status), c.closed.status);
        if let Some(t) = &c.tail {
            state.count(t.source.as_deref(), None, t.status);
            group.write(tenant_id, t.clone(), kept);
        }
        superseded.push(c.closed);
        continued.extend(c.tail);
    }
    let new = plan.fact;
    let (first_subject, first_predicate) = group.first_of(tenant_id, &new.subject, &new.predicate);
    let state = group.tenants.get_mut(tenant).expect("loaded");
    state.subjects += i64::from(first_subject);
    state.predicates += i64::from(first_predicate);
    state.count(new.source.as_deref(), None, new.status);
    group.write(tenant_id, new.clone(), slot(cardinality, &new));
    Ok(Asserted { fact: new, superseded, continued })
}

fn retract(group: &mut Group, tenant: &str, id: FactId, at: Stamp) -> Result<(Fact, bool), EngineError> {
    let tenant_id = group.tenants[tenant].id;
    let Some(held) = group.fact(tenant_id, id) else {
        return Err(EngineError::NotFound(format!("no fact with id {id}")));
    };
    let (old, kept) = (held.fact.clone(), held.slot.clone());
    match takeover::retract(&old, at) {
        None => Ok((old, false)),
        Some(gone) => {
            let state = group.tenants.get_mut(tenant).expect("loaded");
            state.count(old.source.as_deref(), Some(old.status), gone.status);
            group.write(tenant_id, gone.clone(), kept);
            Ok((gone, true))
        }
    }
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
