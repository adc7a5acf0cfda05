//! Monitoring: alert rules evaluated over a tenant's memory, model-token
//! usage, and reports built from blocks run against real data.
//!
//! Alerts, alert rules, reports and report runs are facts in the tenant's own
//! memory (subjects `Alert:`, `AlertRules:`, `Report:`, `ReportRun:`), so
//! their history, `as_of` reads and the change feed work on them like on
//! any other fact. Their predicates are namespaced (`alert.state`,
//! `report.name`, ...) so a tenant's own predicate settings (cardinality)
//! never change how they behave. The rules themselves leave these subjects
//! out of what they measure. Counters that are not facts (token usage, the
//! drift rule's buckets and change-log watermark) live in aux records.
//! See docs/monitoring.md.

pub mod alerts;
pub mod reports;
pub mod rules;
pub mod scheduler;
pub mod time;
pub mod usage;

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use crate::store::{MemoryStore, EngineError, Fact, FactInput, FactQuery, WriteOp, MAX_PAGE};

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

/// `[monitor]` as read from the file; every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileMonitor {
    /// Seconds between background evaluations; 0 turns them off.
    pub interval_secs: Option<u64>,
    pub confidence_max_share: Option<f64>,
    pub confidence_min_facts: Option<u64>,
    pub drift_window_secs: Option<u64>,
    pub drift_baseline_windows: Option<u64>,
    pub drift_factor: Option<f64>,
    pub drift_min_count: Option<u64>,
    /// Model tokens per tenant per UTC day; unset: the cost rule is off
    /// until a tenant sets a budget.
    pub daily_token_budget: Option<u64>,
}

pub const DEFAULT_INTERVAL_SECS: u64 = 60;

/// The resolved `[monitor]` settings: the background interval and the rule
/// defaults every tenant starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorConfig {
    pub interval_secs: u64,
    pub defaults: rules::Rules,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig { interval_secs: DEFAULT_INTERVAL_SECS, defaults: rules::Rules::default() }
    }
}

impl MonitorConfig {
    /// The file layer with `TEMPORA_MONITOR_*` over it.
    pub fn resolve(file: FileMonitor, env: &dyn Fn(&str) -> Option<String>) -> Result<MonitorConfig> {
        fn num<T: std::str::FromStr>(env: &dyn Fn(&str) -> Option<String>, var: &str, file: Option<T>) -> Result<Option<T>> {
            match env(var) {
                Some(v) => v.trim().parse::<T>().map(Some).ok().with_context(|| format!("{var}: {v:?} is not a number")),
                None => Ok(file),
            }
        }
        let mut d = rules::Rules::default();
        let interval_secs = num(env, "TEMPORA_MONITOR_INTERVAL_SECS", file.interval_secs)?.unwrap_or(DEFAULT_INTERVAL_SECS);
        if let Some(v) = num(env, "TEMPORA_MONITOR_CONFIDENCE_MAX_SHARE", file.confidence_max_share)? {
            d.confidence.max_share = v;
        }
        if let Some(v) = num(env, "TEMPORA_MONITOR_CONFIDENCE_MIN_FACTS", file.confidence_min_facts)? {
            d.confidence.min_facts = v;
        }
        if let Some(v) = num(env, "TEMPORA_MONITOR_DRIFT_WINDOW_SECS", file.drift_window_secs)? {
            d.drift.window_ms = v.saturating_mul(1000);
        }
        if let Some(v) = num(env, "TEMPORA_MONITOR_DRIFT_BASELINE_WINDOWS", file.drift_baseline_windows)? {
            d.drift.baseline_windows = v;
        }
        if let Some(v) = num(env, "TEMPORA_MONITOR_DRIFT_FACTOR", file.drift_factor)? {
            d.drift.factor = v;
        }
        if let Some(v) = num(env, "TEMPORA_MONITOR_DRIFT_MIN_COUNT", file.drift_min_count)? {
            d.drift.min_count = v;
        }
        if let Some(v) = num(env, "TEMPORA_MONITOR_DAILY_TOKEN_BUDGET", file.daily_token_budget)? {
            d.cost.daily_token_budget = Some(v);
        }
        if let Err(e) = d.validate() {
            bail!("[monitor]: {e}");
        }
        Ok(MonitorConfig { interval_secs, defaults: d })
    }
}

/// The monitor's shared state in the server: its settings and one lock per
/// tenant, so an evaluation and an ack never decide on the same alert at
/// once.
#[derive(Clone, Default)]
pub struct Monitor {
    pub config: Arc<MonitorConfig>,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Monitor {
    pub fn new(config: MonitorConfig) -> Monitor {
        Monitor { config: Arc::new(config), locks: Arc::default() }
    }

    /// The tenant's monitor lock.
    pub fn lock(&self, tenant: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(tenant.to_string()).or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_layers_env_over_file_and_checks_values() {
        let none = |_: &str| None;
        let c = MonitorConfig::resolve(FileMonitor::default(), &none).unwrap();
        assert_eq!(c, MonitorConfig::default());
        let file = FileMonitor { interval_secs: Some(5), drift_factor: Some(2.0), ..Default::default() };
        let env = |k: &str| (k == "TEMPORA_MONITOR_INTERVAL_SECS").then(|| "1".to_string());
        let c = MonitorConfig::resolve(file, &env).unwrap();
        assert_eq!((c.interval_secs, c.defaults.drift.factor), (1, 2.0));
        let bad = |k: &str| (k == "TEMPORA_MONITOR_CONFIDENCE_MAX_SHARE").then(|| "2".to_string());
        assert!(MonitorConfig::resolve(FileMonitor::default(), &bad).is_err());
        let junk = |k: &str| (k == "TEMPORA_MONITOR_DRIFT_MIN_COUNT").then(|| "many".to_string());
        assert!(MonitorConfig::resolve(FileMonitor::default(), &junk).is_err());
    }

    #[test]
    fn the_config_file_has_a_monitor_section() {
        let path = std::env::temp_dir().join(format!("tempora-monitor-{}.toml", std::process::id()));
        std::fs::write(&path, "[monitor]\ninterval_secs = 0\ndrift_min_count = 7\ndaily_token_budget = 1000\n").unwrap();
        let none = |_: &str| None;
        let c = crate::config::Config::load(Some(&path), &none, crate::config::Overrides::default()).unwrap();
        assert_eq!((c.monitor.interval_secs, c.monitor.defaults.drift.min_count), (0, 7));
        assert_eq!(c.monitor.defaults.cost.daily_token_budget, Some(1000));
        let env = |k: &str| (k == "TEMPORA_MONITOR_DRIFT_MIN_COUNT").then(|| "9".to_string());
        let c = crate::config::Config::load(Some(&path), &env, crate::config::Overrides::default()).unwrap();
        assert_eq!(c.monitor.defaults.drift.min_count, 9, "the environment wins over the file");
        std::fs::write(&path, "[monitor]\nintervall_secs = 5\n").unwrap();
        assert!(crate::config::Config::load(Some(&path), &none, crate::config::Overrides::default()).is_err());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn monitor_subjects_are_recognized() {
        assert!(is_monitor_subject("Alert:1") && is_monitor_subject("ReportRun:x") && is_monitor_subject("AlertRules:current"));
        assert!(!is_monitor_subject("Person:alert") && !is_monitor_subject("Alerts:1"));
    }
}
