//! The HTTP/1.1 client of `compare`: one keep-alive connection and one
//! request at a time on it, straight on hyper's connection API.
//!
//! The peers' drivers (`tokio-postgres`, `mysql_async`) send a prepared
//! statement on an open connection and do little else per query. reqwest,
//! used before, parsed the whole URL again for every request (IDNA host
//! mapping included) and went through a connection pool; on a two-core
//! machine shared with the server, client time comes out of the server's
//! share. This client does what a lean application client does: the host is
//! parsed once, and a request is its method, path, headers and body.
//! Against the same server it left read throughput level and halved p99
//! (`docs/performance.md`, "The round trip under every read").

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;

/// A reply, read in full.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

pub struct Http1 {
    /// `host:port`, for connecting and for the `Host` header.
    authority: String,
    host: HeaderValue,
    bearer: Option<HeaderValue>,
    /// The open connection; `None` before the first request and after one
    /// failed, so the next request connects again (as a pooled client would).
    send: Option<SendRequest<Full<Bytes>>>,
}

impl Http1 {
    /// `base` is `http://host:port` (no TLS: the comparison runs on loopback).
    pub fn new(base: &str, key: Option<&str>) -> Result<Http1> {
        let uri: hyper::Uri = base.parse().with_context(|| format!("{base}: not a URL"))?;
        if uri.scheme_str() != Some("http") {
            bail!("{base}: compare speaks plain http:// to tempora");
        }
        let authority = uri.authority().context("a URL without a host")?.as_str().to_string();
        let host = HeaderValue::from_str(&authority)?;
        let bearer = key.map(|k| HeaderValue::from_str(&format!("Bearer {k}"))).transpose()?;
        Ok(Http1 { authority, host, bearer, send: None })
    }

    async fn connection(&mut self) -> Result<&mut SendRequest<Full<Bytes>>> {
        if self.send.as_ref().is_none_or(|s| s.is_closed()) {
            let tcp = tokio::net::TcpStream::connect(&self.authority)
                .await
                .with_context(|| format!("connecting to {}", self.authority))?;
            tcp.set_nodelay(true)?;
            let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
            // The connection's own task reads and writes the socket; it ends
            // when `send` is dropped or the server closes.
            tokio::spawn(async move {
                let _ = conn.await;
            });
            self.send = Some(send);
        }
        Ok(self.send.as_mut().expect("connected above"))
    }

    /// Sends one request and reads its whole reply. A transport error drops
    /// the connection; the status is the caller's to judge.
    pub async fn request(&mut self, method: Method, path: &str, json: Option<Vec<u8>>) -> Result<Reply> {
        let mut req = Request::builder().method(method).uri(path).header(HOST, self.host.clone());
        if let Some(b) = &self.bearer {
            req = req.header(AUTHORIZATION, b.clone());
        }
        if json.is_some() {
            req = req.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let req = req.body(Full::new(Bytes::from(json.unwrap_or_default())))?;
        let result = async {
            let send = self.connection().await?;
            send.ready().await?;
            let resp = send.send_request(req).await?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, anyhow::Error>(Reply { status: parts.status, headers: parts.headers, body })
        }
        .await;
        if result.is_err() {
            self.send = None;
        }
        result
    }
}
