//! The monitor's facts: the subjects it writes (`Alert:`, `AlertRules:`,
//! `Report:`, `ReportRun:`), the predicates that create one, and the
//! helpers that read and write them.

use crate::store::{EngineError, Fact, FactInput, FactQuery, MemoryStore, WriteOp, MAX_PAGE};
use std::collections::HashMap;

pub const ALERT_PREFIX: &str = "Alert:";
pub const RULES_SUBJECT: &str = "AlertRules:current";
pub const REPORT_PREFIX: &str = "Report:";
pub const RUN_PREFIX: &str = "ReportRun:";
/// The `source` of every fact the monitor writes.
pub const SOURCE: &str = "monitor";

/// Whether a subject is one of the monitor's own (left out of what the
/// rules measure and of report blocks over the tenant's data).
pub fn is_monitor_subject(s: &str) -> bool {
    s.starts_with(ALERT_PREFIX) || s.starts_with("AlertRules:") || s.starts_with(REPORT_PREFIX) || s.starts_with(RUN_PREFIX)
}

/// An assertion by the monitor: confidence 1 (never a candidate).
pub fn assert_op(subject: &str, predicate: &str, object: serde_json::Value) -> WriteOp {
    WriteOp::Assert(FactInput::new(subject, predicate, object).confidence(1.0).source(SOURCE))
}

/// The current (active) facts of one subject, by predicate.
pub fn subject_facts(engine: &dyn MemoryStore, tenant: &str, subject: &str) -> Result<HashMap<String, Fact>, EngineError> {
    let q = FactQuery { subject: Some(subject.to_string()), limit: MAX_PAGE, ..Default::default() };
    let page = engine.query(tenant, &q)?;
    Ok(page.facts.into_iter().map(|f| (f.predicate.clone(), f)).collect())
}

/// The id part of `Prefix:<id>` or a bare id: a UUID, or `None`.
pub fn parse_id(raw: &str, prefix: &str) -> Option<uuid::Uuid> {
    let bare = raw.strip_prefix(prefix).unwrap_or(raw);
    uuid::Uuid::parse_str(bare).ok()
}

pub fn new_id() -> uuid::Uuid {
    uuid::Uuid::now_v7()
}

/// Predicates written exactly once per monitor subject, when it is created:
/// counting them counts the monitor's subjects.
pub const FIRED_AT: &str = "alert.fired_at";
pub const CREATED_AT: &str = "report.created_at";
pub const RAN_AT: &str = "run.ran_at";
pub const OVERRIDES: &str = "alert_rules.overrides";

/// Whether a report or block name is acceptable: not blank, no control
/// characters, at most `max` characters.
pub fn name_ok(s: &str, max: usize) -> bool {
    !s.trim().is_empty() && !s.chars().any(char::is_control) && s.chars().count() <= max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_subjects_are_recognized() {
        assert!(is_monitor_subject("Alert:1") && is_monitor_subject("ReportRun:x") && is_monitor_subject("AlertRules:current"));
        assert!(!is_monitor_subject("Person:alert") && !is_monitor_subject("Alerts:1"));
    }
}
