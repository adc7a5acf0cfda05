//! The error envelope on the answers hyper writes by itself.
//!
//! When a request head cannot be parsed (a garbage request line or header:
//! 400), is over `max_header_bytes` or `max_headers` (431), or its URI is
//! too long (414), hyper answers on its own, before the router ever sees a
//! request, with an empty body; its HTTP/1 server has no hook to change
//! that answer. The API promises the `{"error":{"code","message"}}`
//! envelope on every error, so the connection's socket is wrapped
//! ([`HeadErrorIo`]) and its write side rewrites those answers as they go
//! out: same status, a JSON envelope body, and the matching
//! `content-type` and `content-length`.
//!
//! Telling hyper's answer from the app's: hyper writes it (and then closes
//! the connection) only while no response of the app is being written on
//! the connection, which [`track`] counts (a response counts from its head
//! until hyper drops its body), and it is the exact shape
//! `HTTP/1.1 431 <reason>`, then only `connection`, `content-length: 0`
//! and `date`, ending the bytes handed to the socket. The app's own errors
//! always carry a JSON body, so an empty 400, 414 or 431 is never theirs.

use super::error::ApiError;
use axum::body::Bytes;
use axum::http::StatusCode;
use hyper::body::{Frame, SizeHint};
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The bodies that replace hyper's empty ones, made once per listener.
pub struct Envelopes {
    bad_request: Vec<u8>,
    uri_too_long: Vec<u8>,
    head_too_large: Vec<u8>,
}

impl Envelopes {
    /// `max_headers` and `max_header_bytes` are the listener's limits, named
    /// in the 431 message.
    pub fn new(max_headers: usize, max_header_bytes: usize) -> Envelopes {
        let body = |status, code, message: String| ApiError::new(status, code, message).body().to_string().into_bytes();
        Envelopes {
            bad_request: body(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "malformed HTTP request: the request line or a header could not be parsed".into(),
            ),
            uri_too_long: body(StatusCode::URI_TOO_LONG, "UriTooLong", "the request URI is too long".into()),
            head_too_large: body(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "HeadersTooLarge",
                format!(
                    "the request head is too large: at most {} headers in {} bytes (max_headers, max_header_bytes)",
                    max_headers, max_header_bytes
                ),
            ),
        }
    }

    fn for_status(&self, status: u16) -> Option<&[u8]> {
        match status {
            400 => Some(&self.bad_request),
            414 => Some(&self.uri_too_long),
            431 => Some(&self.head_too_large),
            _ => None,
        }
    }
}

/// Responses of the app being written on one connection (see [`track`]).
#[derive(Clone, Default)]
pub struct Writing(Arc<AtomicUsize>);

impl Writing {
    fn idle(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

/// Counts one response from the moment its head is handed to hyper until
/// hyper drops its body, written or not.
struct Counted(Writing);

impl Counted {
    fn new(w: &Writing) -> Counted {
        w.0.fetch_add(1, Ordering::AcqRel);
        Counted(w.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its response counted while hyper holds it.
pub struct CountedBody {
    inner: axum::body::Body,
    _counted: Counted,
}

impl hyper::body::Body for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Wraps each response of the app so that `writing` counts it. Only the
/// time a response is being written matters: until its head exists hyper
/// reads no further request head, so it writes no error of its own.
pub fn track(
    writing: &Writing,
) -> impl FnOnce(axum::response::Response) -> hyper::Response<CountedBody> + Clone + Send + 'static {
    let writing = writing.clone();
    move |resp: axum::response::Response| {
        let counted = Counted::new(&writing);
        resp.map(|inner| CountedBody { inner, _counted: counted })
    }
}

/// A connection's socket whose write side puts the error envelope on the
/// answers hyper writes for requests it cannot parse.
pub struct HeadErrorIo<T> {
    inner: T,
    envelopes: Arc<Envelopes>,
    writing: Writing,
    /// A rewritten answer, and how much of it is written. Hyper was told
    /// the whole of its own answer went out; this goes out before anything
    /// else is written, flushed or shut down.
    pending: Option<(Vec<u8>, usize)>,
}

impl<T> HeadErrorIo<T> {
    pub fn new(inner: T, envelopes: Arc<Envelopes>, writing: Writing) -> HeadErrorIo<T> {
        HeadErrorIo { inner, envelopes, writing, pending: None }
    }
}

impl<T: AsyncWrite + Unpin> HeadErrorIo<T> {
    /// Writes what is left of a rewritten answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, done)) = &mut self.pending {
            if *done == bytes.len() {
                self.pending = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *done += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Where hyper's own error answer starts in the `len` bytes about to be
    /// written, whose last (up to [`MAX_HEAD`]) bytes are `tail`, and its
    /// rewrite; `None` when they do not end with one.
    fn find(&self, tail: &[u8], len: usize) -> Option<(usize, Vec<u8>)> {
        if !self.writing.idle() {
            return None;
        }
        let (at, rewritten) = own_error_head(tail, &self.envelopes)?;
        Some((len - tail.len() + at, rewritten))
    }

    /// Takes over the answer that makes up the whole of the `len` bytes
    /// offered: it is counted as written, and its rewrite goes out now or
    /// on the next call.
    fn take_over(&mut self, cx: &mut Context<'_>, rewritten: Vec<u8>, len: usize) -> Poll<io::Result<usize>> {
        self.pending = Some((rewritten, 0));
        if let Poll::Ready(Err(e)) = self.poll_pending(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(len))
    }
}

/// Hyper's error answers are about 110 bytes; anything longer is not one.
const MAX_HEAD: usize = 256;

/// When `bytes` end with an answer hyper wrote for a request it could not
/// parse (a 400, 414 or 431 status line followed only by `connection`,
/// `content-length: 0` and `date`), where it starts and the answer with the
/// envelope instead.
fn own_error_head(bytes: &[u8], envelopes: &Envelopes) -> Option<(usize, Vec<u8>)> {
    // Most writes end with a body: the cheap test first.
    if !bytes.ends_with(b"\r\n\r\n") {
        return None;
    }
    let tail_from = bytes.len().saturating_sub(MAX_HEAD);
    let at = tail_from + find_last(&bytes[tail_from..], b"HTTP/1.")?;
    let head = std::str::from_utf8(&bytes[at..]).ok()?.strip_suffix("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status: u16 = match status_line.as_bytes() {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'0' | b'1', b' ', code @ .., ] if code.len() > 3 && code[3] == b' ' => {
            std::str::from_utf8(&code[..3]).ok()?.parse().ok()?
        }
        _ => return None,
    };
    let body = envelopes.for_status(status)?;
    if !printable(status_line) {
        return None;
    }
    let mut kept = Vec::new();
    let mut empty_body = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if !printable(line) {
            return None;
        }
        if name.eq_ignore_ascii_case("content-length") {
            if value != "0" || empty_body {
                return None;
            }
            empty_body = true;
        } else if name.eq_ignore_ascii_case("connection") || name.eq_ignore_ascii_case("date") {
            kept.push(line);
        } else {
            return None;
        }
    }
    if !empty_body {
        return None;
    }
    let mut out = Vec::with_capacity(head.len() + body.len() + 64);
    out.extend_from_slice(status_line.as_bytes());
    out.extend_from_slice(b"\r\ncontent-type: application/json\r\n");
    out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    for line in kept {
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Some((at, out))
}

fn printable(s: &str) -> bool {
    s.bytes().all(|b| (b' '..=b'~').contains(&b))
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

impl<T: AsyncRead + Unpin> AsyncRead for HeadErrorIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeadErrorIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        let tail = &buf[buf.len().saturating_sub(MAX_HEAD)..];
        match this.find(tail, buf.len()) {
            // What comes before hyper's answer goes out as it is, first.
            Some((at, _)) if at > 0 => Pin::new(&mut this.inner).poll_write(cx, &buf[..at]),
            Some((_, rewritten)) => this.take_over(cx, rewritten, buf.len()),
            None => Pin::new(&mut this.inner).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        // The last bytes offered, in order, across the slices.
        let mut tail = [0u8; MAX_HEAD];
        let mut start = MAX_HEAD;
        for b in bufs.iter().rev() {
            if start == 0 {
                break;
            }
            let part = &b[b.len().saturating_sub(start)..];
            tail[start - part.len()..start].copy_from_slice(part);
            start -= part.len();
        }
        match this.find(&tail[start..], len) {
            Some((at, _)) if at > 0 => {
                // Only the slices (and the part of one) before hyper's answer.
                let mut before = Vec::with_capacity(bufs.len());
                let mut left = at;
                for b in bufs {
                    if left == 0 {
                        break;
                    }
                    let take = left.min(b.len());
                    before.push(IoSlice::new(&b[..take]));
                    left -= take;
                }
                Pin::new(&mut this.inner).poll_write_vectored(cx, &before)
            }
            Some((_, rewritten)) => this.take_over(cx, rewritten, len),
            None => Pin::new(&mut this.inner).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    const HYPER_431: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Mon, 07 Dec 2026 07:52:41 GMT\r\n\r\n";
    const HYPER_400: &[u8] =
        b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Mon, 07 Dec 2026 07:52:41 GMT\r\n\r\n";

    fn envelopes() -> Arc<Envelopes> {
        Arc::new(Envelopes::new(100, 64 * 1024))
    }

    /// Splits a written answer into its head lines and its body.
    fn split(out: &[u8]) -> (Vec<String>, serde_json::Value) {
        let text = std::str::from_utf8(out).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        (head.split("\r\n").map(String::from).collect(), serde_json::from_str(body).unwrap())
    }

    /// A socket that takes at most `step` bytes per write.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn hyper_answers_get_the_envelope() {
        let (at, out) = own_error_head(HYPER_431, &envelopes()).expect("recognised");
        assert_eq!(at, 0);
        let (head, body) = split(&out);
        assert_eq!(head[0], "HTTP/1.1 431 Request Header Fields Too Large");
        assert!(head.contains(&"content-type: application/json".to_string()), "{head:?}");
        assert!(head.contains(&"connection: close".to_string()), "{head:?}");
        assert!(head.iter().any(|l| l.starts_with("date: ")), "{head:?}");
        let length = head.iter().find_map(|l| l.strip_prefix("content-length: ")).unwrap();
        assert_eq!(length.parse::<usize>().unwrap(), body.to_string().len());
        assert_eq!(body["error"]["code"], "HeadersTooLarge");
        let (_, out) = own_error_head(HYPER_400, &envelopes()).unwrap();
        assert_eq!(split(&out).1["error"]["code"], "BadRequest");
    }

    #[test]
    fn other_bytes_are_left_alone() {
        let e = envelopes();
        // Another status, a body, another header, no end of head, a JSON body after it.
        for bytes in [
            &b"HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\r\n",
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n",
            b"{\"a\":\"HTTP/1.1 400 Bad Request\"}",
            b"",
        ] {
            assert!(own_error_head(bytes, &e).is_none(), "{:?}", String::from_utf8_lossy(bytes));
        }
    }

    #[tokio::test]
    async fn an_answer_after_other_bytes_and_over_partial_writes() {
        // The tail of an earlier answer still buffered, then hyper's; the
        // socket takes 7 bytes at a time.
        let earlier = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        let mut io = HeadErrorIo::new(Trickle { out: Vec::new(), step: 7 }, envelopes(), Writing::default());
        io.write_all(&[&earlier[..], HYPER_431].concat()).await.unwrap();
        io.flush().await.unwrap();
        let out = io.inner.out;
        assert!(out.starts_with(earlier));
        let (head, body) = split(&out[earlier.len()..]);
        assert_eq!(head[0], "HTTP/1.1 431 Request Header Fields Too Large");
        assert_eq!(body["error"]["code"], "HeadersTooLarge");
    }

    #[tokio::test]
    async fn vectored_writes_too() {
        let mut io = HeadErrorIo::new(Trickle { out: Vec::new(), step: 1 << 20 }, envelopes(), Writing::default());
        let (a, b) = HYPER_400.split_at(30);
        let first = b"tail of a body";
        let mut slices = [IoSlice::new(first), IoSlice::new(a), IoSlice::new(b)];
        let mut left: &mut [IoSlice<'_>] = &mut slices;
        while !left.is_empty() {
            let n = io.write_vectored(left).await.unwrap();
            IoSlice::advance_slices(&mut left, n);
        }
        io.flush().await.unwrap();
        let out = io.inner.out;
        assert!(out.starts_with(first));
        assert_eq!(split(&out[first.len()..]).1["error"]["code"], "BadRequest");
    }

    #[tokio::test]
    async fn nothing_is_rewritten_while_a_response_is_being_written() {
        let writing = Writing::default();
        let counted = Counted::new(&writing);
        let mut io = HeadErrorIo::new(Trickle { out: Vec::new(), step: 1 << 20 }, envelopes(), writing.clone());
        io.write_all(HYPER_431).await.unwrap();
        assert_eq!(io.inner.out, HYPER_431);
        drop(counted);
        assert!(writing.idle());
    }
}
