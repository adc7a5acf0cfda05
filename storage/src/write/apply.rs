//! The write semantics: how one request (a list of [`WriteOp`]s of one tenant)
//! becomes new fact versions and index entries in the group's overlay.
//!
//! The valid-time takeover rules themselves are `crate::takeover` (pure, shared
//! by every store); this module finds what they need and writes what they
//! decide into the engine's keyspaces.

use super::catalog::Catalog;
use super::overlay::Overlay;
use crate::error::{EngineError, Result};
use crate::fact_record;
use crate::keys::{self, TenantId};
use crate::kv::Keyspace;
use crate::model::*;
use crate::record::{self, LogEntry, LogEvent};
use crate::takeover::{self, AssertPlan, Stamp};
use uuid::Uuid;

pub struct Request<'a> {
    pub tenant: &'a str,
    pub ops: &'a [WriteOp],
}

/// Everything one request needs while it runs.
struct Cx<'o, 'kv> {
    ov: &'o mut Overlay<'kv>,
    cat: &'o mut Catalog,
    tenant: &'o str,
    tid: TenantId,
    tx: Tx,
    now: Millis,
}

/// Applies one request to the overlay. On error the caller rolls the overlay
/// and catalog back to their marks: nothing of a failed request survives.
pub fn apply(ov: &mut Overlay<'_>, cat: &mut Catalog, req: Request<'_>, wall_now: Millis) -> Result<WriteOutcome> {
    crate::limits::validate_write(req.tenant, req.ops)?;

    let (tx, now) = cat.next_tx(wall_now);
    let (tid, new_tenant) = cat.tenant(req.tenant);
    if new_tenant {
        ov.put(Keyspace::Meta, keys::meta::tenant_by_name(req.tenant), record::encode(&tid));
        ov.put(Keyspace::Meta, keys::meta::tenant_by_id(tid), record::encode(&req.tenant));
    }
    let mut cx = Cx { ov, cat, tenant: req.tenant, tid, tx, now };

    let mut outcomes = Vec::with_capacity(req.ops.len());
    let mut events = Vec::with_capacity(req.ops.len());
    for op in req.ops {
        let outcome = match op {
            WriteOp::Assert(input) => {
                let a = cx.assert(input)?;
                events.push(LogEvent::asserted(&a));
                OpOutcome::Asserted(a)
            }
            WriteOp::Retract(id) => {
                let (fact, changed) = cx.retract(*id)?;
                if changed {
                    events.push(LogEvent::retracted(&fact));
                }
                OpOutcome::Retracted { fact, changed }
            }
            WriteOp::SetCardinality { predicate, cardinality } => {
                let info = PredicateInfo { name: predicate.clone(), cardinality: *cardinality };
                let was_by_value = cx.by_value(predicate)?;
                cx.ov.put(Keyspace::Meta, keys::meta::predicate(tid, predicate), record::encode(&info));
                cx.cat.set_cardinality(tid, predicate, *cardinality);
                let by_value = *cardinality == Cardinality::Many;
                if by_value != was_by_value {
                    cx.index_by_value(predicate, by_value)?;
                }
                events.push(LogEvent::Cardinality { predicate: predicate.clone(), cardinality: *cardinality });
                OpOutcome::CardinalitySet(info)
            }
            WriteOp::SetThreshold(t) => {
                cx.ov.put(Keyspace::Meta, keys::meta::threshold(tid), record::encode(t));
                cx.cat.set_threshold(tid, *t);
                events.push(LogEvent::Threshold { threshold: *t });
                OpOutcome::ThresholdSet(*t)
            }
        };
        outcomes.push(outcome);
    }
    let entry = LogEntry { recorded_at: now, events };
    cx.ov.put(Keyspace::Log, keys::log(tid, tx), record::encode(&entry));
    Ok(WriteOutcome { tx, recorded_at: now, outcomes })
}

impl Cx<'_, '_> {
    fn assert(&mut self, input: &FactInput) -> Result<Asserted> {
        let at = Stamp { tx: self.tx, now: self.now };
        let fact = takeover::new_fact(self.tenant, input, Uuid::now_v7(), at, self.cat.threshold(self.tid))?;
        let pair = keys::sp_prefix(self.tid, Some(&fact.subject), Some(&fact.predicate));
        // One lookup for the whole assert: the facts it closes and writes
        // are all of this predicate.
        let cardinality = self.cardinality(&fact.predicate)?;
        let by_value = cardinality == Cardinality::Many;
        let had_live;
        let plan = if fact.status == Status::Active {
            // Under `many` only the pair's live facts of the same value can
            // be taken over, and `idx_spo` holds those under one prefix: an
            // assert costs the same on a subject with ten values or with a
            // hundred thousand (an agent's `User:me`, a conversation),
            // however often its value was asserted before.
            let live = match cardinality {
                Cardinality::Many => self.live_facts_with_object(&fact.subject, &fact.predicate, &fact.object)?,
                Cardinality::One | Cardinality::Strict => self.live_facts(&fact.subject, &fact.predicate)?,
            };
            had_live = !live.is_empty() || self.ov.has_prefix(Keyspace::Sp, &pair)?;
            // The planner needs every fact that holds a value in the new
            // interval: the live ones, and the superseded ones still valid
            // after `valid_from`. No superseded fact of the tenant is valid
            // past its bound (raised before any fact is closed past it, this
            // transaction's included), so an assert that starts at or after
            // it, as one starting now does, skips the scan of `idx_valid`
            // and its descent: an eighth of the writer's time under W1.
            let mut existing = live;
            if fact.valid_from < self.cat.state.superseded_until(self.tid) {
                existing.extend(self.shadowed_facts(&fact.subject, &fact.predicate, fact.valid_from)?);
            }
            takeover::plan_assert(fact, existing, cardinality, Uuid::now_v7)?
        } else {
            had_live = self.ov.has_prefix(Keyspace::Sp, &pair)?;
            AssertPlan { fact, closings: Vec::new() }
        };
        let mut superseded = Vec::with_capacity(plan.closings.len());
        let mut continued = Vec::new();
        for c in plan.closings {
            self.close(&c.old, &c.closed, by_value)?;
            if let Some(t) = &c.tail {
                // The subject and predicate exist: `old` has them.
                self.write_new_fact(t, false, by_value)?;
            }
            superseded.push(c.closed);
            continued.extend(c.tail);
        }
        // A subject or predicate is new to the tenant only if no fact of the
        // pair exists; the lookups are skipped when one visibly does.
        let maybe_new = !had_live && superseded.is_empty();
        self.write_new_fact(&plan.fact, maybe_new, by_value)?;
        Ok(Asserted { fact: plan.fact, superseded, continued })
    }

    /// Writes `closed`, the new latest version of `old`, and moves the fact
    /// between the indexes its old and new status belong in. `by_value`:
    /// its predicate is `many` ([`Cx::by_value`]).
    fn close(&mut self, old: &Fact, closed: &Fact, by_value: bool) -> Result<()> {
        let tid = self.tid;
        self.ov.put(Keyspace::Versions, keys::version(closed.id, closed.tx), fact_record::encode_version(closed));
        let idx_key = keys::sp(tid, &closed.subject, &closed.predicate, closed.id);
        if old.status.is_live() {
            self.ov.delete(Keyspace::Sp, idx_key.clone());
            if by_value {
                self.ov.delete(Keyspace::Spo, keys::spo(tid, &old.subject, &old.predicate, &old.object, old.id));
            }
        }
        if let Some(k) = valid_index_key(tid, old) {
            self.ov.delete(Keyspace::Valid, k);
        }
        if let Some(k) = valid_index_key(tid, closed) {
            self.ov.put(Keyspace::Valid, k, Vec::new());
        }
        if closed.status == Status::Superseded {
            self.cat.raise_superseded_until(tid, closed.valid_until);
        }
        self.ov.put(Keyspace::Closed, idx_key, fact_record::encode_indexed(closed));
        let (from, to) = (old.status, closed.status);
        self.cat.stats(tid, |s| {
            *s.count_mut(from) -= 1;
            *s.count_mut(to) += 1;
        });
        self.count_source(old.source.as_deref(), Some(from), to)
    }

    /// Counts a fact of `source` moving from `from` (`None`: new) to `to`.
    /// Facts without a source are not counted.
    fn count_source(&mut self, source: Option<&str>, from: Option<Status>, to: Status) -> Result<()> {
        let Some(source) = source else { return Ok(()) };
        let ov = &*self.ov;
        self.cat.count_source(|k| ov.get(Keyspace::Meta, k), self.tid, source, from, to)?;
        Ok(())
    }

    /// Superseded facts of (subject, predicate) that still cover valid time
    /// after `after` (their `valid_until` is later), from `idx_valid`.
    fn shadowed_facts(&self, subject: &str, predicate: &str, after: Millis) -> Result<Vec<Fact>> {
        let prefix = keys::sp_prefix(self.tid, Some(subject), Some(predicate));
        let start = keys::valid_after(self.tid, subject, predicate, after);
        let mut out = Vec::new();
        for (k, _) in self.ov.scan_prefix_from(Keyspace::Valid, &prefix, &start)? {
            let id = keys::decode_valid_id(&k)?;
            let key = keys::sp(self.tid, subject, predicate, id);
            match self.ov.get(Keyspace::Closed, &key)? {
                Some(v) => out.push(fact_record::decode_indexed(self.tenant, &key, &v)?),
                None => {
                    return Err(crate::error::StorageError::Corrupt(format!(
                        "idx_valid names fact {id}, which idx_closed lacks"
                    ))
                    .into())
                }
            }
        }
        Ok(out)
    }

    /// Writes the first version of a fact and its index entries. `maybe_new`
    /// asks to check whether the subject and predicate are new to the tenant
    /// (for the distinct counts in stats) and whether the pair has its
    /// `idx_ps` key; it is false when a fact of the pair visibly exists.
    /// `f` is a fact this request made, with an id made for it; `by_value`:
    /// its predicate is `many` ([`Cx::by_value`]).
    fn write_new_fact(&mut self, f: &Fact, maybe_new: bool, by_value: bool) -> Result<()> {
        let tid = self.tid;
        let (mut new_subject, mut new_predicate) = (false, false);
        if maybe_new {
            let subject_prefix = keys::sp_prefix(tid, Some(&f.subject), None);
            new_subject = !self.ov.has_prefix(Keyspace::Sp, &subject_prefix)?
                && !self.ov.has_prefix(Keyspace::Closed, &subject_prefix)?;
            new_predicate = !self.ov.has_prefix(Keyspace::Ps, &keys::ps_prefix(tid, &f.predicate))?;
        }
        self.ov.put(Keyspace::Versions, keys::version(f.id, f.tx), fact_record::encode_version(f));
        let home = if f.status.is_live() { Keyspace::Sp } else { Keyspace::Closed };
        if f.status == Status::Superseded {
            self.cat.raise_superseded_until(tid, f.valid_until);
        }
        // The key holds the fact's id, made for this fact by this request:
        // no write has stored it before. Marked so, the layer in memory
        // drops it outright when a later assert closes the fact before the
        // checkpoint (on a hot key, most of them), instead of keeping a
        // delete that each assert's scan of the key must walk.
        self.ov.put_new(home, keys::sp(tid, &f.subject, &f.predicate, f.id), fact_record::encode_indexed(f));
        if f.status.is_live() && by_value {
            self.ov.put_new(Keyspace::Spo, keys::spo(tid, &f.subject, &f.predicate, &f.object, f.id), Vec::new());
        }
        if let Some(k) = valid_index_key(tid, f) {
            self.ov.put(Keyspace::Valid, k, Vec::new());
        }
        // The pair's `idx_ps` key is there once any fact of the pair is, so a
        // fact that joins a live one, takes one over or continues one writes
        // none (`maybe_new` is false) and a first fact of a new subject or
        // predicate writes it without looking.
        if maybe_new {
            let pair = keys::ps(tid, &f.predicate, &f.subject);
            if new_subject || new_predicate || !self.ov.has_prefix(Keyspace::Ps, &pair)? {
                self.ov.put(Keyspace::Ps, pair, Vec::new());
            }
        }
        self.ov.put(Keyspace::Os, keys::os(tid, &f.object, &f.predicate, &f.subject, f.id), Vec::new());
        let status = f.status;
        self.cat.stats(tid, |s| {
            *s.count_mut(status) += 1;
            s.subjects += u64::from(new_subject);
            s.predicates += u64::from(new_predicate);
        });
        self.count_source(f.source.as_deref(), None, status)
    }

    /// Whether the live facts of `predicate` are kept by value in `idx_spo`:
    /// those of `many` predicates, the only asserts that look there (format
    /// 9; up to format 8 every live fact was, a sixth of a store's pages).
    fn by_value(&mut self, predicate: &str) -> Result<bool> {
        Ok(self.cardinality(predicate)? == Cardinality::Many)
    }

    fn cardinality(&mut self, predicate: &str) -> Result<Cardinality> {
        let ov = &*self.ov;
        Ok(self.cat.cardinality(|k| ov.get(Keyspace::Meta, k), self.tid, predicate)?)
    }

    /// Puts (`by_value`) or deletes the `idx_spo` keys of every live fact of
    /// `predicate`, when it becomes `many` or stops being: each pair of the
    /// predicate from `idx_ps`, its live facts from `idx_sp`. In the request's
    /// batch, so the change of cardinality and its index are one write.
    fn index_by_value(&mut self, predicate: &str, by_value: bool) -> Result<()> {
        let tid = self.tid;
        let mut last_subject: Option<String> = None;
        for (k, _) in self.ov.scan_prefix(Keyspace::Ps, &keys::ps_prefix(tid, predicate))? {
            // Up to format 5 a pair had a key per fact: take each pair once.
            let (subject, _, _) = keys::decode_ps(&k)?;
            if last_subject.as_deref() == Some(subject.as_str()) {
                continue;
            }
            for f in self.live_facts(&subject, predicate)? {
                let key = keys::spo(tid, &f.subject, &f.predicate, &f.object, f.id);
                if by_value {
                    self.ov.put(Keyspace::Spo, key, Vec::new());
                } else {
                    self.ov.delete(Keyspace::Spo, key);
                }
            }
            last_subject = Some(subject);
        }
        Ok(())
    }

    fn live_facts(&self, subject: &str, predicate: &str) -> Result<Vec<Fact>> {
        let prefix = keys::sp_prefix(self.tid, Some(subject), Some(predicate));
        self.ov
            .scan_prefix(Keyspace::Sp, &prefix)?
            .into_iter()
            .map(|(k, v)| fact_record::decode_indexed(self.tenant, &k, &v).map_err(EngineError::from))
            .collect()
    }

    /// The live facts of (subject, predicate) whose object is `object`:
    /// those `idx_spo` lists under the value, each read from `idx_sp` and
    /// kept if its stored object is `object` (a long object is keyed by its
    /// hash, so two values could share a prefix).
    fn live_facts_with_object(&self, subject: &str, predicate: &str, object: &serde_json::Value) -> Result<Vec<Fact>> {
        let prefix = keys::spo_prefix(self.tid, subject, predicate, object);
        let mut out = Vec::new();
        for (k, _) in self.ov.scan_prefix(Keyspace::Spo, &prefix)? {
            let (_, _, _, id) = keys::decode_spo(&k)?;
            let key = keys::sp(self.tid, subject, predicate, id);
            let Some(v) = self.ov.get(Keyspace::Sp, &key)? else {
                return Err(crate::error::StorageError::Corrupt(format!("idx_spo names fact {id}, which idx_sp lacks")).into());
            };
            let f = fact_record::decode_indexed(self.tenant, &key, &v)?;
            if &f.object == object {
                out.push(f);
            }
        }
        Ok(out)
    }

    fn retract(&mut self, id: FactId) -> Result<(Fact, bool)> {
        let latest = self.latest_version(id)?.filter(|f| f.tenant == self.tenant);
        let Some(old) = latest else {
            return Err(EngineError::NotFound(format!("no fact with id {id}")));
        };
        match takeover::retract(&old, Stamp { tx: self.tx, now: self.now }) {
            None => Ok((old, false)),
            Some(gone) => {
                let by_value = self.by_value(&old.predicate)?;
                self.close(&old, &gone, by_value)?;
                Ok((gone, true))
            }
        }
    }

    fn latest_version(&self, id: FactId) -> Result<Option<Fact>> {
        let rows = self.ov.scan_prefix(Keyspace::Versions, &keys::version_prefix(id))?;
        match rows.last() {
            Some((k, v)) => Ok(Some(fact_record::decode_version(k, v)?)),
            None => Ok(None),
        }
    }
}

/// The `idx_valid` key of `f` when it belongs there: superseded, with some
/// valid time left.
pub(crate) fn valid_index_key(tid: TenantId, f: &Fact) -> Option<Vec<u8>> {
    match (f.status, f.valid_until) {
        (Status::Superseded, Some(u)) if u > f.valid_from => {
            Some(keys::valid(tid, &f.subject, &f.predicate, u, f.id))
        }
        _ => None,
    }
}
