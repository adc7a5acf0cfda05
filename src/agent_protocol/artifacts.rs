//! Artifact contents, kept in the engine's opaque keyspace next to the
//! facts (so they share its durability, backups and tenancy): the bytes are
//! cut into chunks of [`CHUNK`] bytes under
//! `ap/artifact/<tenant>\0<artifact id>\0<chunk index, big-endian u32>`.
//! All chunks of an artifact are written in one atomic batch, and its
//! metadata facts only after that, so an artifact is listed only once all
//! of its bytes are stored. Downloads stream the chunks one by one.

use super::error::ApError;
use super::store::{self, Artifact, Facts};
use crate::service::Service;
use crate::memory::blocking;
use axum::body::{Body, Bytes};
use axum::extract::multipart::{MultipartError, MultipartRejection};
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use serde_json::json;

/// Bytes per stored chunk.
pub const CHUNK: usize = 64 * 1024;
/// Longest file name or relative path, in bytes.
const MAX_NAME: usize = 1024;

fn chunk_key(tenant: &str, artifact: &str, index: u32) -> Vec<u8> {
    let mut k = b"ap/artifact/".to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(artifact.as_bytes());
    k.push(0);
    k.extend_from_slice(&index.to_be_bytes());
    k
}

/// The key of a task's chat context (where its conversation continues).
pub fn context_key(tenant: &str, task: &str) -> Vec<u8> {
    let mut k = b"ap/context/".to_vec();
    k.extend_from_slice(tenant.as_bytes());
    k.push(0);
    k.extend_from_slice(task.as_bytes());
    k
}

/// The most an artifact may hold: the server's `max_body_bytes`.
pub fn max_bytes(st: &Service) -> usize {
    st.limits.max_body_bytes
}

/// A relative path as the protocol allows it: no `..` component, not
/// absolute, no control characters. Empty means none.
pub fn check_relative_path(p: &str) -> Result<Option<String>, ApError> {
    let p = p.trim();
    if p.is_empty() {
        return Ok(None);
    }
    check_path("relative_path", p)?;
    Ok(Some(p.to_string()))
}

fn check_path(what: &str, p: &str) -> Result<(), ApError> {
    let refuse = |why: &str| Err(ApError::unprocessable(format!("{what} {p:?} is refused: {why}")));
    if p.len() > MAX_NAME {
        return refuse(&format!("longer than {MAX_NAME} bytes"));
    }
    if p.chars().any(char::is_control) {
        return refuse("it contains control characters");
    }
    let bytes = p.as_bytes();
    if p.starts_with('/')
        || p.starts_with('\\')
        || (bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic())
    {
        return refuse("absolute paths are not allowed");
    }
    if p.split(['/', '\\']).any(|c| c == "..") {
        return refuse("'..' is not allowed");
    }
    Ok(())
}

/// The file name an artifact is stored under: the last component of what
/// the client sent, after the same checks as a relative path.
pub fn check_file_name(name: &str) -> Result<String, ApError> {
    let name = name.trim();
    check_path("file name", name)?;
    let base = name.rsplit(['/', '\\']).next().unwrap_or("").trim();
    if base.is_empty() || base == "." {
        return Err(ApError::unprocessable(format!("file name {name:?} names no file")));
    }
    Ok(base.to_string())
}

/// Stores `bytes` as a new artifact of `task_id` (made by `step_id`, when
/// given) and returns it: the chunks first, then the facts.
pub async fn create(
    st: &Service,
    tenant: &str,
    task_id: &str,
    step_id: Option<&str>,
    file_name: String,
    relative_path: Option<String>,
    chunks: Vec<Bytes>,
) -> Result<Artifact, ApError> {
    let id = store::new_id();
    let size: usize = chunks.iter().map(Bytes::len).sum();
    if size > max_bytes(st) {
        return Err(ApError::too_large(format!("the artifact is larger than {} bytes", max_bytes(st))));
    }
    let n = chunks.len();
    let records: Vec<(Vec<u8>, Vec<u8>)> =
        chunks.into_iter().enumerate().map(|(i, c)| (chunk_key(tenant, &id, i as u32), c.to_vec())).collect();
    let engine = st.memory.store().clone();
    blocking(move || engine.aux_put_many(records)).await?;
    let subject = store::artifact_subject(&id);
    let mut facts = Facts::of_task(task_id);
    facts
        .set(&subject, "artifact.task", json!(store::task_subject(task_id)))
        .set(&subject, "artifact.step", json!(step_id.map(store::step_subject)))
        .set(&subject, "artifact.file_name", json!(file_name))
        .set(&subject, "artifact.relative_path", json!(relative_path))
        .set(&subject, "artifact.agent_created", json!(step_id.is_some()))
        .set(&subject, "artifact.size", json!(size))
        .set(&subject, "artifact.chunks", json!(n));
    store::write(st, tenant, facts).await?;
    Ok(Artifact {
        id,
        task_id: task_id.to_string(),
        step_id: step_id.map(String::from),
        file_name,
        relative_path,
        agent_created: step_id.is_some(),
        size: size as u64,
        chunks: n as u64,
    })
}

/// Cuts bytes into stored chunks.
pub fn chunked(bytes: &[u8]) -> Vec<Bytes> {
    bytes.chunks(CHUNK).map(Bytes::copy_from_slice).collect()
}

/// Collects chunks of [`CHUNK`] bytes from pieces of any size.
#[derive(Default)]
pub struct Chunker {
    pub done: Vec<Bytes>,
    open: Vec<u8>,
    pub size: usize,
}

impl Chunker {
    pub fn push(&mut self, mut piece: &[u8]) {
        self.size += piece.len();
        while !piece.is_empty() {
            let room = CHUNK - self.open.len();
            let (now, later) = piece.split_at(room.min(piece.len()));
            self.open.extend_from_slice(now);
            piece = later;
            if self.open.len() == CHUNK {
                self.done.push(Bytes::from(std::mem::take(&mut self.open)));
            }
        }
    }
    pub fn finish(mut self) -> Vec<Bytes> {
        if !self.open.is_empty() {
            self.done.push(Bytes::from(self.open));
        }
        self.done
    }
}

/// An upload's multipart body, read: the `file` field and the relative path.
#[derive(Debug)]
pub struct Upload {
    pub file_name: String,
    pub chunks: Vec<Bytes>,
    pub relative_path: Option<String>,
}

/// The answer to a body that is not `multipart/form-data` with a boundary.
pub fn multipart_rejected(e: MultipartRejection) -> ApError {
    ApError::unprocessable(format!("expected a multipart/form-data body: {e}"))
}

/// Reads the multipart body of an upload: the `file` field (its name
/// checked, its bytes chunked, at most `max` of them) and an optional
/// `relative_path` field, which wins over `relative_path` (from the query).
pub async fn read_upload(
    mut multipart: Multipart,
    mut relative_path: Option<String>,
    max: usize,
) -> Result<Upload, ApError> {
    let read_error = |e: MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApError::too_large(format!("the upload is larger than the configured limit ({max} bytes)"))
        } else {
            ApError::unprocessable(format!("cannot read the multipart body: {e}"))
        }
    };
    let mut file: Option<(String, Vec<Bytes>)> = None;
    while let Some(mut field) = multipart.next_field().await.map_err(read_error)? {
        match field.name() {
            Some("file") => {
                let name = field.file_name().unwrap_or("file").to_string();
                let name = check_file_name(&name)?;
                let mut chunker = Chunker::default();
                while let Some(piece) = field.chunk().await.map_err(read_error)? {
                    chunker.push(&piece);
                    if chunker.size > max {
                        return Err(ApError::too_large(format!("the artifact is larger than {max} bytes")));
                    }
                }
                file = Some((name, chunker.finish()));
            }
            Some("relative_path") => {
                relative_path = Some(field.text().await.map_err(read_error)?);
            }
            _ => {}
        }
    }
    let Some((file_name, chunks)) = file else {
        return Err(ApError::unprocessable("the multipart body has no `file` field"));
    };
    let relative_path = match relative_path {
        Some(p) => check_relative_path(&p)?,
        None => None,
    };
    Ok(Upload { file_name, chunks, relative_path })
}

/// [`read_upload`] of a body and its `Content-Type`, extracted as the
/// upload handler's `Multipart` is (for tests and the fuzz target).
pub async fn parse_upload(content_type: &[u8], body: Bytes, max: usize) -> Result<Upload, ApError> {
    let ctype = HeaderValue::from_bytes(content_type)
        .map_err(|_| ApError::unprocessable("the Content-Type header is not a valid header value"))?;
    let mut req = Request::new(Body::from(body));
    req.headers_mut().insert(CONTENT_TYPE, ctype);
    let multipart = Multipart::from_request(req, &()).await.map_err(multipart_rejected)?;
    read_upload(multipart, None, max).await
}

/// The artifact's bytes as a streamed body, read chunk by chunk.
pub fn download(st: &Service, tenant: &str, a: &Artifact) -> Body {
    let engine = st.memory.store().clone();
    let (tenant, id, n) = (tenant.to_string(), a.id.clone(), a.chunks as u32);
    let chunks = futures_util::stream::unfold(0u32, move |i| {
        let (engine, key) = (engine.clone(), chunk_key(&tenant, &id, i));
        async move {
            if i >= n {
                return None;
            }
            let got = blocking(move || engine.aux_get(&key)).await;
            let item = match got {
                Ok(Some(bytes)) => Ok(Bytes::from(bytes)),
                Ok(None) => Err(std::io::Error::other("an artifact chunk is missing")),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            };
            // After an error the stream ends (the connection is cut short).
            let next = if item.is_ok() { i + 1 } else { n };
            Some((item, next))
        }
    });
    Body::from_stream(chunks)
}

/// `attachment; filename="..."`, with the name made safe for the quoted
/// form and given exactly in `filename*` when it is not plain ASCII.
pub fn content_disposition(name: &str) -> String {
    let plain: String = name
        .chars()
        .map(|c| if c.is_ascii() && !c.is_ascii_control() && c != '"' && c != '\\' { c } else { '_' })
        .collect();
    if plain == name {
        return format!("attachment; filename=\"{plain}\"");
    }
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("attachment; filename=\"{plain}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_and_absolute_paths_are_refused() {
        for bad in ["../x", "a/../../x", "/etc/passwd", "\\windows", "C:\\x", "a\\..\\b", "a\nb"] {
            assert!(check_relative_path(bad).is_err(), "{bad}");
            assert!(check_file_name(bad).is_err(), "{bad}");
        }
        assert_eq!(check_relative_path("python/code/").unwrap().as_deref(), Some("python/code/"));
        assert_eq!(check_relative_path(" ").unwrap(), None);
        assert_eq!(check_file_name("dir/main.py").unwrap(), "main.py");
        assert!(check_file_name("dir/").is_err());
    }

    #[test]
    fn the_chunker_cuts_at_chunk_boundaries() {
        let mut c = Chunker::default();
        let data: Vec<u8> = (0..(CHUNK * 2 + 10)).map(|i| i as u8).collect();
        for piece in data.chunks(1000) {
            c.push(piece);
        }
        let chunks = c.finish();
        assert_eq!(chunks.iter().map(Bytes::len).collect::<Vec<_>>(), [CHUNK, CHUNK, 10]);
        assert_eq!(chunks.concat(), data);
    }

    #[tokio::test]
    async fn an_upload_body_is_read_like_the_handler_reads_it() {
        let body = "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dir/a.txt\"\r\n\r\nhello\r\n\
                    --b\r\nContent-Disposition: form-data; name=\"relative_path\"\r\n\r\nout/\r\n--b--\r\n";
        let up = parse_upload(b"multipart/form-data; boundary=b", Bytes::from(body), 100).await.unwrap();
        assert_eq!((up.file_name.as_str(), up.relative_path.as_deref()), ("a.txt", Some("out/")));
        assert_eq!(up.chunks.concat(), b"hello");
        let small = parse_upload(b"multipart/form-data; boundary=b", Bytes::from(body), 4).await.unwrap_err();
        assert_eq!(small.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(parse_upload(b"text/plain", Bytes::from(body), 100).await.is_err());
    }

    #[test]
    fn content_disposition_quotes_safely() {
        assert_eq!(content_disposition("a.txt"), "attachment; filename=\"a.txt\"");
        assert_eq!(content_disposition("é\".txt"), "attachment; filename=\"__.txt\"; filename*=UTF-8''%C3%A9%22.txt");
    }
}
