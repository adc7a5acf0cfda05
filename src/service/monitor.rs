//! Alerts and reports (`docs/monitoring.md`); the rules themselves are
//! `crate::monitor`.

use super::error::{Result, ServiceError};
use super::idempotency::{Answer, IdempotencyKey, Op};
use super::Service;
use crate::json::JsonInt;
use crate::memory::blocking;
use crate::monitor::reports::{self, Report, MAX_NAME};
use crate::monitor::{alerts, rules, time, usage, ALERT_PREFIX, REPORT_PREFIX};
use serde::Deserialize;
use serde_json::{json, Value};

/// Days of usage history [`Service::token_usage`] answers with.
const USAGE_DAYS: usize = 30;
/// The longest schedule: a year.
pub const MAX_EVERY_SECS: i64 = 366 * 86_400;
pub const DEFAULT_RUNS: i64 = 20;
pub const MAX_RUNS: i64 = 100;

/// Which alerts a listing holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertStates {
    /// Open and acked: the default.
    Unresolved,
    Open,
    Acked,
    Resolved,
    All,
}

impl std::str::FromStr for AlertStates {
    type Err = ServiceError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "open" => Ok(AlertStates::Open),
            "acked" => Ok(AlertStates::Acked),
            "resolved" => Ok(AlertStates::Resolved),
            "all" => Ok(AlertStates::All),
            other => Err(ServiceError::invalid(format!("state must be open, acked, resolved or all, got {other:?}"))),
        }
    }
}

impl AlertStates {
    fn wanted(self) -> &'static [&'static str] {
        match self {
            AlertStates::Unresolved => &[alerts::OPEN, alerts::ACKED],
            AlertStates::Open => &[alerts::OPEN],
            AlertStates::Acked => &[alerts::ACKED],
            AlertStates::Resolved => &[alerts::RESOLVED],
            AlertStates::All => &[alerts::OPEN, alerts::ACKED, alerts::RESOLVED],
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    every_secs: JsonInt,
}

/// A report to create.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewReport {
    name: String,
    blocks: Vec<Value>,
    #[serde(default)]
    schedule: Option<crate::json::Object<Schedule>>,
}

impl Service {
    pub async fn alerts(&self, tenant: &str, states: AlertStates) -> Result<Vec<Value>> {
        let wanted = states.wanted();
        let (engine, tenant) = (self.memory.store().clone(), tenant.to_string());
        // Open and acked alerts are looked up by state, however many alerts the
        // tenant has had; a listing with resolved ones holds the newest 10,000.
        let unresolved_only = !wanted.contains(&alerts::RESOLVED);
        let all = blocking(move || {
            if unresolved_only { alerts::unresolved(&*engine, &tenant) } else { alerts::list(&*engine, &tenant) }
        })
        .await?;
        Ok(all.iter().filter(|a| wanted.contains(&a.state.as_str())).map(|a| a.to_json()).collect())
    }

    /// Acks an open alert; acking an acked one answers it as it is.
    pub async fn ack_alert(&self, tenant: &str, raw_id: &str, key: Option<&IdempotencyKey>) -> Result<Answer<Value>> {
        let id = crate::monitor::parse_id(raw_id, ALERT_PREFIX).ok_or_else(ServiceError::not_found)?;
        let lock = self.monitor.lock(tenant);
        let _held = lock.lock().await;
        let alert = {
            let (engine, tenant) = (self.memory.store().clone(), tenant.to_string());
            blocking(move || alerts::get(&*engine, &tenant, id)).await?.ok_or_else(ServiceError::not_found)?
        };
        match alert.state.as_str() {
            alerts::OPEN => {}
            alerts::ACKED => return Ok(Answer::Fresh(alert.to_json())),
            other => {
                return Err(ServiceError::conflict(format!(
                    "alert {} is {other}: only an open alert can be acked",
                    alert.subject()
                )))
            }
        }
        let now = time::now_ms();
        let ops = alerts::ack_ops(&alert, now);
        self.write_keyed(tenant, Op::AlertAck, key, ops, move |out| Ok(alerts::acked(&alert, now, out))).await
    }

    /// Evaluates the tenant's alert rules now.
    pub async fn evaluate_alerts(&self, tenant: &str, key: Option<&IdempotencyKey>) -> Result<Answer<Value>> {
        if let Some(stored) = self.stored_answer(tenant, Op::AlertsEvaluate, key).await? {
            return Ok(Answer::Replayed(stored));
        }
        let lock = self.monitor.lock(tenant);
        let _held = lock.lock().await;
        let plan = {
            let (engine, tenant, defaults) =
                (self.memory.store().clone(), tenant.to_string(), self.monitor.config.defaults.clone());
            blocking(move || alerts::plan(&*engine, &tenant, &defaults)).await?
        };
        if plan.ops.is_empty() {
            return Ok(Answer::Fresh(plan.render(None)));
        }
        let ops = plan.ops.clone();
        self.write_keyed(tenant, Op::AlertsEvaluate, key, ops, move |out| Ok(plan.render(Some(out)))).await
    }

    /// The tenant's alert rules: the defaults with its overrides.
    pub async fn alert_rules(&self, tenant: &str) -> Result<rules::Rules> {
        let (engine, tenant, defaults) =
            (self.memory.store().clone(), tenant.to_string(), self.monitor.config.defaults.clone());
        Ok(blocking(move || rules::load(&*engine, &tenant, &defaults)).await?)
    }

    /// Stores the tenant's overrides of the rules; answers the rules in effect.
    pub async fn set_alert_rules(&self, tenant: &str, overrides: Value) -> Result<rules::Rules> {
        if !overrides.is_object() {
            return Err(ServiceError::invalid("the rules must be a JSON object"));
        }
        let effective =
            rules::Rules::with_overrides(&self.monitor.config.defaults, &overrides).map_err(ServiceError::Invalid)?;
        self.write(tenant, vec![rules::store_op(overrides)]).await?;
        Ok(effective)
    }

    /// Model tokens spent today and over the last days, and the budget.
    pub async fn token_usage(&self, tenant: &str) -> Result<Value> {
        let (engine, tenant, defaults) =
            (self.memory.store().clone(), tenant.to_string(), self.monitor.config.defaults.clone());
        let (rules, days) = blocking(move || {
            Ok((rules::load(&*engine, &tenant, &defaults)?, usage::days(&*engine, &tenant, USAGE_DAYS)?))
        })
        .await?;
        let today = time::day(time::now_ms());
        let u = days.iter().find(|(d, _)| *d == today).map(|(_, u)| *u).unwrap_or_default();
        let day_json = |d: &str, u: &usage::DayUsage| {
            json!({"day": d, "tokens_in": u.tokens_in, "tokens_out": u.tokens_out, "tokens": u.total(), "calls": u.calls})
        };
        Ok(json!({
            "today": day_json(&today, &u),
            "daily_token_budget": if rules.cost.enabled { rules.cost.daily_token_budget } else { None },
            "days": days.iter().rev().map(|(d, u)| day_json(d, u)).collect::<Vec<_>>(),
        }))
    }

    pub async fn create_report(&self, tenant: &str, body: NewReport, key: Option<&IdempotencyKey>) -> Result<Answer<Value>> {
        let name = body.name;
        if !reports::name_ok(&name, MAX_NAME) {
            return Err(ServiceError::invalid(format!(
                "name must not be blank, hold no control characters and be at most {MAX_NAME} characters"
            )));
        }
        let blocks = reports::parse_blocks(&body.blocks).map_err(ServiceError::Invalid)?;
        let every_secs = match body.schedule.map(|crate::json::Object(s)| s.every_secs.0) {
            None => None,
            Some(n) if (1..=MAX_EVERY_SECS).contains(&n) => Some(n as u64),
            Some(n) => {
                return Err(ServiceError::invalid(format!(
                    "schedule.every_secs must be within 1..={MAX_EVERY_SECS}, got {n}"
                )))
            }
        };
        let report =
            Report { id: crate::monitor::new_id(), name, blocks, every_secs, created_at: time::now_ms(), last_run: None };
        let ops = report.create_ops();
        self.write_keyed(tenant, Op::ReportCreate, key, ops, move |_| Ok(report.to_json())).await
    }

    pub async fn reports(&self, tenant: &str) -> Result<Vec<Value>> {
        let (engine, tenant) = (self.memory.store().clone(), tenant.to_string());
        let all = blocking(move || reports::list(&*engine, &tenant)).await?;
        Ok(all.iter().map(Report::to_json).collect())
    }

    async fn find_report(&self, tenant: &str, raw_id: &str) -> Result<Report> {
        let id = crate::monitor::parse_id(raw_id, REPORT_PREFIX).ok_or_else(ServiceError::not_found)?;
        let (engine, tenant) = (self.memory.store().clone(), tenant.to_string());
        blocking(move || reports::get(&*engine, &tenant, id)).await?.ok_or_else(ServiceError::not_found)
    }

    pub async fn report(&self, tenant: &str, raw_id: &str) -> Result<Value> {
        Ok(self.find_report(tenant, raw_id).await?.to_json())
    }

    /// Runs a report now; its output is kept as facts.
    pub async fn run_report(&self, tenant: &str, raw_id: &str, key: Option<&IdempotencyKey>) -> Result<Answer<Value>> {
        let report = self.find_report(tenant, raw_id).await?;
        if let Some(stored) = self.stored_answer(tenant, Op::ReportRun, key).await? {
            return Ok(Answer::Replayed(stored));
        }
        let run = {
            let (engine, tenant, defaults) =
                (self.memory.store().clone(), tenant.to_string(), self.monitor.config.defaults.clone());
            blocking(move || reports::run(&*engine, &tenant, &defaults, &report)).await?
        };
        let ops = run.ops();
        self.write_keyed(tenant, Op::ReportRun, key, ops, move |out| Ok(run.to_json(Some(out.tx)))).await
    }

    /// A report's runs, newest first.
    pub async fn report_runs(&self, tenant: &str, raw_id: &str, limit: Option<i64>) -> Result<Vec<Value>> {
        let limit = match limit {
            None => DEFAULT_RUNS,
            Some(n) if (1..=MAX_RUNS).contains(&n) => n,
            Some(n) => return Err(ServiceError::invalid(format!("limit must be within 1..={MAX_RUNS}, got {n}"))),
        };
        let report = self.find_report(tenant, raw_id).await?;
        let (engine, tenant) = (self.memory.store().clone(), tenant.to_string());
        let all = blocking(move || reports::runs(&*engine, &tenant, &report, limit as usize)).await?;
        Ok(all.iter().map(|r| r.to_json(None)).collect())
    }
}
