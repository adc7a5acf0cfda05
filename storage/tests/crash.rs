//! Crash recovery: `kill -9` a process that is writing, reopen the store, and
//! check that nothing acknowledged was lost and nothing half-written appeared.
//!
//! The test binary re-executes itself as the child: `child_writer` does
//! nothing unless `TEMPORA_CRASH_CHILD` names a data directory, in which case
//! it opens the engine there (durable, the default) and runs writer threads
//! forever. Each write is a batch of 1-5 facts whose `source` names the batch
//! and its size (`b-<iter>-<thread>-<n>-of-<k>`); once a write returns Ok the
//! child prints `ACK <tx> <batch> <fact ids>` (or `RET <tx> <id>` for a
//! retraction) and flushes. Some facts go to a few subjects of a `one`
//! predicate with random valid intervals, so supersession chains and tails
//! are in flight when the process dies.
//!
//! The parent SIGKILLs the child after a pseudo-random delay, opens the store
//! itself and checks: every acknowledged fact and retraction is there with its
//! tx and source; every batch in the store is complete; the `one` invariant,
//! the supersession links, the change log (gapless, increasing tx,
//! non-decreasing record time) and the stats are intact. Then it closes the
//! store and starts the next child on the same, growing, directory.

use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempora_storage::*;

const CHILD_ENV: &str = "TEMPORA_CRASH_CHILD";
const ITER_ENV: &str = "TEMPORA_CRASH_ITER";
const TENANT: &str = "crash";
/// A `one` predicate on a few subjects: supersession under fire.
const ONE: &str = "located_in";
const SHARED_SUBJECTS: [&str; 3] = ["Person:ann", "Person:ben", "Person:col"];
/// Facts on subjects of their own, which interact with nothing.
const SOLO: &str = "mentions";
const ITERATIONS: u64 = 24;
const CHILD_WRITERS: u64 = 4;

mod common;
use common::Rng;

// ---- the child -------------------------------------------------------------------

/// Runs only as the child process (see the module docs); a no-op otherwise.
#[test]
fn child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let iter: u64 = std::env::var(ITER_ENV).expect("iteration").parse().expect("iteration number");
    let engine = Arc::new(Engine::open(EngineConfig::at(&dir)).expect("child opens the store"));
    // The harness has printed "test child_writer ... " without a newline.
    say(&format!("\nREADY {}", engine.last_tx().0));
    let threads: Vec<_> = (0..CHILD_WRITERS)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || write_forever(&engine, iter, t))
        })
        .collect();
    for t in threads {
        t.join().expect("child writer panicked");
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("stdout");
    out.flush().expect("flush stdout");
}

fn write_forever(engine: &Engine, iter: u64, t: u64) {
    let mut rng = Rng(iter * 1_000_003 + t * 7919 + 1);
    let mut mine: Vec<FactId> = Vec::new();
    for n in 0.. {
        if !mine.is_empty() && rng.below(10) == 0 {
            let id = mine.swap_remove(rng.below(mine.len() as u64) as usize);
            let out = engine.write(TENANT, vec![WriteOp::Retract(id)]).expect("retract");
            say(&format!("RET {} {id}", out.tx));
            continue;
        }
        let k = 1 + rng.below(5);
        let batch = format!("b-{iter}-{t}-{n}-of-{k}");
        let inputs: Vec<FactInput> = (0..k)
            .map(|i| {
                if rng.below(2) == 0 {
                    let subject = SHARED_SUBJECTS[rng.below(SHARED_SUBJECTS.len() as u64) as usize];
                    let from = rng.below(10_000) as Millis;
                    let f = FactInput::new(subject, ONE, json!(format!("Place:{iter}-{t}-{n}-{i}")))
                        .valid_from(from)
                        .source(batch.clone());
                    if rng.below(2) == 0 {
                        f.valid_until(from + 1 + rng.below(3_000) as Millis)
                    } else {
                        f
                    }
                } else {
                    FactInput::new(format!("Doc:{iter}-{t}-{n}-{i}"), SOLO, json!({"n": n, "i": i}))
                        .source(batch.clone())
                }
            })
            .collect();
        let (tx, asserted) = engine.assert_batch(TENANT, inputs).expect("batch");
        let ids: Vec<String> = asserted.iter().map(|a| a.fact.id.to_string()).collect();
        mine.extend(asserted.iter().map(|a| a.fact.id));
        say(&format!("ACK {tx} {batch} {}", ids.join(",")));
    }
}

// ---- the parent ------------------------------------------------------------------

struct AckedBatch {
    tx: Tx,
    ids: Vec<FactId>,
}

/// `b-<iter>-<thread>-<n>-of-<k>` -> k.
fn batch_size(source: &str) -> Option<usize> {
    source.strip_prefix("b-")?.rsplit_once("-of-")?.1.parse().ok()
}

struct Child {
    ready_tx: Tx,
    lines: Vec<String>,
    ran_for: Duration,
}

/// Starts a child writer on `dir`, kills it with SIGKILL `delay` after it
/// reports ready, and returns what it printed.
fn run_child(dir: &std::path::Path, iter: u64, delay: Duration) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env(ITER_ENV, iter.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (lines_tx, lines_rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if lines_tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });

    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready_tx = loop {
        match lines_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => {
                let ready = l.strip_prefix("READY ").map(|t| t.parse::<Tx>().unwrap());
                lines.push(l);
                if let Some(t) = ready {
                    break t;
                }
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("child {iter} never got ready; stderr:\n{}", err_reader.join().unwrap());
            }
        }
    };
    let ready_at = Instant::now();
    std::thread::sleep(delay);
    if let Some(status) = child.try_wait().unwrap() {
        panic!("child {iter} exited on its own ({status}); stderr:\n{}", err_reader.join().unwrap());
    }
    // SIGKILL: no destructor, no final sync, no flush of anything buffered.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill -9 the child");
    let status = child.wait().unwrap();
    let ran_for = ready_at.elapsed();
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL), "child {iter} died of SIGKILL");
    }
    reader.join().unwrap();
    lines.extend(lines_rx.try_iter());
    let _ = err_reader.join();
    Child { ready_tx, lines, ran_for }
}

#[test]
fn kill_9_loses_no_acknowledged_write_to_a_redb_store() {
    kill_9_loses_no_acknowledged_write(Backend::Redb);
}

#[test]
fn kill_9_loses_no_acknowledged_write_to_a_sled_store() {
    kill_9_loses_no_acknowledged_write(Backend::Sled);
}

fn kill_9_loses_no_acknowledged_write(backend: Backend) {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    // The store is created here with `backend`; every child and every reopen
    // then finds that backend in the directory.
    Engine::open(EngineConfig::at(dir.path()).backend(backend)).expect("create the store").close();
    assert_eq!(Backend::found_in(dir.path()), Some(backend));
    let mut acked: BTreeMap<String, AckedBatch> = BTreeMap::new();
    let mut retracted: HashMap<FactId, Tx> = HashMap::new();
    let mut ack_txs: HashSet<Tx> = HashSet::new();
    let mut last_seen_tx = 0;
    let mut total_acks = 0;
    let mut iterations_with_acks = 0;
    let mut stored_facts = 0;
    let mut final_stats = TenantStats::default();
    let mut tails = 0;

    for iter in 0..ITERATIONS {
        let mut rng = Rng(0x5EED_0000 + iter);
        let delay = Duration::from_millis(50 + rng.below(351));
        let child = run_child(dir.path(), iter, delay);
        assert_eq!(child.ready_tx, last_seen_tx, "the child resumes at the last tx the parent saw");

        // ---- what the child acknowledged ----------------------------------------
        let mut acks_now = 0;
        for line in &child.lines {
            let mut parts = line.split(' ');
            match parts.next() {
                Some("ACK") => {
                    let tx: Tx = parts.next().unwrap().parse().unwrap();
                    let batch = parts.next().unwrap().to_string();
                    let ids: Vec<FactId> = parts.next().unwrap().split(',').map(|s| s.parse().unwrap()).collect();
                    assert_eq!(Some(ids.len()), batch_size(&batch), "{line}");
                    assert!(ack_txs.insert(tx), "tx {tx} acknowledged twice");
                    assert!(acked.insert(batch.clone(), AckedBatch { tx, ids }).is_none(), "batch {batch} twice");
                    acks_now += 1;
                }
                Some("RET") => {
                    let tx: Tx = parts.next().unwrap().parse().unwrap();
                    let id: FactId = parts.next().unwrap().parse().unwrap();
                    assert!(ack_txs.insert(tx), "tx {tx} acknowledged twice");
                    retracted.insert(id, tx);
                    acks_now += 1;
                }
                _ => {}
            }
        }
        total_acks += acks_now;
        iterations_with_acks += usize::from(acks_now > 0);

        // ---- recovery --------------------------------------------------------------
        let engine = Engine::open(EngineConfig::at(dir.path())).expect("reopen after kill -9");
        let (last_tx, _) = engine.last_tx();
        assert!(last_tx >= last_seen_tx);
        if let Some(max_ack) = ack_txs.iter().max() {
            assert!(last_tx >= *max_ack, "last tx {last_tx} is below acknowledged tx {max_ack}");
        }
        last_seen_tx = last_tx;

        // Every acknowledged write survived, with its tx and source.
        for (batch, a) in &acked {
            for id in &a.ids {
                let f = engine
                    .get(TENANT, *id, None)
                    .unwrap()
                    .unwrap_or_else(|| panic!("iteration {iter}: acknowledged fact {id} of {batch} lost"));
                assert_eq!(f.created_tx, a.tx, "{batch}");
                assert_eq!(f.source.as_deref(), Some(batch.as_str()));
                let first = engine.get(TENANT, *id, Some(AsOf::Tx(a.tx))).unwrap().unwrap();
                assert_eq!(first.tx, a.tx);
            }
        }
        for (id, tx) in &retracted {
            let f = engine.get(TENANT, *id, None).unwrap().expect("a retracted fact is still stored");
            assert_eq!(f.status, Status::Retracted, "iteration {iter}: acknowledged retraction of {id} lost");
            let h = engine.history(TENANT, *id).unwrap();
            assert!(h.versions.iter().any(|v| v.tx == *tx && v.status == Status::Retracted));
        }

        // Every batch in the store is whole, in one tx.
        let facts = all_facts(&engine);
        stored_facts = facts.len();
        tails = facts.iter().filter(|f| f.continues.is_some()).count();
        let by_id: HashMap<FactId, &Fact> = facts.iter().map(|f| (f.id, f)).collect();
        assert_eq!(by_id.len(), facts.len(), "a fact listed twice");
        let mut batches: HashMap<&str, Vec<&Fact>> = HashMap::new();
        for f in &facts {
            if let Some(from) = f.continues {
                // A tail carries its origin's source; it belongs to no batch.
                let origin = by_id.get(&from).unwrap_or_else(|| panic!("tail {} of missing {from}", f.id));
                // A fact cut more than once names every tail.
                let linked = origin.continued_by.contains(&f.id);
                assert!(linked, "origin of tail {} does not link back", f.id);
                continue;
            }
            let source = f.source.as_deref().expect("every batch fact has a source");
            batches.entry(source).or_default().push(f);
        }
        for (source, fs) in &batches {
            let k = batch_size(source).unwrap_or_else(|| panic!("unexpected source {source}"));
            assert_eq!(fs.len(), k, "iteration {iter}: batch {source} is partial");
            assert!(fs.iter().all(|f| f.created_tx == fs[0].created_tx), "batch {source} spans txs");
        }
        for batch in acked.keys() {
            assert!(batches.contains_key(batch.as_str()), "acknowledged batch {batch} missing");
        }

        // Supersession chains and the `one` invariant.
        for f in &facts {
            if let Some(u) = f.valid_until {
                assert!(u >= f.valid_from, "interval ends before it starts: {f:?}");
            }
            if f.status == Status::Superseded {
                let by = f.superseded_by.expect("superseded_by set");
                let succ = by_id.get(&by).unwrap_or_else(|| panic!("successor {by} of {} missing", f.id));
                let succ_first = engine.get(TENANT, by, Some(AsOf::Tx(succ.created_tx))).unwrap().unwrap();
                // A superseded tail inherits its origin's closer: walk back
                // through `continues` to the fact the closer lists.
                let mut cur = Some(f.id);
                let mut listed = false;
                while let Some(id) = cur {
                    if succ_first.supersedes.contains(&id) {
                        listed = true;
                        break;
                    }
                    cur = engine.get(TENANT, id, None).unwrap().and_then(|x| x.continues);
                }
                assert!(listed, "{by} does not list {} (or what it continues) as superseded", f.id);
            }
            for &tail in &f.continued_by {
                assert!(by_id.contains_key(&tail), "tail {tail} of {} missing", f.id);
            }
        }
        let mut actives: BTreeMap<&str, Vec<&Fact>> = BTreeMap::new();
        for f in facts.iter().filter(|f| f.status == Status::Active && f.predicate == ONE) {
            actives.entry(&f.subject).or_default().push(f);
        }
        for (subject, mut fs) in actives {
            fs.sort_by_key(|f| f.valid_from);
            for w in fs.windows(2) {
                assert!(
                    !w[0].overlaps(w[1].valid_from, w[1].valid_until),
                    "iteration {iter}: {subject}: active {:?} overlaps active {:?}",
                    w[0],
                    w[1]
                );
            }
        }

        // The change log: one entry per tx, 1..=last, record time monotone.
        let mut changes: Vec<Change> = Vec::new();
        loop {
            let after = changes.last().map_or(0, |c| c.tx);
            let page = engine.changes(TENANT, after, 1000).unwrap();
            if page.is_empty() {
                break;
            }
            changes.extend(page);
        }
        assert_eq!(changes.len() as u64, last_tx, "iteration {iter}: change log has gaps");
        for (i, c) in changes.iter().enumerate() {
            assert_eq!(c.tx, i as u64 + 1);
        }
        for w in changes.windows(2) {
            assert!(w[0].recorded_at <= w[1].recorded_at, "recorded_at goes back at tx {}", w[1].tx);
        }
        if let Some(c) = changes.last() {
            assert_eq!(engine.last_tx(), (c.tx, c.recorded_at));
        }

        // Stats are committed with the facts: they match a full scan.
        let stats = engine.stats(TENANT);
        let count = |s: Status| facts.iter().filter(|f| f.status == s).count() as u64;
        assert_eq!(
            (stats.active, stats.candidate, stats.superseded, stats.retracted),
            (count(Status::Active), count(Status::Candidate), count(Status::Superseded), count(Status::Retracted)),
            "iteration {iter}: stats vs full scan"
        );
        final_stats = stats;
        engine.close();
        drop(engine);
        eprintln!(
            "crash iteration {iter}: killed after {:.0?} with {acks_now} acks; last tx {last_tx}, {} facts",
            child.ran_for,
            facts.len()
        );
    }
    assert!(total_acks > 100, "the children acknowledged only {total_acks} writes");
    assert!(final_stats.superseded > 0 && tails > 0 && final_stats.retracted > 0, "{final_stats:?}");
    assert!(iterations_with_acks as u64 >= ITERATIONS * 3 / 4, "only {iterations_with_acks} children wrote");
    eprintln!(
        "crash ({backend:?}): {ITERATIONS} kills, {total_acks} acknowledged writes, {} batches, {stored_facts} facts \
         ({} superseded, {tails} tails, {} retracted), {:.1?}",
        acked.len(),
        final_stats.superseded,
        final_stats.retracted,
        started.elapsed()
    );
}

fn all_facts(engine: &Engine) -> Vec<Fact> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = engine
            .query(
                TENANT,
                &FactQuery {
                    status: StatusFilter::Any,
                    include_retracted: true,
                    limit: MAX_PAGE,
                    cursor: cursor.take(),
                    ..Default::default()
                },
            )
            .unwrap();
        out.extend(page.facts);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
}
