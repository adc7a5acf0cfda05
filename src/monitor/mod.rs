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
pub mod facts;
pub mod reports;
pub mod rules;
pub mod scheduler;
pub mod settings;
pub mod time;
pub mod usage;

pub use facts::*;
pub use settings::*;

