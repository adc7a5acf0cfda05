//! Per-source fact counts (`Engine::source_stats`): kept by the writer as
//! facts are asserted, superseded and retracted, undone with a failed
//! request, durable across reopen, built by the format-3 migration for older
//! stores, and always equal to a brute-force recount of the facts.

mod common;

use common::Rng;
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tempora_storage::kv::{scan_prefix, Keyspace, WriteBatch};
use tempora_storage::{fact_record, record};
use tempora_storage::{
    Cardinality, Durability, Engine, EngineConfig, EngineError, Fact, FactId, FactInput, SourceStats, Status, WriteOp,
    CURRENT_FORMAT,
};

const T2020: i64 = 1_577_836_800_000;
const T2024: i64 = 1_704_067_200_000;
const T2025: i64 = 1_735_689_600_000;
const T2026: i64 = 1_767_225_600_000;
const TENANT: &str = "default";
const SARAH: &str = "Person:sarah";

fn engine() -> Engine {
    Engine::open(EngineConfig::temporary()).expect("a temporary engine opens")
}

/// Opens the store in `dir`. A store just dropped may still be locked for a
/// moment (sled releases its file lock when its background work on the
/// dropped database ends), so a lock error is retried for a while.
fn at(dir: &Path) -> Engine {
    let mut tries = 0;
    loop {
        match Engine::open(EngineConfig::at(dir).durability(Durability::Relaxed)) {
            Ok(e) => return e,
            Err(err) if tries < 100 && err.to_string().contains("lock") => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(err) => panic!("the engine opens: {err:?}"),
        }
    }
}

fn counts(active: u64, candidate: u64, superseded: u64, retracted: u64) -> SourceStats {
    SourceStats { active, candidate, superseded, retracted }
}

fn stats(e: &Engine, source: &str) -> SourceStats {
    e.source_stats(TENANT, source).unwrap()
}

/// Every fact of the tenant at its latest status, through `query`.
fn all_facts(e: &Engine, tenant: &str) -> Vec<Fact> {
    common::every_fact(e, tenant, None)
}

/// The per-source counts recounted from the facts themselves.
fn recount(e: &Engine, tenant: &str) -> BTreeMap<String, SourceStats> {
    let mut out: BTreeMap<String, SourceStats> = BTreeMap::new();
    for f in all_facts(e, tenant) {
        if let Some(source) = f.source {
            let s = out.entry(source).or_default();
            match f.status {
                Status::Active => s.active += 1,
                Status::Candidate => s.candidate += 1,
                Status::Superseded => s.superseded += 1,
                Status::Retracted => s.retracted += 1,
            }
        }
    }
    out
}

/// Every source in `recount` (and every name in `also`) has the counts the
/// engine reports.
fn assert_matches_recount(e: &Engine, tenant: &str, also: &[&str]) -> BTreeMap<String, SourceStats> {
    let expected = recount(e, tenant);
    for (source, want) in &expected {
        assert_eq!(&e.source_stats(tenant, source).unwrap(), want, "tenant {tenant}, source {source}");
    }
    for source in also {
        let want = expected.get(*source).copied().unwrap_or_default();
        assert_eq!(e.source_stats(tenant, source).unwrap(), want, "tenant {tenant}, source {source}");
    }
    expected
}

#[test]
fn an_assertion_counts_for_its_source_only() {
    let e = engine();
    assert_eq!(stats(&e, "connector:hr-feed"), SourceStats::default(), "unknown tenant");
    e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:acme").source("connector:hr-feed")).unwrap();
    e.assert(TENANT, FactInput::new(SARAH, "knows", "Person:tom").source("connector:hr-feed")).unwrap();
    e.assert(TENANT, FactInput::new(SARAH, "age", 41)).unwrap();
    e.assert("other", FactInput::new(SARAH, "age", 41).source("connector:hr-feed")).unwrap();

    let hr = stats(&e, "connector:hr-feed");
    assert_eq!(hr, counts(2, 0, 0, 0));
    assert_eq!((hr.live(), hr.total()), (2, 2));
    // Exact match only: no prefix or extension of a source shares its counts.
    assert_eq!(stats(&e, "connector:hr"), SourceStats::default());
    assert_eq!(stats(&e, "connector:hr-feed2"), SourceStats::default());
    assert_eq!(stats(&e, "unknown"), SourceStats::default());
    assert_eq!(e.source_stats("other", "connector:hr-feed").unwrap(), counts(1, 0, 0, 0));
    assert_eq!(e.source_stats("nobody", "connector:hr-feed").unwrap(), SourceStats::default());
    // The fact without a source is in the tenant's stats, not in any source's.
    assert_eq!(e.stats(TENANT).active, 3);
    assert_matches_recount(&e, TENANT, &[]);
}

#[test]
fn supersession_moves_the_old_source_from_active_to_superseded() {
    let e = engine();
    e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:acme").valid_from(T2020).source("hr")).unwrap();
    let globex =
        e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:globex").valid_from(T2024).source("crm")).unwrap();
    assert_eq!(globex.superseded.len(), 1);
    assert_eq!(stats(&e, "hr"), counts(0, 0, 1, 0));
    assert_eq!(stats(&e, "crm"), counts(1, 0, 0, 0));

    // A bounded assertion inside globex's interval cuts it in two: globex is
    // superseded and its tail, with globex's source, stays active.
    let initech = FactInput::new(SARAH, "works_at", "Org:initech").valid_from(T2025).valid_until(T2026);
    let cut = e.assert(TENANT, initech.source("manual")).unwrap();
    assert_eq!(cut.continued.len(), 1);
    assert_eq!(cut.continued[0].source.as_deref(), Some("crm"));
    assert_eq!(stats(&e, "crm"), counts(1, 0, 1, 0));
    assert_eq!(stats(&e, "manual"), counts(1, 0, 0, 0));
    assert_eq!(stats(&e, "hr"), counts(0, 0, 1, 0));

    // Re-asserting from the same source supersedes its own fact.
    e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:hooli").valid_from(T2026).source("crm")).unwrap();
    assert_eq!(stats(&e, "crm"), counts(1, 0, 2, 0));
    assert_matches_recount(&e, TENANT, &["hr", "crm", "manual"]);
}

#[test]
fn retraction_moves_a_fact_to_retracted_once() {
    let e = engine();
    let acme = e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:acme").valid_from(T2020).source("hr")).unwrap();
    let globex =
        e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:globex").valid_from(T2024).source("hr")).unwrap();
    assert_eq!(stats(&e, "hr"), counts(1, 0, 1, 0));

    e.retract(TENANT, globex.fact.id).unwrap();
    assert_eq!(stats(&e, "hr"), counts(0, 0, 1, 1));
    // A superseded fact can be retracted too.
    e.retract(TENANT, acme.fact.id).unwrap();
    assert_eq!(stats(&e, "hr"), counts(0, 0, 0, 2));
    // Retracting again changes nothing.
    e.retract(TENANT, acme.fact.id).unwrap();
    assert_eq!(stats(&e, "hr"), counts(0, 0, 0, 2));
    assert_eq!(stats(&e, "hr").live(), 0);
    assert_matches_recount(&e, TENANT, &["hr"]);
}

#[test]
fn candidates_are_counted_as_candidates_and_keep_their_standing() {
    let e = engine();
    // Below the default threshold of 0.75: a candidate.
    let guess =
        e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:acme").confidence(0.5).source("guesser")).unwrap();
    assert_eq!(guess.fact.status, Status::Candidate);
    assert_eq!(stats(&e, "guesser"), counts(0, 1, 0, 0));
    assert_eq!(stats(&e, "guesser").live(), 1);

    // An active fact on the same key supersedes no candidate.
    let sure = e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:globex").source("hr")).unwrap();
    assert!(sure.superseded.is_empty());
    assert_eq!(e.get(TENANT, guess.fact.id, None).unwrap().unwrap().status, Status::Candidate);
    assert_eq!(stats(&e, "guesser"), counts(0, 1, 0, 0));

    // A candidate can be retracted.
    e.retract(TENANT, guess.fact.id).unwrap();
    assert_eq!(stats(&e, "guesser"), counts(0, 0, 0, 1));

    // Under a lower threshold the same confidence makes an active fact, which
    // a later fact then supersedes.
    e.set_threshold(TENANT, 0.4).unwrap();
    let now =
        e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:initech").confidence(0.5).source("guesser")).unwrap();
    assert_eq!(now.fact.status, Status::Active);
    assert_eq!(stats(&e, "guesser"), counts(1, 0, 0, 1));
    assert_eq!(stats(&e, "hr"), counts(0, 0, 1, 0));
    e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:hooli").source("hr")).unwrap();
    assert_eq!(stats(&e, "guesser"), counts(0, 0, 1, 1));
    assert_eq!(stats(&e, "hr"), counts(1, 0, 1, 0));
    assert_matches_recount(&e, TENANT, &["guesser", "hr"]);
}

#[test]
fn a_failed_request_leaves_the_counts_unchanged() {
    let e = engine();
    e.set_cardinality(TENANT, "born_in", Cardinality::Strict).unwrap();
    e.assert(TENANT, FactInput::new(SARAH, "born_in", "Place:paris").source("registry")).unwrap();
    e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:acme").source("hr")).unwrap();
    let before = (stats(&e, "registry"), stats(&e, "hr"), stats(&e, "new"), e.stats(TENANT));

    // The first two operations supersede an `hr` fact and count for a source
    // never seen; the third is a strict conflict, so none of it happens.
    let err = e
        .write(
            TENANT,
            vec![
                WriteOp::Assert(FactInput::new(SARAH, "works_at", "Org:globex").source("new")),
                WriteOp::Assert(FactInput::new("Person:tom", "age", 41).source("new")),
                WriteOp::Assert(FactInput::new(SARAH, "born_in", "Place:london").source("registry")),
            ],
        )
        .unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)), "{err:?}");
    assert_eq!((stats(&e, "registry"), stats(&e, "hr"), stats(&e, "new"), e.stats(TENANT)), before);

    // The writer's cached counts were rolled back too: the next write counts
    // from the committed values.
    e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:globex").source("new")).unwrap();
    assert_eq!(stats(&e, "new"), counts(1, 0, 0, 0));
    assert_eq!(stats(&e, "hr"), counts(0, 0, 1, 0));
    assert_matches_recount(&e, TENANT, &["registry", "hr", "new"]);
}

#[test]
fn failed_requests_inside_commit_groups_are_undone() {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(at(dir.path()));
    const STRICT: &str = "born_in";
    e.set_cardinality(TENANT, STRICT, Cardinality::Strict).unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|w| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                let mut rng = Rng(w + 1);
                let mut conflicts = 0;
                for k in 0..60 {
                    let subject = format!("Person:{}", rng.below(4));
                    let source = format!("src:{}", rng.below(5));
                    let job = FactInput::new(subject.clone(), "works_at", json!(format!("Org:{w}-{k}")));
                    let mut ops = vec![WriteOp::Assert(job.source(source.clone()))];
                    if rng.below(2) == 0 {
                        // Often a strict conflict, which fails the whole request.
                        let place = json!(format!("Place:{}", rng.below(2)));
                        ops.push(WriteOp::Assert(FactInput::new(subject, STRICT, place).source(source)));
                    }
                    match e.write(TENANT, ops) {
                        Ok(_) => {}
                        Err(EngineError::Conflict(_)) => conflicts += 1,
                        Err(other) => panic!("{other:?}"),
                    }
                }
                conflicts
            })
        })
        .collect();
    let conflicts: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(conflicts > 0, "the test means to exercise failed requests");
    let sources: Vec<String> = (0..5).map(|i| format!("src:{i}")).collect();
    let names: Vec<&str> = sources.iter().map(String::as_str).collect();
    let expected = assert_matches_recount(&e, TENANT, &names);
    let tenant = e.stats(TENANT);
    let sum = expected.values().fold(SourceStats::default(), |a, s| SourceStats {
        active: a.active + s.active,
        candidate: a.candidate + s.candidate,
        superseded: a.superseded + s.superseded,
        retracted: a.retracted + s.retracted,
    });
    // Every fact of this test has a source.
    assert_eq!(
        (sum.active, sum.candidate, sum.superseded, sum.retracted),
        (tenant.active, tenant.candidate, tenant.superseded, tenant.retracted)
    );

    drop(e);
    let e = at(dir.path());
    assert_matches_recount(&e, TENANT, &names);
}

#[test]
fn counts_survive_close_and_reopen_and_keep_counting() {
    let dir = tempfile::tempdir().unwrap();
    let first;
    {
        let e = at(dir.path());
        first = e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:acme").source("hr")).unwrap();
        e.assert(TENANT, FactInput::new(SARAH, "knows", "Person:tom").confidence(0.1).source("hr")).unwrap();
        e.assert("other", FactInput::new(SARAH, "knows", "Person:tom").source("hr")).unwrap();
        e.close();
    }
    let e = at(dir.path());
    assert_eq!(e.format_found(), CURRENT_FORMAT);
    assert_eq!(stats(&e, "hr"), counts(1, 1, 0, 0));
    assert_eq!(e.source_stats("other", "hr").unwrap(), counts(1, 0, 0, 0));
    // The writer of this lifetime loads the stored counts and moves on from them.
    e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:globex").source("crm")).unwrap();
    assert_eq!(stats(&e, "hr"), counts(0, 1, 1, 0));
    e.retract(TENANT, first.fact.id).unwrap();
    assert_eq!(stats(&e, "hr"), counts(0, 1, 0, 1));
    drop(e);
    let e = at(dir.path());
    assert_eq!(stats(&e, "hr"), counts(0, 1, 0, 1));
    assert_eq!(stats(&e, "crm"), counts(1, 0, 0, 0));
    assert_matches_recount(&e, TENANT, &["hr", "crm"]);
}

#[test]
fn many_sources_are_counted_apart() {
    const N: usize = 3000;
    let dir = tempfile::tempdir().unwrap();
    let e = at(dir.path());
    // Names that are prefixes of one another: "connector:1", "connector:10", ...
    let source = |i: usize| format!("connector:{i}");
    let inputs: Vec<FactInput> = (0..N)
        .map(|i| FactInput::new(format!("Doc:{i}"), "title", json!(format!("t{i}"))).source(source(i)))
        .collect();
    e.assert_batch(TENANT, inputs).unwrap();
    // Every third document gets a new title from one shared source.
    let again: Vec<FactInput> = (0..N)
        .step_by(3)
        .map(|i| FactInput::new(format!("Doc:{i}"), "title", json!(format!("u{i}"))).source("editor"))
        .collect();
    e.assert_batch(TENANT, again).unwrap();
    let expect = |i: usize| if i.is_multiple_of(3) { counts(0, 0, 1, 0) } else { counts(1, 0, 0, 0) };
    for i in 0..N {
        assert_eq!(stats(&e, &source(i)), expect(i), "{}", source(i));
    }
    assert_eq!(stats(&e, "editor"), counts(N.div_ceil(3) as u64, 0, 0, 0));
    drop(e);
    let e = at(dir.path());
    for i in 0..N {
        assert_eq!(stats(&e, &source(i)), expect(i), "{}", source(i));
    }
    assert_eq!(recount(&e, TENANT).len(), N + 1);
}

// ---- format 2 -> 3 --------------------------------------------------------------

/// Turns a store written by this build into the store format 2 would have
/// written: the same data without the per-source counters (`meta` keys under
/// `0x08`) and with format marker 2.
fn downgrade_to_format_2(dir: &Path) {
    let config = tempora_storage::EngineConfig::default().cache_bytes(1 << 20);
    let kv = tempora_storage::Backend::found_in(dir).expect("a store").open(dir, &config).unwrap();
    let mut b = WriteBatch::default();
    let mut removed = 0;
    for item in scan_prefix(kv.as_ref(), Keyspace::Meta, &[0x08], false) {
        let (k, _) = item.unwrap();
        b.delete(Keyspace::Meta, k);
        removed += 1;
    }
    assert!(removed > 0, "the store had source counters to remove");
    // Format 2 stored whole facts (format 4 leaves out what the key holds).
    let mut names = BTreeMap::new();
    for item in scan_prefix(kv.as_ref(), Keyspace::Meta, &[0x04], false) {
        let (k, v) = item.unwrap();
        let id = u32::from_be_bytes(k[1..5].try_into().unwrap());
        names.insert(id, record::decode::<String>(&v).unwrap());
    }
    for item in scan_prefix(kv.as_ref(), Keyspace::Versions, &[], false) {
        let (k, v) = item.unwrap();
        b.put(Keyspace::Versions, k.clone(), record::encode(&fact_record::decode_version(&k, &v).unwrap()));
    }
    for ks in [Keyspace::Sp, Keyspace::Closed] {
        for item in scan_prefix(kv.as_ref(), ks, &[], false) {
            let (k, v) = item.unwrap();
            let tenant = &names[&tempora_storage::keys::tenant_of_index_key(&k).unwrap()];
            let fact = fact_record::decode_indexed(tenant, &k, &v).unwrap();
            b.put(ks, k, record::encode(&fact));
        }
    }
    b.delete(Keyspace::Meta, vec![0x09]);
    // Record version byte 1, then MessagePack 2 (a positive fixint).
    b.put(Keyspace::Meta, vec![0x01], vec![0x01, 2]);
    kv.apply(b).unwrap();
    kv.sync().unwrap();
}

#[test]
fn a_format_2_store_gets_its_source_counts_from_the_migration() {
    let dir = tempfile::tempdir().unwrap();
    let (expected_default, expected_acme);
    {
        let e = at(dir.path());
        e.set_cardinality(TENANT, "knows", Cardinality::Many).unwrap();
        e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:acme").valid_from(T2020).source("hr")).unwrap();
        e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:globex").valid_from(T2024).source("crm")).unwrap();
        // A bounded takeover leaves a tail of crm's fact: closed and live
        // facts of one source, under one subject and predicate.
        e.assert(
            TENANT,
            FactInput::new(SARAH, "works_at", "Org:initech").valid_from(T2025).valid_until(T2026).source("hr"),
        )
        .unwrap();
        let tom = e.assert(TENANT, FactInput::new(SARAH, "knows", "Person:tom").source("hr")).unwrap();
        e.assert(TENANT, FactInput::new(SARAH, "knows", "Person:ann").source("h")).unwrap();
        e.assert(TENANT, FactInput::new("Person:tom", "age", 41).confidence(0.5).source("crm")).unwrap();
        e.assert(TENANT, FactInput::new("Person:tom", "age", 42)).unwrap();
        e.retract(TENANT, tom.fact.id).unwrap();
        let gone = e.assert("acme", FactInput::new("Org:acme", "hq", "Paris").source("hr")).unwrap();
        e.retract("acme", gone.fact.id).unwrap();
        e.assert("acme", FactInput::new("Org:acme", "hq", "Lyon").source("hr")).unwrap();
        expected_default = assert_matches_recount(&e, TENANT, &[]);
        expected_acme = assert_matches_recount(&e, "acme", &[]);
        e.close();
    }
    assert_eq!(expected_default["hr"], counts(1, 0, 1, 1));
    assert_eq!(expected_default["crm"], counts(1, 1, 1, 0));
    assert_eq!(expected_acme["hr"], counts(1, 0, 0, 1));

    downgrade_to_format_2(dir.path());
    {
        let e = at(dir.path());
        assert_eq!(e.format_found(), 2);
        for (tenant, expected) in [(TENANT, &expected_default), ("acme", &expected_acme)] {
            for (source, want) in expected {
                assert_eq!(&e.source_stats(tenant, source).unwrap(), want, "{tenant} {source} after migration");
            }
        }
        // The migrated counters are where the writer goes on counting.
        e.assert(TENANT, FactInput::new(SARAH, "works_at", "Org:hooli").valid_from(T2026).source("hr")).unwrap();
        assert_eq!(stats(&e, "crm"), counts(0, 1, 2, 0));
        assert_eq!(stats(&e, "hr"), counts(2, 0, 1, 1));
        assert_matches_recount(&e, TENANT, &["hr", "crm", "h"]);
        e.close();
    }
    let e = at(dir.path());
    assert_eq!(e.format_found(), CURRENT_FORMAT);
    assert_matches_recount(&e, TENANT, &["hr", "crm", "h"]);
    assert_matches_recount(&e, "acme", &["hr"]);
}

// ---- against a recount, under random operations ----------------------------

const SOURCES: [Option<&str>; 4] = [None, Some("s:a"), Some("s:ab"), Some("s:b")];
const SUBJECTS: [&str; 2] = ["E:a", "E:b"];
const PREDICATES: [&str; 2] = ["p", "q"];

/// One assertion: indexes of subject, predicate, object, source and
/// confidence, then `valid_from` and `valid_until`.
type GenInput = (usize, usize, u8, usize, u8, i64, Option<i64>);

#[derive(Debug, Clone)]
enum Op {
    /// One request of one or more assertions (of tenant `t`).
    Assert { t: usize, inputs: Vec<GenInput> },
    /// Retract the `n`th fact seen so far (modulo their number).
    Retract { t: usize, n: usize },
    Threshold { t: usize, v: u8 },
    Cardinality { t: usize, p: usize, c: u8 },
}

fn input() -> impl Strategy<Value = GenInput> {
    (0..2usize, 0..2usize, 0..3u8, 0..4usize, 0..3u8, 0..6i64, prop::option::of(1..4i64))
        .prop_map(|(s, p, o, src, conf, from, len)| (s, p, o, src, conf, from, len.map(|l| from + l)))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..2usize, prop::collection::vec(input(), 1..=3)).prop_map(|(t, inputs)| Op::Assert { t, inputs }),
        2 => (0..2usize, any::<usize>()).prop_map(|(t, n)| Op::Retract { t, n }),
        1 => (0..2usize, 0..3u8).prop_map(|(t, v)| Op::Threshold { t, v }),
        1 => (0..2usize, 0..2usize, 0..3u8).prop_map(|(t, p, c)| Op::Cardinality { t, p, c }),
    ]
}

const PT_TENANTS: [&str; 2] = ["t0", "t1"];

fn run(e: &Engine, op: &Op, seen: &mut [Vec<FactId>; 2]) {
    let result = match op {
        Op::Assert { t, inputs } => {
            let ops = inputs
                .iter()
                .map(|&(s, p, o, src, conf, from, until)| {
                    let mut f = FactInput::new(SUBJECTS[s], PREDICATES[p], json!(format!("O:{o}"))).valid_from(from);
                    f.valid_until = until;
                    f.source = SOURCES[src].map(str::to_string);
                    f.confidence = [None, Some(0.5), Some(0.8)][conf as usize];
                    WriteOp::Assert(f)
                })
                .collect();
            e.write(PT_TENANTS[*t], ops).map(|out| {
                for o in out.outcomes {
                    if let tempora_storage::OpOutcome::Asserted(a) = o {
                        seen[*t].push(a.fact.id);
                        seen[*t].extend(a.continued.iter().map(|f| f.id));
                    }
                }
            })
        }
        Op::Retract { t, n } => match seen[*t].len() {
            0 => Ok(()),
            len => e.retract(PT_TENANTS[*t], seen[*t][n % len]).map(|_| ()),
        },
        Op::Threshold { t, v } => e.set_threshold(PT_TENANTS[*t], [0.4, 0.75, 0.9][*v as usize]),
        Op::Cardinality { t, p, c } => {
            let c = [Cardinality::One, Cardinality::Many, Cardinality::Strict][*c as usize];
            e.set_cardinality(PT_TENANTS[*t], PREDICATES[*p], c).map(|_| ())
        }
    };
    match result {
        Ok(()) | Err(EngineError::Conflict(_)) => {}
        Err(other) => panic!("{op:?}: {other:?}"),
    }
}

fn check(e: &Engine) {
    let names: Vec<&str> = SOURCES.iter().flatten().copied().collect();
    for t in PT_TENANTS {
        assert_matches_recount(e, t, &names);
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn source_counts_match_a_recount(ops in prop::collection::vec(op(), 1..=30)) {
        let dir = tempfile::tempdir().unwrap();
        let mut seen = [Vec::new(), Vec::new()];
        {
            let e = at(dir.path());
            for op in &ops {
                run(&e, op, &mut seen);
                check(&e);
            }
            e.close();
        }
        // And from the store alone, after a reopen.
        let e = at(dir.path());
        check(&e);
        run(&e, &Op::Retract { t: 0, n: 0 }, &mut seen);
        check(&e);
    }
}
