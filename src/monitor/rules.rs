//! A tenant's alert rules: the server's `[monitor]` defaults with the
//! tenant's overrides on top. The overrides are one fact,
//! `AlertRules:current alert_rules.overrides <object>`, so every change of
//! the rules is in the tenant's history.

use super::{assert_op, RULES_SUBJECT};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use crate::store::{MemoryStore, EngineError, WriteOp};

pub use super::facts::OVERRIDES;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    pub confidence: Confidence,
    pub freshness: Freshness,
    pub drift: Drift,
    pub cost: Cost,
}

/// Fires when candidates are more than `max_share` of the live facts, once
/// there are at least `min_facts` live facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confidence {
    pub enabled: bool,
    pub max_share: f64,
    pub min_facts: u64,
}

/// Fires, per predicate, when active facts of it were last confirmed (the
/// later of valid_from and the record time) longer ago than its TTL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Freshness {
    pub enabled: bool,
    pub ttl_ms: BTreeMap<String, u64>,
}

/// Fires when the supersessions of the last `window_ms` are at least
/// `min_count` and more than `factor` times their mean over the
/// `baseline_windows` windows before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drift {
    pub enabled: bool,
    pub window_ms: u64,
    pub baseline_windows: u64,
    pub factor: f64,
    pub min_count: u64,
}

/// Fires when today's (UTC) model tokens exceed the budget; no budget: off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cost {
    pub enabled: bool,
    pub daily_token_budget: Option<u64>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            confidence: Confidence { enabled: true, max_share: 0.5, min_facts: 50 },
            freshness: Freshness { enabled: true, ttl_ms: BTreeMap::new() },
            drift: Drift { enabled: true, window_ms: 3_600_000, baseline_windows: 24, factor: 3.0, min_count: 50 },
            cost: Cost { enabled: true, daily_token_budget: None },
        }
    }
}

pub const MAX_BASELINE_WINDOWS: u64 = 1000;
pub const MAX_TTL_PREDICATES: usize = 100;
/// Predicate names in `freshness.ttl_ms`, in characters.
pub const MAX_PREDICATE_CHARS: usize = 64;
/// Counts (`min_facts`, `min_count`).
pub const MAX_COUNT: u64 = 1_000_000_000;
/// TTLs: ten years.
pub const MAX_TTL_MS: u64 = 10 * 366 * 86_400_000;
/// A drift window: a year.
pub const MAX_WINDOW_MS: u64 = 366 * 86_400_000;
pub const MAX_FACTOR: f64 = 1000.0;
pub const MAX_BUDGET: u64 = 1_000_000_000_000_000;

impl Rules {
    /// Range checks; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let c = &self.confidence;
        if !(0.0..=1.0).contains(&c.max_share) {
            return Err(format!("confidence.max_share must be within [0, 1], got {}", c.max_share));
        }
        if c.min_facts > MAX_COUNT {
            return Err(format!("confidence.min_facts must be at most {MAX_COUNT}"));
        }
        if self.freshness.ttl_ms.len() > MAX_TTL_PREDICATES {
            return Err(format!("freshness.ttl_ms names at most {MAX_TTL_PREDICATES} predicates"));
        }
        for (p, ttl) in &self.freshness.ttl_ms {
            if !super::facts::name_ok(p, MAX_PREDICATE_CHARS) {
                return Err(format!(
                    "freshness.ttl_ms: {p:?} is not a predicate name (not blank, no control characters, at most {MAX_PREDICATE_CHARS} characters)"
                ));
            }
            if !(1..=MAX_TTL_MS).contains(ttl) {
                return Err(format!("freshness.ttl_ms.{p} must be within 1..={MAX_TTL_MS}"));
            }
        }
        let d = &self.drift;
        if !(1..=MAX_WINDOW_MS).contains(&d.window_ms) {
            return Err(format!("drift.window_ms must be within 1..={MAX_WINDOW_MS}"));
        }
        if !(1..=MAX_BASELINE_WINDOWS).contains(&d.baseline_windows) {
            return Err(format!("drift.baseline_windows must be within 1..={MAX_BASELINE_WINDOWS}, got {}", d.baseline_windows));
        }
        if !(1.0..=MAX_FACTOR).contains(&d.factor) {
            return Err(format!("drift.factor must be within [1, {MAX_FACTOR}], got {}", d.factor));
        }
        if !(1..=MAX_COUNT).contains(&d.min_count) {
            return Err(format!("drift.min_count must be within 1..={MAX_COUNT}"));
        }
        if self.cost.daily_token_budget.is_some_and(|b| b > MAX_BUDGET) {
            return Err(format!("cost.daily_token_budget must be at most {MAX_BUDGET}"));
        }
        Ok(())
    }

    /// `defaults` with `overrides` merged over it (objects field by field;
    /// `freshness.ttl_ms` as a whole), checked. The error names the field.
    pub fn with_overrides(defaults: &Rules, overrides: &Value) -> Result<Rules, String> {
        let mut merged = serde_json::to_value(defaults).expect("rules serialize");
        let Value::Object(o) = overrides else { return Err("the rules must be a JSON object".into()) };
        merge(&mut merged, o, 0);
        integers(&mut merged);
        let rules: Rules = serde_path_to_error::deserialize(&merged).map_err(|e| {
            let path = e.path().to_string();
            format!("{path}: {}", e.into_inner())
        })?;
        rules.validate()?;
        Ok(rules)
    }
}

/// JSON Schema counts `5.0` as the integer 5: such numbers become integers
/// (the float fields take integers as well).
fn integers(v: &mut Value) {
    match v {
        Value::Number(n) if !n.is_i64() && !n.is_u64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15) {
                *v = Value::from(f as u64);
            }
        }
        Value::Object(o) => o.values_mut().for_each(integers),
        Value::Array(a) => a.iter_mut().for_each(integers),
        _ => {}
    }
}

fn merge(target: &mut Value, add: &Map<String, Value>, depth: usize) {
    for (k, v) in add {
        match (target.get_mut(k), v) {
            (Some(t @ Value::Object(_)), Value::Object(inner)) if depth == 0 => merge(t, inner, depth + 1),
            _ => {
                target[k] = v.clone();
            }
        }
    }
}

/// The tenant's stored overrides (`{}` when none).
pub fn overrides(engine: &dyn MemoryStore, tenant: &str) -> Result<Value, EngineError> {
    let facts = super::subject_facts(engine, tenant, RULES_SUBJECT)?;
    Ok(facts.get(OVERRIDES).map(|f| f.object.clone()).filter(Value::is_object).unwrap_or_else(|| Value::Object(Map::new())))
}

/// The tenant's effective rules. Overrides that no longer check (the
/// defaults changed under them) are ignored, with a warning.
pub fn load(engine: &dyn MemoryStore, tenant: &str, defaults: &Rules) -> Result<Rules, EngineError> {
    let o = overrides(engine, tenant)?;
    Ok(Rules::with_overrides(defaults, &o).unwrap_or_else(|e| {
        tracing::warn!(tenant, error = %e, "stored alert rules do not check; using the defaults");
        defaults.clone()
    }))
}

/// The write that stores new overrides.
pub fn store_op(overrides: Value) -> WriteOp {
    assert_op(RULES_SUBJECT, OVERRIDES, overrides)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_merge_by_field_and_are_checked() {
        let d = Rules::default();
        let r = Rules::with_overrides(&d, &json!({"drift": {"min_count": 3}, "freshness": {"ttl_ms": {"price": 10}}})).unwrap();
        assert_eq!(r.drift.min_count, 3);
        assert_eq!(r.drift.window_ms, d.drift.window_ms);
        assert_eq!(r.freshness.ttl_ms.get("price"), Some(&10));
        let e = Rules::with_overrides(&d, &json!({"drift": {"windw_ms": 3}})).unwrap_err();
        assert!(e.contains("windw_ms"), "{e}");
        let e = Rules::with_overrides(&d, &json!({"confidence": {"max_share": 1.5}})).unwrap_err();
        assert!(e.contains("confidence.max_share"), "{e}");
        let e = Rules::with_overrides(&d, &json!({"cost": {"daily_token_budget": "lots"}})).unwrap_err();
        assert!(e.contains("cost.daily_token_budget"), "{e}");
        assert!(Rules::with_overrides(&d, &json!([1])).is_err());
        let r = Rules::with_overrides(&d, &json!({"drift": {"min_count": 4.0, "factor": 2}})).unwrap();
        assert_eq!((r.drift.min_count, r.drift.factor), (4, 2.0));
    }
}
