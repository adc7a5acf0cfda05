//! The `rmcp` server handler: `initialize` (with version negotiation),
//! `tools/list` and `tools/call`. One handler value is made per HTTP request
//! (the transport is stateless); who is calling comes from the HTTP request
//! parts that the transport front put in the request's extensions.

use crate::service::tools::schemas::{self, ToolDef};
use crate::service::tools::{self, CallerInfo};
use crate::service::Service;
use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::sync::Arc;

pub const INSTRUCTIONS: &str = "tempora is a bitemporal memory of facts (subject predicate object, with confidence, \
    source, valid time and record time). Call build_context first at the start of a task to load what memory knows; \
    use recall to look things up, remember to store what you learn, digest for longer text, recall_as_of to ask \
    about the past, whats_changed to catch up on changes, and explain_fact to see where a fact came from and what \
    replaced it. Entities are named `Type:id` (e.g. Person:sarah); times are unix milliseconds.";

pub struct Server {
    st: Service,
}

impl Server {
    pub fn new(st: Service) -> Server {
        Server { st }
    }
}

pub fn tool(def: ToolDef) -> Tool {
    let mut t = Tool::new(def.name, def.description, Arc::new(schemas::as_object(def.input)))
        .with_title(def.title)
        .with_raw_output_schema(Arc::new(schemas::as_object(def.output)));
    let annotations = ToolAnnotations::with_title(def.title)
        .read_only(!def.writes)
        .destructive(false)
        .idempotent(!def.writes)
        .open_world(def.name == schemas::DIGEST);
    t.annotations = Some(annotations);
    t
}

fn caller(ctx: &RequestContext<RoleServer>) -> Option<CallerInfo> {
    let parts = ctx.extensions.get::<Parts>()?;
    parts.extensions.get::<CallerInfo>().cloned()
}

impl ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("tempora", env!("CARGO_PKG_VERSION"))
                    .with_title("tempora memory")
                    .with_description("A persistent, bitemporal memory database for AI agents"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(schemas::tools().into_iter().map(tool).collect()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        schemas::find(name).map(tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if schemas::find(&name).is_none() {
            return Err(ErrorData::invalid_params(format!("unknown tool {name:?}"), None));
        }
        let Some(caller) = caller(&ctx) else {
            // The transport front always sets it; without it nobody is authenticated.
            tracing::error!("MCP call without caller information");
            return Err(ErrorData::internal_error("internal error", None));
        };
        let args = request.arguments.unwrap_or_default();
        let result = match tools::call(&self.st, &caller, &name, args).await {
            Ok(value) => CallToolResult::structured(value),
            Err(e) => {
                if !e.is_caused_by_request() {
                    tracing::warn!(tool = %name, code = e.code(), message = %e, "MCP tool failed");
                }
                CallToolResult::error(vec![ContentBlock::text(format!("{}: {}", e.code(), e))])
            }
        };
        Ok(result.into())
    }
}
