//! How a connector turns one record into facts: who the record is about
//! (the subject template) and which fields become which predicates.

use crate::digest::{self, mask::Masker, Hint};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use crate::store::{is_entity_ref, validate_input, FactInput};

/// The connector's `subject` setting.
#[derive(Debug, Clone, PartialEq)]
pub enum SubjectRule {
    /// Unset: the record's own `id` / `subject` / `type` fields decide, as
    /// in `/api/digest`.
    Record,
    /// A type name (`Person`): records are `Person:<id>`.
    Type(String),
    /// One entity (`Org:acme`): every record is about it.
    Entity(String),
    /// A template (`Person:{employee_id}`): placeholders are the record's
    /// fields.
    Template(Vec<Piece>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    Field(String),
}

impl SubjectRule {
    pub fn parse(s: Option<&str>) -> Result<SubjectRule, String> {
        let Some(s) = s.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(SubjectRule::Record);
        };
        if !s.contains('{') && !s.contains('}') {
            return match Hint::parse(s)? {
                Hint::Entity(e) => Ok(SubjectRule::Entity(e)),
                Hint::Type(t) => Ok(SubjectRule::Type(t)),
            };
        }
        let mut pieces = Vec::new();
        let mut rest = s;
        while let Some(open) = rest.find('{') {
            if rest[..open].contains('}') {
                return Err(format!("subject template {s:?} has a '}}' without its '{{'"));
            }
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_string()));
            }
            let close =
                rest[open..].find('}').ok_or_else(|| format!("subject template {s:?} has an unclosed '{{'"))? + open;
            let field = rest[open + 1..close].trim();
            if field.is_empty() || field.contains('{') {
                return Err(format!("subject template {s:?} has an empty or nested placeholder"));
            }
            pieces.push(Piece::Field(field.to_string()));
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("subject template {s:?} has a '}}' without its '{{'"));
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_string()));
        }
        match pieces.first() {
            Some(Piece::Text(t)) if t.contains(':') && digest::is_type_name(t.split(':').next().unwrap_or("")) => {}
            _ => {
                return Err(format!(
                    "subject template {s:?} must start with an entity type and a colon, like Person:{{id}}"
                ))
            }
        }
        Ok(SubjectRule::Template(pieces))
    }

    /// Fields the template consumes (they do not also become facts).
    fn fields(&self) -> Vec<&str> {
        match self {
            SubjectRule::Template(p) => p
                .iter()
                .filter_map(|p| match p {
                    Piece::Field(f) => Some(f.as_str()),
                    Piece::Text(_) => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The connector's `fields` setting: which fields become predicates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(untagged)]
pub enum FieldMap {
    /// Every field, under its own name.
    #[default]
    All,
    /// These fields, under their own names.
    Only(Vec<String>),
    /// field → predicate.
    Renamed(std::collections::BTreeMap<String, String>),
}

impl FieldMap {
    pub fn from_value(v: Option<&Value>) -> Result<FieldMap, String> {
        match v {
            None | Some(Value::Null) => Ok(FieldMap::All),
            Some(Value::Array(items)) => {
                let names = items
                    .iter()
                    .map(|i| i.as_str().filter(|s| !s.is_empty()).map(String::from))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("fields must be a list of field names or an object of field: predicate")?;
                if names.is_empty() {
                    return Err("fields must name at least one field".into());
                }
                for n in &names {
                    check_predicate(n)?;
                }
                Ok(FieldMap::Only(names))
            }
            Some(Value::Object(m)) => {
                let mut out = std::collections::BTreeMap::new();
                for (k, v) in m {
                    let p = v.as_str().ok_or_else(|| format!("fields.{k} must be a predicate name"))?;
                    check_predicate(p)?;
                    out.insert(k.clone(), p.to_string());
                }
                if out.is_empty() {
                    return Err("fields must name at least one field".into());
                }
                Ok(FieldMap::Renamed(out))
            }
            Some(_) => Err("fields must be a list of field names or an object of field: predicate".into()),
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            FieldMap::All => Value::Null,
            FieldMap::Only(v) => json!(v),
            FieldMap::Renamed(m) => json!(m),
        }
    }

    /// The predicate `field` maps to, if it becomes a fact.
    fn predicate<'a>(&'a self, field: &'a str) -> Option<&'a str> {
        match self {
            FieldMap::All => Some(field),
            FieldMap::Only(v) => v.iter().any(|f| f == field).then_some(field),
            FieldMap::Renamed(m) => m.get(field).map(String::as_str),
        }
    }
}

fn check_predicate(p: &str) -> Result<(), String> {
    let probe = FactInput::new("Probe:x", p, true);
    validate_input(&probe).map_err(|e| format!("predicate {p:?}: {e}"))
}

/// Everything needed to map records of one delivery.
pub struct Mapper<'a> {
    pub subject: &'a SubjectRule,
    pub fields: &'a FieldMap,
    pub masker: &'a Masker,
    pub source: &'a str,
    pub confidence: Option<f64>,
    pub connector: &'a str,
    pub delivery: &'a str,
}

impl Mapper<'_> {
    /// The facts of one record, or why it is rejected. A record that maps
    /// to no fact at all is rejected too, so a mapping that names fields
    /// the data lacks does not pass silently.
    /// `id_fallback` is the field that names a record without an `id`
    /// (a CSV body's first column).
    pub fn facts(
        &self,
        record: usize,
        fields: &Map<String, Value>,
        id_fallback: Option<&str>,
    ) -> Result<Vec<FactInput>, String> {
        let (subject, used): (String, Vec<&str>) = match self.subject {
            SubjectRule::Template(pieces) => (self.render(pieces, fields)?, self.subject.fields()),
            SubjectRule::Record => {
                digest::record_subject(fields, id_fallback, None, self.masker, |v| self.masker.mask_value(v))?
            }
            SubjectRule::Type(t) => {
                let hint = Hint::Type(t.clone());
                digest::record_subject(fields, id_fallback, Some(&hint), self.masker, |v| self.masker.mask_value(v))?
            }
            SubjectRule::Entity(e) => (e.clone(), Vec::new()),
        };
        let mut out = Vec::new();
        for (k, v) in fields {
            if v.is_null() || used.contains(&k.as_str()) {
                continue;
            }
            let Some(predicate) = self.fields.predicate(k) else {
                continue;
            };
            let mut props = Map::new();
            props.insert("connector".into(), json!(self.connector));
            props.insert("delivery".into(), json!(self.delivery));
            props.insert("record".into(), json!(record));
            let input = FactInput {
                subject: subject.clone(),
                predicate: predicate.to_string(),
                object: self.masker.mask_value(v),
                confidence: self.confidence,
                source: Some(self.source.to_string()),
                properties: Some(props),
                ..Default::default()
            };
            validate_input(&input).map_err(|e| format!("field {k:?}: {e}"))?;
            out.push(input);
        }
        if out.is_empty() {
            return Err(match self.fields {
                FieldMap::All => "the record has no field to store".to_string(),
                _ => "the record has none of the connector's mapped fields".to_string(),
            });
        }
        Ok(out)
    }

    fn render(&self, pieces: &[Piece], fields: &Map<String, Value>) -> Result<String, String> {
        let mut s = String::new();
        for p in pieces {
            match p {
                Piece::Text(t) => s.push_str(t),
                Piece::Field(f) => {
                    let v = match fields.get(f) {
                        Some(Value::String(v)) if !v.trim().is_empty() => v.trim().to_string(),
                        Some(Value::Number(n)) => n.to_string(),
                        Some(Value::Bool(b)) => b.to_string(),
                        None | Some(Value::Null) => {
                            return Err(format!("field {f:?} of the subject template is missing"))
                        }
                        Some(_) => {
                            return Err(format!("field {f:?} of the subject template must be a string or a number"))
                        }
                    };
                    let v = self.masker.mask_id(&v);
                    s.push_str(&v.split_whitespace().collect::<Vec<_>>().join("_"));
                }
            }
        }
        if !is_entity_ref(&s) {
            return Err(format!("the subject template gives {s:?}, which is not an entity ref (Type:id)"));
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::mask::{Secret, Strategy};

    fn mapper_facts(subject: &str, fields: Value, record: Value) -> Result<Vec<(String, String, Value)>, String> {
        let rule = SubjectRule::parse(Some(subject).filter(|s| !s.is_empty()))?;
        let fields = FieldMap::from_value(Some(&fields))?;
        let masker = Masker::new(Strategy::None, Secret::generate());
        let m = Mapper {
            subject: &rule,
            fields: &fields,
            masker: &masker,
            source: "connector:hr",
            confidence: None,
            connector: "hr",
            delivery: "d1",
        };
        let rec = record.as_object().unwrap().clone();
        Ok(m.facts(1, &rec, None)?.into_iter().map(|f| (f.subject, f.predicate, f.object)).collect())
    }

    #[test]
    fn a_template_names_the_subject_and_its_fields_are_not_facts() {
        let facts =
            mapper_facts("Person:{id}", Value::Null, json!({"id": 7, "name": "Sarah", "org": "Org:acme"})).unwrap();
        assert_eq!(
            facts,
            vec![
                ("Person:7".into(), "name".into(), json!("Sarah")),
                ("Person:7".into(), "org".into(), json!("Org:acme")),
            ]
        );
        let err = mapper_facts("Person:{id}", Value::Null, json!({"name": "x"})).unwrap_err();
        assert!(err.contains("\"id\" of the subject template is missing"), "{err}");
    }

    #[test]
    fn fields_pick_and_rename_predicates() {
        let facts =
            mapper_facts("Person:{id}", json!({"name": "full_name"}), json!({"id": "s", "name": "Sarah", "x": 1}))
                .unwrap();
        assert_eq!(facts, vec![("Person:s".into(), "full_name".into(), json!("Sarah"))]);
        let facts = mapper_facts("Person", json!(["name"]), json!({"id": "s", "name": "Sarah", "x": 1})).unwrap();
        assert_eq!(facts, vec![("Person:s".into(), "name".into(), json!("Sarah"))]);
        let err = mapper_facts("Person:{id}", json!(["title"]), json!({"id": "s", "name": "Sarah"})).unwrap_err();
        assert!(err.contains("none of the connector's mapped fields"), "{err}");
    }

    #[test]
    fn without_a_template_the_record_decides_as_in_digest() {
        let facts = mapper_facts("", Value::Null, json!({"id": "Person:sarah", "age": 40})).unwrap();
        assert_eq!(facts, vec![("Person:sarah".into(), "age".into(), json!(40))]);
        let facts = mapper_facts("Org:acme", Value::Null, json!({"plan": "gold"})).unwrap();
        assert_eq!(facts, vec![("Org:acme".into(), "plan".into(), json!("gold"))]);
    }

    #[test]
    fn bad_templates_are_refused_up_front() {
        for t in ["{id}", "Person:{id", "Person:{}", "Person:id}", "9x:{id}", "Person {id}"] {
            assert!(SubjectRule::parse(Some(t)).is_err(), "{t} must be refused");
        }
        assert!(SubjectRule::parse(Some("Person:{dept}-{id}")).is_ok());
    }
}
