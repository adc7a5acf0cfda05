//! The engine's own part of the bitemporal examples.
//!
//! The contract itself (docs/semantics.md: takeovers, tails, candidates,
//! cardinality, transactions, retraction, history, the change log, stats,
//! tenants, reads, record time) is told once for both stores, the engine
//! and PostgreSQL, through the store seam: `tests/it/store_semantics.rs`.
//! What stays here holds for the engine only: how many index entries a read
//! looks at (its keyspaces), which decides whether `query_within` answers.
//! The PostgreSQL store has no such budget (its `query_within` always
//! leaves the read to the blocking pool), so the case has nothing to check
//! there.

use tempora_storage::{Cardinality, Engine, EngineConfig, Fact, FactInput, FactQuery};

const T2020: i64 = 1_577_836_800_000; // 2020-01-01

const TENANT: &str = "default";
const SARAH: &str = "Person:sarah";

fn engine() -> Engine {
    Engine::open(EngineConfig::temporary()).expect("a temporary engine opens")
}

fn about(subject: &str) -> FactQuery {
    FactQuery { subject: Some(subject.into()), ..Default::default() }
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
