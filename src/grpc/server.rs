//! The gRPC listener: health, reflection and neuro-san's services, behind
//! the server's in-flight limit.

use super::{routing, AGENT_SERVICE, CONCIERGE_SERVICE, FILE_DESCRIPTOR_SET};
use crate::service::Service;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tonic_health::ServingStatus;

/// Serves the gRPC API on `listener` until `shutdown` resolves, then lets
/// the calls in flight finish (the caller bounds how long it waits).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Service,
    in_flight: Arc<tokio::sync::Semaphore>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let (health, health_service) = tonic_health::server::health_reporter();
    for name in [CONCIERGE_SERVICE, AGENT_SERVICE] {
        health.set_service_status(name, ServingStatus::Serving).await;
    }
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .expect("the built-in descriptor sets are valid");
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .expect("the built-in descriptor sets are valid");

    let max_header_bytes = u32::try_from(state.limits.max_header_bytes).unwrap_or(u32::MAX);
    // Health and reflection are routed by their service names; every other
    // path (the concierge, the agents, anything unknown) goes to NeuroSan.
    let mut builder = tonic::service::Routes::builder();
    builder.add_service(health_service).add_service(reflection_v1).add_service(reflection_v1alpha);
    // One place of the server's `max_in_flight` per call, the same places
    // HTTP takes; with none free the call is refused at once (UNAVAILABLE),
    // not queued. A streamed answer gives its place back once its head is
    // out, as over HTTP.
    let router = builder.routes().into_axum_router().fallback_service(routing::NeuroSan::new(state)).layer(
        tower::ServiceBuilder::new()
            .layer(axum::error_handling::HandleErrorLayer::new(|_: tower::BoxError| async {
                tonic::Status::unavailable(crate::service::error::AT_REQUEST_LIMIT).into_http::<axum::body::Body>()
            }))
            .load_shed()
            .layer(tower::limit::GlobalConcurrencyLimitLayer::with_semaphore(in_flight)),
    );
    let routes = tonic::service::Routes::from(router);

    tonic::transport::Server::builder()
        // The same head limit as HTTP; HTTP/2 pings find peers that vanished
        // without closing (a dead peer would otherwise hold its streams).
        .http2_max_header_list_size(max_header_bytes)
        .http2_keepalive_interval(Some(Duration::from_secs(60)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .max_concurrent_streams(Some(1024))
        .serve_with_incoming_shutdown(
            routes.prepare(),
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
}
