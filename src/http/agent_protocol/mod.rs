//! The Agent Protocol v1 (`/ap/v1`, docs/agent-protocol.md): tasks, their
//! steps and artifacts over the agent networks of `crate::agents`.
//!
//! A step is one chat turn of the task's network ([`step`], through
//! `crate::service::chat::turn`); tasks, steps and artifact metadata are facts of
//! the caller's tenant ([`store`]), so a task's history is data that can be
//! read as of any time; artifact bytes live in the engine too, chunked
//! ([`artifacts`]). Errors have the protocol's own shapes ([`error`]).

pub mod error;
pub mod routes;
pub mod upload;

use crate::http::{get, AppState, Routes};

/// The `/ap/v1` routes (merged into the listener's table, `crate::http::route_table`).
pub fn router() -> Routes<AppState> {
    Routes::new()
        .route("/ap/v1/agent/tasks", get(routes::list_tasks).post(routes::create_task))
        .route("/ap/v1/agent/tasks/{task_id}", get(routes::get_task))
        .route("/ap/v1/agent/tasks/{task_id}/steps", get(routes::list_steps).post(routes::execute_step))
        .route("/ap/v1/agent/tasks/{task_id}/steps/{step_id}", get(routes::get_step))
        .route("/ap/v1/agent/tasks/{task_id}/artifacts", get(routes::list_artifacts).post(routes::upload_artifact))
        .route("/ap/v1/agent/tasks/{task_id}/artifacts/{artifact_id}", get(routes::download_artifact))
}
