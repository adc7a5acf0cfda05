//! The `memory` network's tools, run for one tenant: `remember`, `recall`,
//! `build_context` and `whats_changed` are the MCP tools of the same names
//! (one implementation, the same argument schemas), `history` is every
//! stored version of a subject's facts. The model-free front man and the
//! tool-calling loop both call them through [`run`].

use crate::agents::MemoryTool;
use crate::auth::Principal;
use crate::service::ServiceError;
use crate::service::Service;
use crate::service::tools::CallerInfo;
use crate::memory::blocking;
use serde_json::{json, Map, Value};
use crate::store::Fact;

/// Most versions `history` returns.
pub const MAX_HISTORY: usize = 1000;
const DEFAULT_HISTORY: usize = 200;

/// Runs `tool` with `args` (the tool's schema, `crate::agents` built-in
/// network) in `tenant`. `source` is stamped on what `remember` writes when
/// the arguments name none: the conversation it was said in.
pub async fn run(
    st: &Service,
    tenant: &str,
    tool: MemoryTool,
    mut args: Map<String, Value>,
    source: Option<&str>,
) -> Result<Value, ServiceError> {
    // A tool runs in the turn's tenant whatever the arguments say: the
    // model must not be able to name another.
    args.remove("namespace");
    let caller = CallerInfo { principal: Principal::Tenant(tenant.to_string()), idempotency_key: None };
    match tool {
        MemoryTool::History => history(st, tenant, args).await,
        MemoryTool::Remember => {
            if let (Some(s), false) = (source, args.contains_key("source")) {
                args.insert("source".into(), json!(s));
            }
            crate::service::tools::call(st, &caller, tool.name(), args).await
        }
        MemoryTool::Recall | MemoryTool::BuildContext | MemoryTool::WhatsChanged => {
            crate::service::tools::call(st, &caller, tool.name(), args).await
        }
    }
}

async fn history(st: &Service, tenant: &str, args: Map<String, Value>) -> Result<Value, ServiceError> {
    let subject = match args.get("subject") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        _ => return Err(ServiceError::invalid("history needs subject, an entity `Type:id`")),
    };
    let predicate = match args.get("predicate") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(p.clone()),
        Some(other) => {
            return Err(ServiceError::invalid(format!("predicate must be a string, got {}", crate::json::kind_name(other))))
        }
    };
    let limit = match args.get("limit") {
        None | Some(Value::Null) => DEFAULT_HISTORY,
        Some(v) => match v.as_u64() {
            Some(n @ 1..) if n as usize <= MAX_HISTORY => n as usize,
            _ => return Err(ServiceError::invalid(format!("limit must be an integer within [1, {MAX_HISTORY}]"))),
        },
    };
    for key in args.keys() {
        if !["subject", "predicate", "limit"].contains(&key.as_str()) {
            return Err(ServiceError::invalid(format!("invalid argument {key}: unknown field")));
        }
    }
    let engine = st.memory.store().clone();
    let tenant = tenant.to_string();
    let versions: Vec<Fact> = blocking(move || engine.subject_history(&tenant, &subject, None)).await?;
    let mut versions: Vec<Fact> =
        versions.into_iter().filter(|f| predicate.as_deref().is_none_or(|p| f.predicate == p)).collect();
    let truncated = versions.len() > limit;
    // The newest matter most when cut: keep the last `limit`, oldest first.
    if truncated {
        versions.drain(..versions.len() - limit);
    }
    Ok(json!({"versions": versions, "truncated": truncated}))
}
