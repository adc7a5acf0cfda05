//! HTTP connections are served on `http_threads` threads, each with its own
//! event loop (`src/http_threads.rs`): accepted connections are handed out
//! in turn, every thread serves its share, and the server still stops
//! cleanly with kept-alive connections open on them.

use crate::common::Server;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The process's threads named `tempora-http-<n>`: (name, CPU time in ns).
fn http_threads(pid: u32) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim().to_string();
        // The first field of schedstat: time spent on a CPU, in nanoseconds.
        let ran = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse().ok()))
            .unwrap_or(0);
        if comm.starts_with("tempora-http-") {
            out.push((comm, ran));
        }
    }
    out.sort();
    out
}

/// One kept-alive HTTP/1.1 connection, a request at a time.
struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(authority: &str) -> Conn {
        let tcp = TcpStream::connect(authority).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Conn { reader: BufReader::new(tcp) }
    }

    /// `GET path`, returning the status and the body.
    fn get(&mut self, authority: &str, path: &str) -> (u16, String) {
        let req = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        self.reader.get_mut().write_all(req.as_bytes()).unwrap();
        let mut status_line = String::new();
        self.reader.read_line(&mut status_line).unwrap();
        let status = status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).unwrap();
        (status, String::from_utf8(body).unwrap())
    }
}

#[test]
fn connections_are_spread_over_the_http_threads_and_the_server_stops_with_them_open() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[("TEMPORA_HTTP_THREADS", "3")]);
    // A new thread sets its own name once it runs: wait for all three.
    let expected = ["tempora-http-0", "tempora-http-1", "tempora-http-2"];
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let names = loop {
        let names: Vec<String> = http_threads(server.pid()).into_iter().map(|(n, _)| n).collect();
        if names == expected || std::time::Instant::now() > deadline {
            break names;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(names, expected);

    // Six connections, handed out in turn: two on each thread. Each thread's
    // CPU time grows only if it serves some of them.
    let authority = server.authority().to_string();
    let mut conns: Vec<Conn> = (0..6).map(|_| Conn::open(&authority)).collect();
    let before = http_threads(server.pid());
    for _ in 0..300 {
        for c in &mut conns {
            let (status, body) = c.get(&authority, "/api/facts?subject=Person:nobody");
            assert_eq!((status, body.as_str()), (200, "[]"));
        }
    }
    let after = http_threads(server.pid());
    for ((name, ran_before), (_, ran_after)) in before.iter().zip(&after) {
        // 600 requests on a thread take milliseconds; an idle thread wakes
        // for its timers only.
        assert!(ran_after - ran_before > 2_000_000, "{name} ran {} ns: {before:?} {after:?}", ran_after - ran_before);
    }

    // Shutdown with the six connections open and idle: each closes after
    // its (finished) request, the threads stop, and the process exits 0.
    server.stop_ok();
    for c in &mut conns {
        let mut rest = Vec::new();
        let n = c.reader.read_to_end(&mut rest).unwrap_or(0);
        assert_eq!(n, 0, "the server closed the connection without sending more");
    }
}
