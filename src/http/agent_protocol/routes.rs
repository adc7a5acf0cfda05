//! The `/ap/v1` handlers: bodies and queries read leniently where clients
//! differ (no body, GETs with bodies, `page`/`pageSize`), answers always
//! carrying every field the protocol names.

use super::error::ApError;
use super::upload;
use crate::service::tasks::step::{self, StepRequest};
use crate::service::tasks::{self as store, artifacts, Page, Reader};
use crate::http::AppState;
use axum::body::Bytes;
use axum::extract::multipart::MultipartRejection;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Multipart, Path, RawQuery, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

pub const DEFAULT_PAGE_SIZE: usize = 10;
pub const MAX_PAGE_SIZE: usize = 100;

/// The caller's tenant; a missing or wrong key is `404 {"message"}`.
pub struct Tenant(pub String);

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApError> {
        let credentials = crate::http::extract::credentials(parts, None);
        let caller = state.service.authenticate_naming(&credentials, || crate::http::extract::admin_tenant(parts))?;
        Ok(Tenant(caller.tenant()?.to_string()))
    }
}

/// `current_page` (alias `page`) and `page_size` (alias `pageSize`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paging {
    pub page: usize,
    pub size: usize,
}

impl Paging {
    pub fn parse(query: Option<&str>) -> Result<Paging, ApError> {
        let mut p = Paging { page: 1, size: DEFAULT_PAGE_SIZE };
        for (k, v) in query.unwrap_or("").split('&').filter_map(|kv| kv.split_once('=')) {
            let v = crate::http::extract::percent_decode(v);
            let number = |name: &str| {
                let digits = v.trim();
                // A page past any number is simply past the end.
                let n = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| digits.parse::<u64>().unwrap_or(u64::MAX));
                n.filter(|n| *n >= 1).ok_or_else(|| {
                    ApError::unprocessable(format!("{name} must be an integer of at least 1, got {v:?}"))
                })
            };
            match k {
                "current_page" | "page" => p.page = number(k)?.min(usize::MAX as u64 / 2) as usize,
                "page_size" | "pageSize" => {
                    let n = number(k)?;
                    if n > MAX_PAGE_SIZE as u64 {
                        return Err(ApError::unprocessable(format!("{k} must be at most {MAX_PAGE_SIZE}, got {n}")));
                    }
                    p.size = n as usize;
                }
                _ => {}
            }
        }
        Ok(p)
    }

    fn skip(self) -> usize {
        (self.page - 1).saturating_mul(self.size)
    }

    fn json(self, total: usize) -> Value {
        json!({
            "total_items": total,
            "total_pages": total.div_ceil(self.size),
            "current_page": self.page,
            "page_size": self.size,
        })
    }
}

fn list<T>(key: &str, page: Page<T>, paging: Paging, json: impl Fn(&T) -> Value) -> Json<Value> {
    let items: Vec<Value> = page.items.iter().map(json).collect();
    Json(json!({ key: items, "pagination": paging.json(page.total) }))
}

/// A task or step body: none (empty), or an object with `input` (string or
/// null) and `additional_input` (object or null).
fn parse_body(body: Result<Bytes, BytesRejection>) -> Result<StepRequest, ApError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApError::too_large("the request body is larger than the configured limit (max_body_bytes)")
        } else {
            ApError::unprocessable(format!("cannot read the request body: {e}"))
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(StepRequest::default());
    }
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| ApError::unprocessable(format!("the body is not JSON: {e}")))?;
    let obj = match v {
        Value::Null => return Ok(StepRequest::default()),
        Value::Object(o) => o,
        other => {
            return Err(ApError::unprocessable(format!(
                "the body must be a JSON object, got {}",
                crate::json::kind_name(&other)
            )))
        }
    };
    let input = match obj.get("input") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(ApError::unprocessable(format!(
                "input must be a string or null, got {}",
                crate::json::kind_name(other)
            )))
        }
    };
    let additional_input = match obj.get("additional_input") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(other) => {
            return Err(ApError::unprocessable(format!(
                "additional_input must be an object or null, got {}",
                crate::json::kind_name(other)
            )))
        }
    };
    Ok(StepRequest { input, additional_input })
}

/// `POST /ap/v1/agent/tasks`.
pub async fn create_task(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApError> {
    let req = parse_body(body)?;
    let task = st.service.create_task(&tenant, req).await?;
    Ok(Json(task.json()))
}

/// `GET /ap/v1/agent/tasks`.
pub async fn list_tasks(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    RawQuery(q): RawQuery,
) -> Result<Json<Value>, ApError> {
    let paging = Paging::parse(q.as_deref())?;
    let page = Reader::new(&st, &tenant).tasks(paging.skip(), paging.size).await?;
    Ok(list("tasks", page, paging, store::Task::json))
}

/// `GET /ap/v1/agent/tasks/{task_id}`.
pub async fn get_task(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    Path(task_id): Path<String>,
) -> Result<Json<Value>, ApError> {
    Ok(Json(Reader::new(&st, &tenant).task(&task_id).await?.json()))
}

/// `POST /ap/v1/agent/tasks/{task_id}/steps`: runs the step to its end on
/// its own task, so a client that goes away does not cut it short.
pub async fn execute_step(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    Path(task_id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApError> {
    Reader::new(&st, &tenant).task(&task_id).await?;
    let req = parse_body(body)?;
    if req.input.as_ref().is_some_and(|i| i.len() > crate::service::chat::turn::MAX_USER_TEXT) {
        return Err(ApError::unprocessable(format!(
            "input is longer than {} bytes",
            crate::service::chat::turn::MAX_USER_TEXT
        )));
    }
    let work = tokio::spawn(async move { step::execute(&st, &tenant, &task_id, req).await });
    let step = work.await.map_err(|_| ApError::internal())??;
    Ok(Json(step.json()))
}

/// `GET /ap/v1/agent/tasks/{task_id}/steps`.
pub async fn list_steps(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    Path(task_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Json<Value>, ApError> {
    let reader = Reader::new(&st, &tenant);
    reader.task(&task_id).await?;
    let paging = Paging::parse(q.as_deref())?;
    let page = reader.steps(&task_id, paging.skip(), paging.size).await?;
    Ok(list("steps", page, paging, store::Step::json))
}

/// `GET /ap/v1/agent/tasks/{task_id}/steps/{step_id}`.
pub async fn get_step(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    Path((task_id, step_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApError> {
    let reader = Reader::new(&st, &tenant);
    reader.task(&task_id).await?;
    Ok(Json(reader.step(&task_id, &step_id).await?.json()))
}

/// `GET /ap/v1/agent/tasks/{task_id}/artifacts`.
pub async fn list_artifacts(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    Path(task_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Json<Value>, ApError> {
    let reader = Reader::new(&st, &tenant);
    reader.task(&task_id).await?;
    let paging = Paging::parse(q.as_deref())?;
    let page = reader.artifacts(&task_id, paging.skip(), paging.size).await?;
    Ok(list("artifacts", page, paging, store::Artifact::json))
}

/// `POST /ap/v1/agent/tasks/{task_id}/artifacts`: multipart `file` and an
/// optional `relative_path` (also accepted in the query).
pub async fn upload_artifact(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    Path(task_id): Path<String>,
    RawQuery(q): RawQuery,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Json<Value>, ApError> {
    Reader::new(&st, &tenant).task(&task_id).await?;
    let multipart = multipart.map_err(upload::multipart_rejected)?;
    let relative_path = q
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "relative_path")
        .map(|(_, v)| crate::http::extract::percent_decode(v));
    let upload = upload::read_upload(multipart, relative_path, artifacts::max_bytes(&st)).await?;
    let upload::Upload { file_name, chunks, relative_path } = upload;
    let a = artifacts::create(&st, &tenant, &task_id, None, file_name, relative_path, chunks).await?;
    Ok(Json(a.json()))
}

/// `GET /ap/v1/agent/tasks/{task_id}/artifacts/{artifact_id}`: the bytes,
/// streamed, whatever the `Accept` header says.
pub async fn download_artifact(
    State(st): State<AppState>,
    Tenant(tenant): Tenant,
    Path((task_id, artifact_id)): Path<(String, String)>,
) -> Result<Response, ApError> {
    let reader = Reader::new(&st, &tenant);
    reader.task(&task_id).await?;
    let a = reader.artifact(&task_id, &artifact_id).await?;
    let body = upload::download(&st, &tenant, &a);
    Ok((
        [
            (CONTENT_TYPE, "application/octet-stream".to_string()),
            (CONTENT_DISPOSITION, upload::content_disposition(&a.file_name)),
            (CONTENT_LENGTH, a.size.to_string()),
        ],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_reads_both_spellings_and_checks_bounds() {
        assert_eq!(Paging::parse(None).unwrap(), Paging { page: 1, size: 10 });
        assert_eq!(Paging::parse(Some("current_page=3&page_size=1")).unwrap(), Paging { page: 3, size: 1 });
        assert_eq!(Paging::parse(Some("page=2&pageSize=25&x=y")).unwrap(), Paging { page: 2, size: 25 });
        for bad in ["page_size=0", "page_size=101", "current_page=0", "current_page=x", "page=-1"] {
            assert_eq!(Paging::parse(Some(bad)).unwrap_err().status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
        }
        let huge = Paging::parse(Some("current_page=99999999999999999999")).unwrap();
        assert_eq!(huge.json(3)["total_pages"], 1);
        assert!(huge.skip() > 3);
        let far = Paging::parse(Some("current_page=1000000000")).unwrap();
        assert_eq!(far.json(3)["total_pages"], 1);
        assert!(far.skip() > 3);
    }
}
