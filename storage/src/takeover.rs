//! The valid-time takeover rules of the product contract, as pure functions.
//!
//! A store finds the facts an assert may take over and applies what these
//! functions decide; the rules themselves live only here, so every store
//! (the embedded engine, a SQL store) closes, splits and refuses alike.
//! Nothing here reads or writes storage: the inputs are facts, the outputs
//! are facts.
//!
//! The rules (`docs/semantics.md`):
//! - A fact asserted with a confidence below the tenant's threshold is a
//!   candidate: it takes over nothing.
//! - An active fact takes over, over its valid interval, every fact of its
//!   subject and predicate that holds a value somewhere in that interval in
//!   the current valid-time view: the active facts, and the superseded ones
//!   whose remaining interval still overlaps it. Under cardinality `many`,
//!   only those with the same object; under `strict`, one with another
//!   object is a conflict and nothing is written.
//! - A fact taken over keeps what lies before the new `valid_from` (clamped
//!   at its own start, so an interval never ends before it begins); what lies
//!   after a bounded new fact lives on as a tail, a new fact with the old
//!   one's standing.
//! - A retraction closes one fact and revives nothing.

use crate::error::{EngineError, Result};
use crate::model::{Cardinality, Fact, FactId, FactInput, Millis, Status, Tx};

/// When and by which transaction a write happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub tx: Tx,
    pub now: Millis,
}

/// The first version of the fact `input` asserts, before any takeover:
/// active when its confidence reaches `threshold`, a candidate below it.
/// Refuses an interval that ends at or before its start.
pub fn new_fact(
    tenant: &str,
    input: &FactInput,
    id: FactId,
    at: Stamp,
    threshold: f64,
) -> Result<Fact> {
    let valid_from = input.valid_from.unwrap_or(at.now);
    let valid_until = input.valid_until;
    if let Some(u) = valid_until {
        if u <= valid_from {
            return Err(EngineError::invalid(format!(
                "valid_until ({u}) must be after valid_from ({valid_from})"
            )));
        }
    }
    let confidence = input.confidence.unwrap_or(1.0);
    let status = if confidence >= threshold {
        Status::Active
    } else {
        Status::Candidate
    };
    Ok(Fact {
        id,
        tenant: tenant.to_string(),
        subject: input.subject.clone(),
        predicate: input.predicate.clone(),
        object: input.object.clone(),
        confidence,
        source: input.source.clone(),
        properties: input.properties.clone(),
        valid_from,
        valid_until,
        recorded_at: at.now,
        tx: at.tx,
        status,
        created_tx: at.tx,
        created_at: at.now,
        supersedes: Vec::new(),
        superseded_by: None,
        continues: None,
        continued_by: Vec::new(),
    })
}

/// Whether `old` holds a value within `new`'s interval in the current
/// valid-time view, and so would be taken over by it (before cardinality).
/// Candidates and retracted facts never hold a value there.
pub fn contends(old: &Fact, new: &Fact) -> bool {
    matches!(old.status, Status::Active | Status::Superseded)
        && old.overlaps(new.valid_from, new.valid_until)
}

/// One fact an assert takes over: its closing version, and the tail that
/// carries on what lies after the new fact's bounded interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Closing {
    /// The fact as it was.
    pub old: Fact,
    /// Its new latest version, closed at the new fact's start.
    pub closed: Fact,
    /// A new fact for the part of `old` after the new fact's end.
    pub tail: Option<Fact>,
}

/// What an assert writes: the new fact (its `supersedes` filled in) and
/// each fact it takes over, in the order the store listed them.
#[derive(Debug, Clone, PartialEq)]
pub struct AssertPlan {
    pub fact: Fact,
    pub closings: Vec<Closing>,
}

/// Plans the assert of `fact` (from [`new_fact`]) over `existing`: facts of
/// its tenant, subject and predicate, which must include every one for
/// which [`contends`] holds (others are passed over, so a store may hand in
/// all it found). `new_id` makes the id of each tail, in order.
///
/// Refuses, writing nothing, an active fact of a `strict` predicate whose
/// interval another object holds.
pub fn plan_assert(
    mut fact: Fact,
    existing: Vec<Fact>,
    cardinality: Cardinality,
    mut new_id: impl FnMut() -> FactId,
) -> Result<AssertPlan> {
    if fact.status != Status::Active {
        return Ok(AssertPlan {
            fact,
            closings: Vec::new(),
        });
    }
    let mut rivals: Vec<Fact> = existing
        .into_iter()
        .filter(|old| old.id != fact.id && contends(old, &fact))
        .collect();
    match cardinality {
        Cardinality::Many => rivals.retain(|old| old.object == fact.object),
        Cardinality::Strict => {
            if let Some(clash) = rivals.iter().find(|old| old.object != fact.object) {
                return Err(EngineError::Conflict(format!(
                    "{} {} is strict and already has {} over an overlapping valid interval (fact {})",
                    fact.subject, fact.predicate, clash.object, clash.id
                )));
            }
        }
        Cardinality::One => {}
    }
    let at = Stamp {
        tx: fact.tx,
        now: fact.recorded_at,
    };
    let closings: Vec<Closing> = rivals
        .into_iter()
        .map(|old| take_over(old, &fact, at, &mut new_id))
        .collect();
    fact.supersedes = closings.iter().map(|c| c.closed.id).collect();
    Ok(AssertPlan { fact, closings })
}

/// Closes `old` where `new` takes over.
fn take_over(old: Fact, new: &Fact, at: Stamp, new_id: &mut impl FnMut() -> FactId) -> Closing {
    let mut closed = old.clone();
    closed.status = Status::Superseded;
    // Clamped at the old start, so a closed interval never ends before it
    // begins: a fact wholly taken over keeps an empty interval.
    closed.valid_until = Some(new.valid_from.max(old.valid_from));
    closed.superseded_by = Some(new.id);
    closed.tx = at.tx;
    closed.recorded_at = at.now;

    // The tail keeps the old fact's standing: an active fact's tail is
    // active; the tail of an already superseded fact is superseded (its end
    // still comes from whatever closed it first).
    let tail = match new.valid_until {
        Some(end) if old.valid_until.is_none_or(|u| u > end) => Some(Fact {
            id: new_id(),
            valid_from: end.max(old.valid_from),
            valid_until: old.valid_until,
            status: old.status,
            tx: at.tx,
            recorded_at: at.now,
            created_tx: at.tx,
            created_at: at.now,
            supersedes: Vec::new(),
            superseded_by: old.superseded_by,
            continues: Some(old.id),
            continued_by: Vec::new(),
            ..old.clone()
        }),
        _ => None,
    };
    if let Some(t) = &tail {
        closed.continued_by.push(t.id);
    }
    Closing { old, closed, tail }
}

/// The retracted version of `old`, or `None` when it already is retracted
/// (a second retraction writes nothing). Nothing `old` superseded comes
/// back: a retraction revives nothing.
pub fn retract(old: &Fact, at: Stamp) -> Option<Fact> {
    if old.status == Status::Retracted {
        return None;
    }
    let mut gone = old.clone();
    gone.status = Status::Retracted;
    gone.tx = at.tx;
    gone.recorded_at = at.now;
    Some(gone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DAY: Millis = 86_400_000;

    fn input(object: &str, from: Millis, until: Option<Millis>) -> FactInput {
        let mut i = FactInput::new("Person:sarah", "works_at", json!(object));
        i.valid_from = Some(from);
        i.valid_until = until;
        i
    }

    fn fact(object: &str, from: Millis, until: Option<Millis>, tx: Tx) -> Fact {
        new_fact(
            "t",
            &input(object, from, until),
            uuid::Uuid::now_v7(),
            Stamp {
                tx,
                now: tx as Millis,
            },
            0.5,
        )
        .unwrap()
    }

    #[test]
    fn a_bounded_fact_splits_an_open_one_into_a_head_and_a_tail() {
        let old = fact("Org:acme", 0, None, 1);
        let new = fact("Org:globex", 10 * DAY, Some(20 * DAY), 2);
        let plan = plan_assert(
            new.clone(),
            vec![old.clone()],
            Cardinality::One,
            uuid::Uuid::now_v7,
        )
        .unwrap();
        assert_eq!(plan.fact.supersedes, vec![old.id]);
        let c = &plan.closings[0];
        assert_eq!(
            (
                c.closed.status,
                c.closed.valid_until,
                c.closed.superseded_by
            ),
            (Status::Superseded, Some(10 * DAY), Some(new.id))
        );
        let tail = c.tail.as_ref().unwrap();
        assert_eq!(
            (
                tail.valid_from,
                tail.valid_until,
                tail.status,
                tail.continues
            ),
            (20 * DAY, None, Status::Active, Some(old.id))
        );
        assert_eq!(c.closed.continued_by, vec![tail.id]);
        assert_eq!((tail.tx, tail.created_tx), (2, 2));
    }

    #[test]
    fn a_fact_that_starts_earlier_closes_a_later_one_at_its_own_start() {
        let old = fact("Org:acme", 10 * DAY, None, 1);
        let new = fact("Org:globex", 0, None, 2);
        let plan = plan_assert(new, vec![old], Cardinality::One, uuid::Uuid::now_v7).unwrap();
        assert_eq!(
            plan.closings[0].closed.valid_until,
            Some(10 * DAY),
            "an empty interval, never inverted"
        );
        assert!(plan.closings[0].tail.is_none());
    }

    #[test]
    fn cardinality_decides_who_is_taken_over() {
        let acme = fact("Org:acme", 0, None, 1);
        let same = fact("Org:globex", 0, None, 2);
        let new = fact("Org:globex", 5, None, 3);
        let existing = vec![acme.clone(), same.clone()];
        let one = plan_assert(
            new.clone(),
            existing.clone(),
            Cardinality::One,
            uuid::Uuid::now_v7,
        )
        .unwrap();
        assert_eq!(one.fact.supersedes, vec![acme.id, same.id]);
        let many = plan_assert(
            new.clone(),
            existing.clone(),
            Cardinality::Many,
            uuid::Uuid::now_v7,
        )
        .unwrap();
        assert_eq!(many.fact.supersedes, vec![same.id]);
        match plan_assert(new, existing, Cardinality::Strict, uuid::Uuid::now_v7) {
            Err(EngineError::Conflict(m)) => assert!(
                m.contains("strict") && m.contains(&acme.id.to_string()),
                "{m}"
            ),
            other => panic!("expected a conflict, got {other:?}"),
        }
    }

    #[test]
    fn candidates_retracted_facts_and_disjoint_intervals_take_no_part() {
        let mut candidate = fact("Org:acme", 0, None, 1);
        candidate.status = Status::Candidate;
        let mut retracted = fact("Org:acme", 0, None, 1);
        retracted.status = Status::Retracted;
        let before = fact("Org:acme", 0, Some(5), 1);
        let new = fact("Org:globex", 5, None, 2);
        let plan = plan_assert(
            new,
            vec![candidate, retracted, before],
            Cardinality::Strict,
            uuid::Uuid::now_v7,
        )
        .unwrap();
        assert!(plan.closings.is_empty());
        // A new candidate takes over nothing, even on a strict predicate.
        let old = fact("Org:acme", 0, None, 1);
        let low = new_fact(
            "t",
            &input("Org:initech", 0, None).confidence(0.1),
            uuid::Uuid::now_v7(),
            Stamp { tx: 3, now: 3 },
            0.5,
        )
        .unwrap();
        assert_eq!(low.status, Status::Candidate);
        assert!(
            plan_assert(low, vec![old], Cardinality::Strict, uuid::Uuid::now_v7)
                .unwrap()
                .closings
                .is_empty()
        );
    }

    #[test]
    fn a_superseded_fact_still_valid_after_the_start_is_taken_over_and_keeps_its_standing() {
        let mut shadow = fact("Org:acme", 20, Some(40), 1);
        shadow.status = Status::Superseded;
        let closer = uuid::Uuid::now_v7();
        shadow.superseded_by = Some(closer);
        let new = fact("Org:globex", 25, Some(30), 2);
        let plan = plan_assert(
            new,
            vec![shadow.clone()],
            Cardinality::One,
            uuid::Uuid::now_v7,
        )
        .unwrap();
        let c = &plan.closings[0];
        assert_eq!(c.closed.valid_until, Some(25));
        let tail = c.tail.as_ref().unwrap();
        assert_eq!(
            (
                tail.valid_from,
                tail.valid_until,
                tail.status,
                tail.superseded_by
            ),
            (30, Some(40), Status::Superseded, Some(closer))
        );
    }

    #[test]
    fn inverted_intervals_are_refused_and_retraction_is_once() {
        assert!(new_fact(
            "t",
            &input("Org:acme", 10, Some(10)),
            uuid::Uuid::now_v7(),
            Stamp { tx: 1, now: 1 },
            0.5
        )
        .is_err());
        let f = fact("Org:acme", 0, None, 1);
        let gone = retract(&f, Stamp { tx: 2, now: 2 }).unwrap();
        assert_eq!(
            (gone.status, gone.tx, gone.valid_until),
            (Status::Retracted, 2, None)
        );
        assert!(retract(&gone, Stamp { tx: 3, now: 3 }).is_none());
    }
}
