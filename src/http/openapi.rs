//! `/openapi.json`: the memory API spec this server implements, built from
//! the reference document (`api/abagraph.openapi.json`) plus this server's
//! extensions, so it is always a superset of the reference.

use axum::Json;
use serde_json::Value;
use std::sync::OnceLock;

const REFERENCE: &str = include_str!("../../api/abagraph.openapi.json");

pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc: Value = serde_json::from_str(REFERENCE).expect("the embedded spec is JSON");
        doc["info"]["title"] = Value::String("tempora memory API".into());
        doc["info"]["version"] = Value::String(env!("CARGO_PKG_VERSION").into());
        doc["servers"] = serde_json::json!([{"url": "/", "description": "this server"}]);
        doc
    })
}

pub async fn serve() -> Json<Value> {
    Json(document().clone())
}
