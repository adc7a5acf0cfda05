//! The read path. Every read is a range scan inside one tenant's key range,
//! then a walk back through a fact's versions when the read is rewound
//! (`as_of`). A read never waits for a sync; it only keeps the writer from
//! applying a group while it runs (the engine's `snapshot` lock), so it sees
//! the store as of the last applied group, never half of one.

use crate::codec::KeyReader;
use crate::error::{EngineError, Result};
use crate::fact_record;
use crate::keys::{self, TenantId};
use crate::kv::{scan_prefix, KvIter, Keyspace, OrderedKv};
use crate::model::*;
use crate::record::{self, LogEntry, LogEvent};
use std::cmp::Ordering;
use std::ops::Bound;
use uuid::Uuid;

pub(crate) struct Reader<'a> {
    pub kv: &'a dyn OrderedKv,
    pub tid: TenantId,
    /// The name `tid` stands for (index values do not hold it).
    pub tenant: String,
    /// No superseded fact of the tenant is valid at or after this time
    /// (`Published::superseded_until`): a current read there has nothing to
    /// find in `idx_closed`.
    pub superseded_until: Millis,
}

/// Which index answers a query.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// `idx_sp` (+ `idx_closed`): by subject, or the whole tenant.
    Subject,
    Predicate,
    Object,
}

impl Plan {
    fn tag(self) -> char {
        match self {
            Plan::Subject => 's',
            Plan::Predicate => 'p',
            Plan::Object => 'o',
        }
    }
}

impl Reader<'_> {
    /// The latest version of a fact, or the one visible at `as_of`.
    pub fn fact(&self, id: FactId, as_of: Option<AsOf>) -> Result<Option<Fact>> {
        let mut best = None;
        for item in scan_prefix(self.kv, Keyspace::Versions, &keys::version_prefix(id), true) {
            let (k, v) = item?;
            let f = fact_record::decode_version(&k, &v)?;
            if as_of.is_none_or(|a| a.admits(f.tx, f.recorded_at)) {
                best = Some(f);
                break;
            }
        }
        Ok(best)
    }

    pub fn versions(&self, id: FactId) -> Result<Vec<Fact>> {
        let mut out = Vec::new();
        for item in scan_prefix(self.kv, Keyspace::Versions, &keys::version_prefix(id), false) {
            let (k, v) = item?;
            out.push(fact_record::decode_version(&k, &v)?);
        }
        Ok(out)
    }

    pub fn history(&self, tenant: &str, id: FactId) -> Result<FactHistory> {
        let versions = self.versions(id)?;
        if versions.is_empty() || versions[0].tenant != tenant {
            return Err(EngineError::NotFound(format!("no fact with id {id}")));
        }
        let mut predecessors = Vec::new();
        let mut successors = Vec::new();
        for v in &versions {
            for p in v.supersedes.iter().chain(&v.continues) {
                push_unique(&mut predecessors, *p);
            }
            for s in v.superseded_by.iter().chain(&v.continued_by) {
                push_unique(&mut successors, *s);
            }
        }
        Ok(FactHistory { id, versions, predecessors, successors })
    }

    /// Resolves the latest version `latest` to the version visible at `as_of`.
    fn at(&self, latest: Fact, as_of: Option<AsOf>) -> Result<Option<Fact>> {
        match as_of {
            None => Ok(Some(latest)),
            Some(a) if a.admits(latest.tx, latest.recorded_at) => Ok(Some(latest)),
            Some(a) if !a.admits(latest.created_tx, latest.created_at) => Ok(None),
            Some(a) => self.earlier_version(&latest, a),
        }
    }

    /// The version of `latest`'s fact visible at `a`, given that `a` admits
    /// its first version but not `latest`: a forward scan from the first
    /// version that stops before `latest` (forward scans are much cheaper
    /// than reverse ones in sled, and most facts have two or three versions).
    fn earlier_version(&self, latest: &Fact, a: AsOf) -> Result<Option<Fact>> {
        let lo = Bound::Included(keys::version(latest.id, latest.created_tx));
        let hi = Bound::Excluded(keys::version(latest.id, latest.tx));
        let mut best = None;
        for item in self.kv.scan(Keyspace::Versions, lo, hi, false) {
            let (k, v) = item?;
            let tx = keys::decode_version_tx(&k)?;
            if !matches!(a, AsOf::Tx(x) if tx > x) {
                let f = fact_record::decode_version(&k, &v)?;
                if a.admits(f.tx, f.recorded_at) {
                    best = Some(f);
                    continue;
                }
            }
            break;
        }
        Ok(best)
    }

    /// A page of facts matching `q` (`Engine::query`), or `None` once it has
    /// looked at more than `budget` index entries without finishing the
    /// page. A caller on an async thread runs a query here first and moves it
    /// to a blocking thread only when it turns out long: most reads name a
    /// subject and finish in a few entries, and the hand-off would cost them
    /// more than the read.
    pub fn query_within(&self, q: &FactQuery, budget: usize) -> Result<Option<FactPage>> {
        let limit = match q.limit {
            0 => DEFAULT_PAGE,
            n => n.min(MAX_PAGE),
        };
        let (plan, prefix) = match (&q.subject, &q.predicate, &q.object) {
            (Some(s), p, _) => (Plan::Subject, keys::sp_prefix(self.tid, Some(s), p.as_deref())),
            (None, p, Some(o)) => (Plan::Object, keys::os_prefix(self.tid, o, p.as_deref())),
            (None, Some(p), None) => (Plan::Predicate, keys::ps_prefix(self.tid, p)),
            (None, None, None) => (Plan::Subject, keys::sp_prefix(self.tid, None, None)),
        };
        let after = match &q.cursor {
            Some(c) => Some(decode_cursor(c, plan, &prefix)?),
            None => None,
        };
        let lo = match &after {
            Some(k) => Bound::Excluded(k.clone()),
            None => Bound::Included(prefix.clone()),
        };
        let hi = crate::codec::prefix_end(&prefix);

        let mut facts = Vec::new();
        let mut last_key = None;
        let mut more = false;
        // Index entries looked at; true once past the budget.
        let mut seen = 0usize;
        let mut spent = || {
            seen += 1;
            seen > budget
        };
        let mut consider = |key: Vec<u8>, latest: Fact| -> Result<bool> {
            if !may_be_selected(&latest, q) {
                return Ok(true);
            }
            let Some(f) = self.at(latest, q.as_of)? else { return Ok(true) };
            if !selected(&f, q) {
                return Ok(true);
            }
            if facts.len() == limit {
                more = true;
                return Ok(false);
            }
            facts.push(f);
            last_key = Some(key);
            Ok(true)
        };

        match plan {
            Plan::Subject => {
                for item in self.index_entries(lo, hi, needs_closed(q, self.superseded_until)) {
                    let (k, v) = item?;
                    if spent() {
                        break;
                    }
                    let latest = fact_record::decode_indexed(&self.tenant, &k, &v)?;
                    if !consider(k, latest)? {
                        break;
                    }
                }
            }
            Plan::Predicate => {
                // One `idx_ps` key per pair (two or more in a store upgraded
                // from format 5, one per fact, which sort together), then the
                // pair's facts in `idx_sp` order: subject, then fact id, the
                // order format 5's keys gave.
                let closed_too = needs_closed(q, self.superseded_until);
                let (mut resume, ps_lo) = match after {
                    Some(cursor) => {
                        // Made by `ps_cursor`: a pair and the last fact id returned.
                        let bad = || EngineError::invalid("cursor does not belong to this query");
                        let (s, p, id) = keys::decode_ps(&cursor).map_err(|_| bad())?;
                        let id = id.ok_or_else(bad)?;
                        let from = Bound::Included(keys::ps(self.tid, &p, &s));
                        (Some((s, p, id)), from)
                    }
                    None => (None, lo),
                };
                let mut last_pair: Option<(String, String)> = None;
                'pairs: for item in self.kv.scan(Keyspace::Ps, ps_lo, hi, false) {
                    let (k, _) = item?;
                    if spent() {
                        break;
                    }
                    let (s, p, _) = keys::decode_ps(&k)?;
                    if last_pair.as_ref().is_some_and(|(ls, lp)| *ls == s && *lp == p) {
                        continue;
                    }
                    let pair = keys::sp_prefix(self.tid, Some(&s), Some(&p));
                    let to = crate::codec::prefix_end(&pair);
                    // The cursor's pair goes on after its last fact.
                    let from = match resume.take() {
                        Some((rs, rp, id)) if rs == s && rp == p => Bound::Excluded(keys::sp(self.tid, &s, &p, id)),
                        _ => Bound::Included(pair),
                    };
                    for entry in self.index_entries(from, to, closed_too) {
                        let (fk, v) = entry?;
                        if spent() {
                            break 'pairs;
                        }
                        let latest = fact_record::decode_indexed(&self.tenant, &fk, &v)?;
                        let cursor = keys::ps_cursor(self.tid, &p, &s, latest.id);
                        if !consider(cursor, latest)? {
                            break 'pairs;
                        }
                    }
                    last_pair = Some((s, p));
                }
            }
            Plan::Object => {
                for item in self.kv.scan(Keyspace::Os, lo, hi, false) {
                    let (k, _) = item?;
                    if spent() {
                        break;
                    }
                    let (s, p, id) = keys::decode_os(&k)?;
                    let Some(latest) = self.latest_by_key(&s, &p, id, needs_closed(q, self.superseded_until))? else {
                        continue;
                    };
                    if !consider(k, latest)? {
                        break;
                    }
                }
            }
        }
        if seen > budget {
            return Ok(None);
        }
        let next_cursor = if more { last_key.map(|k| encode_cursor(plan, &k)) } else { None };
        Ok(Some(FactPage { facts, next_cursor }))
    }

    /// The facts keyed in `lo..hi` of `idx_sp`, merged in key order with
    /// those of `idx_closed` when `closed_too` (the two share a key layout).
    fn index_entries(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, closed_too: bool) -> KvIter<'_> {
        if !closed_too {
            return self.kv.scan(Keyspace::Sp, lo, hi, false);
        }
        let live = self.kv.scan(Keyspace::Sp, lo.clone(), hi.clone(), false);
        Box::new(MergeByKey::new(live, self.kv.scan(Keyspace::Closed, lo, hi, false)))
    }

    fn latest_by_key(&self, s: &str, p: &str, id: FactId, closed_too: bool) -> Result<Option<Fact>> {
        let key = keys::sp(self.tid, s, p, id);
        if let Some(v) = self.kv.get(Keyspace::Sp, &key)? {
            return Ok(Some(fact_record::decode_indexed(&self.tenant, &key, &v)?));
        }
        if closed_too {
            if let Some(v) = self.kv.get(Keyspace::Closed, &key)? {
                return Ok(Some(fact_record::decode_indexed(&self.tenant, &key, &v)?));
            }
        }
        Ok(None)
    }

    /// Every version of every fact about `subject` (visible at `as_of`),
    /// ordered by tx, then fact id.
    pub fn subject_history(&self, subject: &str, as_of: Option<AsOf>) -> Result<Vec<Fact>> {
        let prefix = keys::sp_prefix(self.tid, Some(subject), None);
        let mut out = Vec::new();
        for ks in [Keyspace::Sp, Keyspace::Closed] {
            for item in scan_prefix(self.kv, ks, &prefix, false) {
                let (k, v) = item?;
                let latest = fact_record::decode_indexed(&self.tenant, &k, &v)?;
                for version in self.versions(latest.id)? {
                    if as_of.is_none_or(|a| a.admits(version.tx, version.recorded_at)) {
                        out.push(version);
                    }
                }
            }
        }
        out.sort_by(|a, b| a.tx.cmp(&b.tx).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// The tenant's change-log entries with tx > `after`, oldest first, at
    /// most `limit`.
    fn log_entries(&self, after: Tx, limit: usize) -> impl Iterator<Item = Result<(Tx, LogEntry)>> + '_ {
        let lo = Bound::Excluded(keys::log(self.tid, after));
        let hi = Bound::Included(keys::log(self.tid, Tx::MAX));
        self.kv.scan(Keyspace::Log, lo, hi, false).take(limit).map(|item| {
            let (k, v) = item?;
            Ok((keys::decode_log_tx(&k)?, record::decode(&v)?))
        })
    }

    /// Committed transactions of the tenant with tx > `after`, oldest first.
    pub fn changes(&self, tenant: &str, after: Tx, limit: usize) -> Result<Vec<Change>> {
        let mut out = Vec::new();
        for item in self.log_entries(after, limit) {
            let (tx, entry) = item?;
            let mut events = Vec::with_capacity(entry.events.len());
            for e in entry.events {
                events.push(match e {
                    LogEvent::Assert { fact, superseded, continued, .. } => ChangeEvent::Assert {
                        fact: self.version_at_tx(fact, tx)?,
                        superseded: superseded
                            .into_iter()
                            .map(|id| self.version_at_tx(id, tx))
                            .collect::<Result<_>>()?,
                        continued: continued
                            .into_iter()
                            .map(|id| self.version_at_tx(id, tx))
                            .collect::<Result<_>>()?,
                    },
                    LogEvent::Retract { fact, .. } => ChangeEvent::Retract { fact: self.version_at_tx(fact, tx)? },
                    LogEvent::Cardinality { predicate, cardinality } => {
                        ChangeEvent::Cardinality(PredicateInfo { name: predicate, cardinality })
                    }
                    LogEvent::Threshold { threshold } => ChangeEvent::Threshold(threshold),
                });
            }
            out.push(Change { tx, recorded_at: entry.recorded_at, tenant: tenant.to_string(), events });
        }
        Ok(out)
    }

    /// Like [`Reader::changes`], by fact id: no version is read for an entry
    /// written from format 7 on, which carries the subjects and value
    /// changes itself. For an older entry they come from its versions.
    pub fn change_log(&self, after: Tx, limit: usize) -> Result<Vec<LoggedChange>> {
        let mut out = Vec::new();
        for item in self.log_entries(after, limit) {
            let (tx, entry) = item?;
            let mut events = Vec::with_capacity(entry.events.len());
            for e in entry.events {
                events.push(match e {
                    LogEvent::Assert { fact, superseded, continued, subject, changed } => {
                        let (subject, changed) = match (subject, changed) {
                            (Some(s), Some(c)) => (s, c as usize),
                            _ => {
                                let new = self.version_at_tx(fact, tx)?;
                                let mut changed = 0;
                                for id in &superseded {
                                    changed += usize::from(self.version_at_tx(*id, tx)?.object != new.object);
                                }
                                (new.subject, changed)
                            }
                        };
                        LoggedEvent::Assert { fact, subject, superseded, continued, changed }
                    }
                    LogEvent::Retract { fact, subject } => {
                        let subject = match subject {
                            Some(s) => s,
                            None => self.version_at_tx(fact, tx)?.subject,
                        };
                        LoggedEvent::Retract { fact, subject }
                    }
                    LogEvent::Cardinality { predicate, cardinality } => {
                        LoggedEvent::Cardinality(PredicateInfo { name: predicate, cardinality })
                    }
                    LogEvent::Threshold { threshold } => LoggedEvent::Threshold(threshold),
                });
            }
            out.push(LoggedChange { tx, recorded_at: entry.recorded_at, events });
        }
        Ok(out)
    }

    /// The tenant's newest change-log entry: its tx and record time.
    pub fn last_change(&self) -> Result<Option<(Tx, Millis)>> {
        let lo = Bound::Included(keys::log(self.tid, 0));
        let hi = Bound::Included(keys::log(self.tid, Tx::MAX));
        match self.kv.scan(Keyspace::Log, lo, hi, true).next() {
            Some(item) => {
                let (k, v) = item?;
                let entry: LogEntry = record::decode(&v)?;
                Ok(Some((keys::decode_log_tx(&k)?, entry.recorded_at)))
            }
            None => Ok(None),
        }
    }

    fn version_at_tx(&self, id: FactId, tx: Tx) -> Result<Fact> {
        let key = keys::version(id, tx);
        match self.kv.get(Keyspace::Versions, &key)? {
            Some(v) => Ok(fact_record::decode_version(&key, &v)?),
            None => Err(EngineError::Storage(crate::error::StorageError::Corrupt(format!(
                "change log names version {id}@{tx}, which is missing"
            )))),
        }
    }

    pub fn predicates(&self) -> Result<Vec<PredicateInfo>> {
        let mut out = Vec::new();
        for item in scan_prefix(self.kv, Keyspace::Meta, &keys::meta::predicate_prefix(self.tid), false) {
            let (_, v) = item?;
            out.push(record::decode(&v)?);
        }
        Ok(out)
    }

    /// The committed per-source counts (written in the same batch as the
    /// facts they count).
    pub fn source_stats(&self, source: &str) -> Result<SourceStats> {
        match self.kv.get(Keyspace::Meta, &keys::meta::source_stats(self.tid, source))? {
            Some(v) => Ok(record::decode(&v)?),
            None => Ok(SourceStats::default()),
        }
    }

    pub fn predicate(&self, name: &str) -> Result<PredicateInfo> {
        match self.kv.get(Keyspace::Meta, &keys::meta::predicate(self.tid, name))? {
            Some(v) => Ok(record::decode(&v)?),
            None => Ok(PredicateInfo { name: name.to_string(), cardinality: Cardinality::default() }),
        }
    }
}

/// Whether the read can need facts that are no longer live (`idx_closed`),
/// given the tenant's `superseded_until` bound. It must admit every fact
/// [`selected`] admits: `idx_closed` holds the latest versions of superseded
/// and retracted facts.
fn needs_closed(q: &FactQuery, superseded_until: Millis) -> bool {
    if q.as_of.is_some() {
        // A fact closed since may have been live then.
        return true;
    }
    let retracted = q.include_retracted
        || match q.status {
            StatusFilter::Only(s) => s == Status::Retracted,
            StatusFilter::Among(set) => set.contains(Status::Retracted),
            StatusFilter::Current | StatusFilter::Any => false,
        };
    let superseded = match q.status {
        StatusFilter::Current => q.valid_at.is_some(),
        StatusFilter::Only(s) => s == Status::Superseded,
        StatusFilter::Among(set) => set.contains(Status::Superseded),
        StatusFilter::Any => true,
    };
    // A superseded fact covers no time at or after the tenant's bound.
    retracted || (superseded && q.valid_at.is_none_or(|t| t < superseded_until))
}

/// Whether a version of the fact whose latest version is `latest` can pass
/// the valid-time filter of [`selected`]. A version differs from the one
/// before only in its status, record time and an equal or earlier
/// `valid_until` (`take_over` and `retract` clone the old version), so every
/// version starts where `latest` does. A read rewound with `as_of` asks this
/// before looking for the version visible then: a fact superseded since that
/// began after the valid instant asked about is passed over without reading
/// `versions`.
fn may_be_selected(latest: &Fact, q: &FactQuery) -> bool {
    q.valid_at.is_none_or(|t| latest.valid_from <= t)
}

/// The status and valid-time filters of a query, applied to the version
/// visible at its record time.
pub(crate) fn selected(f: &Fact, q: &FactQuery) -> bool {
    let status_ok = if f.status == Status::Retracted {
        q.include_retracted
            || match q.status {
                StatusFilter::Only(s) => s == Status::Retracted,
                StatusFilter::Among(set) => set.contains(Status::Retracted),
                _ => false,
            }
    } else {
        match q.status {
            StatusFilter::Current => {
                f.status == Status::Active || (q.valid_at.is_some() && f.status == Status::Superseded)
            }
            StatusFilter::Only(s) => f.status == s,
            StatusFilter::Among(set) => set.contains(f.status),
            StatusFilter::Any => true,
        }
    };
    status_ok
        && q.valid_at.is_none_or(|t| f.covers(t))
        && q.subject.as_ref().is_none_or(|s| &f.subject == s)
        && q.predicate.as_ref().is_none_or(|p| &f.predicate == p)
        && q.object.as_ref().is_none_or(|o| &f.object == o)
}

fn push_unique(v: &mut Vec<Uuid>, id: Uuid) {
    if !v.contains(&id) {
        v.push(id);
    }
}

fn encode_cursor(plan: Plan, key: &[u8]) -> String {
    let mut s = String::with_capacity(1 + key.len() * 2);
    s.push(plan.tag());
    for b in key {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn decode_cursor(c: &str, plan: Plan, prefix: &[u8]) -> Result<Vec<u8>> {
    let bad = || EngineError::invalid("cursor does not belong to this query");
    let hex = c.strip_prefix(plan.tag()).ok_or_else(bad)?;
    if hex.len() % 2 != 0 || !hex.is_ascii() {
        return Err(bad());
    }
    let key = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<std::result::Result<Vec<u8>, _>>()
        .map_err(|_| bad())?;
    if !key.starts_with(prefix) {
        return Err(bad());
    }
    // The key must parse as far as its tenant id at least.
    KeyReader::new(&key).u32().map_err(|_| bad())?;
    Ok(key)
}

/// Merges two ascending key streams (the live and closed indexes share a key
/// layout and never hold the same key at once).
struct MergeByKey<I: Iterator> {
    a: std::iter::Peekable<I>,
    b: std::iter::Peekable<I>,
}

impl<I: Iterator<Item = Result<(Vec<u8>, Vec<u8>), crate::error::StorageError>>> MergeByKey<I> {
    fn new(a: I, b: I) -> Self {
        MergeByKey { a: a.peekable(), b: b.peekable() }
    }
}

impl<I: Iterator<Item = Result<(Vec<u8>, Vec<u8>), crate::error::StorageError>>> Iterator for MergeByKey<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        let order = match (self.a.peek(), self.b.peek()) {
            (None, None) => return None,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(Err(_)), _) => Ordering::Less,
            (_, Some(Err(_))) => Ordering::Greater,
            (Some(Ok((ka, _))), Some(Ok((kb, _)))) => ka.cmp(kb),
        };
        if order == Ordering::Greater {
            self.b.next()
        } else {
            self.a.next()
        }
    }
}

#[cfg(test)]
mod tests;
