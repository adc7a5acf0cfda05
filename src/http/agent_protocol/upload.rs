//! Artifacts on the wire: a multipart upload read into chunks, a download
//! streamed from the stored chunks (`service/tasks/artifacts.rs`), and the
//! `Content-Disposition` of a download.

use super::error::ApError;
use crate::service::tasks::artifacts::{self, check_file_name, check_relative_path, Chunker};
use crate::service::tasks::Artifact;
use crate::service::Service;
use axum::body::{Body, Bytes};
use axum::extract::multipart::{MultipartError, MultipartRejection};
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};

/// An upload's multipart body, read: the `file` field and the relative path.
#[derive(Debug)]
pub struct Upload {
    pub file_name: String,
    pub chunks: Vec<Vec<u8>>,
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
    let mut file: Option<(String, Vec<Vec<u8>>)> = None;
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

/// The artifact's bytes as a streamed body.
pub fn download(st: &Service, tenant: &str, a: &Artifact) -> Body {
    Body::from_stream(artifacts::read(st, tenant, a))
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
