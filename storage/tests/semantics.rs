//! The bitemporal contract of PRODUCT.md section 3, told as named examples
//! through the public [`Engine`] API.
//!
//! Each test opens its own temporary engine. Valid times are unix
//! milliseconds of real dates so the examples read like the product text.
//! Tests that need distinct record times (`as_of` by time, a clock that
//! steps back) drive the engine with their own clock through
//! [`Engine::open_with_clock`].

use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use tempora_storage::{
    AsOf, Asserted, Cardinality, ChangeEvent, Engine, EngineConfig, EngineError, Fact, FactId, FactInput,
    FactQuery, OpOutcome, Status, StatusFilter, TenantStats, WriteOp,
};

const T2020: i64 = 1_577_836_800_000; // 2020-01-01
const T2021: i64 = 1_609_459_200_000; // 2021-01-01
const T2022: i64 = 1_640_995_200_000; // 2022-01-01
const T2022_5: i64 = 1_656_633_600_000; // 2022-07-01
const T2023: i64 = 1_672_531_200_000; // 2023-01-01
const T2024: i64 = 1_704_067_200_000; // 2024-01-01
const T2025: i64 = 1_735_689_600_000; // 2025-01-01

const TENANT: &str = "default";
const SARAH: &str = "Person:sarah";

fn engine() -> Engine {
    Engine::open(EngineConfig::temporary()).expect("a temporary engine opens")
}

fn works_at(org: &str, from: i64) -> FactInput {
    FactInput::new(SARAH, "works_at", org).valid_from(from)
}

fn about(subject: &str) -> FactQuery {
    FactQuery { subject: Some(subject.into()), ..Default::default() }
}

fn query(e: &Engine, tenant: &str, q: FactQuery) -> Vec<Fact> {
    let page = e.query(tenant, &q).expect("query");
    assert!(page.next_cursor.is_none(), "examples fit in one page");
    page.facts
}

fn objects(facts: &[Fact]) -> Vec<Value> {
    let mut v: Vec<Value> = facts.iter().map(|f| f.object.clone()).collect();
    v.sort_by_key(|o| o.to_string());
    v
}

fn latest(e: &Engine, id: FactId) -> Fact {
    e.get(TENANT, id, None).expect("get").expect("the fact exists")
}

fn ids(facts: &[Fact]) -> Vec<FactId> {
    let mut v: Vec<FactId> = facts.iter().map(|f| f.id).collect();
    v.sort();
    v
}

// ---- the worked example ------------------------------------------------------

/// A clock only the worked example moves, so its two writes get distinct
/// record times and `as_of` by time can land between them.
static WORKED_CLOCK: AtomicI64 = AtomicI64::new(T2025);
fn worked_clock() -> i64 {
    WORKED_CLOCK.load(Ordering::SeqCst)
}

#[test]
fn worked_example_new_employer_supersedes_the_old_one() {
    let e = Engine::open_with_clock(EngineConfig::temporary(), worked_clock).unwrap();
    WORKED_CLOCK.store(T2025, Ordering::SeqCst);
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    WORKED_CLOCK.store(T2025 + 1_000, Ordering::SeqCst);
    let globex = e.assert(TENANT, works_at("Org:globex", T2024)).unwrap();
    assert!(globex.fact.tx > acme.fact.tx);
    assert_eq!(acme.fact.recorded_at, T2025);
    assert_eq!(globex.fact.recorded_at, T2025 + 1_000);

    // Now: globex is active; acme is superseded, closed at 2024, linked both ways.
    let g = latest(&e, globex.fact.id);
    assert_eq!(g.status, Status::Active);
    assert_eq!((g.valid_from, g.valid_until), (T2024, None));
    assert_eq!(g.supersedes, vec![acme.fact.id]);
    let a = latest(&e, acme.fact.id);
    assert_eq!(a.status, Status::Superseded);
    assert_eq!((a.valid_from, a.valid_until), (T2020, Some(T2024)));
    assert_eq!(a.superseded_by, Some(globex.fact.id));
    assert_eq!(a.tx, globex.fact.tx, "the closing version is stamped with the superseding write");
    assert_eq!(globex.superseded, vec![a.clone()]);
    assert!(globex.continued.is_empty(), "an open-ended takeover leaves no tail");

    let now = query(&e, TENANT, about(SARAH));
    assert_eq!(objects(&now), vec![json!("Org:globex")]);

    // valid_at 2022 answers acme (a superseded fact still covers what it kept).
    let in_2022 = query(&e, TENANT, FactQuery { valid_at: Some(T2022), ..about(SARAH) });
    assert_eq!(ids(&in_2022), vec![acme.fact.id]);
    assert_eq!(in_2022[0].status, Status::Superseded);
    // valid_at 2024 (the boundary) and later answers globex only.
    let in_2024 = query(&e, TENANT, FactQuery { valid_at: Some(T2024), ..about(SARAH) });
    assert_eq!(ids(&in_2024), vec![globex.fact.id]);

    // as_of between the two writes: acme active and open-ended, no globex yet.
    for as_of in [AsOf::Tx(acme.fact.tx), AsOf::Time(T2025 + 500)] {
        let then = query(&e, TENANT, FactQuery { as_of: Some(as_of), ..about(SARAH) });
        assert_eq!(then.len(), 1, "{as_of:?}");
        assert_eq!(then[0].id, acme.fact.id);
        assert_eq!(then[0].status, Status::Active);
        assert_eq!(then[0].valid_until, None);
        assert_eq!(then[0].superseded_by, None);
        let got = e.get(TENANT, acme.fact.id, Some(as_of)).unwrap().unwrap();
        assert_eq!((got.status, got.valid_until), (Status::Active, None));
        assert_eq!(e.get(TENANT, globex.fact.id, Some(as_of)).unwrap(), None, "globex did not exist yet");
    }
    // Before the first write: nothing.
    assert!(query(&e, TENANT, FactQuery { as_of: Some(AsOf::Tx(0)), ..about(SARAH) }).is_empty());
    assert!(query(&e, TENANT, FactQuery { as_of: Some(AsOf::Time(T2025 - 1)), ..about(SARAH) }).is_empty());
    // as_of and valid_at together: record time after both writes, valid 2022.
    let both = query(
        &e,
        TENANT,
        FactQuery { as_of: Some(AsOf::Tx(globex.fact.tx)), valid_at: Some(T2022), ..about(SARAH) },
    );
    assert_eq!(ids(&both), vec![acme.fact.id]);
}

// ---- a bounded assertion cuts an interval in two ----------------------------------

#[test]
fn secondment_leaves_the_rest_of_the_old_interval_as_a_tail() {
    let e = engine();
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let globex = e.assert(TENANT, works_at("Org:globex", T2022).valid_until(T2023)).unwrap();

    assert_eq!(globex.superseded.len(), 1);
    assert_eq!(globex.continued.len(), 1);
    let tail = &globex.continued[0];
    assert_ne!(tail.id, acme.fact.id, "the tail is a new fact");
    assert_eq!(tail.status, Status::Active);
    assert_eq!(tail.object, json!("Org:acme"));
    assert_eq!((tail.valid_from, tail.valid_until), (T2023, None));
    assert_eq!(tail.continues, Some(acme.fact.id));
    assert_eq!(tail.tx, globex.fact.tx);

    let closed = latest(&e, acme.fact.id);
    assert_eq!(closed.status, Status::Superseded);
    assert_eq!((closed.valid_from, closed.valid_until), (T2020, Some(T2022)));
    assert_eq!(closed.superseded_by, Some(globex.fact.id));
    assert_eq!(closed.continued_by, vec![tail.id]);

    let at = |t: i64| query(&e, TENANT, FactQuery { valid_at: Some(t), ..about(SARAH) });
    // 2024: acme again, as the tail.
    assert_eq!(ids(&at(T2024)), vec![tail.id]);
    // Mid-2022: globex.
    assert_eq!(ids(&at(T2022_5)), vec![globex.fact.id]);
    // 2021: acme's superseded version, which still covers it.
    let in_2021 = at(T2021);
    assert_eq!(ids(&in_2021), vec![acme.fact.id]);
    assert_eq!(in_2021[0].status, Status::Superseded);
    // The boundaries: 2022 is globex's, 2023 is the tail's.
    assert_eq!(ids(&at(T2022)), vec![globex.fact.id]);
    assert_eq!(ids(&at(T2023)), vec![tail.id]);

    // Now (no valid_at): both active pieces, globex and the tail.
    assert_eq!(ids(&query(&e, TENANT, about(SARAH))), {
        let mut v = vec![globex.fact.id, tail.id];
        v.sort();
        v
    });

    // The chain is navigable both ways.
    let h = e.history(TENANT, acme.fact.id).unwrap();
    assert!(h.successors.contains(&globex.fact.id) && h.successors.contains(&tail.id));
    let th = e.history(TENANT, tail.id).unwrap();
    assert_eq!(th.predecessors, vec![acme.fact.id]);
}

#[test]
fn a_takeover_inside_an_interval_changes_nothing_outside_it() {
    let e = engine();
    // acme [2020, 2024), then globex over [2021, 2022): acme keeps [2020, 2021)
    // and a tail carries [2022, 2024).
    let acme = e.assert(TENANT, works_at("Org:acme", T2020).valid_until(T2024)).unwrap();
    let globex = e.assert(TENANT, works_at("Org:globex", T2021).valid_until(T2022)).unwrap();
    let tail = &globex.continued[0];
    assert_eq!((tail.valid_from, tail.valid_until), (T2022, Some(T2024)));
    assert_eq!(globex.superseded[0].valid_until, Some(T2021));
    // After 2024 nobody: the takeover did not extend acme.
    assert!(query(&e, TENANT, FactQuery { valid_at: Some(T2025), ..about(SARAH) }).is_empty());
    let _ = acme;

    // A takeover that covers an old interval entirely leaves it no instants:
    // it is closed with an empty interval (valid_until == valid_from) and no tail.
    let e = engine();
    let short = e.assert(TENANT, works_at("Org:acme", T2022).valid_until(T2023)).unwrap();
    let wide = e.assert(TENANT, works_at("Org:globex", T2020)).unwrap();
    assert!(wide.continued.is_empty());
    let closed = latest(&e, short.fact.id);
    assert_eq!((closed.valid_from, closed.valid_until), (T2022, Some(T2022)));
    assert!(closed.valid_until.unwrap() >= closed.valid_from, "no interval ends before it starts");
    assert_eq!(ids(&query(&e, TENANT, FactQuery { valid_at: Some(T2022_5), ..about(SARAH) })), vec![wide.fact.id]);
}

// ---- candidates ------------------------------------------------------------------

#[test]
fn a_backfilled_value_takes_over_what_a_superseded_fact_still_covered() {
    // acme from 2020, globex from 2024 (acme now covers [2020, 2024)), then the
    // correction "initech from 2022": initech takes over [2022, ∞) in the
    // valid-time view, so acme is cut back to [2020, 2022) and 2023 has one
    // answer, initech.
    let e = engine();
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let globex = e.assert(TENANT, works_at("Org:globex", T2024)).unwrap();
    let initech = e.assert(TENANT, works_at("Org:initech", T2022)).unwrap();

    let closed: Vec<_> = initech.superseded.iter().map(|f| (f.object.clone(), f.valid_until)).collect();
    assert!(closed.contains(&(json!("Org:acme"), Some(T2022))), "{closed:?}");
    assert!(closed.contains(&(json!("Org:globex"), Some(T2024))), "globex keeps an empty interval: {closed:?}");

    let at = |t| objects(&query(&e, TENANT, FactQuery { valid_at: Some(t), ..about(SARAH) }));
    assert_eq!(at(T2021), vec![json!("Org:acme")]);
    assert_eq!(at(T2023), vec![json!("Org:initech")]);
    assert_eq!(at(T2025), vec![json!("Org:initech")]);

    let acme_now = latest(&e, acme.fact.id);
    assert_eq!((acme_now.status, acme_now.valid_until), (Status::Superseded, Some(T2022)));
    assert_eq!(acme_now.superseded_by, Some(initech.fact.id), "the latest closer is named");
    let h = e.history(TENANT, acme.fact.id).unwrap();
    assert!(h.successors.contains(&globex.fact.id) && h.successors.contains(&initech.fact.id));
}

#[test]
fn a_bounded_backfill_inside_a_superseded_interval_leaves_a_superseded_tail() {
    // acme [2020, 2024) after globex from 2024; then initech for [2021, 2022):
    // acme keeps [2020, 2021), a superseded tail carries acme over [2022, 2024).
    let e = engine();
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let globex = e.assert(TENANT, works_at("Org:globex", T2024)).unwrap();
    let initech = e.assert(TENANT, works_at("Org:initech", T2021).valid_until(T2022)).unwrap();

    assert_eq!(initech.superseded.len(), 1);
    assert_eq!(initech.continued.len(), 1);
    let tail = &initech.continued[0];
    assert_eq!((tail.valid_from, tail.valid_until), (T2022, Some(T2024)));
    assert_eq!(tail.status, Status::Superseded);
    assert_eq!(tail.superseded_by, Some(globex.fact.id), "its end still comes from globex");
    assert_eq!(tail.continues, Some(acme.fact.id));

    let at = |t| objects(&query(&e, TENANT, FactQuery { valid_at: Some(t), ..about(SARAH) }));
    assert_eq!(at(T2020), vec![json!("Org:acme")]);
    assert_eq!(at(T2021), vec![json!("Org:initech")]);
    assert_eq!(at(T2022_5), vec![json!("Org:acme")]);
    assert_eq!(at(T2024), vec![json!("Org:globex")]);
    assert_eq!(objects(&query(&e, TENANT, about(SARAH))), vec![json!("Org:globex"), json!("Org:initech")]);
}

#[test]
fn candidates_supersede_nothing_and_are_never_superseded() {
    let e = engine();
    assert_eq!(e.threshold(TENANT), 0.75);
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let rumour = e.assert(TENANT, works_at("Org:globex", T2024).confidence(0.5)).unwrap();
    assert_eq!(rumour.fact.status, Status::Candidate);
    assert!(rumour.superseded.is_empty() && rumour.continued.is_empty() && rumour.fact.supersedes.is_empty());
    assert_eq!(latest(&e, acme.fact.id).status, Status::Active, "a candidate closes nothing");
    assert_eq!(latest(&e, acme.fact.id).valid_until, None);

    // The threshold is inclusive: exactly 0.75 is active.
    let exact = e.assert(TENANT, FactInput::new("Person:bob", "works_at", "Org:acme").valid_from(T2020).confidence(0.75)).unwrap();
    assert_eq!(exact.fact.status, Status::Active);

    // A confident assertion over the candidate's interval leaves it alone.
    let initech = e.assert(TENANT, works_at("Org:initech", T2023)).unwrap();
    assert_eq!(initech.superseded.iter().map(|f| f.id).collect::<Vec<_>>(), vec![acme.fact.id]);
    let r = latest(&e, rumour.fact.id);
    assert_eq!((r.status, r.valid_until, r.superseded_by), (Status::Candidate, None, None));

    // Candidates are not current; they are found by status.
    let current = query(&e, TENANT, about(SARAH));
    assert_eq!(ids(&current), vec![initech.fact.id]);
    let candidates = query(&e, TENANT, FactQuery { status: StatusFilter::Only(Status::Candidate), ..about(SARAH) });
    assert_eq!(ids(&candidates), vec![rumour.fact.id]);
    let in_2024 = query(&e, TENANT, FactQuery { valid_at: Some(T2024), ..about(SARAH) });
    assert_eq!(ids(&in_2024), vec![initech.fact.id], "a candidate is not current at any instant");
}

#[test]
fn the_candidate_threshold_is_set_per_tenant() {
    let e = engine();
    e.set_threshold(TENANT, 0.9).unwrap();
    assert_eq!(e.threshold(TENANT), 0.9);
    assert_eq!(e.threshold("other"), 0.75, "another tenant keeps the default");
    let a = e.assert(TENANT, works_at("Org:acme", T2020).confidence(0.8)).unwrap();
    assert_eq!(a.fact.status, Status::Candidate);
    let b = e.assert("other", works_at("Org:acme", T2020).confidence(0.8)).unwrap();
    assert_eq!(b.fact.status, Status::Active);

    e.set_threshold(TENANT, 0.3).unwrap();
    let c = e.assert(TENANT, works_at("Org:globex", T2024).confidence(0.4)).unwrap();
    assert_eq!(c.fact.status, Status::Active);
    // The older candidate stays a candidate: the threshold is applied at write time.
    assert_eq!(latest(&e, a.fact.id).status, Status::Candidate);
    assert!(c.superseded.is_empty());

    assert!(matches!(e.set_threshold(TENANT, 1.5), Err(EngineError::Invalid(_))));
    assert_eq!(e.threshold(TENANT), 0.3);
}

// ---- cardinality -----------------------------------------------------------------------

#[test]
fn many_lets_values_coexist_and_reasserting_a_value_supersedes_its_older_copy() {
    let e = engine();
    e.set_cardinality(TENANT, "knows", Cardinality::Many).unwrap();
    assert_eq!(e.predicate(TENANT, "knows").unwrap().cardinality, Cardinality::Many);
    assert_eq!(e.predicate(TENANT, "works_at").unwrap().cardinality, Cardinality::One, "default is one");
    let knows = |who: &str, from: i64| FactInput::new(SARAH, "knows", who).valid_from(from);

    let bob = e.assert(TENANT, knows("Person:bob", T2020)).unwrap();
    let eve = e.assert(TENANT, knows("Person:eve", T2021)).unwrap();
    assert!(eve.superseded.is_empty());
    let now = query(&e, TENANT, about(SARAH));
    assert_eq!(objects(&now), vec![json!("Person:bob"), json!("Person:eve")]);

    let bob2 = e.assert(TENANT, knows("Person:bob", T2022)).unwrap();
    assert_eq!(bob2.superseded.len(), 1);
    assert_eq!(bob2.superseded[0].id, bob.fact.id);
    assert_eq!(bob2.superseded[0].valid_until, Some(T2022));
    assert_eq!(latest(&e, eve.fact.id).status, Status::Active, "other values are untouched");
    assert_eq!(ids(&query(&e, TENANT, about(SARAH))), {
        let mut v = vec![eve.fact.id, bob2.fact.id];
        v.sort();
        v
    });
}

#[test]
fn strict_rejects_a_conflicting_value_and_writes_nothing() {
    let e = engine();
    e.set_cardinality(TENANT, "born_in", Cardinality::Strict).unwrap();
    let born = |place: &str, from: i64| FactInput::new(SARAH, "born_in", place).valid_from(from);
    let paris = e.assert(TENANT, born("Place:paris", T2020).valid_until(T2022)).unwrap();

    let (tx, stats, changes) = (e.last_tx(), e.stats(TENANT), e.changes(TENANT, 0, 100).unwrap());
    let err = e.assert(TENANT, born("Place:rome", T2021)).unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)), "{err:?}");
    assert_eq!(e.last_tx(), tx, "no transaction was taken");
    assert_eq!(e.stats(TENANT), stats);
    assert_eq!(e.changes(TENANT, 0, 100).unwrap(), changes, "no change-log entry");
    assert_eq!(latest(&e, paris.fact.id), paris.fact);
    assert_eq!(query(&e, TENANT, FactQuery { status: StatusFilter::Any, ..about(SARAH) }).len(), 1);

    // The same value over an overlapping interval is no conflict: it takes over.
    let again = e.assert(TENANT, born("Place:paris", T2021)).unwrap();
    assert_eq!(again.superseded[0].id, paris.fact.id);
    // A different value where nothing overlaps is fine.
    let e2 = engine();
    e2.set_cardinality(TENANT, "born_in", Cardinality::Strict).unwrap();
    e2.assert(TENANT, born("Place:paris", T2020).valid_until(T2021)).unwrap();
    let rome = e2.assert(TENANT, born("Place:rome", T2021)).unwrap();
    assert!(rome.superseded.is_empty());
    // A candidate conflicts with nothing: it supersedes nothing, so it
    // contends with nothing. (The contract does not say; this is the
    // reading the tests hold the engine to.)
    let maybe = e2.assert(TENANT, born("Place:oslo", T2022).confidence(0.1)).unwrap();
    assert_eq!(maybe.fact.status, Status::Candidate);
}

// ---- transactions ------------------------------------------------------------------------

#[test]
fn a_batch_is_one_transaction_and_later_inputs_see_earlier_ones() {
    let e = engine();
    let (tx, out) = e
        .assert_batch(TENANT, vec![works_at("Org:acme", T2020), works_at("Org:globex", T2024)])
        .unwrap();
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|a| a.fact.tx == tx));
    assert_eq!(out[1].superseded[0].id, out[0].fact.id);
    // The earlier fact has exactly one stored version at that tx: the closed one.
    let h = e.history(TENANT, out[0].fact.id).unwrap();
    assert_eq!(h.versions.len(), 1);
    assert_eq!(h.versions[0].status, Status::Superseded);
    assert_eq!(h.versions[0].tx, tx);
    assert_eq!(e.changes(TENANT, 0, 10).unwrap().len(), 1);
}

#[test]
fn a_batch_with_one_invalid_input_writes_nothing() {
    let e = engine();
    e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let (tx, stats) = (e.last_tx(), e.stats(TENANT));
    let bad_batches = vec![
        vec![works_at("Org:globex", T2024), FactInput::new("", "works_at", "Org:x").valid_from(T2020)],
        vec![works_at("Org:globex", T2024), works_at("Org:x", T2021).confidence(1.5)],
        vec![works_at("Org:globex", T2024), works_at("Org:x", T2022).valid_until(T2021)],
    ];
    for batch in bad_batches {
        let err = e.assert_batch(TENANT, batch).unwrap_err();
        assert!(matches!(err, EngineError::Invalid(_)), "{err:?}");
    }
    assert_eq!(e.last_tx(), tx);
    assert_eq!(e.stats(TENANT), stats);

    // A strict conflict late in a batch also undoes the batch's earlier inputs.
    e.set_cardinality(TENANT, "born_in", Cardinality::Strict).unwrap();
    let tx = e.last_tx();
    let err = e
        .assert_batch(
            TENANT,
            vec![
                works_at("Org:globex", T2024),
                FactInput::new(SARAH, "born_in", "Place:paris").valid_from(T2020),
                FactInput::new(SARAH, "born_in", "Place:rome").valid_from(T2020),
            ],
        )
        .unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)), "{err:?}");
    assert_eq!(e.last_tx(), tx);
    assert_eq!(e.stats(TENANT), stats);
    assert_eq!(objects(&query(&e, TENANT, about(SARAH))), vec![json!("Org:acme")]);
    assert_eq!(e.changes(TENANT, 0, 100).unwrap().len(), 2, "the first assert and the cardinality");
}

// ---- retraction ----------------------------------------------------------------------------

#[test]
fn retraction_hides_a_fact_and_revives_nothing() {
    let e = engine();
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let globex = e.assert(TENANT, works_at("Org:globex", T2024)).unwrap();
    let gone = e.retract(TENANT, globex.fact.id).unwrap();
    assert_eq!(gone.status, Status::Retracted);
    assert!(gone.tx > globex.fact.tx);
    assert_eq!((gone.valid_from, gone.valid_until), (T2024, None), "only the status changes");

    // Hidden by default, at every instant.
    assert!(query(&e, TENANT, about(SARAH)).is_empty(), "acme is not revived");
    assert!(query(&e, TENANT, FactQuery { valid_at: Some(T2025), ..about(SARAH) }).is_empty());
    assert!(query(&e, TENANT, FactQuery { status: StatusFilter::Any, ..about(SARAH) })
        .iter()
        .all(|f| f.status != Status::Retracted));
    // Shown on request.
    let all = query(&e, TENANT, FactQuery { include_retracted: true, status: StatusFilter::Any, ..about(SARAH) });
    assert_eq!(all.len(), 2);
    let only = query(&e, TENANT, FactQuery { status: StatusFilter::Only(Status::Retracted), ..about(SARAH) });
    assert_eq!(ids(&only), vec![globex.fact.id]);
    // Still superseded, still closed at 2024.
    let a = latest(&e, acme.fact.id);
    assert_eq!((a.status, a.valid_until), (Status::Superseded, Some(T2024)));
    // Before the retraction it was there.
    let before = query(&e, TENANT, FactQuery { as_of: Some(AsOf::Tx(globex.fact.tx)), ..about(SARAH) });
    assert_eq!(ids(&before), vec![globex.fact.id]);
    // get() still answers with the retracted version.
    assert_eq!(latest(&e, globex.fact.id).status, Status::Retracted);
}

#[test]
fn retracting_a_retracted_fact_changes_nothing() {
    let e = engine();
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let first = e.retract(TENANT, acme.fact.id).unwrap();
    let stats = e.stats(TENANT);
    let out = e.write(TENANT, vec![WriteOp::Retract(acme.fact.id)]).unwrap();
    match &out.outcomes[..] {
        [OpOutcome::Retracted { fact, changed }] => {
            assert!(!changed);
            assert_eq!(fact, &first, "answers the existing retracted version");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.history(TENANT, acme.fact.id).unwrap().versions.len(), 2, "no new version");
    assert_eq!(e.stats(TENANT), stats);
    // The request still is one (empty) transaction: "one request writes one
    // transaction". Its change-log entry names no event.
    let changes = e.changes(TENANT, first.tx, 10).unwrap();
    assert_eq!(changes.len(), 1);
    assert!(changes[0].events.is_empty());

    let unknown = e.retract(TENANT, uuid_like(&acme)).unwrap_err();
    assert!(matches!(unknown, EngineError::NotFound(_)), "{unknown:?}");
}

/// An id nobody has: a fact id with its last byte flipped.
fn uuid_like(a: &Asserted) -> FactId {
    let mut b = *a.fact.id.as_bytes();
    b[15] ^= 0xff;
    FactId::from_bytes(b)
}

// ---- history and changes -----------------------------------------------------------------------

#[test]
fn history_gives_every_version_with_the_chain_both_ways() {
    let e = engine();
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let globex = e.assert(TENANT, works_at("Org:globex", T2022).valid_until(T2023)).unwrap();
    let tail = globex.continued[0].clone();
    let initech = e.assert(TENANT, works_at("Org:initech", T2024)).unwrap();
    e.retract(TENANT, acme.fact.id).unwrap();

    let h = e.history(TENANT, acme.fact.id).unwrap();
    assert_eq!(h.id, acme.fact.id);
    let statuses: Vec<_> = h.versions.iter().map(|v| (v.status, v.valid_until)).collect();
    assert_eq!(
        statuses,
        vec![(Status::Active, None), (Status::Superseded, Some(T2022)), (Status::Retracted, Some(T2022))]
    );
    assert!(h.versions.windows(2).all(|w| w[0].tx < w[1].tx), "oldest first, tx strictly increasing");
    assert!(h.versions.iter().all(|v| v.created_tx == acme.fact.tx));
    assert!(h.predecessors.is_empty());
    assert_eq!(h.successors, vec![globex.fact.id, tail.id]);

    let gh = e.history(TENANT, globex.fact.id).unwrap();
    assert_eq!(gh.versions.len(), 1);
    assert_eq!(gh.predecessors, vec![acme.fact.id]);
    assert!(gh.successors.is_empty());

    let th = e.history(TENANT, tail.id).unwrap();
    assert_eq!(th.predecessors, vec![acme.fact.id]);
    assert_eq!(th.successors, vec![initech.fact.id], "initech closed the tail");
    assert_eq!(th.versions.last().unwrap().valid_until, Some(T2024));

    assert!(matches!(e.history(TENANT, uuid_like(&acme)), Err(EngineError::NotFound(_))));
}

#[test]
fn changes_list_every_transaction_in_order_with_resolved_versions() {
    let e = engine();
    let acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    e.set_cardinality(TENANT, "knows", Cardinality::Many).unwrap();
    let globex = e.assert(TENANT, works_at("Org:globex", T2022).valid_until(T2023)).unwrap();
    e.set_threshold(TENANT, 0.5).unwrap();
    let gone = e.retract(TENANT, globex.fact.id).unwrap();
    e.assert("other", works_at("Org:elsewhere", T2020)).unwrap();

    let changes = e.changes(TENANT, 0, 100).unwrap();
    assert_eq!(changes.len(), 5, "the other tenant's write is not listed");
    assert!(changes.windows(2).all(|w| w[0].tx < w[1].tx));
    assert!(changes.iter().all(|c| c.tenant == TENANT));
    match &changes[0].events[..] {
        [ChangeEvent::Assert { fact, superseded, continued }] => {
            assert_eq!(fact, &acme.fact);
            assert!(superseded.is_empty() && continued.is_empty());
        }
        other => panic!("{other:?}"),
    }
    match &changes[1].events[..] {
        [ChangeEvent::Cardinality(p)] => assert_eq!((p.name.as_str(), p.cardinality), ("knows", Cardinality::Many)),
        other => panic!("{other:?}"),
    }
    match &changes[2].events[..] {
        [ChangeEvent::Assert { fact, superseded, continued }] => {
            // Resolved to the versions that tx wrote, not to the latest ones
            // (globex has since been retracted).
            assert_eq!(fact, &globex.fact);
            assert_eq!(fact.status, Status::Active);
            assert_eq!(superseded, &globex.superseded);
            assert_eq!(continued, &globex.continued);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&changes[3].events[..], [ChangeEvent::Threshold(t)] if *t == 0.5));
    match &changes[4].events[..] {
        [ChangeEvent::Retract { fact }] => assert_eq!(fact, &gone),
        other => panic!("{other:?}"),
    }
    // Paging through the log.
    let after = e.changes(TENANT, changes[1].tx, 2).unwrap();
    assert_eq!(after.iter().map(|c| c.tx).collect::<Vec<_>>(), vec![changes[2].tx, changes[3].tx]);
    assert_eq!(changes.iter().map(|c| c.events.first().map(ChangeEvent::op)).collect::<Vec<_>>(), vec![
        Some("assert"),
        Some("predicate"),
        Some("assert"),
        Some("threshold"),
        Some("retract")
    ]);
}

#[test]
fn stats_count_facts_by_latest_status_and_distinct_names() {
    let e = engine();
    assert_eq!(e.stats(TENANT), TenantStats::default());
    e.assert(TENANT, works_at("Org:acme", T2020)).unwrap(); // superseded below
    e.assert(TENANT, works_at("Org:globex", T2022).valid_until(T2023)).unwrap(); // + tail
    e.assert(TENANT, works_at("Org:initech", T2025).confidence(0.2)).unwrap(); // candidate
    let bob = e.assert(TENANT, FactInput::new("Person:bob", "knows", "Person:sarah").valid_from(T2020)).unwrap();
    e.retract(TENANT, bob.fact.id).unwrap();
    assert_eq!(
        e.stats(TENANT),
        TenantStats { active: 2, candidate: 1, superseded: 1, retracted: 1, subjects: 2, predicates: 2 }
    );
    assert_eq!(e.stats(TENANT).total(), 5);
    assert_eq!(e.stats("nobody"), TenantStats::default());
}

// ---- tenants ----------------------------------------------------------------------------------

#[test]
fn tenants_are_isolated() {
    let e = engine();
    let a = e.assert("a", works_at("Org:acme", T2020)).unwrap();
    // Tenant b has not written yet, then has.
    for round in 0..2 {
        assert_eq!(e.get("b", a.fact.id, None).unwrap(), None, "round {round}");
        assert_eq!(e.get("b", a.fact.id, Some(AsOf::Tx(a.fact.tx))).unwrap(), None);
        assert!(e.query("b", &about(SARAH)).unwrap().facts.is_empty());
        let everything = e
            .query("b", &FactQuery { status: StatusFilter::Any, include_retracted: true, ..Default::default() })
            .unwrap()
            .facts;
        assert_eq!(everything.len(), round, "only b's own facts");
        assert!(everything.iter().all(|f| f.tenant == "b"));
        assert!(e.incoming("b", "Org:acme", None).unwrap().facts.is_empty());
        assert!(matches!(e.history("b", a.fact.id), Err(EngineError::NotFound(_))));
        assert!(matches!(e.retract("b", a.fact.id), Err(EngineError::NotFound(_))));
        assert!(e.subject_history("b", SARAH, None).unwrap().is_empty());
        e.assert("b", FactInput::new("Person:zed", "likes", "Food:tea").valid_from(T2020)).unwrap();
    }
    // Tenant b's own writes never touch a's facts, even for the same subject.
    let b = e.assert("b", works_at("Org:globex", T2024)).unwrap();
    assert!(b.superseded.is_empty());
    assert_eq!(latest_in(&e, "a", a.fact.id).status, Status::Active);
    assert_eq!(e.stats("a").active, 1);
    assert_eq!(e.changes("a", 0, 100).unwrap().len(), 1);
    assert_eq!(e.tenants(), vec!["a".to_string(), "b".to_string()]);
}

fn latest_in(e: &Engine, tenant: &str, id: FactId) -> Fact {
    e.get(tenant, id, None).unwrap().unwrap()
}

// ---- reads ----------------------------------------------------------------------------------------

#[test]
fn pagination_returns_every_fact_exactly_once() {
    let e = engine();
    e.set_cardinality(TENANT, "knows", Cardinality::Many).unwrap();
    let mut expected = Vec::new();
    for i in 0..23 {
        let subject = format!("Person:p{}", i % 5);
        let a = e.assert(TENANT, FactInput::new(subject, "knows", format!("Person:q{i}")).valid_from(T2020)).unwrap();
        expected.push(a.fact.id);
    }
    expected.sort();
    let queries = [
        FactQuery::default(),
        FactQuery { predicate: Some("knows".into()), ..Default::default() },
        FactQuery { status: StatusFilter::Any, include_retracted: true, ..Default::default() },
        FactQuery { as_of: Some(AsOf::Tx(e.last_tx().0)), ..Default::default() },
    ];
    for base in queries {
        for limit in [1, 4, 7, 23, 100] {
            let mut seen = Vec::new();
            let mut cursor = None;
            let mut pages = 0;
            loop {
                let page = e.query(TENANT, &FactQuery { limit, cursor: cursor.clone(), ..base.clone() }).unwrap();
                assert!(page.facts.len() <= limit);
                seen.extend(page.facts.iter().map(|f| f.id));
                pages += 1;
                assert!(pages <= 30, "pagination terminates");
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            seen.sort();
            assert_eq!(seen, expected, "limit {limit}, {base:?}");
        }
    }
    // A query under the object index pages too.
    let by_object = e.incoming(TENANT, "Person:q3", None).unwrap();
    assert_eq!(by_object.facts.len(), 1);
}

#[test]
fn a_query_within_budget_matches_the_full_query_and_a_longer_one_gives_up() {
    let e = engine();
    e.set_cardinality(TENANT, "knows", Cardinality::Many).unwrap();
    for i in 0..30 {
        e.assert(TENANT, FactInput::new(SARAH, "knows", format!("Person:q{i}")).valid_from(T2020)).unwrap();
    }
    e.assert(TENANT, FactInput::new("Person:tom", "knows", "Person:q0").valid_from(T2020)).unwrap();
    let ids = |facts: &[Fact]| facts.iter().map(|f| f.id).collect::<Vec<_>>();
    let cases = [
        // Sarah's 30 facts are 30 index entries; a page of 10 looks at one more to know there is more.
        (about(SARAH), 30, 29),
        (FactQuery { limit: 10, ..about(SARAH) }, 11, 10),
        // The predicate plan looks at the two pairs' `idx_ps` keys and every `knows` fact: 33.
        (FactQuery { predicate: Some("knows".into()), ..Default::default() }, 33, 32),
        // Nothing matches `valid_at` 2019, but every entry is still looked at.
        (FactQuery { valid_at: Some(T2020 - 1), ..about(SARAH) }, 30, 29),
    ];
    for (q, enough, short) in cases {
        let full = e.query(TENANT, &q).unwrap();
        let within = e.query_within(TENANT, &q, enough).unwrap().expect("finishes within its budget");
        assert_eq!(ids(&within.facts), ids(&full.facts), "{q:?}");
        assert_eq!(within.next_cursor, full.next_cursor, "{q:?}");
        assert!(e.query_within(TENANT, &q, short).unwrap().is_none(), "{q:?} gives up past {short} entries");
    }
    // A tenant without data has nothing to look at.
    assert!(e.query_within("nobody", &about(SARAH), 0).unwrap().expect("empty").facts.is_empty());
}

#[test]
fn a_bad_cursor_is_invalid() {
    let e = engine();
    e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    e.assert(TENANT, FactInput::new("Person:bob", "works_at", "Org:acme").valid_from(T2020)).unwrap();
    for cursor in ["", "zz", "s0", "sxyz1", "s00000000"] {
        let q = FactQuery { cursor: Some(cursor.into()), ..Default::default() };
        assert!(matches!(e.query(TENANT, &q), Err(EngineError::Invalid(_))), "{cursor:?}");
    }
    // A cursor of one query is refused by a query over another index.
    let page = e.query(TENANT, &FactQuery { limit: 1, ..Default::default() }).unwrap();
    let cursor = page.next_cursor.expect("two facts, one per page");
    let other = FactQuery { predicate: Some("works_at".into()), cursor: Some(cursor.clone()), ..Default::default() };
    assert!(matches!(e.query(TENANT, &other), Err(EngineError::Invalid(_))));
    // And accepted by its own.
    let next = e.query(TENANT, &FactQuery { limit: 1, cursor: Some(cursor), ..Default::default() }).unwrap();
    assert_eq!(next.facts.len(), 1);
    // A by-predicate cursor is a pair and a fact id: cut short or run on, it is
    // refused as the caller's mistake, not reported as damage.
    let works = FactQuery { predicate: Some("works_at".into()), limit: 1, ..Default::default() };
    let cursor = e.query(TENANT, &works).unwrap().next_cursor.expect("two facts, one per page");
    for bad in [&cursor[..cursor.len() - 32], &cursor[..cursor.len() - 2], &format!("{cursor}00")] {
        let q = FactQuery { cursor: Some(bad.to_string()), ..works.clone() };
        assert!(matches!(e.query(TENANT, &q), Err(EngineError::Invalid(_))), "{bad:?}");
    }
    assert_eq!(e.query(TENANT, &FactQuery { cursor: Some(cursor), ..works }).unwrap().facts.len(), 1);
}

#[test]
fn object_filter_and_incoming_edges() {
    let e = engine();
    e.set_cardinality(TENANT, "knows", Cardinality::Many).unwrap();
    let s_acme = e.assert(TENANT, works_at("Org:acme", T2020)).unwrap();
    let b_acme = e.assert(TENANT, FactInput::new("Person:bob", "works_at", "Org:acme").valid_from(T2020)).unwrap();
    let b_knows = e.assert(TENANT, FactInput::new("Person:bob", "knows", "Org:acme").valid_from(T2020)).unwrap();
    e.assert(TENANT, FactInput::new("Person:bob", "age", 42).valid_from(T2020)).unwrap();
    e.assert(TENANT, FactInput::new("Person:eve", "works_at", "Org:acmecorp").valid_from(T2020)).unwrap();

    let acme = json!("Org:acme");
    let by_object = query(&e, TENANT, FactQuery { object: Some(acme.clone()), ..Default::default() });
    let mut expected = vec![s_acme.fact.id, b_acme.fact.id, b_knows.fact.id];
    expected.sort();
    assert_eq!(ids(&by_object), expected, "exact object, not a prefix of it");
    let with_predicate =
        query(&e, TENANT, FactQuery { object: Some(acme.clone()), predicate: Some("knows".into()), ..Default::default() });
    assert_eq!(ids(&with_predicate), vec![b_knows.fact.id]);
    let with_subject =
        query(&e, TENANT, FactQuery { object: Some(acme), subject: Some("Person:bob".into()), ..Default::default() });
    let mut expected_bob = vec![b_acme.fact.id, b_knows.fact.id];
    expected_bob.sort();
    assert_eq!(ids(&with_subject), expected_bob);
    // Non-string objects are indexed by value too.
    assert_eq!(query(&e, TENANT, FactQuery { object: Some(json!(42)), ..Default::default() }).len(), 1);

    let incoming = e.incoming(TENANT, "Org:acme", None).unwrap();
    assert_eq!(ids(&incoming.facts), expected);
    assert!(incoming.facts.iter().all(|f| f.object_entity() == Some("Org:acme")));

    // Incoming edges follow time: after sarah moves on, her edge is not current,
    // but it is as of before the move.
    let before = e.last_tx().0;
    e.assert(TENANT, works_at("Org:globex", T2024)).unwrap();
    let now = e.incoming(TENANT, "Org:acme", None).unwrap();
    assert_eq!(ids(&now.facts), expected_bob);
    let then = e.incoming(TENANT, "Org:acme", Some(AsOf::Tx(before))).unwrap();
    assert_eq!(ids(&then.facts), expected);
}

#[test]
fn invalid_input_is_rejected() {
    let e = engine();
    let cases = vec![
        FactInput::new("", "works_at", "Org:acme"),
        FactInput::new("   ", "works_at", "Org:acme"),
        FactInput::new(SARAH, "", "Org:acme"),
        works_at("Org:acme", T2020).confidence(1.5),
        works_at("Org:acme", T2020).confidence(-0.1),
        works_at("Org:acme", T2020).valid_until(T2020),
        works_at("Org:acme", T2021).valid_until(T2020),
    ];
    for input in cases {
        let err = e.assert(TENANT, input.clone()).unwrap_err();
        assert!(matches!(err, EngineError::Invalid(_)), "{input:?}: {err:?}");
    }
    assert_eq!(e.last_tx().0, 0, "nothing was written");
    assert!(e.tenants().is_empty(), "not even the tenant");
    assert!(matches!(e.write(TENANT, vec![]), Err(EngineError::Invalid(_))));
    assert!(matches!(e.assert("", works_at("Org:acme", T2020)), Err(EngineError::Invalid(_))));
}

// ---- record time ------------------------------------------------------------------------------

static STEPPING_CLOCK: AtomicI64 = AtomicI64::new(T2025);
fn stepping_clock() -> i64 {
    STEPPING_CLOCK.load(Ordering::SeqCst)
}

#[test]
fn recorded_at_never_decreases_even_when_the_clock_steps_back() {
    let e = Engine::open_with_clock(EngineConfig::temporary(), stepping_clock).unwrap();
    let mut last = (0, i64::MIN);
    for (i, now) in [T2025, T2025 + 10, T2024, T2025 + 5, T2025 + 20, T2020].into_iter().enumerate() {
        STEPPING_CLOCK.store(now, Ordering::SeqCst);
        // No valid_from: it is taken from the write's record time.
        let a = e.assert(TENANT, FactInput::new(format!("Person:p{i}"), "works_at", "Org:acme")).unwrap();
        assert!(a.fact.tx > last.0);
        assert!(a.fact.recorded_at >= last.1, "{} went back from {}", a.fact.recorded_at, last.1);
        assert_eq!(a.fact.recorded_at, now.max(last.1));
        assert_eq!(a.fact.valid_from, a.fact.recorded_at, "a missing valid_from is the record time");
        assert_eq!(e.last_tx(), (a.fact.tx, a.fact.recorded_at));
        last = (a.fact.tx, a.fact.recorded_at);
    }
    // A takeover stamped after the clock stepped back never closes an interval
    // before it starts.
    STEPPING_CLOCK.store(T2020, Ordering::SeqCst);
    let next = e.assert(TENANT, FactInput::new("Person:p0", "works_at", "Org:globex")).unwrap();
    let closed = &next.superseded[0];
    assert!(closed.valid_until.unwrap() >= closed.valid_from);
    assert!(next.fact.recorded_at >= last.1);
}
