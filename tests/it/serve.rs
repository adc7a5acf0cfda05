//! The `tempora` binary, started for real: it opens (and creates) its data
//! directory, refuses a directory another server holds, and on SIGTERM
//! finishes and exits 0.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempora_storage::{Engine, EngineConfig, CURRENT_FORMAT};

fn start(data_dir: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(["serve", "--data-dir"])
        .arg(data_dir)
        .args(["--http-addr", "off", "--grpc-addr", "off", "--tcp-addr", "off"])
        .env_remove("TEMPORA_DATA_DIR")
        .stderr(Stdio::piped())
        .spawn()
        .expect("tempora starts")
}

/// Reads stderr until a line contains `needle` (or the process ends). The
/// rest of stderr keeps being drained in the background, so the server never
/// writes into a closed pipe.
fn wait_for(child: &mut Child, needle: &str) -> Vec<String> {
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let done = line.contains(needle);
        lines.push(line);
        if done {
            break;
        }
    }
    lines
}

fn sigterm(child: &Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

#[test]
fn serve_creates_the_data_dir_and_stops_cleanly_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut child = start(&dir);
    let lines = wait_for(&mut child, "tempora started");
    assert!(lines.iter().any(|l| l.contains("tempora started")), "{lines:#?}");
    sigterm(&child);
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status:?}");

    let engine = Engine::open(EngineConfig::at(&dir)).expect("the server left a valid store");
    assert_eq!(engine.format_found(), CURRENT_FORMAT);
}

#[test]
fn a_second_server_on_the_same_data_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut first = start(&dir);
    wait_for(&mut first, "tempora started");

    let out = Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(["serve", "--data-dir"])
        .arg(&dir)
        .args(["--http-addr", "off", "--grpc-addr", "off", "--tcp-addr", "off"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot open data directory"), "{err}");

    sigterm(&first);
    assert!(first.wait().unwrap().success());
}

#[test]
fn bad_configuration_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(["serve", "--http-addr", "not-an-address"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("http address") && err.contains("not-an-address"), "{err}");
}

#[test]
fn healthcheck_reports_whether_the_server_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap().to_string();
    drop(probe);
    let check = || {
        Command::new(env!("CARGO_BIN_EXE_tempora"))
            .args(["healthcheck", "--addr", &addr])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(!check(), "nothing listens yet");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tempora"))
        .args(["serve", "--data-dir"])
        .arg(tmp.path().join("d"))
        .args(["--http-addr", &addr, "--grpc-addr", "off", "--tcp-addr", "off"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&mut child, "http listening");
    assert!(check());
    sigterm(&child);
    assert!(child.wait().unwrap().success());
}
