//! `/openapi.json`: the document of the memory API this server implements,
//! `api/tempora.openapi.json`, checked in and served as it is.
//!
//! It is a superset of the reference (`api/abagraph.openapi.json`): every
//! reference operation, parameter, response and schema, plus what this
//! server does on top (operations marked `x-tempora-extension: true`) and
//! what it does differently (PRODUCT.md wins over the reference: e.g. the
//! session cookie is `tempora_session`). A reference operation not
//! implemented yet would stay, marked `x-tempora-planned: true` (it answers
//! 404). `tests/it/openapi_doc.rs` keeps the file true: a superset of the
//! reference, an operation for every route of `crate::http::route_table`
//! and a route for every operation, every `$ref` resolving, the engine's
//! limits where they are documented, `info.version` the crate's version.
//! To add a route, add its operation to the file.

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::sync::OnceLock;

/// The document, as checked in: JSON, pretty-printed, keys sorted.
pub const SOURCE: &str = include_str!("../../api/tempora.openapi.json");

/// The document, parsed once.
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| serde_json::from_str(SOURCE).expect("api/tempora.openapi.json is JSON"))
}

/// `GET /openapi.json`: the document, compact (serialized once).
pub async fn serve() -> Response {
    static BODY: OnceLock<String> = OnceLock::new();
    let body = BODY.get_or_init(|| document().to_string());
    ([(CONTENT_TYPE, "application/json")], body.as_str()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_served_document_is_the_file() {
        let resp = serve().await;
        assert_eq!(resp.headers()[CONTENT_TYPE], "application/json");
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        let served: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(&served, document());
    }
}
