//! `[monitor]` settings and the monitor's shared state.

use super::rules;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
}
