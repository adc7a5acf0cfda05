//! JSON ↔ `google.protobuf.Struct`/`Value`, as the proto3 JSON mapping
//! relates them: objects, lists, strings, bools and null map one to one;
//! numbers are doubles on the protobuf side. A double with no fractional
//! part (within ±2^53, where doubles are exact) reads back as a JSON
//! integer, so `1` stays `1`; NaN and infinities, which JSON cannot hold,
//! read back as null.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct, Value as PbValue};
use serde_json::{Map, Number, Value};

/// The largest integer a double holds exactly.
const EXACT: f64 = 9_007_199_254_740_992.0;

pub fn to_struct(map: &Map<String, Value>) -> Struct {
    Struct { fields: map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect() }
}

/// A JSON value that should be an object (a schema, metadata): anything
/// else has no `Struct` form and is left out.
pub fn to_struct_opt(v: Option<&Value>) -> Option<Struct> {
    match v {
        Some(Value::Object(m)) => Some(to_struct(m)),
        _ => None,
    }
}

pub fn to_value(v: &Value) -> PbValue {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(ListValue { values: items.iter().map(to_value).collect() }),
        Value::Object(m) => Kind::StructValue(to_struct(m)),
    };
    PbValue { kind: Some(kind) }
}

pub fn from_struct(s: &Struct) -> Map<String, Value> {
    s.fields.iter().map(|(k, v)| (k.clone(), from_value(v))).collect()
}

pub fn from_value(v: &PbValue) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(from_value).collect()),
        Some(Kind::StructValue(s)) => Value::Object(from_struct(s)),
    }
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() <= EXACT {
        // Exact: the cast cannot round. -0.0 reads as 0.
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map(Value::Number).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(v: Value) -> Value {
        from_value(&to_value(&v))
    }

    #[test]
    fn objects_round_trip_with_nested_lists_null_numbers_and_bools() {
        let v = json!({
            "type": "object",
            "properties": {"query": {"type": "string", "enum": ["a", "b"]}},
            "required": ["query"],
            "nested": [[1, 2.5, -3], [], [null, true, false, "x", {"deep": [{"deeper": null}]}]],
            "empty": {},
            "zero": 0,
            "negative": -7,
            "big": 9007199254740992_i64,
            "fraction": 0.125,
        });
        assert_eq!(round_trip(v.clone()), v);
        let Value::Object(m) = &v else { unreachable!() };
        assert_eq!(Value::Object(from_struct(&to_struct(m))), v);
    }

    #[test]
    fn the_protobuf_side_is_the_well_known_types() {
        let s = to_struct(json!({"n": 2, "l": [null, "s"], "b": true}).as_object().unwrap());
        assert_eq!(s.fields["n"].kind, Some(Kind::NumberValue(2.0)));
        assert_eq!(s.fields["b"].kind, Some(Kind::BoolValue(true)));
        let Some(Kind::ListValue(l)) = &s.fields["l"].kind else { panic!("{s:?}") };
        assert_eq!(l.values[0].kind, Some(Kind::NullValue(0)));
        assert_eq!(l.values[1].kind, Some(Kind::StringValue("s".into())));
    }

    #[test]
    fn doubles_read_back_as_json_numbers() {
        let n = |x: f64| from_value(&PbValue { kind: Some(Kind::NumberValue(x)) });
        assert_eq!(n(3.0), json!(3));
        assert!(n(3.0).is_i64());
        assert_eq!(n(-0.0), json!(0));
        assert_eq!(n(1.5), json!(1.5));
        // Past 2^53 a double is not an exact integer: it stays a double.
        assert!(n(1e300).is_f64());
        assert_eq!(n(f64::NAN), Value::Null);
        assert_eq!(n(f64::INFINITY), Value::Null);
        // A value with no kind set is null, as protobuf reads it.
        assert_eq!(from_value(&PbValue { kind: None }), Value::Null);
    }

    #[test]
    fn only_objects_have_a_struct() {
        assert!(to_struct_opt(Some(&json!({"a": 1}))).is_some());
        assert!(to_struct_opt(Some(&json!([1]))).is_none());
        assert!(to_struct_opt(Some(&json!("s"))).is_none());
        assert!(to_struct_opt(None).is_none());
    }
}
