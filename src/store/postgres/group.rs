//! One write group's view of the database, held in memory between reading
//! and writing it.
//!
//! A group reads, under the clock lock, every row its writes may need in a
//! handful of set-based statements ([`Group::load`]); its writes are then
//! applied one after another to this copy, a refused write undone in
//! memory ([`Group::mark`], [`Group::undo_to`]); and what they changed goes
//! back in a handful more ([`Group::flush`]). So a group costs the same few
//! round trips whether it holds one write or five hundred, which is what
//! makes group commit pay on a database across a network.
//!
//! Every statement here takes arrays (`unnest`) and walks an index per
//! element (`LATERAL`), so the planner never trades the indexes for a scan.

use super::rows::{self, db_tx, json_text, COLUMNS};
use super::statements::{Batch, Db, Param};
use crate::store::{Cardinality, EngineError, Fact, FactId, Millis, Status, Tx, WriteOp, DEFAULT_THRESHOLD};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;
use uuid::Uuid;

/// A subject and predicate of a tenant: the unit of the takeover rules.
pub type Pair = (i32, String, String);

/// A tenant as the group sees it: its row, and what the group has done to
/// its counts (added to the row by [`Group::flush`]).
#[derive(Clone)]
pub struct TenantState {
    pub id: i32,
    pub name: String,
    pub threshold: f64,
    pub last_tx: Option<(Tx, Millis)>,
    counts: [i64; 4],
    pub subjects: i64,
    pub predicates: i64,
    sources: HashMap<String, [i64; 4]>,
    /// The cardinality of every predicate the group's writes name.
    pub cardinalities: HashMap<String, Cardinality>,
}

fn count_slot(status: Status) -> usize {
    match status {
        Status::Active => 0,
        Status::Candidate => 1,
        Status::Superseded => 2,
        Status::Retracted => 3,
    }
}

impl TenantState {
    /// Counts a fact going from `from` (none: a new fact) to `to`.
    pub fn count(&mut self, source: Option<&str>, from: Option<Status>, to: Status) {
        if let Some(f) = from {
            self.counts[count_slot(f)] -= 1;
        }
        self.counts[count_slot(to)] += 1;
        if let Some(s) = source {
            let c = self.sources.entry(s.to_string()).or_default();
            if let Some(f) = from {
                c[count_slot(f)] -= 1;
            }
            c[count_slot(to)] += 1;
        }
    }

    pub fn cardinality(&self, predicate: &str) -> Cardinality {
        self.cardinalities.get(predicate).copied().unwrap_or_default()
    }
}

/// The latest version of a fact the group read or wrote.
#[derive(Clone)]
pub struct Held {
    pub tenant_id: i32,
    pub fact: Fact,
    /// What it holds exclusively while active (see the schema's `facts.slot`).
    pub slot: String,
    /// Written by the group: goes back to `facts` at the flush.
    written: bool,
}

/// How to take back one change to the held state.
enum Undo {
    Held(FactId, Option<Box<Held>>),
    Pushed(Pair),
    Subject(i32, String),
    Predicate(i32, String),
    Reply(i32, Vec<u8>),
}

/// Where a write began, to undo it to.
pub struct Mark {
    undo: usize,
    versions: usize,
    changes: usize,
    replies: usize,
    predicate_sets: usize,
    tenant: TenantState,
}

/// The group's copy of what its writes read, and what they wrote.
#[derive(Default)]
pub struct Group {
    pub tenants: HashMap<String, TenantState>,
    held: HashMap<FactId, Held>,
    /// The facts of each pair the group asserts on that a takeover may
    /// close (live, or superseded and still valid), and those it made.
    pairs: HashMap<Pair, Vec<FactId>>,
    known_subjects: HashSet<(i32, String)>,
    known_predicates: HashSet<(i32, String)>,
    /// Idempotent replies: those stored before the group, and its own.
    replies: HashMap<(i32, Vec<u8>), Vec<u8>>,
    versions: Vec<(i32, Fact)>,
    changes: Vec<(i32, i64, Millis, Value)>,
    new_replies: Vec<(i32, Vec<u8>, Vec<u8>, i64)>,
    predicate_sets: Vec<(i32, String, Cardinality)>,
    undo: Vec<Undo>,
}

/// A write as [`Group::load`] sees it: its tenant, its operations and its
/// idempotency key.
pub type JobWants<'a> = (&'a str, &'a [WriteOp], Option<&'a [u8]>);

/// What the group's writes will ask about, gathered before any is applied.
#[derive(Default)]
struct Wants {
    /// Per pair, the earliest `valid_from` asserted on it and the objects
    /// asserted (as stored text).
    pairs: HashMap<Pair, (Millis, HashSet<String>)>,
    /// Predicates whose cardinality the group sets: their pairs are read
    /// whole, whatever the cardinality stored.
    reset: HashSet<(i32, String)>,
    ids: HashSet<(i32, FactId)>,
    subjects: HashSet<(i32, String)>,
    predicates: HashSet<(i32, String)>,
    keys: HashSet<(i32, Vec<u8>)>,
}

/// The facts an assert on a pair may take over: the live ones, and the
/// superseded ones still valid after the earliest `valid_from` asserted.
/// Under `many` only facts of the same object can be taken over, and those
/// are read through `facts_live_values` (`m.by_object`, a filter PostgreSQL
/// evaluates once per row of `k`, picks the branch), so an assert on a
/// subject with a hundred thousand values reads what one with ten does. A
/// pair has a row per object asserted; what belongs to the pair as a whole
/// is read by its first row only (`k.first`).
static PAIR_FACTS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT k.t AS tenant_id, f.* FROM unnest($1::int[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::bool[])
              AS k(t, s, p, v, o, first)
         CROSS JOIN LATERAL (
             SELECT k.o IS NOT NULL AND EXISTS (
                 SELECT 1 FROM predicates WHERE tenant_id = k.t AND name = k.p AND cardinality = 'many'
             ) AS by_object
         ) AS m
         CROSS JOIN LATERAL (
             SELECT {COLUMNS}, slot FROM facts
              WHERE tenant_id = k.t AND subject = k.s AND predicate = k.p AND status IN ('active', 'candidate')
                AND NOT m.by_object AND k.first
             UNION ALL
             SELECT {COLUMNS}, slot FROM facts
              WHERE tenant_id = k.t AND subject = k.s AND predicate = k.p AND md5(object) = md5(k.o)
                AND status IN ('active', 'candidate') AND object = k.o AND m.by_object
             UNION ALL
             SELECT {COLUMNS}, slot FROM facts
              WHERE tenant_id = k.t AND subject = k.s AND predicate = k.p AND status = 'superseded'
                AND valid_until > k.v AND k.first
             UNION ALL
             SELECT {COLUMNS}, slot FROM facts
              WHERE tenant_id = k.t AND subject = k.s AND predicate = k.p AND status = 'superseded'
                AND valid_until IS NULL AND k.first
         ) AS f"
    )
});
static FACTS_BY_ID: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT k.t AS tenant_id, f.* FROM unnest($1::int[], $2::uuid[]) AS k(t, i)
         CROSS JOIN LATERAL (SELECT {COLUMNS}, slot FROM facts WHERE tenant_id = k.t AND id = k.i) AS f"
    )
});
/// The group's tenants by name (`$1`, `text[]`).
pub const FIND_TENANTS: &str = "SELECT id, name, threshold FROM tenants WHERE name = ANY($1)";
/// (Not a `LATERAL ... LIMIT 1`: on a table not yet analyzed the planner
/// takes a sequential scan that stops at the first match for cheap, and for
/// a subject with no fact it reads the whole table.)
const KNOWN_SUBJECTS: &str = "SELECT k.t, k.s FROM unnest($1::int[], $2::text[]) AS k(t, s)
     WHERE EXISTS (SELECT 1 FROM facts WHERE tenant_id = k.t AND subject = k.s)";
const PREDICATES: &str = "SELECT k.t, k.p, (SELECT cardinality FROM predicates WHERE tenant_id = k.t AND name = k.p),
            EXISTS (SELECT 1 FROM facts WHERE tenant_id = k.t AND predicate = k.p)
     FROM unnest($1::int[], $2::text[]) AS k(t, p)";
const REPLIES: &str = "SELECT k.t, k.k, i.reply FROM unnest($1::int[], $2::bytea[]) AS k(t, k)
     JOIN LATERAL (SELECT reply FROM idempotency WHERE tenant_id = k.t AND key = k.k) AS i ON true";

/// The columns of a fact version as `unnest` arguments and their types.
/// `supersedes` and `continued_by` travel as array literals: a list of
/// lists of different lengths is no PostgreSQL array.
const UNNEST_FACTS: &str = "unnest($1::int[], $2::uuid[], $3::int8[], $4::text[], $5::text[], $6::text[],
            $7::float8[], $8::text[], $9::text[], $10::int8[], $11::int8[], $12::int8[], $13::text[],
            $14::int8[], $15::int8[], $16::text[], $17::uuid[], $18::uuid[], $19::text[], $20::text[])
     AS r(tenant_id, id, tx, subject, predicate, object, confidence, source, properties, valid_from,
          valid_until, recorded_at, status, created_tx, created_at, supersedes, superseded_by, continues,
          continued_by, slot)";
const SELECT_FACTS: &str = "r.tenant_id, r.id, r.tx, r.subject, r.predicate, r.object, r.confidence, r.source,
            r.properties, r.valid_from, r.valid_until, r.recorded_at, r.status, r.created_tx, r.created_at,
            r.supersedes::uuid[], r.superseded_by, r.continues, r.continued_by::uuid[]";
static INSERT_VERSIONS: LazyLock<String> = LazyLock::new(|| {
    format!("INSERT INTO fact_versions (tenant_id, {COLUMNS}) SELECT {SELECT_FACTS} FROM {UNNEST_FACTS}")
});
static UPSERT_LATEST: LazyLock<String> = LazyLock::new(|| {
    let updates = COLUMNS.split(", ").map(|c| format!("{c} = EXCLUDED.{c}")).collect::<Vec<_>>().join(", ");
    format!(
        "INSERT INTO facts (tenant_id, {COLUMNS}, slot) SELECT {SELECT_FACTS}, r.slot FROM {UNNEST_FACTS}
         ON CONFLICT (tenant_id, id) DO UPDATE SET {updates}, slot = EXCLUDED.slot"
    )
});

impl Group {
    /// Reads what the writes of `jobs` (tenant, ops, idempotency key) will
    /// need; `now` stands in for a missing `valid_from`.
    /// `tenants` are the rows of [`FIND_TENANTS`] for the group's tenants,
    /// read with the clock (see the writer).
    pub async fn load(db: &Db<'_>, jobs: Vec<JobWants<'_>>, now: Millis, tenants: Vec<Row>) -> Result<Group, Loaded> {
        let mut g = Group::default();
        g.load_tenants(db, jobs.iter().map(|j| j.0).filter(|t| !t.is_empty()), tenants).await?;
        let mut wants = Wants::default();
        for (tenant, ops, key) in jobs {
            let Some(t) = g.tenants.get(tenant) else { continue };
            if let Some(k) = key {
                wants.keys.insert((t.id, k.to_vec()));
            }
            for op in ops {
                match op {
                    WriteOp::Assert(f) => {
                        let from = f.valid_from.unwrap_or(now);
                        let e = wants
                            .pairs
                            .entry((t.id, f.subject.clone(), f.predicate.clone()))
                            .or_insert_with(|| (from, HashSet::new()));
                        e.0 = e.0.min(from);
                        e.1.insert(json_text(&f.object));
                        wants.subjects.insert((t.id, f.subject.clone()));
                        wants.predicates.insert((t.id, f.predicate.clone()));
                    }
                    WriteOp::Retract(id) => {
                        wants.ids.insert((t.id, *id));
                    }
                    WriteOp::SetCardinality { predicate, .. } => {
                        wants.reset.insert((t.id, predicate.clone()));
                    }
                    WriteOp::SetThreshold(_) => {}
                }
            }
        }
        g.load_wants(db, wants).await?;
        Ok(g)
    }

    /// The tenants' rows, made for tenants writing for the first time.
    async fn load_tenants(
        &mut self,
        db: &Db<'_>,
        names: impl Iterator<Item = &str>,
        mut found: Vec<Row>,
    ) -> Result<(), Loaded> {
        let names: Vec<&str> = names.collect::<HashSet<_>>().into_iter().collect();
        if names.is_empty() {
            return Ok(());
        }
        if found.len() < names.len() {
            // Only the missing ones are inserted: an insert that meets a
            // conflict still spends a value of the identity sequence.
            let have: HashSet<String> = found.iter().map(|r| r.get(1)).collect();
            let missing: Vec<&str> = names.iter().copied().filter(|n| !have.contains(*n)).collect();
            db.execute(
                "INSERT INTO tenants (name, threshold) SELECT unnest($1::text[]), $2 ON CONFLICT (name) DO NOTHING",
                &[&missing, &DEFAULT_THRESHOLD],
            )
            .await?;
            found = db.query(FIND_TENANTS, &[&names]).await?;
        }
        for row in found {
            let name: String = row.get(1);
            let state = TenantState {
                id: row.get(0),
                name: name.clone(),
                threshold: row.get(2),
                last_tx: None,
                counts: [0; 4],
                subjects: 0,
                predicates: 0,
                sources: HashMap::new(),
                cardinalities: HashMap::new(),
            };
            self.tenants.insert(name, state);
        }
        Ok(())
    }

    async fn load_wants(&mut self, db: &Db<'_>, wants: Wants) -> Result<(), Loaded> {
        let names: HashMap<i32, String> = self.tenants.values().map(|t| (t.id, t.name.clone())).collect();
        // One row per pair and object asserted, or one with no object when
        // the group sets the predicate's cardinality (the pair is then read
        // whole whatever is stored).
        let (mut pt, mut ps, mut pp, mut pv, mut po, mut pf) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for ((t, s, p), (from, objects)) in &wants.pairs {
            let objects: Vec<Option<&str>> = match wants.reset.contains(&(*t, p.clone())) {
                true => vec![None],
                false => objects.iter().map(|o| Some(o.as_str())).collect(),
            };
            for (i, o) in objects.into_iter().enumerate() {
                pt.push(*t);
                ps.push(s.as_str());
                pp.push(p.as_str());
                pv.push(*from);
                po.push(o);
                pf.push(i == 0);
            }
        }
        let (it, ii): (Vec<i32>, Vec<Uuid>) = wants.ids.iter().copied().unzip();
        let (rt, rp): (Vec<i32>, Vec<&str>) = wants.predicates.iter().map(|(t, p)| (*t, p.as_str())).unzip();
        let (kt, kk): (Vec<i32>, Vec<&[u8]>) = wants.keys.iter().map(|(t, k)| (*t, k.as_slice())).unzip();
        let (pair_params, id_params, predicate_params, key_params) = (
            [&pt as &(dyn ToSql + Sync), &ps, &pp, &pv, &po, &pf],
            [&it as &(dyn ToSql + Sync), &ii],
            [&rt as &(dyn ToSql + Sync), &rp],
            [&kt as &(dyn ToSql + Sync), &kk],
        );
        // Sent together: the connection pipelines them, one wait for all.
        let (by_pair, by_id, predicates, replies) = futures_util::try_join!(
            db.query_if(!pt.is_empty(), &PAIR_FACTS, &pair_params),
            db.query_if(!it.is_empty(), &FACTS_BY_ID, &id_params),
            db.query_if(!rt.is_empty(), PREDICATES, &predicate_params),
            db.query_if(!kt.is_empty(), REPLIES, &key_params),
        )?;
        for key in wants.pairs.into_keys() {
            self.pairs.insert(key, Vec::new());
        }
        // A fact named by a retraction may also be one of a pair's: held once.
        for row in by_pair.iter().chain(&by_id) {
            let tenant_id: i32 = row.get("tenant_id");
            let fact = rows::fact(&names[&tenant_id], row)?;
            if self.held.contains_key(&fact.id) {
                continue;
            }
            if let Some(ids) = self.pairs.get_mut(&(tenant_id, fact.subject.clone(), fact.predicate.clone())) {
                ids.push(fact.id);
            }
            let slot = row.get("slot");
            self.held.insert(fact.id, Held { tenant_id, fact, slot, written: false });
        }
        // A subject with a fact just read is known; only the others are
        // asked after (none, when every write changes a value it has).
        for h in self.held.values() {
            self.known_subjects.insert((h.tenant_id, h.fact.subject.clone()));
        }
        let unknown: Vec<&(i32, String)> = wants.subjects.iter().filter(|k| !self.known_subjects.contains(*k)).collect();
        if !unknown.is_empty() {
            let (st, ss): (Vec<i32>, Vec<&str>) = unknown.iter().map(|(t, s)| (*t, s.as_str())).unzip();
            for row in db.query(KNOWN_SUBJECTS, &[&st, &ss]).await? {
                self.known_subjects.insert((row.get(0), row.get(1)));
            }
        }
        for row in predicates {
            let (t, p): (i32, String) = (row.get(0), row.get(1));
            let state = self.tenants.values_mut().find(|s| s.id == t).expect("loaded above");
            let c = match row.get::<_, Option<&str>>(2) {
                Some(name) => rows::cardinality_of(name)?,
                None => Cardinality::default(),
            };
            state.cardinalities.insert(p.clone(), c);
            if row.get::<_, bool>(3) {
                self.known_predicates.insert((t, p));
            }
        }
        for row in replies {
            self.replies.insert((row.get(0), row.get(1)), row.get(2));
        }
        Ok(())
    }

    /// The reply stored under `key`, before or during the group.
    pub fn reply(&self, tenant_id: i32, key: &[u8]) -> Option<&Vec<u8>> {
        self.replies.get(&(tenant_id, key.to_vec()))
    }

    pub fn mark(&self, tenant: &str) -> Mark {
        Mark {
            undo: self.undo.len(),
            versions: self.versions.len(),
            changes: self.changes.len(),
            replies: self.new_replies.len(),
            predicate_sets: self.predicate_sets.len(),
            tenant: self.tenants[tenant].clone(),
        }
    }

    /// Takes back everything done since `mark`.
    pub fn undo_to(&mut self, mark: Mark) {
        while self.undo.len() > mark.undo {
            match self.undo.pop().expect("longer than the mark") {
                Undo::Held(id, Some(h)) => {
                    self.held.insert(id, *h);
                }
                Undo::Held(id, None) => {
                    self.held.remove(&id);
                }
                Undo::Pushed(pair) => {
                    self.pairs.get_mut(&pair).and_then(Vec::pop);
                }
                Undo::Subject(t, s) => {
                    self.known_subjects.remove(&(t, s));
                }
                Undo::Predicate(t, p) => {
                    self.known_predicates.remove(&(t, p));
                }
                Undo::Reply(t, k) => {
                    self.replies.remove(&(t, k));
                }
            }
        }
        self.versions.truncate(mark.versions);
        self.changes.truncate(mark.changes);
        self.new_replies.truncate(mark.replies);
        self.predicate_sets.truncate(mark.predicate_sets);
        let name = mark.tenant.name.clone();
        self.tenants.insert(name, mark.tenant);
    }

    /// The facts of `pair` a takeover of a fact valid from `from` may
    /// close, in the order the embedded engine lists them: live ones by
    /// id, then superseded ones by end and id.
    pub fn pair_facts(&self, pair: &Pair, from: Millis) -> Vec<Fact> {
        let Some(ids) = self.pairs.get(pair) else { return Vec::new() };
        let mut found: Vec<&Fact> = ids
            .iter()
            .map(|id| &self.held[id].fact)
            .filter(|f| f.status.is_live() || (f.status == Status::Superseded && f.valid_until.is_none_or(|u| u > from)))
            .collect();
        found.sort_by_key(|f| {
            let closed = f.status == Status::Superseded;
            let end = if closed { (f.valid_until.is_none(), f.valid_until) } else { (false, None) };
            (closed, end, f.id)
        });
        found.into_iter().cloned().collect()
    }

    /// The latest version of fact `id` of a tenant, if the group has it.
    pub fn fact(&self, tenant_id: i32, id: FactId) -> Option<&Held> {
        self.held.get(&id).filter(|h| h.tenant_id == tenant_id)
    }

    pub fn slot_of(&self, id: FactId) -> String {
        self.held.get(&id).map(|h| h.slot.clone()).unwrap_or_default()
    }

    /// Records `f` as its fact's version at `f.tx` and as its latest.
    pub fn write(&mut self, tenant_id: i32, f: Fact, slot: String) {
        let pair = (tenant_id, f.subject.clone(), f.predicate.clone());
        let before = self.held.insert(f.id, Held { tenant_id, fact: f.clone(), slot, written: true });
        if before.is_none() {
            if let Some(ids) = self.pairs.get_mut(&pair) {
                ids.push(f.id);
                self.undo.push(Undo::Pushed(pair));
            }
        }
        self.undo.push(Undo::Held(f.id, before.map(Box::new)));
        self.versions.push((tenant_id, f));
    }

    /// Whether the tenant had no fact of `subject` (and of `predicate`)
    /// before this one; from now on it has.
    pub fn first_of(&mut self, tenant_id: i32, subject: &str, predicate: &str) -> (bool, bool) {
        let s = self.known_subjects.insert((tenant_id, subject.to_string()));
        if s {
            self.undo.push(Undo::Subject(tenant_id, subject.to_string()));
        }
        let p = self.known_predicates.insert((tenant_id, predicate.to_string()));
        if p {
            self.undo.push(Undo::Predicate(tenant_id, predicate.to_string()));
        }
        (s, p)
    }

    pub fn set_cardinality(&mut self, tenant: &str, predicate: &str, c: Cardinality) {
        let state = self.tenants.get_mut(tenant).expect("a loaded tenant");
        state.cardinalities.insert(predicate.to_string(), c);
        self.predicate_sets.push((state.id, predicate.to_string(), c));
    }

    pub fn log(&mut self, tenant_id: i32, tx: Tx, at: Millis, events: Value) {
        self.changes.push((tenant_id, db_tx(tx), at, events));
    }

    pub fn store_reply(&mut self, tenant_id: i32, key: Vec<u8>, reply: Vec<u8>, tx: i64) {
        self.replies.insert((tenant_id, key.clone()), reply.clone());
        self.undo.push(Undo::Reply(tenant_id, key.clone()));
        self.new_replies.push((tenant_id, key, reply, tx));
    }

    /// What writes back what the group did, in the transaction it read in,
    /// as statements to send together.
    pub fn flush(self) -> Batch {
        let mut batch = Batch::default();
        // A write may close a fact an earlier op of the same write made:
        // the version at that tx is then the last one written.
        let mut versions: HashMap<(i32, FactId, Tx), usize> = HashMap::new();
        for (i, (t, f)) in self.versions.iter().enumerate() {
            versions.insert((*t, f.id, f.tx), i);
        }
        let mut order: Vec<usize> = versions.into_values().collect();
        order.sort_unstable();
        // Versions before the latest rows, which refer to them.
        if !order.is_empty() {
            let cols = FactColumns::of(order.iter().map(|i| (self.versions[*i].0, &self.versions[*i].1, "")));
            batch.push(INSERT_VERSIONS.as_str(), cols.into_params());
        }
        // Closed facts first: an active fact may take a slot over time only
        // another's closing frees.
        let latest: Vec<&Held> = self.held.values().filter(|h| h.written).collect();
        for active in [false, true] {
            let part: Vec<&&Held> = latest.iter().filter(|h| (h.fact.status == Status::Active) == active).collect();
            if !part.is_empty() {
                let cols = FactColumns::of(part.iter().map(|h| (h.tenant_id, &h.fact, h.slot.as_str())));
                batch.push(UPSERT_LATEST.as_str(), cols.into_params());
            }
        }
        if !self.changes.is_empty() {
            let (t, x, at, ev) = unzip4(self.changes.into_iter());
            batch.push(
                "INSERT INTO changes (tenant_id, tx, recorded_at, events)
                 SELECT * FROM unnest($1::int[], $2::int8[], $3::int8[], $4::jsonb[])",
                vec![Box::new(t), Box::new(x), Box::new(at), Box::new(ev)],
            );
        }
        if !self.new_replies.is_empty() {
            let (t, k, r, x) = unzip4(self.new_replies.into_iter());
            batch.push(
                "INSERT INTO idempotency (tenant_id, key, reply, tx)
                 SELECT * FROM unnest($1::int[], $2::bytea[], $3::bytea[], $4::int8[])",
                vec![Box::new(t), Box::new(k), Box::new(r), Box::new(x)],
            );
        }
        if !self.predicate_sets.is_empty() {
            let mut last: HashMap<(i32, String), Cardinality> = HashMap::new();
            for (t, p, c) in self.predicate_sets {
                last.insert((t, p), c);
            }
            let (t, p, c): (Vec<i32>, Vec<String>, Vec<&'static str>) =
                unzip3(last.into_iter().map(|((t, p), c)| (t, p, c.as_str())));
            batch.push(
                "INSERT INTO predicates (tenant_id, name, cardinality)
                 SELECT * FROM unnest($1::int[], $2::text[], $3::text[])
                 ON CONFLICT (tenant_id, name) DO UPDATE SET cardinality = EXCLUDED.cardinality",
                vec![Box::new(t), Box::new(p), Box::new(c)],
            );
        }
        for state in self.tenants.into_values() {
            save_tenant(&mut batch, state);
        }
        batch
    }
}

/// What stops a group from loading.
pub enum Loaded {
    Database(tokio_postgres::Error),
    Corrupt(EngineError),
}

impl From<tokio_postgres::Error> for Loaded {
    fn from(e: tokio_postgres::Error) -> Self {
        Loaded::Database(e)
    }
}

impl From<EngineError> for Loaded {
    fn from(e: EngineError) -> Self {
        Loaded::Corrupt(e)
    }
}

fn save_tenant(batch: &mut Batch, s: TenantState) {
    let (last_tx, last_at) = match s.last_tx {
        Some((t, at)) => (Some(db_tx(t)), Some(at)),
        None => (None, None),
    };
    batch.push(
        "UPDATE tenants SET threshold = $2,
             last_tx = coalesce($3, last_tx), last_recorded_at = coalesce($4, last_recorded_at),
             active = active + $5, candidate = candidate + $6, superseded = superseded + $7,
             retracted = retracted + $8, subjects = subjects + $9, predicate_count = predicate_count + $10
         WHERE id = $1",
        vec![
            Box::new(s.id),
            Box::new(s.threshold),
            Box::new(last_tx),
            Box::new(last_at),
            Box::new(s.counts[0]),
            Box::new(s.counts[1]),
            Box::new(s.counts[2]),
            Box::new(s.counts[3]),
            Box::new(s.subjects),
            Box::new(s.predicates),
        ],
    );
    let moved: Vec<(String, [i64; 4])> = s.sources.into_iter().filter(|(_, c)| c.iter().any(|n| *n != 0)).collect();
    if moved.is_empty() {
        return;
    }
    let names: Vec<String> = moved.iter().map(|(s, _)| s.clone()).collect();
    let col = |i: usize| moved.iter().map(|(_, c)| c[i]).collect::<Vec<i64>>();
    let (a, c, sup, r) = (col(0), col(1), col(2), col(3));
    // The rows first, then the deltas: a delta may be negative, which an
    // inserted row's checks would refuse.
    batch.push(
        "INSERT INTO source_stats (tenant_id, source) SELECT $1, unnest($2::text[])
         ON CONFLICT (tenant_id, source) DO NOTHING",
        vec![Box::new(s.id), Box::new(names.clone())],
    );
    batch.push(
        "UPDATE source_stats s SET active = s.active + d.a, candidate = s.candidate + d.c,
             superseded = s.superseded + d.s, retracted = s.retracted + d.r
         FROM unnest($2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[]) AS d(source, a, c, s, r)
         WHERE s.tenant_id = $1 AND s.source = d.source",
        vec![Box::new(s.id), Box::new(names), Box::new(a), Box::new(c), Box::new(sup), Box::new(r)],
    );
}

/// Fact versions as one array per column, for [`UNNEST_FACTS`].
struct FactColumns {
    tenant: Vec<i32>,
    id: Vec<Uuid>,
    tx: Vec<i64>,
    subject: Vec<String>,
    predicate: Vec<String>,
    object: Vec<String>,
    confidence: Vec<f64>,
    source: Vec<Option<String>>,
    properties: Vec<Option<String>>,
    valid_from: Vec<i64>,
    valid_until: Vec<Option<i64>>,
    recorded_at: Vec<i64>,
    status: Vec<&'static str>,
    created_tx: Vec<i64>,
    created_at: Vec<i64>,
    supersedes: Vec<String>,
    superseded_by: Vec<Option<Uuid>>,
    continues: Vec<Option<Uuid>>,
    continued_by: Vec<String>,
    slot: Vec<String>,
}

/// `{a,b}`: ids as a PostgreSQL array literal.
fn id_array(ids: &[FactId]) -> String {
    let inner: Vec<String> = ids.iter().map(Uuid::to_string).collect();
    format!("{{{}}}", inner.join(","))
}

impl FactColumns {
    fn of<'a>(facts: impl Iterator<Item = (i32, &'a Fact, &'a str)>) -> FactColumns {
        let mut c = FactColumns {
            tenant: vec![],
            id: vec![],
            tx: vec![],
            subject: vec![],
            predicate: vec![],
            object: vec![],
            confidence: vec![],
            source: vec![],
            properties: vec![],
            valid_from: vec![],
            valid_until: vec![],
            recorded_at: vec![],
            status: vec![],
            created_tx: vec![],
            created_at: vec![],
            supersedes: vec![],
            superseded_by: vec![],
            continues: vec![],
            continued_by: vec![],
            slot: vec![],
        };
        for (t, f, slot) in facts {
            c.tenant.push(t);
            c.id.push(f.id);
            c.tx.push(db_tx(f.tx));
            c.subject.push(f.subject.clone());
            c.predicate.push(f.predicate.clone());
            c.object.push(json_text(&f.object));
            c.confidence.push(f.confidence);
            c.source.push(f.source.clone());
            c.properties.push(f.properties.as_ref().map(|p| json_text(&Value::Object(p.clone()))));
            c.valid_from.push(f.valid_from);
            c.valid_until.push(f.valid_until);
            c.recorded_at.push(f.recorded_at);
            c.status.push(f.status.as_str());
            c.created_tx.push(db_tx(f.created_tx));
            c.created_at.push(f.created_at);
            c.supersedes.push(id_array(&f.supersedes));
            c.superseded_by.push(f.superseded_by);
            c.continues.push(f.continues);
            c.continued_by.push(id_array(&f.continued_by));
            c.slot.push(slot.to_string());
        }
        c
    }

    /// `$1..$20` of [`UNNEST_FACTS`].
    fn into_params(self) -> Vec<Param> {
        vec![
            Box::new(self.tenant),
            Box::new(self.id),
            Box::new(self.tx),
            Box::new(self.subject),
            Box::new(self.predicate),
            Box::new(self.object),
            Box::new(self.confidence),
            Box::new(self.source),
            Box::new(self.properties),
            Box::new(self.valid_from),
            Box::new(self.valid_until),
            Box::new(self.recorded_at),
            Box::new(self.status),
            Box::new(self.created_tx),
            Box::new(self.created_at),
            Box::new(self.supersedes),
            Box::new(self.superseded_by),
            Box::new(self.continues),
            Box::new(self.continued_by),
            Box::new(self.slot),
        ]
    }
}

fn unzip3<A, B, C>(it: impl Iterator<Item = (A, B, C)>) -> (Vec<A>, Vec<B>, Vec<C>) {
    let (mut a, mut b, mut c) = (vec![], vec![], vec![]);
    for (x, y, z) in it {
        a.push(x);
        b.push(y);
        c.push(z);
    }
    (a, b, c)
}

fn unzip4<A, B, C, D>(it: impl Iterator<Item = (A, B, C, D)>) -> (Vec<A>, Vec<B>, Vec<C>, Vec<D>) {
    let (mut a, mut b, mut c, mut d) = (vec![], vec![], vec![], vec![]);
    for (w, x, y, z) in it {
        a.push(w);
        b.push(x);
        c.push(y);
        d.push(z);
    }
    (a, b, c, d)
}
