//! Facts: asserting (one or a batch), retracting, reading one, a page, a
//! fact's history, and predicates' cardinality.

use super::error::{Result, ServiceError};
use super::idempotency::{self, Answer, IdempotencyKey, Op};
use super::Service;
use crate::memory::blocking;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, PoisonError};
use tempora_storage::{
    Cardinality, EngineError, Fact, FactHistory, FactId, FactInput, FactPage, FactQuery, Idempotency, Millis,
    OpOutcome, PredicateInfo, Tx, WriteOp, WriteOutcome,
};

/// The most facts one batch may assert.
pub const MAX_BATCH: usize = 10_000;

/// What one assertion did: the new fact, the ids of the facts it closed,
/// and the ids of the tails it left of a fact whose interval it cut.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assertion {
    pub fact: Fact,
    pub superseded: Vec<FactId>,
    pub continued: Vec<FactId>,
}

/// A batch's transaction and each assertion, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assertions {
    pub tx: Tx,
    pub recorded_at: Millis,
    pub facts: Vec<Assertion>,
}

fn assertion(outcome: &OpOutcome) -> Result<Assertion> {
    match outcome {
        OpOutcome::Asserted(a) => Ok(Assertion {
            fact: a.fact.clone(),
            superseded: a.superseded.iter().map(|f| f.id).collect(),
            continued: a.continued.iter().map(|f| f.id).collect(),
        }),
        other => Err(ServiceError::internal(format!("an assert answered {other:?}"))),
    }
}

fn one_assertion(out: &WriteOutcome) -> Result<Assertion> {
    match out.outcomes.first() {
        Some(o) => assertion(o),
        None => Err(ServiceError::internal("an assert answered nothing")),
    }
}

fn assertions(out: &WriteOutcome) -> Result<Assertions> {
    let facts = out.outcomes.iter().map(assertion).collect::<Result<_>>()?;
    Ok(Assertions { tx: out.tx, recorded_at: out.recorded_at, facts })
}

impl Service {
    /// Asserts one fact (`docs/semantics.md`: takeover, candidates,
    /// cardinality).
    pub async fn assert(
        &self,
        tenant: &str,
        input: FactInput,
        key: Option<&IdempotencyKey>,
    ) -> Result<Answer<Assertion>> {
        self.write_keyed(tenant, Op::Assert, key, vec![WriteOp::Assert(input)], one_assertion).await
    }

    /// Asserts facts in one transaction: all of them or none.
    pub async fn assert_batch(
        &self,
        tenant: &str,
        inputs: Vec<FactInput>,
        key: Option<&IdempotencyKey>,
    ) -> Result<Answer<Assertions>> {
        if inputs.is_empty() {
            return Err(ServiceError::invalid("facts must hold at least one fact"));
        }
        if inputs.len() > MAX_BATCH {
            return Err(ServiceError::invalid(format!("a batch holds at most {MAX_BATCH} facts")));
        }
        let ops = inputs.into_iter().map(WriteOp::Assert).collect();
        self.write_keyed(tenant, Op::AssertBatch, key, ops, assertions).await
    }

    /// Retracts a fact: its version is closed in record time, with no
    /// successor and no revival of what it closed. Retracting a retracted
    /// fact answers it again.
    pub async fn retract(&self, tenant: &str, id: FactId) -> Result<Fact> {
        let out = self.write(tenant, vec![WriteOp::Retract(id)]).await?;
        match out.outcomes.into_iter().next() {
            Some(OpOutcome::Retracted { fact, .. }) => Ok(fact),
            other => Err(ServiceError::internal(format!("a retract answered {other:?}"))),
        }
    }

    /// One fact, as of a record time.
    pub async fn fact(&self, tenant: &str, id: FactId, as_of: Option<tempora_storage::AsOf>) -> Result<Fact> {
        // A point read is a few key lookups, bounded whatever the store
        // holds: cheaper inline than a hop to the blocking pool and back.
        self.memory.store().get(tenant, id, as_of)?.ok_or_else(ServiceError::not_found)
    }

    /// One fact, as of a record time, if the tenant has it.
    pub async fn fact_if_any(&self, tenant: &str, id: FactId, as_of: Option<tempora_storage::AsOf>) -> Result<Option<Fact>> {
        Ok(self.memory.store().get(tenant, id, as_of)?)
    }

    /// Every version of a fact and its neighbours in the supersession chain.
    pub async fn history(&self, tenant: &str, id: FactId) -> Result<FactHistory> {
        // A history grows with every supersession: read off the async threads.
        let engine = self.memory.store().clone();
        let tenant = tenant.to_string();
        Ok(blocking(move || engine.history(&tenant, id)).await?)
    }

    /// A page of facts.
    pub async fn facts(&self, tenant: &str, query: FactQuery) -> Result<FactPage> {
        Ok(self.memory.query(tenant, query).await?)
    }

    pub async fn predicate(&self, tenant: &str, name: &str) -> Result<PredicateInfo> {
        Ok(self.memory.store().predicate(tenant, name)?)
    }

    pub async fn set_cardinality(&self, tenant: &str, name: &str, cardinality: Cardinality) -> Result<PredicateInfo> {
        let op = WriteOp::SetCardinality { predicate: name.to_string(), cardinality };
        self.write(tenant, vec![op]).await?;
        Ok(PredicateInfo { name: name.to_string(), cardinality })
    }

    /// One write transaction without a key.
    pub(crate) async fn write(&self, tenant: &str, ops: Vec<WriteOp>) -> Result<WriteOutcome> {
        match self.memory.write(tenant, ops, None).await? {
            Ok(out) => Ok(out),
            Err(_) => Err(ServiceError::internal("a write without a key was answered as a replay")),
        }
    }

    /// One write transaction, under `key` when there is one: its answer,
    /// `result` of the outcome, is stored with the write, and a later call
    /// with the same key gets it back (`idempotency.rs`). Under a key the
    /// answer is made once, in the writer as it stores it, and handed back
    /// from there.
    pub(crate) async fn write_keyed<T, F>(
        &self,
        tenant: &str,
        op: Op,
        key: Option<&IdempotencyKey>,
        ops: Vec<WriteOp>,
        result: F,
    ) -> Result<Answer<T>>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce(&WriteOutcome) -> Result<T> + Send + 'static,
    {
        let Some(key) = key else {
            return Ok(Answer::Fresh(result(&self.write(tenant, ops).await?)?));
        };
        let made: Arc<Mutex<Option<Result<T>>>> = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&made);
        let idem = Idempotency {
            key: key.scoped(op),
            render: Box::new(move |r: &std::result::Result<WriteOutcome, EngineError>| match r {
                Ok(out) => {
                    let answer = result(out);
                    let stored = idempotency::encode(answer.as_ref());
                    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
                    stored
                }
                Err(e) => idempotency::encode::<T>(Err(&ServiceError::from(e))),
            }),
        };
        match self.memory.write(tenant, ops, Some(idem)).await? {
            Ok(_) => {
                let answer = made.lock().unwrap_or_else(PoisonError::into_inner).take();
                let answer = answer.unwrap_or_else(|| Err(ServiceError::internal("a keyed write made no answer")));
                Ok(Answer::Fresh(answer?))
            }
            Err(stored) => Ok(Answer::Replayed(idempotency::decode(&stored))),
        }
    }

    /// The answer stored under `key` by an earlier call, if any: operations
    /// that do expensive work (model calls, fetching a delivery) before
    /// their write look first, so a retry is answered without redoing it.
    /// (The write itself still checks.)
    pub(crate) async fn stored_answer<T: DeserializeOwned>(
        &self,
        tenant: &str,
        op: Op,
        key: Option<&IdempotencyKey>,
    ) -> Result<Option<Result<T>>> {
        let Some(key) = key else { return Ok(None) };
        let engine = self.memory.store().clone();
        let (tenant, scoped) = (tenant.to_string(), key.scoped(op));
        let stored = blocking(move || engine.idempotent_reply(&tenant, &scoped)).await?;
        Ok(stored.map(|bytes| idempotency::decode(&bytes)))
    }
}
