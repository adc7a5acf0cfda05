//! Alerts: the rules' signals, and alerts as facts.
//!
//! An alert is the subject `Alert:<id>` with the facts `alert.state`
//! (`open`, `acked` or `resolved`; cardinality one, so each new state
//! supersedes the previous one, which stays in history), `alert.rule`,
//! `alert.key` (what it is about), `alert.message`, `alert.value`,
//! `alert.limit`, `alert.fired_at`, and `alert.acked_at` /
//! `alert.resolved_at` once it got there.
//!
//! An evaluation computes every rule's signals, then: a firing (rule, key)
//! without an open or acked alert fires a new one; an open or acked alert
//! whose (rule, key) no longer fires is resolved; anything else is left as
//! it is (no refiring while the condition holds). All of one evaluation is
//! one write transaction.

use super::rules::Rules;
use super::time::{self, now_ms};
use super::{assert_op, is_monitor_subject, subject_facts, usage, ALERT_PREFIX};
use crate::recall::collect;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use crate::store::{
    AsOf, MemoryStore, EngineError, Fact, FactId, FactQuery, LoggedEvent, OpOutcome, Status, StatusFilter, TenantStats, Tx,
    WriteOp, WriteOutcome, MAX_PAGE,
};
use uuid::Uuid;

pub const STATE: &str = "alert.state";
pub const RULE: &str = "alert.rule";
pub const KEY: &str = "alert.key";
pub const MESSAGE: &str = "alert.message";
pub const VALUE: &str = "alert.value";
pub const LIMIT: &str = "alert.limit";
pub use super::facts::FIRED_AT;
pub const ACKED_AT: &str = "alert.acked_at";
pub const RESOLVED_AT: &str = "alert.resolved_at";

pub const OPEN: &str = "open";
pub const ACKED: &str = "acked";
pub const RESOLVED: &str = "resolved";

/// Change-log transactions read per step of a scan.
const SCAN_STEP: usize = 1000;
/// Alerts a listing of every state returns (the newest).
pub const MAX_ALERTS: usize = 10_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub id: Uuid,
    pub state: String,
    /// The fact holding the current state, and its transaction.
    pub state_fact: FactId,
    pub tx: Tx,
    pub rule: String,
    pub key: String,
    pub message: String,
    pub value: Value,
    pub limit: Value,
    pub fired_at: i64,
    pub acked_at: Option<i64>,
    pub resolved_at: Option<i64>,
}

impl Alert {
    pub fn subject(&self) -> String {
        format!("{ALERT_PREFIX}{}", self.id)
    }

    pub fn is_unresolved(&self) -> bool {
        self.state == OPEN || self.state == ACKED
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "subject": self.subject(),
            "object": self.state,
            "id": self.id,
            "state": self.state,
            "rule": self.rule,
            "key": self.key,
            "message": self.message,
            "value": self.value,
            "limit": self.limit,
            "fired_at": self.fired_at,
            "fact_id": self.state_fact,
            "tx": self.tx,
        });
        if let Some(t) = self.acked_at {
            v["acked_at"] = json!(t);
        }
        if let Some(t) = self.resolved_at {
            v["resolved_at"] = json!(t);
        }
        v
    }

    fn from_facts(id: Uuid, facts: &HashMap<String, Fact>) -> Option<Alert> {
        let state = facts.get(STATE)?;
        let text = |p: &str| facts.get(p).and_then(|f| f.object.as_str()).unwrap_or_default().to_string();
        let int = |p: &str| facts.get(p).and_then(|f| f.object.as_i64());
        Some(Alert {
            id,
            state: state.object.as_str()?.to_string(),
            state_fact: state.id,
            tx: state.tx,
            rule: text(RULE),
            key: text(KEY),
            message: text(MESSAGE),
            value: facts.get(VALUE).map(|f| f.object.clone()).unwrap_or(Value::Null),
            limit: facts.get(LIMIT).map(|f| f.object.clone()).unwrap_or(Value::Null),
            fired_at: int(FIRED_AT).unwrap_or(state.created_at),
            acked_at: int(ACKED_AT),
            resolved_at: int(RESOLVED_AT),
        })
    }
}

/// One alert by id (`None`: no such alert in this tenant).
pub fn get(engine: &dyn MemoryStore, tenant: &str, id: Uuid) -> Result<Option<Alert>, EngineError> {
    let facts = subject_facts(engine, tenant, &format!("{ALERT_PREFIX}{id}"))?;
    Ok(Alert::from_facts(id, &facts))
}

/// The tenant's newest [`MAX_ALERTS`] alerts, in any state, newest first.
pub fn list(engine: &dyn MemoryStore, tenant: &str) -> Result<Vec<Alert>, EngineError> {
    let q = FactQuery { predicate: Some(STATE.to_string()), ..Default::default() };
    // Every alert's state fact (one small fact each), then the newest by id
    // (ids sort by time): reading the first MAX_ALERTS once listed the
    // oldest alerts and none of the newest.
    let (mut states, _) = collect(engine, tenant, &q, usize::MAX)?;
    states.sort_by(|a, b| b.subject.cmp(&a.subject));
    states.truncate(MAX_ALERTS);
    let mut out = read_alerts(engine, tenant, &states)?;
    out.sort_by(|a, b| b.fired_at.cmp(&a.fired_at).then(b.id.cmp(&a.id)));
    Ok(out)
}

/// The alerts whose state facts these are, each read whole.
fn read_alerts(engine: &dyn MemoryStore, tenant: &str, states: &[Fact]) -> Result<Vec<Alert>, EngineError> {
    let ids = states.iter().filter_map(|f| f.subject.strip_prefix(ALERT_PREFIX).and_then(|s| Uuid::parse_str(s).ok()));
    ids.filter_map(|id| get(engine, tenant, id).transpose()).collect()
}

/// Every open or acked alert of the tenant, newest first, however many
/// alerts it has had: the state facts whose object is `open` or `acked`,
/// found through the object index with no cap. (That index keeps the
/// closed states of resolved alerts too; the query passes over them, so a
/// long history costs time, never an alert.) Evaluations and reports go by
/// this, never by [`list`], whose cap once hid the newest alerts (ids sort
/// by time) from evaluation once a tenant had had 10,000: each pass then
/// fired the same alert again.
pub fn unresolved(engine: &dyn MemoryStore, tenant: &str) -> Result<Vec<Alert>, EngineError> {
    let mut out = Vec::new();
    for state in [OPEN, ACKED] {
        let q = FactQuery { predicate: Some(STATE.to_string()), object: Some(json!(state)), ..Default::default() };
        let (states, _) = collect(engine, tenant, &q, usize::MAX)?;
        out.extend(read_alerts(engine, tenant, &states)?.into_iter().filter(Alert::is_unresolved));
    }
    out.sort_by(|a, b| b.fired_at.cmp(&a.fired_at).then(b.id.cmp(&a.id)));
    Ok(out)
}

/// What one rule says about one key right now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signal {
    pub rule: &'static str,
    pub key: String,
    pub firing: bool,
    pub value: Value,
    pub limit: Value,
    pub message: String,
}

/// Per-tenant state of the change-log scan (aux `monitor/scan/<tenant>`):
/// supersession counts per bucket for the drift rule, and what the monitor's
/// own subjects add to the tenant's stats (left out of the confidence rule
/// and of a report's stats block).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ScanState {
    pub watermark: Tx,
    pub bucket_ms: u64,
    pub buckets: BTreeMap<i64, u64>,
    pub monitor_active: i64,
    pub monitor_candidate: i64,
    pub monitor_superseded: i64,
    pub monitor_retracted: i64,
    /// Alerts, reports and runs ever created, and the rules subject.
    pub monitor_subjects: i64,
    pub monitor_predicates: std::collections::BTreeSet<String>,
}

/// Predicates written exactly once per monitor subject: counting them
/// counts the subjects.
const CREATING: [&str; 4] = [FIRED_AT, super::facts::CREATED_AT, super::facts::RAN_AT, super::facts::OVERRIDES];

impl ScanState {
    /// The tenant's stats without the monitor's own facts.
    pub fn own(&self, s: &TenantStats) -> TenantStats {
        let sub = |n: u64, m: i64| (n as i64 - m).max(0) as u64;
        TenantStats {
            active: sub(s.active, self.monitor_active),
            candidate: sub(s.candidate, self.monitor_candidate),
            superseded: sub(s.superseded, self.monitor_superseded),
            retracted: sub(s.retracted, self.monitor_retracted),
            subjects: sub(s.subjects, self.monitor_subjects),
            predicates: sub(s.predicates, self.monitor_predicates.len() as i64),
        }
    }
}

/// One scan at a time: a scan reads, extends and stores the state.
static SCANNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn scan_key(tenant: &str) -> Vec<u8> {
    let mut k = b"monitor/scan/".to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k
}

/// Buckets per drift window.
const BUCKETS_PER_WINDOW: i64 = 4;

/// Reads the tenant's new changes into its scan state and stores it.
pub fn scan(engine: &dyn MemoryStore, tenant: &str, window_ms: u64, baseline_windows: u64) -> Result<ScanState, EngineError> {
    let _one = SCANNING.lock().unwrap_or_else(|e| e.into_inner());
    let key = scan_key(tenant);
    let mut st: ScanState = engine.aux_get(&key)?.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let g = (window_ms / BUCKETS_PER_WINDOW as u64).max(1);
    if st.bucket_ms != g {
        // A new window size: the old buckets do not fit it; the baseline refills.
        st.buckets.clear();
        st.bucket_ms = g;
    }
    // Every pass reads up to the tenant's newest transaction as of its start:
    // a pass that stopped earlier would leave the drift rule behind for as
    // long as writes outpace it, and a pass that chased writes arriving
    // meanwhile might never end. Reading a change costs a fraction of
    // writing it, so a pass keeps up with any write rate.
    let head = engine.tenant_last_write(tenant)?.map_or(0, |(tx, _)| tx);
    while st.watermark < head {
        // By fact id: a version is read only for the monitor's own subjects,
        // which are few. The drift rule takes the log's count of value changes.
        let changes = engine.change_log(tenant, st.watermark, SCAN_STEP)?;
        if changes.is_empty() {
            break;
        }
        for ch in &changes {
            let b = ch.recorded_at.div_euclid(g as i64);
            for ev in &ch.events {
                match ev {
                    // Only a changed value is drift: a confirmation of the same
                    // value closes the older copy too. The test stays inside the
                    // arm: in the guard, an unchanged value would fall through
                    // to the next arm and count as the monitor's own fact.
                    #[allow(clippy::collapsible_match)]
                    LoggedEvent::Assert { subject, changed, .. } if !is_monitor_subject(subject) => {
                        if *changed > 0 {
                            *st.buckets.entry(b).or_default() += *changed as u64;
                        }
                    }
                    LoggedEvent::Assert { fact, superseded, continued, .. } => {
                        if let Some(fact) = engine.get(tenant, *fact, Some(AsOf::Tx(ch.tx)))? {
                            match fact.status {
                                Status::Active => st.monitor_active += 1,
                                Status::Candidate => st.monitor_candidate += 1,
                                _ => {}
                            }
                            if CREATING.contains(&fact.predicate.as_str())
                                && (fact.predicate != super::rules::OVERRIDES || !st.monitor_predicates.contains(&fact.predicate))
                            {
                                st.monitor_subjects += 1;
                            }
                            if !st.monitor_predicates.contains(&fact.predicate) {
                                st.monitor_predicates.insert(fact.predicate);
                            }
                        }
                        // What it closed and continued are facts of the same
                        // subject (supersession is per subject and predicate).
                        st.monitor_active += continued.len() as i64 - superseded.len() as i64;
                        st.monitor_superseded += superseded.len() as i64;
                    }
                    LoggedEvent::Retract { fact, subject } if is_monitor_subject(subject) => {
                        let before = engine.get(tenant, *fact, Some(AsOf::Tx(ch.tx.saturating_sub(1))))?;
                        match before.map(|f| f.status) {
                            Some(Status::Active) => st.monitor_active -= 1,
                            Some(Status::Candidate) => st.monitor_candidate -= 1,
                            Some(Status::Superseded) => st.monitor_superseded -= 1,
                            _ => {}
                        }
                        st.monitor_retracted += 1;
                    }
                    _ => {}
                }
            }
            st.watermark = ch.tx;
        }
    }
    let cur = now_ms().div_euclid(g as i64);
    let keep_from = cur - BUCKETS_PER_WINDOW * (baseline_windows as i64 + 1) - 1;
    st.buckets.retain(|b, _| *b >= keep_from);
    engine.aux_put(&key, &serde_json::to_vec(&st).expect("scan state serializes"))?;
    Ok(st)
}

fn duration_text(ms: u64) -> String {
    const UNITS: [(u64, &str); 5] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1000, "s"), (1, "ms")];
    for (u, name) in UNITS {
        if ms >= u && ms.is_multiple_of(u) {
            return format!("{}{name}", ms / u);
        }
    }
    format!("{ms}ms")
}

/// How many active facts of `predicate`, open at `now`, were last confirmed
/// before `cutoff`, and the oldest of them (subject, when confirmed). Reads
/// every active fact of the predicate a page at a time, so the count is exact
/// at any size and memory stays one page.
fn stale_facts(engine: &dyn MemoryStore, tenant: &str, predicate: &str, cutoff: i64, now: i64) -> Result<(u64, Option<(String, i64)>), EngineError> {
    let mut q = FactQuery {
        predicate: Some(predicate.to_string()),
        status: StatusFilter::Only(Status::Active),
        limit: MAX_PAGE,
        ..Default::default()
    };
    let (mut stale, mut oldest): (u64, Option<(String, i64)>) = (0, None);
    loop {
        let page = engine.query(tenant, &q)?;
        for f in page.facts {
            let confirmed = f.valid_from.max(f.created_at);
            if is_monitor_subject(&f.subject) || f.valid_until.is_some_and(|u| u <= now) || confirmed >= cutoff {
                continue;
            }
            stale += 1;
            if oldest.as_ref().is_none_or(|(_, at)| confirmed < *at) {
                oldest = Some((f.subject, confirmed));
            }
        }
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => return Ok((stale, oldest)),
        }
    }
}

/// Every rule's signals for the tenant now.
pub fn signals(engine: &dyn MemoryStore, tenant: &str, rules: &Rules, scan: &ScanState, now: i64) -> Result<Vec<Signal>, EngineError> {
    let mut out = Vec::new();
    if rules.confidence.enabled {
        let c = &rules.confidence;
        let s = scan.own(&engine.stats(tenant));
        let (active, candidate) = (s.active, s.candidate);
        let live = active + candidate;
        let share = if live == 0 { 0.0 } else { candidate as f64 / live as f64 };
        let share = (share * 10_000.0).round() / 10_000.0;
        out.push(Signal {
            rule: "confidence",
            key: "candidates".into(),
            firing: live >= c.min_facts && share > c.max_share,
            value: json!(share),
            limit: json!(c.max_share),
            message: format!(
                "{candidate} of {live} live facts ({:.1}%) are candidates below the confidence threshold (limit {:.1}%, applies from {} facts)",
                share * 100.0,
                c.max_share * 100.0,
                c.min_facts
            ),
        });
    }
    if rules.freshness.enabled {
        for (predicate, ttl) in &rules.freshness.ttl_ms {
            let cutoff = now.saturating_sub(*ttl as i64);
            let (stale, oldest) = stale_facts(engine, tenant, predicate, cutoff, now)?;
            let example = oldest.map(|(subject, at)| format!(", oldest: {subject} (confirmed {})", time::iso(at))).unwrap_or_default();
            out.push(Signal {
                rule: "freshness",
                key: predicate.clone(),
                firing: stale > 0,
                value: json!(stale),
                limit: json!(ttl),
                message: format!(
                    "{stale} active `{predicate}` facts were not confirmed within {}{example}",
                    duration_text(*ttl)
                ),
            });
        }
    }
    if rules.drift.enabled {
        let d = &rules.drift;
        let g = scan.bucket_ms.max(1) as i64;
        let cur = now.div_euclid(g);
        let sum = |from: i64, to: i64| scan.buckets.range(from..=to).map(|(_, n)| n).sum::<u64>();
        let recent = sum(cur - BUCKETS_PER_WINDOW + 1, cur);
        let base_to = cur - BUCKETS_PER_WINDOW;
        let base_from = base_to - BUCKETS_PER_WINDOW * d.baseline_windows as i64 + 1;
        let baseline = sum(base_from, base_to) as f64 / d.baseline_windows as f64;
        let threshold = d.factor * baseline;
        let limit = (threshold.max(d.min_count as f64) * 100.0).round() / 100.0;
        out.push(Signal {
            rule: "drift",
            key: "supersessions".into(),
            firing: recent >= d.min_count && recent as f64 > threshold,
            value: json!(recent),
            limit: json!(limit),
            message: format!(
                "{recent} values changed in the last {} (baseline {:.2} per window over the previous {}; fires at {} and above {}x the baseline)",
                duration_text(d.window_ms),
                baseline,
                d.baseline_windows,
                d.min_count,
                d.factor
            ),
        });
    }
    if rules.cost.enabled {
        if let Some(budget) = rules.cost.daily_token_budget {
            let today = time::day(now);
            let u = usage::on_day(engine, tenant, &today)?;
            out.push(Signal {
                rule: "cost",
                key: "tokens".into(),
                firing: u.total() > budget,
                value: json!(u.total()),
                limit: json!(budget),
                message: format!(
                    "{} model tokens used on {today} (UTC) in {} calls ({} in, {} out); the daily budget is {budget}",
                    u.total(),
                    u.calls,
                    u.tokens_in,
                    u.tokens_out
                ),
            });
        }
    }
    Ok(out)
}

/// What an evaluation decided: the ops of its write, and how to answer.
pub struct Plan {
    pub ops: Vec<WriteOp>,
    /// New alerts and the index of their `alert.state` op.
    pub fired: Vec<(Alert, usize)>,
    pub resolved: Vec<(Alert, usize)>,
    pub unchanged: Vec<Alert>,
    pub checks: Vec<Signal>,
}

fn state_ops(subject: &str, state: &str, at_predicate: &str, now: i64) -> [WriteOp; 2] {
    [assert_op(subject, STATE, json!(state)), assert_op(subject, at_predicate, json!(now))]
}

/// The tenant's stats without the monitor's own facts, subjects and
/// predicates (reads the change log up to now first).
pub fn own_stats(engine: &dyn MemoryStore, tenant: &str, defaults: &Rules) -> Result<TenantStats, EngineError> {
    let rules = super::rules::load(engine, tenant, defaults)?;
    let st = scan(engine, tenant, rules.drift.window_ms, rules.drift.baseline_windows)?;
    Ok(st.own(&engine.stats(tenant)))
}

/// Evaluates the tenant's rules and plans the write (call under the
/// tenant's monitor lock).
pub fn plan(engine: &dyn MemoryStore, tenant: &str, defaults: &Rules) -> Result<Plan, EngineError> {
    let rules = super::rules::load(engine, tenant, defaults)?;
    let scan = scan(engine, tenant, rules.drift.window_ms, rules.drift.baseline_windows)?;
    let now = now_ms();
    let checks = signals(engine, tenant, &rules, &scan, now)?;
    let existing = unresolved(engine, tenant)?;
    let mut plan = Plan { ops: Vec::new(), fired: Vec::new(), resolved: Vec::new(), unchanged: Vec::new(), checks: Vec::new() };
    let firing = |rule: &str, key: &str| checks.iter().any(|s| s.firing && s.rule == rule && s.key == key);
    for a in existing {
        if firing(&a.rule, &a.key) {
            plan.unchanged.push(a);
        } else {
            let at = plan.ops.len();
            plan.ops.extend(state_ops(&a.subject(), RESOLVED, RESOLVED_AT, now));
            let mut a = a;
            a.state = RESOLVED.into();
            a.resolved_at = Some(now);
            plan.resolved.push((a, at));
        }
    }
    for s in checks.iter().filter(|s| s.firing) {
        if plan.unchanged.iter().any(|a| a.rule == s.rule && a.key == s.key) {
            continue;
        }
        let id = super::new_id();
        let subject = format!("{ALERT_PREFIX}{id}");
        let at = plan.ops.len();
        plan.ops.extend([
            assert_op(&subject, STATE, json!(OPEN)),
            assert_op(&subject, RULE, json!(s.rule)),
            assert_op(&subject, KEY, json!(s.key)),
            assert_op(&subject, MESSAGE, json!(s.message)),
            assert_op(&subject, VALUE, s.value.clone()),
            assert_op(&subject, LIMIT, s.limit.clone()),
            assert_op(&subject, FIRED_AT, json!(now)),
        ]);
        let a = Alert {
            id,
            state: OPEN.into(),
            state_fact: Uuid::nil(),
            tx: 0,
            rule: s.rule.into(),
            key: s.key.clone(),
            message: s.message.clone(),
            value: s.value.clone(),
            limit: s.limit.clone(),
            fired_at: now,
            acked_at: None,
            resolved_at: None,
        };
        plan.fired.push((a, at));
    }
    plan.checks = checks;
    Ok(plan)
}

/// Fills in the state facts the write created.
fn settle(items: &[(Alert, usize)], out: Option<&WriteOutcome>) -> Vec<Value> {
    items
        .iter()
        .map(|(a, at)| {
            let mut a = a.clone();
            if let Some(OpOutcome::Asserted(x)) = out.and_then(|o| o.outcomes.get(*at)) {
                a.state_fact = x.fact.id;
                a.tx = x.fact.tx;
            }
            a.to_json()
        })
        .collect()
}

impl Plan {
    /// The answer of an evaluation, after its write (`None`: nothing written).
    pub fn render(&self, out: Option<&WriteOutcome>) -> Value {
        json!({
            "fired": settle(&self.fired, out),
            "resolved": settle(&self.resolved, out),
            "unchanged": self.unchanged.iter().map(Alert::to_json).collect::<Vec<_>>(),
            "checks": self.checks,
            "tx": out.map(|o| o.tx),
        })
    }

    /// What the background evaluation logs.
    pub fn summary(&self) -> (usize, usize) {
        (self.fired.len(), self.resolved.len())
    }
}

/// The write that acks an open alert.
pub fn ack_ops(a: &Alert, now: i64) -> Vec<WriteOp> {
    state_ops(&a.subject(), ACKED, ACKED_AT, now).into()
}

/// The acked alert after its write.
pub fn acked(a: &Alert, now: i64, out: &WriteOutcome) -> Value {
    let mut a = a.clone();
    a.state = ACKED.into();
    a.acked_at = Some(now);
    settle(&[(a, 0)], Some(out)).remove(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::{Durability, Engine, EngineConfig};
    use crate::store::FactInput;

    /// An open alert is found however many alerts came before it: the
    /// evaluation once read the first 10,000 alerts only, and alert ids sort
    /// by time, so a tenant's newest alerts went unseen: never resolved, and
    /// fired again at every pass while their rule held.
    #[test]
    fn an_evaluation_sees_open_alerts_past_ten_thousand_resolved_ones() {
        let engine = Engine::open(EngineConfig::temporary().durability(Durability::Relaxed)).unwrap();
        let subject = |n: u128| format!("{ALERT_PREFIX}{}", Uuid::from_u128(n));
        for chunk in (1..=10_500u128).collect::<Vec<_>>().chunks(5_000) {
            engine.write("t", chunk.iter().map(|&n| assert_op(&subject(n), STATE, json!(RESOLVED))).collect()).unwrap();
        }
        // The newest alert sorts after all of them; its rule no longer fires
        // (the tenant holds no candidates), so the evaluation resolves it.
        let open = Uuid::from_u128(u128::MAX);
        let ops = vec![
            assert_op(&subject(u128::MAX), STATE, json!(OPEN)),
            assert_op(&subject(u128::MAX), RULE, json!("confidence")),
            assert_op(&subject(u128::MAX), KEY, json!("candidates")),
        ];
        engine.write("t", ops).unwrap();
        assert_eq!(unresolved(&engine, "t").unwrap().iter().map(|a| a.id).collect::<Vec<_>>(), vec![open]);
        // A listing of every state holds the newest alerts, this one first.
        let listed = list(&engine, "t").unwrap();
        assert_eq!((listed.len(), listed[0].id), (MAX_ALERTS, open));
        let plan = plan(&engine, "t", &Rules::default()).unwrap();
        assert_eq!(plan.resolved.iter().map(|(a, _)| a.id).collect::<Vec<_>>(), vec![open]);
        assert!(plan.fired.is_empty(), "{:?}", plan.fired);
    }

    /// The freshness count is exact past any page or cap: it once stopped at
    /// the first 100,000 facts of a predicate and said nothing of the rest.
    #[test]
    fn freshness_counts_every_stale_fact_of_a_large_predicate() {
        const FACTS: usize = 110_000;
        let engine = Engine::open(EngineConfig::temporary().durability(Durability::Relaxed)).unwrap();
        let one = |s: &str| WriteOp::Assert(FactInput::new(s, "reading", json!(1)).confidence(1.0));
        engine.write("t", vec![one("Sensor:first")]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        for chunk in (0..FACTS).collect::<Vec<_>>().chunks(10_000) {
            engine.write("t", chunk.iter().map(|i| one(&format!("Sensor:{i}"))).collect()).unwrap();
        }
        let now = now_ms() + 60_000;
        // Neither counts: valid only from after the cutoff, and no longer valid at `now`.
        let later = FactInput::new("Sensor:later", "reading", json!(1)).confidence(1.0).valid_from(now);
        let ended =
            FactInput::new("Sensor:ended", "reading", json!(1)).confidence(1.0).valid_from(0).valid_until(now - 1);
        engine.write("t", vec![WriteOp::Assert(later), WriteOp::Assert(ended)]).unwrap();
        let (stale, oldest) = stale_facts(&engine, "t", "reading", now, now).unwrap();
        assert_eq!(stale, FACTS as u64 + 1);
        assert_eq!(oldest.unwrap().0, "Sensor:first");
    }

    /// Under sustained writes a pass must reach the newest change: a pass
    /// that read a fixed number of transactions (50,000 once) left the drift
    /// rule further behind with every pass once writes outpaced it.
    #[test]
    fn one_pass_reads_every_change_up_to_the_newest() {
        const KEYS: usize = 100;
        const WRITES: usize = 52_000;
        let engine = std::sync::Arc::new(Engine::open(EngineConfig::temporary().durability(Durability::Relaxed)).unwrap());
        // One transaction per write; four writers so that the writer groups them.
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let engine = std::sync::Arc::clone(&engine);
                std::thread::spawn(move || {
                    for i in (w..WRITES).step_by(4) {
                        let input = FactInput::new(format!("Sensor:{}", i % KEYS), "reading", json!(i)).confidence(1.0);
                        engine.write("t", vec![WriteOp::Assert(input)]).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let head = engine.tenant_last_write("t").unwrap().unwrap().0;
        let st = scan(&*engine, "t", 3_600_000, 3).unwrap();
        assert_eq!(st.watermark, head);
        // Every write after a key's first closed a different value.
        assert_eq!(st.buckets.values().sum::<u64>(), (WRITES - KEYS) as u64);
        // A second pass finds nothing new and counts nothing twice.
        let again = scan(&*engine, "t", 3_600_000, 3).unwrap();
        assert_eq!((again.watermark, again.buckets.values().sum::<u64>()), (head, (WRITES - KEYS) as u64));
    }
}
