//! The `slot` of each fact in `facts`: what the exclusion constraint
//! `one_active_value` compares, so that no two active facts hold one slot
//! of a subject and predicate over overlapping valid time.

use crate::store::postgres::rows::json_text;
use crate::store::{Cardinality, EngineError, Fact, Millis, Result, Status};

/// What a fact holds exclusively in `facts` (the schema's `slot`), as the
/// writer sets it for a fact asserted under `cardinality`: the whole pair
/// ('') under one and strict, its value under many.
pub(super) fn base_slot(cardinality: Cardinality, f: &Fact) -> String {
    match cardinality {
        Cardinality::Many => object_slot(f),
        Cardinality::One | Cardinality::Strict => String::new(),
    }
}

/// The slot of `f`'s value: 'm' and the SHA-256 of its object's JSON text,
/// as the writer makes it.
fn object_slot(f: &Fact) -> String {
    use sha2::Digest;
    format!("m{:x}", sha2::Sha256::digest(json_text(&f.object).as_bytes()))
}

/// The slots of the live facts of one subject and predicate, whose
/// predicate is now `cardinality`. The store does not say what the
/// cardinality was when each fact was asserted, and values asserted under
/// many may stand side by side after the predicate became one (each
/// continues after a bounded takeover): of active facts that would hold the
/// whole pair over overlapping valid time, the one that starts first keeps
/// it, and each other holds its value instead. Refuses two active facts
/// holding the same value over overlapping time, which the database's
/// constraint would refuse too (the rules never leave them).
pub(super) fn live_slots(pair: &[Fact], cardinality: Cardinality) -> Result<Vec<String>> {
    let until = |f: &Fact| f.valid_until.unwrap_or(Millis::MAX);
    let mut slots: Vec<String> = pair.iter().map(|f| base_slot(cardinality, f)).collect();
    let mut active: Vec<usize> = (0..pair.len()).filter(|&i| pair[i].status == Status::Active).collect();
    active.sort_by_key(|&i| pair[i].valid_from);
    // A fact keeps '' only if it starts after every fact that kept it ends.
    let mut end = Millis::MIN;
    for &i in &active {
        if slots[i].is_empty() {
            if pair[i].valid_from < end {
                slots[i] = object_slot(&pair[i]);
            } else {
                end = until(&pair[i]);
            }
        }
    }
    active.sort_by(|&a, &b| slots[a].cmp(&slots[b]).then(pair[a].valid_from.cmp(&pair[b].valid_from)));
    // In order of slot and start, each fact must start after the one
    // before it in its slot ends.
    for w in active.windows(2) {
        let (a, b) = (&pair[w[0]], &pair[w[1]]);
        if slots[w[0]] == slots[w[1]] && b.valid_from < until(a) {
            return Err(EngineError::Invalid(format!(
                "facts {} and {} of {} {} are both active with the value {} over overlapping valid time, \
                 which PostgreSQL's one_active_value constraint refuses",
                a.id, b.id, a.subject, a.predicate, a.object
            )));
        }
    }
    Ok(slots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fact(object: &str, from: Millis, until: Option<Millis>, status: Status) -> Fact {
        let input = crate::store::FactInput::new("Person:ana", "speaks", json!(object));
        let stamp = tempora_storage::takeover::Stamp { tx: 1, now: 1 };
        let mut f = tempora_storage::takeover::new_fact("t", &input, uuid::Uuid::now_v7(), stamp, 0.5).unwrap();
        (f.valid_from, f.valid_until, f.status) = (from, until, status);
        f
    }

    #[test]
    fn a_slot_is_the_pair_under_one_and_the_value_under_many() {
        let f = fact("en", 0, None, Status::Active);
        assert_eq!(base_slot(Cardinality::One, &f), "");
        assert_eq!(base_slot(Cardinality::Strict, &f), "");
        let many = base_slot(Cardinality::Many, &f);
        assert!(many.starts_with('m') && many.len() == 65, "{many}");
        assert_ne!(many, base_slot(Cardinality::Many, &fact("fr", 0, None, Status::Active)));
    }

    #[test]
    fn overlapping_values_under_one_hold_their_own_values() {
        // Three values asserted under many, still standing after the
        // predicate became one; a candidate and a value after them.
        let pair = [
            fact("de", 20, None, Status::Active),
            fact("en", 0, None, Status::Active),
            fact("fr", 10, Some(30), Status::Active),
            fact("it", 5, None, Status::Candidate),
        ];
        let slots = live_slots(&pair, Cardinality::One).unwrap();
        // The first to start keeps the pair; the others hold their values.
        assert_eq!(slots[1], "");
        assert_eq!(slots[0], object_slot(&pair[0]));
        assert_eq!(slots[2], object_slot(&pair[2]));
        assert_eq!(slots[3], "", "a candidate holds nothing the constraint compares");
        // Values one after another share the pair.
        let apart = [fact("en", 0, Some(10), Status::Active), fact("fr", 10, None, Status::Active)];
        assert_eq!(live_slots(&apart, Cardinality::One).unwrap(), ["", ""]);
    }

    #[test]
    fn one_value_twice_over_overlapping_time_is_refused() {
        let pair = [fact("en", 0, None, Status::Active), fact("en", 5, None, Status::Active)];
        let err = live_slots(&pair, Cardinality::Many).unwrap_err().to_string();
        assert!(err.contains("one_active_value"), "{err}");
        let superseded = [fact("en", 0, None, Status::Active), fact("en", 5, None, Status::Superseded)];
        assert!(live_slots(&superseded, Cardinality::Many).is_ok());
    }
}
