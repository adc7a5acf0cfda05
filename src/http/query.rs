//! Query-string parameters, parsed by hand so every bad value answers with the
//! error envelope naming the parameter.

use super::error::ApiError;
use super::extract::percent_decode;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use crate::service::params::ReadParams;
use crate::service::model::{AsOf, Status, StatusFilter, StatusSet};

#[derive(Debug, Default, Clone)]
pub struct QueryPairs(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryPairs {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Ok(QueryPairs::parse(parts.uri.query().unwrap_or("")))
    }
}

impl QueryPairs {
    pub fn parse(query: &str) -> Self {
        QueryPairs(
            query
                .split('&')
                .filter(|kv| !kv.is_empty())
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => (percent_decode(k), percent_decode(v)),
                    None => (percent_decode(kv), String::new()),
                })
                .collect(),
        )
    }

    /// The value of `name`; given twice is an error (which one was meant?).
    pub fn string(&self, name: &str) -> Result<Option<String>, ApiError> {
        let mut found = self.0.iter().filter(|(k, _)| k == name);
        let first = found.next().map(|(_, v)| v.clone());
        if found.next().is_some() {
            return Err(ApiError::schema(format!("query parameter {name} is given more than once")));
        }
        Ok(first)
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        match self.string(name)? {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::schema(format!("query parameter {name} must be an integer, got {v:?}"))),
        }
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.string(name)?.as_deref() {
            None => Ok(None),
            // Not the bare `?flag` (an empty value): the documented type is boolean.
            Some("true" | "1") => Ok(Some(true)),
            Some("false" | "0") => Ok(Some(false)),
            Some(v) => Err(ApiError::schema(format!("query parameter {name} must be true or false, got {v:?}"))),
        }
    }

    /// `as_of` (unix ms) or `as_of_tx` (a transaction number), not both.
    pub fn as_of(&self) -> Result<Option<AsOf>, ApiError> {
        Ok(self.read_params()?.as_of()?)
    }

    /// The read parameters, checked by the service's rules
    /// (`service/params.rs`) when they are used.
    pub fn read_params(&self) -> Result<ReadParams, ApiError> {
        Ok(ReadParams {
            as_of: self.int("as_of")?,
            as_of_tx: self.int("as_of_tx")?,
            valid_at: self.int("valid_at")?,
            limit: self.int("limit")?,
            cursor: self.string("cursor")?,
        })
    }

    /// `status`: absent means the default (active; with `valid_at` also
    /// superseded facts covering it); `all`/`any` means every status,
    /// retracted included; else a comma-separated list.
    pub fn status(&self) -> Result<StatusFilter, ApiError> {
        let Some(v) = self.string("status")? else { return Ok(StatusFilter::Current) };
        let v = v.trim();
        if v.is_empty() {
            return Ok(StatusFilter::Current);
        }
        if v == "all" || v == "any" {
            return Ok(StatusFilter::Among(StatusSet::all()));
        }
        let mut set = StatusSet::default();
        for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let s: Status = part.parse().map_err(|e: String| ApiError::schema(format!("status: {e}")))?;
            set = set.with(s);
        }
        Ok(StatusFilter::Among(set))
    }
}
