//! The data directory's disk filling up or going read-only under a running
//! server: writes are refused with a clear 503 and change nothing, reads go
//! on, writes resume when the disk is usable again, and a restart finds every
//! acknowledged write and nothing else.
//!
//! The data directory is on a small tmpfs mounted for the test, so this needs
//! root (as CI runs); elsewhere the test says so and does nothing.

use crate::common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` mounted on a fresh directory; unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        ok.then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Makes `dir` read-only under the running server, as a filesystem
    /// remounted read-only would be: a read-only bind mount stacked on it
    /// (a plain `remount,ro` is refused while the server has files open for
    /// writing). Everything opened by path from now on is read-only.
    fn read_only(&self, dir: &Path) {
        run("mount", &["--bind", dir.to_str().unwrap(), dir.to_str().unwrap()]);
        run("mount", &["-o", "remount,bind,ro", dir.to_str().unwrap()]);
    }

    /// Undoes [`Tmpfs::read_only`].
    fn writable(&self, dir: &Path) {
        run("umount", &[dir.to_str().unwrap()]);
    }

    /// Bytes still free for writing.
    fn available(&self) -> u64 {
        let path = std::ffi::CString::new(self.path().to_str().unwrap()).unwrap();
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut st) }, 0);
        st.f_bavail as u64 * st.f_frsize as u64
    }

    /// A file that takes space until only `leave` bytes are free (or the
    /// disk is full, with `leave` 0).
    fn fill(&self, leave: u64) -> PathBuf {
        let path = self.path().join("ballast");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0x5a_u8; 64 << 10];
        while self.available() > leave {
            let n = (self.available() - leave).min(chunk.len() as u64) as usize;
            if f.write_all(&chunk[..n]).is_err() {
                break;
            }
        }
        let _ = f.flush();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

fn run(cmd: &str, args: &[&str]) {
    let ok = Command::new(cmd).args(args).status().unwrap();
    assert!(ok.success(), "{cmd} {args:?} failed");
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

fn fact(i: usize) -> Value {
    json!({"subject": format!("Disk:f{i}"), "predicate": "note", "object": format!("entry number {i}")})
}

/// POST /api/facts; the response.
async fn try_assert(api: &Api, body: &Value) -> Resp {
    api.post("/api/facts", body).await
}

/// Asserts a refused write: 503 `Unavailable` whose message contains `why`.
fn refused(r: &Resp, why: &str) {
    assert_eq!(r.status.as_u16(), 503, "expected a refusal, got {}: {}", r.status, r.text);
    assert_eq!(r.json["error"]["code"], "Unavailable", "{}", r.text);
    let msg = r.json["error"]["message"].as_str().unwrap();
    assert!(msg.contains(why), "message {msg:?} should say {why:?}");
    assert!(msg.contains("reads go on"), "{msg}");
}

/// The ids of every fact of the tenant.
async fn all_ids(api: &Api) -> Vec<String> {
    let mut v = ids(&api.list("status=all&limit=1000").await);
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_or_read_only_disk_refuses_writes_keeps_reads_and_recovers() {
    engine_only!();
    if !is_root() {
        eprintln!("skipped: mounting a tmpfs for the data directory needs root");
        return;
    }
    let fs = Tmpfs::mount("64m").expect("mount a tmpfs");
    let data = fs.path().join("data");
    let reserve = 16u64 << 20;
    let server = Server::start(&data, &[("TEMPORA_MIN_FREE_DISK_BYTES", &reserve.to_string())]);
    let api = Api::new(&server, None);

    let mut acked: Vec<String> = Vec::new();
    for i in 0..20 {
        acked.push(api.assert_fact(fact(i)).await["id"].as_str().unwrap().to_string());
    }
    assert_eq!(api.get("/readyz").await.expect(200)["writes"], "ok");

    // Below the reserve: every kind of write is refused, nothing changes.
    let ballast = fs.fill(reserve / 2);
    let before = api.stats().await;
    refused(&try_assert(&api, &fact(100)).await, "reserve");
    let batch = json!({"facts": [fact(101), fact(102)]});
    refused(&api.post("/api/facts/batch", &batch).await, "reserve");
    refused(&api.delete(&format!("/api/facts/{}", acked[0])).await, "reserve");
    let ready = api.get("/readyz").await;
    assert!(ready.expect(200)["writes"].as_str().unwrap().contains("reserve"), "{}", ready.text);
    // Reads go on, and see exactly what was acknowledged.
    let mut want = acked.clone();
    want.sort();
    assert_eq!(all_ids(&api).await, want);
    assert_eq!(api.get(&format!("/api/facts/{}", acked[3])).await.expect(200)["object"], "entry number 3");
    let s = api.get("/api/search?question=entry").await;
    assert!(!s.expect(200)["answer_facts"].as_array().unwrap().is_empty(), "{}", s.text);
    assert_eq!(api.stats().await["facts"], before["facts"], "a refused write changed the counts");

    // Space returns: writes resume without a restart.
    std::fs::remove_file(&ballast).unwrap();
    acked.push(api.assert_fact(fact(20)).await["id"].as_str().unwrap().to_string());
    assert_eq!(api.get("/readyz").await.expect(200)["writes"], "ok");

    // Read-only: refused with the reason; reads go on; writable again, writes resume.
    fs.read_only(&data);
    refused(&try_assert(&api, &fact(103)).await, "read-only");
    assert_eq!(all_ids(&api).await.len(), acked.len());
    fs.writable(&data);
    acked.push(api.assert_fact(fact(21)).await["id"].as_str().unwrap().to_string());
    server.stop_ok();

    // No reserve: the disk fills under the store itself. The failed write and
    // every one after it are refused with the cause; reads go on.
    let server = Server::start(&data, &[("TEMPORA_MIN_FREE_DISK_BYTES", "0")]);
    let api = Api::new(&server, None);
    let ballast = fs.fill(512 << 10);
    let big = "x".repeat(200 << 10);
    let mut attempted = Vec::new();
    let mut failure = None;
    for i in 0..400 {
        let body = json!({"subject": format!("Disk:big{i}"), "predicate": "blob", "object": big});
        let r = try_assert(&api, &body).await;
        if r.status.as_u16() == 201 {
            acked.push(r.json["id"].as_str().unwrap().to_string());
        } else {
            attempted.push(format!("Disk:big{i}"));
            failure = Some(r);
            break;
        }
    }
    let failure = failure.expect("the disk never filled");
    if failure.status.as_u16() != 503 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        panic!("expected 503, got {}\n{}", failure.text, server.stderr());
    }
    refused(&try_assert(&api, &fact(104)).await, "stopped taking writes");
    assert!(all_ids(&api).await.len() >= acked.len());
    // Space back: this store still refuses (it failed a write); a restart heals it.
    std::fs::remove_file(&ballast).unwrap();
    refused(&try_assert(&api, &fact(105)).await, "restart");
    server.kill9();

    let server = Server::start(&data, &[("TEMPORA_MIN_FREE_DISK_BYTES", "1048576")]);
    let api = Api::new(&server, None);
    let present = all_ids(&api).await;
    for id in &acked {
        assert!(present.binary_search(id).is_ok(), "acknowledged fact {id} is lost");
    }
    // Anything else present can only be the write that failed (it may or may
    // not have reached the disk); never a refused one.
    let extra: Vec<Value> = api
        .list("status=all&limit=1000")
        .await
        .into_iter()
        .filter(|f| !acked.contains(&f["id"].as_str().unwrap().to_string()))
        .collect();
    for f in &extra {
        assert!(attempted.contains(&f["subject"].as_str().unwrap().to_string()), "unexpected fact after restart: {f}");
    }
    let total = api.stats().await["facts"]["total"].as_u64().unwrap() as usize;
    assert_eq!(total, present.len(), "stats disagree with the facts");
    acked.push(api.assert_fact(fact(22)).await["id"].as_str().unwrap().to_string());
    let s = api.get("/api/search?question=entry").await;
    assert!(!s.expect(200)["answer_facts"].as_array().unwrap().is_empty(), "{}", s.text);
    server.stop_ok();
}
