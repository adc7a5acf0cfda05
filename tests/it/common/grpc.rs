//! A gRPC client for the NeuroSan listener: a channel to the server's gRPC
//! port, requests with the key and tenant metadata, and unary and
//! server-streaming calls on any path (agents are routed by name, so the
//! generated clients' fixed paths cannot reach them).

use super::Server;
use std::str::FromStr;
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};
use tonic_prost::ProstCodec;

pub async fn channel(server: &Server) -> Channel {
    let addr = server.grpc.as_ref().expect("the gRPC listener is on");
    Endpoint::from_shared(format!("http://{addr}")).unwrap().timeout(Duration::from_secs(60)).connect().await.unwrap()
}

/// `msg` with `authorization: Bearer <key>` and `x-tempora-tenant`, when given.
pub fn request<T>(msg: T, key: Option<&str>, tenant: Option<&str>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Some(k) = key {
        req.metadata_mut().insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    if let Some(t) = tenant {
        req.metadata_mut().insert("x-tempora-tenant", t.parse().unwrap());
    }
    req
}

/// A client on `ch`, ready to send, and `path` as a request path.
async fn ready(ch: &Channel, path: &str) -> (tonic::client::Grpc<Channel>, PathAndQuery) {
    let mut grpc = tonic::client::Grpc::new(ch.clone());
    grpc.ready().await.unwrap();
    (grpc, PathAndQuery::from_str(path).unwrap())
}

/// A unary call on `path`.
pub async fn unary<Req, Resp>(
    ch: &Channel,
    path: &str,
    msg: Req,
    key: Option<&str>,
    tenant: Option<&str>,
) -> Result<Resp, Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let (mut grpc, path) = ready(ch, path).await;
    grpc.unary(request(msg, key, tenant), path, ProstCodec::default()).await.map(tonic::Response::into_inner)
}

/// A server-streaming call on `path`, read to its end (within 60 s).
pub async fn streaming<Req, Resp>(
    ch: &Channel,
    path: &str,
    msg: Req,
    key: Option<&str>,
    tenant: Option<&str>,
) -> Result<Vec<Resp>, Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let (mut grpc, path) = ready(ch, path).await;
    let call = async {
        let mut stream =
            grpc.server_streaming(request(msg, key, tenant), path, ProstCodec::default()).await?.into_inner();
        let mut out = Vec::new();
        while let Some(m) = stream.message().await? {
            out.push(m);
        }
        Ok(out)
    };
    tokio::time::timeout(Duration::from_secs(60), call).await.expect("the call ends within 60 s")
}

#[track_caller]
pub fn expect_code<T: std::fmt::Debug>(r: Result<T, Status>, code: Code) {
    match r {
        Err(s) => assert_eq!(s.code(), code, "{s:?}"),
        Ok(v) => panic!("expected {code:?}, got {v:?}"),
    }
}
