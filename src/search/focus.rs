//! What a search is about, as read from its request: the valid-time
//! interval and the entities the question names. The rankers and the
//! fusion read these; `time` and `entities` work them out.

use crate::store::Fact;
use serde::Serialize;

/// The open ends of an interval.
pub const OPEN_START: i64 = i64::MIN;
pub const OPEN_END: i64 = i64::MAX;

/// The valid-time interval a search is about: `[from, until)`, unix ms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Window {
    /// `null` in JSON when open.
    #[serde(serialize_with = "open_as_null")]
    pub from: i64,
    #[serde(serialize_with = "open_as_null")]
    pub until: i64,
    /// The words of the question that named it; absent for an interval the
    /// request gave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `question` or `request`.
    pub source: &'static str,
    /// Byte ranges of the question that named it.
    #[serde(skip)]
    pub spans: Vec<(usize, usize)>,
}

fn open_as_null<S: serde::Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    if *v == OPEN_START || *v == OPEN_END {
        s.serialize_none()
    } else {
        s.serialize_i64(*v)
    }
}

impl Window {
    pub fn overlaps(&self, f: &Fact) -> bool {
        f.valid_from < self.until && f.valid_until.is_none_or(|u| u > self.from)
    }
}

/// An entity the question names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    pub entity: String,
    /// The name's terms (left out of the entity list's text query).
    pub terms: Vec<String>,
}
