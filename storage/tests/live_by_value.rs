//! `idx_spo`, the live facts of `many` predicates by value (format 8 kept
//! every live fact, format 9 those of `many` predicates): after any sequence
//! of asserts (new values, reassertions, takeovers under every cardinality,
//! bounded intervals that leave tails, candidates), retracts and cardinality
//! changes to and from `many`, in transactions of one or several
//! operations, it holds exactly one key per live fact of a predicate that is
//! `many` then, on both backends; and a store of format 7 gets it built on
//! open and then reasserts a `many` value as before.

mod common;

use common::{every_fact, Rng};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::ops::Bound;
use std::path::Path;
use tempora_storage::kv::{Keyspace, OrderedKv, WriteBatch};
use tempora_storage::*;

const TENANTS: [&str; 2] = ["a", "b"];
const SUBJECTS: [&str; 3] = ["E:1", "E:2", "User:me"];
const PREDICATES: [&str; 3] = ["p", "q", "said"];

fn values() -> Vec<Value> {
    vec![
        json!("x"),
        json!("y"),
        json!(1),
        json!({"k": [1, 2], "a": null}),
        // Longer than an object key holds inline: keyed by its hash.
        json!("long ".repeat(40)),
        json!("long ".repeat(41)),
    ]
}

fn raw(dir: &Path) -> std::sync::Arc<dyn OrderedKv> {
    let config = EngineConfig::default().cache_bytes(1 << 20);
    Backend::found_in(dir).expect("a store").open(dir, &config).unwrap()
}

fn spo_keys(kv: &dyn OrderedKv) -> BTreeSet<Vec<u8>> {
    kv.scan(Keyspace::Spo, Bound::Unbounded, Bound::Unbounded, false).map(|i| i.unwrap().0).collect()
}

/// The live facts of every tenant (latest versions, through the query path).
fn live_facts(e: &Engine) -> Vec<Fact> {
    let mut out = Vec::new();
    for tenant in TENANTS {
        out.extend(every_fact(e, tenant, None).into_iter().filter(|f| matches!(f.status, Status::Active | Status::Candidate)));
    }
    out
}

/// The live facts whose predicate is `many` in their tenant now: what
/// `idx_spo` holds.
fn by_value(e: &Engine, live: &[Fact]) -> Vec<Fact> {
    let many = |tenant: &str, predicate: &str| {
        e.predicates(tenant).unwrap().iter().any(|p| p.name == predicate && p.cardinality == Cardinality::Many)
    };
    live.iter().filter(|f| many(&f.tenant, &f.predicate)).cloned().collect()
}

/// The `idx_spo` keys `live` calls for, the tenant ids read from `kv`.
fn expected(kv: &dyn OrderedKv, live: &[Fact]) -> BTreeSet<Vec<u8>> {
    let tid = |name: &str| -> u32 {
        record::decode(&kv.get(Keyspace::Meta, &keys::meta::tenant_by_name(name)).unwrap().expect("a tenant")).unwrap()
    };
    live.iter().map(|f| keys::spo(tid(&f.tenant), &f.subject, &f.predicate, &f.object, f.id)).collect()
}

/// Runs `steps` random transactions against a store of `backend` in `dir`,
/// then compares `idx_spo` with the live facts.
fn random_history(dir: &Path, backend: Backend, seed: u64, steps: usize) {
    let values = values();
    let mut rng = Rng(seed);
    let mut ids: Vec<(&str, FactId)> = Vec::new();
    {
        let e = Engine::open(EngineConfig::at(dir).backend(backend).durability(Durability::Relaxed)).unwrap();
        for tenant in TENANTS {
            e.set_cardinality(tenant, "said", Cardinality::Many).unwrap();
        }
        for _ in 0..steps {
            let tenant = *rng.pick(&TENANTS);
            let mut ops = Vec::new();
            for _ in 0..=rng.below(3) {
                let op = match rng.below(20) {
                    0 => WriteOp::SetCardinality {
                        predicate: rng.pick(&PREDICATES[..2]).to_string(),
                        cardinality: *rng.pick(&[Cardinality::One, Cardinality::Many, Cardinality::Many, Cardinality::Strict]),
                    },
                    1..=3 if !ids.is_empty() => {
                        let (t, id) = ids[rng.below(ids.len() as u64) as usize];
                        if t != tenant {
                            continue;
                        }
                        WriteOp::Retract(id)
                    }
                    _ => {
                        let mut input =
                            FactInput::new(*rng.pick(&SUBJECTS), *rng.pick(&PREDICATES), rng.pick(&values).clone());
                        match rng.below(8) {
                            0 => input = input.confidence(0.1),
                            1 => input = input.valid_from(rng.below(5) as i64 * 1000),
                            2 => {
                                let from = rng.below(5) as i64 * 1000;
                                input = input.valid_from(from).valid_until(from + 1 + rng.below(3000) as i64);
                            }
                            _ => {}
                        }
                        WriteOp::Assert(input)
                    }
                };
                ops.push(op);
            }
            // A strict predicate may refuse a write: nothing of it is stored.
            if let Ok(out) = e.write(tenant, ops) {
                for o in out.outcomes {
                    if let OpOutcome::Asserted(a) = o {
                        ids.push((tenant, a.fact.id));
                        ids.extend(a.continued.iter().map(|f| (tenant, f.id)));
                    }
                }
            }
        }
        e.close();
    }
    let e = Engine::open(EngineConfig::at(dir).backend(backend)).unwrap();
    let all_live = live_facts(&e);
    let live = by_value(&e, &all_live);
    e.close();
    drop(e);
    let kv = raw(dir);
    let (got, want) = (spo_keys(kv.as_ref()), expected(kv.as_ref(), &live));
    assert!(!want.is_empty());
    assert!(want.len() < all_live.len(), "some live facts are not of a many predicate (seed {seed})");
    assert_eq!(got.len(), want.len(), "idx_spo holds {} keys for {} live facts (seed {seed})", got.len(), want.len());
    assert_eq!(got, want, "seed {seed}");
}

#[test]
fn idx_spo_holds_exactly_the_live_facts_on_redb() {
    for seed in 0..6 {
        let tmp = tempfile::tempdir().unwrap();
        random_history(tmp.path(), Backend::Redb, seed, 300);
    }
}

#[test]
fn idx_spo_holds_exactly_the_live_facts_on_sled() {
    for seed in 100..104 {
        let tmp = tempfile::tempdir().unwrap();
        random_history(tmp.path(), Backend::Sled, seed, 300);
    }
}

/// A reassertion of a `many` value takes over its one live copy, whatever
/// the value's history and the pair's size.
#[test]
fn a_value_reasserted_often_among_many_supersedes_its_one_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::open(EngineConfig::at(tmp.path()).durability(Durability::Relaxed)).unwrap();
    e.set_cardinality("a", "said", Cardinality::Many).unwrap();
    e.assert_batch("a", (0..50).map(|i| FactInput::new("User:me", "said", json!(format!("turn {i}")))).collect())
        .unwrap();
    for round in 0..30 {
        // Twice in one transaction too: the second takes over the first.
        let (_, out) = e
            .assert_batch("a", vec![FactInput::new("User:me", "said", json!("turn 7")), FactInput::new("User:me", "said", json!("turn 7"))])
            .unwrap();
        assert_eq!(out[0].superseded.len(), 1, "round {round}");
        assert_eq!(out[1].superseded.len(), 1, "round {round}");
        assert_eq!(out[1].superseded[0].id, out[0].fact.id);
    }
    let q = FactQuery { subject: Some("User:me".into()), predicate: Some("said".into()), limit: MAX_PAGE, ..Default::default() };
    let now = e.query("a", &q).unwrap().facts;
    assert_eq!(now.len(), 50);
    assert_eq!(now.iter().filter(|f| f.object == json!("turn 7")).count(), 1);
}

/// A store of format 7 has no `idx_spo`: opening it builds one from the live
/// facts (and drops keys left there by a build cut short), after which a
/// `many` value reasserted supersedes its live copy as before.
#[test]
fn a_format_7_store_gets_idx_spo_on_open_and_reasserts_as_before() {
    for backend in [Backend::Redb, Backend::Sled] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        random_history(dir, backend, 7, 200);
        let live_before = {
            let e = Engine::open(EngineConfig::at(dir)).unwrap();
            let mut b = Vec::new();
            for _ in 0..20 {
                b.push(FactInput::new("User:me", "said", json!("again")));
            }
            e.assert_batch("a", b).unwrap();
            let live = live_facts(&e);
            e.close();
            live
        };
        // Back to format 7: no `idx_spo`, but for a stale key a format-8
        // build cut short may have left behind.
        {
            let kv = raw(dir);
            let mut b = WriteBatch::default();
            for k in spo_keys(kv.as_ref()) {
                b.delete(Keyspace::Spo, k);
            }
            b.put(Keyspace::Spo, keys::spo(1, "User:me", "said", &json!("stale"), uuid::Uuid::now_v7()), Vec::new());
            b.put(Keyspace::Meta, keys::meta::FORMAT.to_vec(), record::encode(&7u32));
            kv.apply(b).unwrap();
            kv.sync().unwrap();
        }
        let e = Engine::open(EngineConfig::at(dir)).unwrap();
        assert_eq!(e.format_found(), 7);
        assert_eq!(live_facts(&e), live_before);
        let q = FactQuery { subject: Some("User:me".into()), predicate: Some("said".into()), limit: MAX_PAGE, ..Default::default() };
        let again = |e: &Engine| e.query("a", &q).unwrap().facts.into_iter().filter(|f| f.object == json!("again")).collect::<Vec<_>>();
        let copy = again(&e);
        assert_eq!(copy.len(), 1, "{backend:?}");
        let out = e.assert("a", FactInput::new("User:me", "said", json!("again"))).unwrap();
        assert_eq!(out.superseded.iter().map(|f| f.id).collect::<Vec<_>>(), [copy[0].id], "{backend:?}");
        assert_eq!(again(&e).len(), 1);
        let live = by_value(&e, &live_facts(&e));
        e.close();
        drop(e);
        let kv = raw(dir);
        assert_eq!(spo_keys(kv.as_ref()), expected(kv.as_ref(), &live), "{backend:?}");
    }
}
