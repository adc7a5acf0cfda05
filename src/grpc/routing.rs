//! The NeuroSan services over HTTP/2 requests. neuro-san routes its agent
//! service by agent name: the name takes the place of the package in the
//! method path (`/{agent_name}.AgentService/Function`), so no generated
//! server (whose paths are fixed) can serve it. [`NeuroSan`] reads the path
//! itself, resolves the caller from the request's metadata as the HTTP
//! surface does, and hands the request to tonic's codec with a service for
//! the method, as generated servers do.

use super::convert;
use super::pb;
use crate::service::principal::{bearer_token, Credentials};
use crate::service::{Service, ServiceError};

/// The metadata an admin names the tenant of a call with (as the HTTP header).
const TENANT_METADATA: &str = "x-tempora-tenant";
use crate::service::chat::turn::{self, StartError};
use axum::http::{Request, Response};
use futures_util::{FutureExt, Stream, StreamExt};
use std::convert::Infallible;
use std::future::{ready, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::server::Grpc;
use tonic::Status;
use tonic_prost::ProstCodec;

/// The full method path of `ConciergeService/List`.
pub const CONCIERGE_LIST: &str = "/dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService/List";

/// The generic agent service, as reflection describes it.
pub const AGENT_SERVICE: &str = "dev.cognizant_ai.neuro_san.api.grpc.agent.AgentService";
pub const CONCIERGE_SERVICE: &str = "dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService";

/// What separates an agent's name from the method in a path.
const AGENT_SERVICE_SEP: &str = ".AgentService/";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentMethod {
    Function,
    Connectivity,
    StreamingChat,
}

/// Where a method path goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    ConciergeList,
    Agent {
        agent: &'a str,
        method: AgentMethod,
    },
    /// An agent service path with a method the service does not have.
    UnknownMethod,
    /// Nothing this service serves.
    Unknown,
}

/// Reads a method path. The agent's name is everything before the last
/// `.AgentService/`, so names may hold `/` and `.`.
pub fn route(path: &str) -> Route<'_> {
    if path == CONCIERGE_LIST {
        return Route::ConciergeList;
    }
    let Some((agent, method)) = path.strip_prefix('/').and_then(|p| p.rsplit_once(AGENT_SERVICE_SEP)) else {
        return Route::Unknown;
    };
    if agent.is_empty() {
        return Route::Unknown;
    }
    let method = match method {
        "Function" => AgentMethod::Function,
        "Connectivity" => AgentMethod::Connectivity,
        "StreamingChat" => AgentMethod::StreamingChat,
        _ => return Route::UnknownMethod,
    };
    Route::Agent { agent, method }
}

/// The concierge and agent services as one tower service over HTTP/2
/// requests (the gRPC server's fallback, after health and reflection).
#[derive(Clone)]
pub struct NeuroSan {
    state: Service,
    /// The largest request message accepted, in bytes.
    max_message: usize,
}

impl NeuroSan {
    pub fn new(state: Service) -> NeuroSan {
        let max_message = state.limits.max_body_bytes;
        NeuroSan { state, max_message }
    }

    fn codec<E, D>(&self) -> Grpc<ProstCodec<E, D>>
    where
        E: prost::Message + Send + 'static,
        D: prost::Message + Default + Send + 'static,
    {
        Grpc::new(ProstCodec::default()).max_decoding_message_size(self.max_message)
    }

    async fn handle(self, req: Request<axum::body::Body>) -> Response<Body> {
        let path = req.uri().path().to_string();
        let route = route(&path);
        match route {
            Route::Unknown => return status(Status::unimplemented(format!("no service at {path}"))),
            Route::UnknownMethod => {
                return status(Status::unimplemented(format!("AgentService has no method at {path}")))
            }
            Route::ConciergeList | Route::Agent { .. } => {}
        }
        // Who is calling, from the metadata (the request's headers), exactly
        // as for HTTP: `authorization: Bearer <key>`, and for admins
        // `x-tempora-tenant`.
        let (parts, body) = req.into_parts();
        let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let credentials = Credentials {
            bearer: header("authorization").and_then(bearer_token),
            session: None,
            host: header("host").or_else(|| parts.uri.host()),
            tenant: header(TENANT_METADATA),
        };
        let caller = match self.state.authenticate(&credentials) {
            Ok(c) => c,
            Err(_) => {
                return status(Status::unauthenticated(
                    "a valid key is required (metadata authorization: Bearer <key>; an admin names a \
                     configured tenant with x-tempora-tenant)",
                ))
            }
        };
        let req = Request::from_parts(parts, body);
        let (agent, method) = match route {
            Route::ConciergeList => {
                let list = convert::list_to_pb(self.state.networks());
                let svc = tower::service_fn(move |_: tonic::Request<pb::concierge::ConciergeRequest>| {
                    ready(Ok::<_, Status>(tonic::Response::new(list.clone())))
                });
                return self.codec().unary(svc, req).await;
            }
            Route::Agent { agent, method } => (agent, method),
            Route::Unknown | Route::UnknownMethod => unreachable!("answered above"),
        };
        // An unknown network is an unknown service: UNIMPLEMENTED, which
        // neuro-san's client does not retry.
        let Some(network) = self.state.network(agent) else {
            return status(unknown_agent(agent));
        };
        match method {
            AgentMethod::Function => {
                let answer = convert::function_to_pb(network.function());
                let svc = tower::service_fn(move |_: tonic::Request<pb::agent::FunctionRequest>| {
                    ready(Ok::<_, Status>(tonic::Response::new(answer.clone())))
                });
                self.codec().unary(svc, req).await
            }
            AgentMethod::Connectivity => {
                let answer = convert::connectivity_to_pb(&network);
                let svc = tower::service_fn(move |_: tonic::Request<pb::agent::ConnectivityRequest>| {
                    ready(Ok::<_, Status>(tonic::Response::new(answer.clone())))
                });
                self.codec().unary(svc, req).await
            }
            AgentMethod::StreamingChat => {
                let Some(tenant) = caller.tenant else {
                    return status(Status::invalid_argument(
                        "admin requests name their tenant with the x-tempora-tenant metadata",
                    ));
                };
                let chat = Chat { state: self.state.clone(), tenant, agent: Arc::from(agent) };
                self.codec().server_streaming(chat, req).await
            }
        }
    }
}

impl tower::Service<Request<axum::body::Body>> for NeuroSan {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<axum::body::Body>) -> Self::Future {
        let this = self.clone();
        // A panic while handling a call is INTERNAL for that call, as the
        // HTTP surface answers 500, instead of a reset connection.
        let handled = std::panic::AssertUnwindSafe(this.handle(req)).catch_unwind();
        Box::pin(async move {
            Ok(handled.await.unwrap_or_else(|_| {
                tracing::error!("a gRPC call panicked");
                status(super::error::status(ServiceError::Internal))
            }))
        })
    }
}

fn status(s: Status) -> Response<Body> {
    s.into_http()
}

fn unknown_agent(agent: &str) -> Status {
    Status::unimplemented(format!("no agent network named {agent:?}"))
}

/// The messages of one turn, as the client reads them.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<pb::agent::ChatResponse, Status>> + Send>>;

/// `StreamingChat` of one network for one tenant.
struct Chat {
    state: Service,
    tenant: String,
    agent: Arc<str>,
}

impl tonic::server::ServerStreamingService<pb::agent::ChatRequest> for Chat {
    type Response = pb::agent::ChatResponse;
    type ResponseStream = ChatStream;
    type Future = std::future::Ready<Result<tonic::Response<ChatStream>, Status>>;

    fn call(&mut self, req: tonic::Request<pb::agent::ChatRequest>) -> Self::Future {
        let req = convert::request_from_pb(req.into_inner());
        let started = turn::start(&self.state, self.tenant.clone(), &self.agent, req);
        ready(match started {
            // The stream owns the turn: when the client goes away the
            // response stream is dropped, and with it the turn.
            Ok(turn) => Ok(tonic::Response::new(until_shutdown(turn, self.state.stopping()))),
            Err(StartError::UnknownAgent(name)) => Err(unknown_agent(&name)),
            Err(StartError::BadRequest(message)) => Err(super::error::status(ServiceError::Invalid(message))),
        })
    }
}

/// The turn's messages as protobuf, ended early by a server shutting down
/// ([`turn::Turn::until`]).
fn until_shutdown(turn: turn::Turn, stop: tokio::sync::watch::Receiver<bool>) -> ChatStream {
    Box::pin(turn.until(stop).map(|r| Ok(convert::response_to_pb(r))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_paths_split_at_the_last_agent_service() {
        assert_eq!(
            route("/memory.AgentService/Function"),
            Route::Agent { agent: "memory", method: AgentMethod::Function }
        );
        assert_eq!(
            route("/deep/math_guy.AgentService/Connectivity"),
            Route::Agent { agent: "deep/math_guy", method: AgentMethod::Connectivity }
        );
        assert_eq!(
            route("/a.AgentService/b.AgentService/StreamingChat"),
            Route::Agent { agent: "a.AgentService/b", method: AgentMethod::StreamingChat }
        );
        // The package's own name is just another (unknown) agent name.
        assert_eq!(
            route("/dev.cognizant_ai.neuro_san.api.grpc.agent.AgentService/Function"),
            Route::Agent { agent: "dev.cognizant_ai.neuro_san.api.grpc.agent", method: AgentMethod::Function }
        );
    }

    #[test]
    fn other_paths_are_the_concierge_or_nothing() {
        assert_eq!(route(CONCIERGE_LIST), Route::ConciergeList);
        assert_eq!(route("/dev.cognizant_ai.neuro_san.api.grpc.concierge.ConciergeService/Other"), Route::Unknown);
        assert_eq!(route("/memory/Function"), Route::Unknown);
        assert_eq!(route("/memory.Service/Function"), Route::Unknown);
        assert_eq!(route("/.AgentService/Function"), Route::Unknown);
        assert_eq!(route("memory.AgentService/Function"), Route::Unknown);
        assert_eq!(route(""), Route::Unknown);
        assert_eq!(route("/"), Route::Unknown);
    }

    #[test]
    fn an_unknown_method_of_the_agent_service_is_its_own_route() {
        assert_eq!(route("/memory.AgentService/Chat"), Route::UnknownMethod);
        assert_eq!(route("/memory.AgentService/"), Route::UnknownMethod);
        assert_eq!(route("/memory.AgentService/function"), Route::UnknownMethod);
    }
}
