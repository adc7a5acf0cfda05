//! Input limits the engine enforces on every fact, whatever surface it came
//! from. The service may enforce tighter request-level limits on top.

use crate::error::{EngineError, Result};
use crate::model::{FactInput, WriteOp};
use serde_json::Value;

pub const MAX_SUBJECT_BYTES: usize = 1024;
pub const MAX_PREDICATE_BYTES: usize = 256;
pub const MAX_SOURCE_BYTES: usize = 2048;
/// Serialized size of `object` plus `properties`.
pub const MAX_VALUE_BYTES: usize = 256 * 1024;
pub const MAX_JSON_DEPTH: usize = 32;

/// Checks one write (one transaction) of `tenant` before anything of it is
/// applied: a tenant, at least one operation, and each operation's input.
pub fn validate_write(tenant: &str, ops: &[WriteOp]) -> Result<()> {
    if tenant.is_empty() {
        return Err(EngineError::invalid("tenant must not be empty"));
    }
    if ops.is_empty() {
        return Err(EngineError::invalid("a write needs at least one operation"));
    }
    for op in ops {
        match op {
            WriteOp::Assert(input) => validate_input(input)?,
            WriteOp::SetThreshold(t) if !(0.0..=1.0).contains(t) => {
                return Err(EngineError::invalid(format!("threshold must be within [0, 1], got {t}")))
            }
            WriteOp::SetCardinality { predicate, .. } if predicate.is_empty() => {
                return Err(EngineError::invalid("predicate must not be empty"))
            }
            _ => {}
        }
    }
    Ok(())
}

pub fn validate_input(f: &FactInput) -> Result<()> {
    check_name("subject", &f.subject, MAX_SUBJECT_BYTES)?;
    check_name("predicate", &f.predicate, MAX_PREDICATE_BYTES)?;
    if let Some(c) = f.confidence {
        if !(0.0..=1.0).contains(&c) {
            return Err(EngineError::invalid(format!("confidence must be within [0, 1], got {c}")));
        }
    }
    if let Some(s) = &f.source {
        if s.len() > MAX_SOURCE_BYTES {
            return Err(EngineError::invalid(format!("source is longer than {MAX_SOURCE_BYTES} bytes")));
        }
    }
    if let (Some(from), Some(until)) = (f.valid_from, f.valid_until) {
        if until <= from {
            return Err(EngineError::invalid(format!(
                "valid_until ({until}) must be after valid_from ({from})"
            )));
        }
    }
    let mut size = 0;
    check_json("object", &f.object, 0, &mut size)?;
    if let Some(p) = &f.properties {
        for v in p.values() {
            check_json("properties", v, 1, &mut size)?;
        }
        size += p.keys().map(|k| k.len() + 3).sum::<usize>();
    }
    if size > MAX_VALUE_BYTES {
        return Err(EngineError::invalid(format!(
            "object and properties together exceed {MAX_VALUE_BYTES} bytes"
        )));
    }
    Ok(())
}

fn check_name(field: &str, v: &str, max: usize) -> Result<()> {
    if v.trim().is_empty() {
        return Err(EngineError::invalid(format!("{field} must not be empty")));
    }
    if v.len() > max {
        return Err(EngineError::invalid(format!("{field} is longer than {max} bytes")));
    }
    if v.chars().any(char::is_control) {
        return Err(EngineError::invalid(format!("{field} must not contain control characters")));
    }
    Ok(())
}

/// Depth and approximate serialized size, without serializing.
fn check_json(field: &str, v: &Value, depth: usize, size: &mut usize) -> Result<()> {
    if depth > MAX_JSON_DEPTH {
        return Err(EngineError::invalid(format!("{field} nests deeper than {MAX_JSON_DEPTH} levels")));
    }
    match v {
        Value::Null | Value::Bool(_) => *size += 5,
        Value::Number(_) => *size += 24,
        Value::String(s) => *size += s.len() + 2,
        Value::Array(a) => {
            *size += 2;
            for x in a {
                check_json(field, x, depth + 1, size)?;
            }
        }
        Value::Object(o) => {
            *size += 2;
            for (k, x) in o {
                *size += k.len() + 3;
                check_json(field, x, depth + 1, size)?;
            }
        }
    }
    if *size > MAX_VALUE_BYTES {
        return Err(EngineError::invalid(format!(
            "object and properties together exceed {MAX_VALUE_BYTES} bytes"
        )));
    }
    Ok(())
}
