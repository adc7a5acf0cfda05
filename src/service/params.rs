//! The read parameters every surface takes (`as_of`, `as_of_tx`,
//! `valid_at`, `limit`, `cursor`), checked by one set of rules whatever the
//! wire they came in on (a query string, JSON arguments, a gRPC message):
//!
//! - `as_of` is unix milliseconds of record time, `as_of_tx` a transaction
//!   number (not negative); give one or neither.
//! - `valid_at` is unix milliseconds of valid time, any integer.
//! - `limit` is a page size within `[1, max]` of the operation; outside it
//!   the request is refused, naming the range (never clamped in silence).
//! - `cursor` is opaque: what the previous page returned.

use super::error::{Result, ServiceError};
use tempora_storage::{AsOf, Tx};

/// Read parameters as a surface received them, before they are checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadParams {
    pub as_of: Option<i64>,
    pub as_of_tx: Option<i64>,
    pub valid_at: Option<i64>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
}

impl ReadParams {
    /// The record time to read at.
    pub fn as_of(&self) -> Result<Option<AsOf>> {
        record_time(self.as_of, self.as_of_tx)
    }

    /// The page size: `default` when absent, else within `[1, max]`.
    pub fn limit(&self, default: usize, max: usize) -> Result<usize> {
        limit("limit", self.limit, default, max)
    }
}

/// `as_of` (unix ms) or `as_of_tx` (a transaction number), not both.
pub fn record_time(as_of: Option<i64>, as_of_tx: Option<i64>) -> Result<Option<AsOf>> {
    match (as_of, as_of_tx) {
        (Some(_), Some(_)) => Err(ServiceError::invalid("give as_of or as_of_tx, not both")),
        (Some(t), None) => Ok(Some(AsOf::Time(t))),
        (None, Some(tx)) if tx >= 0 => Ok(Some(AsOf::Tx(tx as Tx))),
        (None, Some(_)) => Err(ServiceError::invalid("as_of_tx must not be negative")),
        (None, None) => Ok(None),
    }
}

/// A page size named `name`: `default` when absent, else within `[1, max]`.
pub fn limit(name: &str, value: Option<i64>, default: usize, max: usize) -> Result<usize> {
    match value {
        None => Ok(default),
        Some(n) if n >= 1 && n <= max as i64 => Ok(n as usize),
        Some(n) => Err(ServiceError::invalid(format!("{name} must be within [1, {max}], got {n}"))),
    }
}

/// An integer argument that must lie within `[min, max]`.
pub fn within(name: &str, value: Option<i64>, min: i64, max: i64) -> Result<Option<i64>> {
    match value {
        Some(n) if !(min..=max).contains(&n) => {
            Err(ServiceError::invalid(format!("{name} must be within [{min}, {max}], got {n}")))
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_record_time_at_most() {
        assert_eq!(record_time(Some(5), None), Ok(Some(AsOf::Time(5))));
        assert_eq!(record_time(None, Some(7)), Ok(Some(AsOf::Tx(7))));
        assert_eq!(record_time(None, None), Ok(None));
        assert!(record_time(Some(5), Some(7)).is_err());
        assert!(record_time(None, Some(-1)).is_err());
    }

    #[test]
    fn a_limit_outside_its_range_is_refused_not_clamped() {
        let p = |l| ReadParams { limit: l, ..Default::default() };
        assert_eq!(p(None).limit(100, 1000), Ok(100));
        assert_eq!(p(Some(1)).limit(100, 1000), Ok(1));
        assert_eq!(p(Some(1000)).limit(100, 1000), Ok(1000));
        for bad in [0, -1, 1001] {
            let e = p(Some(bad)).limit(100, 1000).unwrap_err();
            assert_eq!(e, ServiceError::invalid(format!("limit must be within [1, 1000], got {bad}")));
        }
    }
}
