//! Concurrency: sixteen writers and a few readers share one `Arc<Engine>` on a
//! real data directory and hammer a handful of keys.
//!
//! Writers mix assertions with random (bounded and open) valid intervals on a
//! `one` predicate, assertions on a `strict` predicate (some rejected with
//! `Conflict`), multi-fact batches (all-or-nothing), retractions of earlier
//! facts, and writes the engine must reject (unknown id, invalid interval).
//! Readers run queries, `as_of` reads and gets the whole time; none may fail
//! and none may ever observe two overlapping active facts of a `one`/`strict`
//! predicate for one subject.
//!
//! Afterwards the whole store is checked: the valid-time invariants now and at
//! every record time (every tx from 1 to the last), the tx sequence (unique,
//! increasing per writer, gapless: rejected writes consume no tx), record
//! times non-decreasing in tx order, the change log against what writers were
//! told, and the stats against a full scan.

use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tempora_storage::*;
use uuid::Uuid;

const TENANT: &str = "acme";
const ONE: &str = "located_in";
const STRICT: &str = "born_in";
const SUBJECTS: [&str; 4] = ["Person:ada", "Person:bob", "Person:cy", "Person:dee"];
const WRITERS: usize = 16;
const OPS_PER_WRITER: usize = 150;
const READERS: usize = 3;

mod common;
use common::Rng;

/// A random valid interval: from in [0, 1000), open-ended half the time.
fn interval(rng: &mut Rng) -> (Millis, Option<Millis>) {
    let from = rng.below(1000) as Millis;
    let until = if rng.below(2) == 0 { None } else { Some(from + 1 + rng.below(400) as Millis) };
    (from, until)
}

fn input(rng: &mut Rng, predicate: &str, object: serde_json::Value, source: String) -> FactInput {
    let (from, until) = interval(rng);
    let mut f = FactInput::new(*rng.pick(&SUBJECTS), predicate, object).valid_from(from).source(source);
    if let Some(u) = until {
        f = f.valid_until(u);
    }
    f
}

/// Overlapping active facts of the same (subject, predicate) among `facts`,
/// for the predicates whose cardinality forbids them. Also reports active
/// facts with an empty interval, and the same fact id twice.
fn overlap_violations<'a>(facts: impl IntoIterator<Item = &'a Fact>) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut groups: BTreeMap<(&str, &str), Vec<&Fact>> = BTreeMap::new();
    for f in facts {
        if !seen.insert(f.id) {
            out.push(format!("fact {} read twice", f.id));
        }
        if f.status == Status::Active && (f.predicate == ONE || f.predicate == STRICT) {
            if f.valid_until.is_some_and(|u| u <= f.valid_from) {
                out.push(format!("active fact with empty interval: {f:?}"));
            }
            groups.entry((&f.subject, &f.predicate)).or_default().push(f);
        }
    }
    for ((s, p), mut fs) in groups {
        fs.sort_by_key(|f| (f.valid_from, f.id));
        for w in fs.windows(2) {
            if w[0].overlaps(w[1].valid_from, w[1].valid_until) {
                out.push(format!(
                    "{s} {p}: active {} [{}, {:?}) tx {} overlaps active {} [{}, {:?}) tx {}",
                    w[0].id,
                    w[0].valid_from,
                    w[0].valid_until,
                    w[0].tx,
                    w[1].id,
                    w[1].valid_from,
                    w[1].valid_until,
                    w[1].tx
                ));
            }
        }
    }
    out
}

/// Every fact of the tenant (latest version, or the version at `as_of`),
/// every status, retracted included, over all pages.
fn all_facts(engine: &Engine, as_of: Option<AsOf>) -> Vec<Fact> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .query(
                TENANT,
                &FactQuery {
                    status: StatusFilter::Any,
                    include_retracted: true,
                    as_of,
                    limit: MAX_PAGE,
                    cursor: cursor.take(),
                    ..Default::default()
                },
            )
            .expect("full query");
        out.extend(page.facts);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
}

#[derive(Default)]
struct WriterLog {
    /// (tx, recorded_at, what) of every write that returned Ok, in call order.
    committed: Vec<(Tx, Millis, String)>,
    /// Facts this writer asserted (the new facts and the tails they created).
    asserted: Vec<(FactId, Tx, Option<String>)>,
    /// Sources of assertions and batches that were rejected.
    rejected_sources: Vec<String>,
    conflicts: u64,
    not_found: u64,
    invalid: u64,
    /// Txs of retractions of an already retracted fact.
    noop_retract_tx: Vec<Tx>,
}

#[test]
fn concurrent_writers_and_readers_keep_every_invariant() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::open(EngineConfig::at(dir.path())).unwrap());
    let setup = engine
        .write(TENANT, vec![WriteOp::SetCardinality { predicate: STRICT.into(), cardinality: Cardinality::Strict }])
        .unwrap();
    assert_eq!(setup.tx, 1, "a fresh store starts at tx 1");

    let pool: Arc<Mutex<Vec<FactId>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));

    // ---- readers --------------------------------------------------------------
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (engine, pool, done, reads) = (engine.clone(), pool.clone(), done.clone(), reads.clone());
            std::thread::spawn(move || -> Vec<String> {
                let mut rng = Rng(0xDEAD_0000 + r as u64);
                let mut violations = Vec::new();
                let check = |violations: &mut Vec<String>, what: &str, facts: &[Fact]| {
                    for v in overlap_violations(facts) {
                        violations.push(format!("reader {r}, {what}: {v}"));
                    }
                };
                while !done.load(Ordering::Acquire) {
                    let subject = rng.pick(&SUBJECTS).to_string();
                    let predicate = if rng.below(3) == 0 { STRICT } else { ONE };
                    let (last_tx, last_at) = engine.last_tx();
                    match rng.below(8) {
                        0 => {
                            let q = FactQuery { subject: Some(subject), predicate: Some(predicate.into()), ..Default::default() };
                            let page = engine.query(TENANT, &q).expect("current read by subject");
                            assert!(page.facts.iter().all(|f| f.status == Status::Active));
                            check(&mut violations, "current by subject", &page.facts);
                        }
                        1 => {
                            let q = FactQuery { predicate: Some(predicate.into()), limit: MAX_PAGE, ..Default::default() };
                            let page = engine.query(TENANT, &q).expect("current read by predicate");
                            check(&mut violations, "current by predicate", &page.facts);
                        }
                        2 => {
                            let page = engine.query(TENANT, &FactQuery { limit: MAX_PAGE, ..Default::default() }).expect("whole tenant");
                            check(&mut violations, "whole tenant", &page.facts);
                        }
                        3 if last_tx > 0 => {
                            let at = 1 + rng.below(last_tx);
                            let q = FactQuery {
                                subject: Some(subject),
                                predicate: Some(predicate.into()),
                                status: StatusFilter::Any,
                                include_retracted: true,
                                as_of: Some(AsOf::Tx(at)),
                                limit: MAX_PAGE,
                                ..Default::default()
                            };
                            let page = engine.query(TENANT, &q).expect("as_of read");
                            assert!(page.facts.iter().all(|f| f.tx <= at), "as_of {at} returned a later version");
                            check(&mut violations, &format!("as_of tx {at}"), &page.facts);
                        }
                        4 => {
                            let q = FactQuery {
                                subject: Some(subject),
                                as_of: Some(AsOf::Time(last_at)),
                                limit: MAX_PAGE,
                                ..Default::default()
                            };
                            let page = engine.query(TENANT, &q).expect("as_of time read");
                            check(&mut violations, "as_of time", &page.facts);
                        }
                        5 => {
                            let t = rng.below(1500) as Millis;
                            let q = FactQuery {
                                subject: Some(subject),
                                predicate: Some(predicate.into()),
                                valid_at: Some(t),
                                ..Default::default()
                            };
                            let page = engine.query(TENANT, &q).expect("valid_at read");
                            assert!(page.facts.iter().all(|f| f.covers(t)));
                            let active = page.facts.iter().filter(|f| f.status == Status::Active).count();
                            if active > 1 {
                                violations.push(format!("reader {r}: {active} active facts cover {t}"));
                            }
                            check(&mut violations, "valid_at", &page.facts);
                        }
                        6 => {
                            let id = {
                                let p = pool.lock().unwrap();
                                if p.is_empty() {
                                    continue;
                                }
                                p[rng.below(p.len() as u64) as usize]
                            };
                            let latest = engine.get(TENANT, id, None).expect("get").expect("a committed fact exists");
                            let first = engine
                                .get(TENANT, id, Some(AsOf::Tx(latest.created_tx)))
                                .expect("get as_of")
                                .expect("visible at its own tx");
                            assert_eq!(first.tx, latest.created_tx);
                            assert!(!engine.history(TENANT, id).expect("history").versions.is_empty());
                        }
                        _ => {
                            let after = rng.below(last_tx.max(1));
                            let changes = engine.changes(TENANT, after, 50).expect("changes");
                            for w in changes.windows(2) {
                                assert!(w[0].tx < w[1].tx && w[0].recorded_at <= w[1].recorded_at);
                            }
                            assert!(changes.first().is_none_or(|c| c.tx > after));
                        }
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
                violations
            })
        })
        .collect();

    // ---- writers ---------------------------------------------------------------
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (engine, pool) = (engine.clone(), pool.clone());
            std::thread::spawn(move || -> WriterLog {
                let mut rng = Rng(0xC0FFEE + w as u64 * 7919);
                let mut log = WriterLog::default();
                let mut last = 0;
                for k in 0..OPS_PER_WRITER {
                    let source = format!("w{w}-{k}");
                    let (ops, what) = match rng.below(100) {
                        0..=34 => {
                            let mut f = input(&mut rng, ONE, json!(format!("Place:{w}-{k}")), source.clone());
                            if rng.below(10) == 0 {
                                f = f.confidence(0.5); // a candidate
                            }
                            (vec![WriteOp::Assert(f)], "assert one")
                        }
                        35..=54 => {
                            let obj = json!(*rng.pick(&["Place:x", "Place:y", "Place:z"]));
                            (vec![WriteOp::Assert(input(&mut rng, STRICT, obj, source.clone()))], "assert strict")
                        }
                        55..=69 => {
                            let n = 2 + rng.below(3);
                            let ops = (0..n)
                                .map(|i| {
                                    let f = if rng.below(2) == 0 {
                                        input(&mut rng, ONE, json!(format!("Place:{w}-{k}-{i}")), source.clone())
                                    } else {
                                        let obj = json!(*rng.pick(&["Place:x", "Place:y"]));
                                        input(&mut rng, STRICT, obj, source.clone())
                                    };
                                    WriteOp::Assert(f)
                                })
                                .collect();
                            (ops, "batch")
                        }
                        70..=84 => {
                            let id = {
                                let p = pool.lock().unwrap();
                                (!p.is_empty()).then(|| p[rng.below(p.len() as u64) as usize])
                            };
                            match id {
                                Some(id) => (vec![WriteOp::Retract(id)], "retract"),
                                None => (vec![WriteOp::Retract(Uuid::now_v7())], "retract unknown"),
                            }
                        }
                        85..=89 => (vec![WriteOp::Retract(Uuid::now_v7())], "retract unknown"),
                        90..=94 => {
                            let from = rng.below(1000) as Millis;
                            let f = FactInput::new(*rng.pick(&SUBJECTS), ONE, json!("Place:never"))
                                .valid_from(from)
                                .valid_until(from)
                                .source(source.clone());
                            (vec![WriteOp::Assert(f)], "invalid")
                        }
                        _ => {
                            // valid_from omitted: it becomes the write's record time.
                            let f = FactInput::new(*rng.pick(&SUBJECTS), ONE, json!(format!("Place:now-{w}-{k}")))
                                .source(source.clone());
                            (vec![WriteOp::Assert(f)], "assert now")
                        }
                    };
                    let retract_target = match &ops[..] {
                        [WriteOp::Retract(id)] => Some(*id),
                        _ => None,
                    };
                    let was_retracted = retract_target
                        .and_then(|id| engine.get(TENANT, id, None).unwrap())
                        .is_some_and(|f| f.status == Status::Retracted);
                    match engine.write(TENANT, ops) {
                        Ok(out) => {
                            assert!(out.tx > last, "writer {w}: tx {} after {last}", out.tx);
                            last = out.tx;
                            log.committed.push((out.tx, out.recorded_at, what.to_string()));
                            assert!(!matches!(what, "retract unknown" | "invalid"), "{what} succeeded");
                            for o in &out.outcomes {
                                match o {
                                    OpOutcome::Asserted(a) => {
                                        assert_eq!((a.fact.tx, a.fact.created_tx), (out.tx, out.tx));
                                        assert_eq!(a.fact.recorded_at, out.recorded_at);
                                        if what == "assert now" {
                                            assert_eq!(a.fact.valid_from, out.recorded_at);
                                        }
                                        let mut p = pool.lock().unwrap();
                                        p.push(a.fact.id);
                                        log.asserted.push((a.fact.id, out.tx, a.fact.source.clone()));
                                        for t in &a.continued {
                                            p.push(t.id);
                                            log.asserted.push((t.id, out.tx, t.source.clone()));
                                        }
                                    }
                                    OpOutcome::Retracted { fact, changed } => {
                                        assert_eq!(fact.status, Status::Retracted);
                                        if *changed {
                                            assert_eq!(fact.tx, out.tx);
                                        } else {
                                            assert!(was_retracted || fact.tx < out.tx);
                                            log.noop_retract_tx.push(out.tx);
                                        }
                                    }
                                    other => panic!("unexpected outcome {other:?}"),
                                }
                            }
                        }
                        Err(EngineError::Conflict(_)) => {
                            assert!(matches!(what, "assert strict" | "batch"), "{what} conflicted");
                            log.conflicts += 1;
                            log.rejected_sources.push(source);
                        }
                        Err(EngineError::NotFound(_)) => {
                            assert_eq!(what, "retract unknown");
                            log.not_found += 1;
                        }
                        Err(EngineError::Invalid(_)) => {
                            assert_eq!(what, "invalid");
                            log.invalid += 1;
                            log.rejected_sources.push(source);
                        }
                        Err(e) => panic!("writer {w}: {what} failed: {e}"),
                    }
                }
                log
            })
        })
        .collect();

    let logs: Vec<WriterLog> = writers.into_iter().map(|h| h.join().expect("writer panicked")).collect();
    let write_time = started.elapsed();
    done.store(true, Ordering::Release);
    let mut violations = Vec::new();
    for h in readers {
        violations.extend(h.join().expect("reader panicked"));
    }
    assert!(violations.is_empty(), "readers saw {} violations:\n{}", violations.len(), violations.join("\n"));

    // ---- tx sequence -----------------------------------------------------------------
    let (last_tx, last_recorded_at) = engine.last_tx();
    let mut recorded: BTreeMap<Tx, Millis> = BTreeMap::new();
    recorded.insert(setup.tx, setup.recorded_at);
    for log in &logs {
        for (tx, at, _) in &log.committed {
            assert!(recorded.insert(*tx, *at).is_none(), "tx {tx} returned twice");
        }
    }
    let expected: Vec<Tx> = (1..=last_tx).collect();
    assert_eq!(
        recorded.keys().copied().collect::<Vec<_>>(),
        expected,
        "the returned txs must be exactly 1..={last_tx}: rejected writes consume no tx"
    );
    let conflicts: u64 = logs.iter().map(|l| l.conflicts).sum();
    let not_found: u64 = logs.iter().map(|l| l.not_found).sum();
    let invalid: u64 = logs.iter().map(|l| l.invalid).sum();
    let committed: usize = logs.iter().map(|l| l.committed.len()).sum();
    assert_eq!(committed as u64 + 1, last_tx);
    assert_eq!(
        committed as u64 + conflicts + not_found + invalid,
        (WRITERS * OPS_PER_WRITER) as u64,
        "every write either committed or was rejected"
    );
    assert!(conflicts > 0, "the strict predicate should have rejected some writes");
    assert!(not_found > 0 && invalid > 0);

    // ---- change log ------------------------------------------------------------------
    let mut changes = Vec::new();
    loop {
        let after = changes.last().map_or(0, |c: &Change| c.tx);
        let page = engine.changes(TENANT, after, 500).unwrap();
        if page.is_empty() {
            break;
        }
        changes.extend(page);
    }
    assert_eq!(changes.iter().map(|c| c.tx).collect::<Vec<_>>(), expected, "one log entry per tx");
    for w in changes.windows(2) {
        assert!(w[0].recorded_at <= w[1].recorded_at, "recorded_at goes backwards at tx {}", w[1].tx);
    }
    for c in &changes {
        assert_eq!(c.recorded_at, recorded[&c.tx], "log record time of tx {}", c.tx);
        for e in &c.events {
            if let ChangeEvent::Assert { fact, superseded, continued } = e {
                assert!(fact.tx == c.tx && superseded.iter().chain(continued).all(|f| f.tx == c.tx));
            }
        }
    }
    assert_eq!(changes.last().unwrap().recorded_at, last_recorded_at);
    let noop: HashSet<Tx> = logs.iter().flat_map(|l| l.noop_retract_tx.iter().copied()).collect();
    for c in &changes {
        if noop.contains(&c.tx) {
            // Retracting an already retracted fact still commits a tx, with an
            // empty log entry: nothing changes.
            assert!(c.events.is_empty(), "no-op retraction at tx {} logged {:?}", c.tx, c.events);
        }
    }

    // ---- the store now ---------------------------------------------------------------
    let facts = all_facts(&engine, None);
    let by_id: HashMap<FactId, &Fact> = facts.iter().map(|f| (f.id, f)).collect();
    assert_eq!(by_id.len(), facts.len(), "a fact is listed once");
    let v = overlap_violations(&facts);
    assert!(v.is_empty(), "{}", v.join("\n"));
    let asserted: usize = logs.iter().map(|l| l.asserted.len()).sum();
    assert_eq!(facts.len(), asserted, "every committed assertion and tail is stored, nothing else");
    for log in &logs {
        for (id, tx, source) in &log.asserted {
            let f = by_id.get(id).unwrap_or_else(|| panic!("fact {id} of tx {tx} missing"));
            assert_eq!((&f.source, f.created_tx), (source, *tx));
        }
    }
    let rejected: HashSet<&String> = logs.iter().flat_map(|l| &l.rejected_sources).collect();
    for f in &facts {
        assert!(f.source.as_ref().is_none_or(|s| !rejected.contains(s)), "a rejected write left {f:?}");
    }
    let mut counts = TenantStats::default();
    for f in &facts {
        *match f.status {
            Status::Active => &mut counts.active,
            Status::Candidate => &mut counts.candidate,
            Status::Superseded => &mut counts.superseded,
            Status::Retracted => &mut counts.retracted,
        } += 1;
    }
    counts.subjects = facts.iter().map(|f| &f.subject).collect::<HashSet<_>>().len() as u64;
    counts.predicates = facts.iter().map(|f| &f.predicate).collect::<HashSet<_>>().len() as u64;
    assert_eq!(engine.stats(TENANT), counts, "stats vs a full scan");
    assert!(counts.superseded > 0 && counts.retracted > 0 && counts.candidate > 0 && counts.active > 0);

    // ---- every version, at every tx ---------------------------------------------------
    let mut versions_by_tx: BTreeMap<Tx, Vec<Fact>> = BTreeMap::new();
    for f in &facts {
        let h = engine.history(TENANT, f.id).unwrap();
        assert_eq!(h.versions.last().unwrap(), *by_id.get(&f.id).unwrap(), "history ends at the latest version");
        assert_eq!(h.versions[0].tx, h.versions[0].created_tx);
        for w in h.versions.windows(2) {
            assert!(w[0].tx < w[1].tx, "versions of {} out of order", f.id);
        }
        for v in h.versions {
            if let Some(u) = v.valid_until {
                assert!(u >= v.valid_from, "interval ends before it starts: {v:?}");
            }
            if v.status == Status::Superseded {
                let by = v.superseded_by.expect("a superseded version names its successor");
                assert!(by_id.contains_key(&by), "successor {by} of {} missing", v.id);
            }
            versions_by_tx.entry(v.tx).or_default().push(v);
        }
    }
    assert!(versions_by_tx.keys().all(|tx| *tx >= 1 && *tx <= last_tx));
    // Replay: after each tx, the versions visible at that tx.
    let samples: BTreeSet<Tx> = (1..=last_tx).step_by((last_tx as usize / 25).max(1)).chain([last_tx]).collect();
    let mut visible: HashMap<FactId, Fact> = HashMap::new();
    let mut checked_samples = 0;
    for tx in 1..=last_tx {
        let mut touched = BTreeSet::new();
        for v in versions_by_tx.remove(&tx).unwrap_or_default() {
            touched.insert((v.subject.clone(), v.predicate.clone()));
            visible.insert(v.id, v);
        }
        if !touched.is_empty() {
            let v = overlap_violations(
                visible.values().filter(|f| touched.contains(&(f.subject.clone(), f.predicate.clone()))),
            );
            assert!(v.is_empty(), "as of tx {tx}:\n{}", v.join("\n"));
        }
        if samples.contains(&tx) {
            // The engine's as_of read agrees with the replay.
            let read = all_facts(&engine, Some(AsOf::Tx(tx)));
            let got: BTreeMap<FactId, &Fact> = read.iter().map(|f| (f.id, f)).collect();
            assert_eq!(got.len(), read.len(), "as of tx {tx}: a fact read twice");
            let want: BTreeMap<FactId, &Fact> = visible.iter().map(|(k, v)| (*k, v)).collect();
            assert_eq!(got, want, "as_of tx {tx} differs from the replay of versions");
            let v = overlap_violations(&read);
            assert!(v.is_empty(), "as_of tx {tx}:\n{}", v.join("\n"));
            checked_samples += 1;
        }
    }
    assert!(checked_samples >= 2);

    engine.close();
    eprintln!(
        "concurrency: {last_tx} tx ({conflicts} conflicts, {not_found} not found, {invalid} invalid rejected), \
         {} facts, {} reads; writes {:.1?}, total {:.1?}",
        facts.len(),
        reads.load(Ordering::Relaxed),
        write_time,
        started.elapsed()
    );
}
