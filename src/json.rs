//! JSON request-body helpers shared by every surface: integers as JSON
//! Schema counts them, and optional fields that may be left out but not sent
//! as `null`.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// A JSON value's kind as a message names it ("an array", "null").
pub fn kind_name(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// For optional body fields whose schema does not allow `null`: absent means
/// `None` (with `#[serde(default)]`), present must be a value; `null` is an
/// error naming the field.
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// An integer as JSON Schema counts one: `5.0` is the integer 5, so a
/// number without a fractional part is accepted too (where a double holds it
/// exactly). Times (unix ms), counts and budgets in request bodies use it.
#[derive(Debug, Clone, Copy)]
pub struct JsonInt(pub i64);

impl<'de> Deserialize<'de> for JsonInt {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, Unexpected, Visitor};
        struct Int;
        impl Visitor<'_> for Int {
            type Value = JsonInt;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a 64-bit integer")
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<JsonInt, E> {
                Ok(JsonInt(v))
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<JsonInt, E> {
                i64::try_from(v).map(JsonInt).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }
            fn visit_f64<E: Error>(self, v: f64) -> Result<JsonInt, E> {
                const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
                if v.fract() == 0.0 && v.abs() <= EXACT {
                    Ok(JsonInt(v as i64))
                } else {
                    Err(E::invalid_type(Unexpected::Float(v), &self))
                }
            }
        }
        d.deserialize_any(Int)
    }
}

/// A body that must be a JSON object. serde's derived `Deserialize` for a
/// struct also accepts a JSON array of the fields in declaration order, so
/// without this `["Person:a", "likes", "x"]` would be stored as a fact.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OnlyMap<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for OnlyMap<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(OnlyMap(std::marker::PhantomData)).map(Object)
    }
}
