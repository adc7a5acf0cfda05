//! Backup and restore: a restored store answers every read as the original
//! did, a backup taken under concurrent writes holds whole transactions
//! only and the store as it stood when it began, and a damaged or truncated
//! file restores nothing.

mod common;

use common::every_fact;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tempora_storage::backup::{restore, restore_reopening_every, verify};
use tempora_storage::*;

const TENANTS: [&str; 2] = ["nas", "acme"];

fn populate(e: &Engine) -> Tx {
    let mut mid = 0;
    for t in TENANTS {
        for i in 0..50 {
            e.assert(t, FactInput::new(format!("Person:p{i}"), "works_at", format!("Org:o{i}")).valid_from(2020))
                .unwrap();
        }
        mid = e.last_tx().0;
        for i in 0..20 {
            e.assert(t, FactInput::new(format!("Person:p{i}"), "works_at", "Org:globex").valid_from(2024)).unwrap();
        }
        let f = e.assert(t, FactInput::new("Person:gone", "likes", "tea")).unwrap();
        e.retract(t, f.fact.id).unwrap();
    }
    e.aux_put(b"svc:one", b"first record").unwrap();
    e.aux_put_many(vec![(b"svc:two".to_vec(), b"2".to_vec()), (b"svc:three".to_vec(), vec![3; 1000])]).unwrap();
    mid
}

fn aux(e: &Engine) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v = Vec::new();
    e.aux_scan(b"", |k, val| {
        v.push((k.to_vec(), val.to_vec()));
        true
    })
    .unwrap();
    v
}

#[test]
fn a_restored_store_answers_every_read_as_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Engine::open(EngineConfig::at(tmp.path().join("src"))).unwrap();
    let mid = populate(&src);
    let mut file = Vec::new();
    let made = src.backup(&mut file).unwrap();
    assert_eq!(made.last_tx, src.last_tx().0);
    assert_eq!(made.bytes, file.len() as u64);
    assert_eq!(verify(&mut file.as_slice()).unwrap(), made);

    // In one piece, and in many: the restore closes and reopens the store it
    // fills every few MiB (every 4 KiB here) to give back sled's memory.
    for (name, piece) in [("restored", None), ("restored-in-pieces", Some(4096))] {
        let dst_dir = tmp.path().join(name);
        let restored = match piece {
            None => restore(&mut file.as_slice(), &dst_dir).unwrap(),
            Some(bytes) => restore_reopening_every(&mut file.as_slice(), &dst_dir, bytes).unwrap(),
        };
        assert_eq!(restored, made);
        assert!(piece.is_none_or(|b| file.len() > 8 * b), "{} bytes: too few pieces", file.len());
        assert!(!tmp.path().join(format!(".{name}.restoring")).exists(), "the scratch directory was moved into place");
        same_store(&src, Engine::open(EngineConfig::at(&dst_dir)).unwrap(), mid);
    }
}

/// `dst` answers every read as `src`, and goes on from where `src` stood.
fn same_store(src: &Engine, dst: Engine, mid: Tx) {
    assert_eq!(dst.last_tx(), src.last_tx());
    assert_eq!(dst.tenants(), src.tenants());
    for t in TENANTS {
        assert_eq!(every_fact(&dst, t, None), every_fact(src, t, None), "{t}: current and history");
        assert_eq!(
            every_fact(&dst, t, Some(AsOf::Tx(mid))),
            every_fact(src, t, Some(AsOf::Tx(mid))),
            "{t} as of {mid}"
        );
        assert_eq!(dst.stats(t), src.stats(t));
        assert_eq!(dst.changes(t, 0, 10_000).unwrap(), src.changes(t, 0, 10_000).unwrap(), "{t}: change log");
        let q = FactQuery { subject: Some("Person:p3".into()), valid_at: Some(2022), ..Default::default() };
        assert_eq!(dst.query(t, &q).unwrap().facts[0].object, serde_json::json!("Org:o3"));
    }
    assert_eq!(aux(&dst), aux(src));
    // The restored store goes on from where the original stood.
    let next = dst.assert("nas", FactInput::new("Person:new", "works_at", "Org:acme")).unwrap();
    assert_eq!(next.fact.tx, src.last_tx().0 + 1);
}

#[test]
fn a_backup_under_concurrent_writes_holds_whole_transactions() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Arc::new(Engine::open(EngineConfig::at(tmp.path().join("src"))).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (e, stop) = (Arc::clone(&src), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    // Three facts per transaction, and a supersession of the writer's key.
                    let batch = (0..3).map(|i| FactInput::new(format!("W:{w}-{n}"), format!("part{i}"), n)).collect();
                    e.assert_batch("nas", batch).unwrap();
                    e.assert("nas", FactInput::new(format!("Key:{w}"), "value", n)).unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut files = Vec::new();
    for _ in 0..3 {
        let mut f = Vec::new();
        src.backup(&mut f).unwrap();
        files.push(f);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let written: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(written > 0);

    for (i, f) in files.iter().enumerate() {
        let dir = tmp.path().join(format!("r{i}"));
        let summary = restore(&mut f.as_slice(), &dir).unwrap();
        let e = Engine::open(EngineConfig::at(&dir)).unwrap();
        assert_eq!(e.last_tx().0, summary.last_tx, "the header's tx is the store's");
        let facts = every_fact(&e, "nas", None);
        // What the writers did after the backup began is not in it: the
        // restored store is the original as of the backup's tx.
        assert!(
            facts == every_fact(&src, "nas", Some(AsOf::Tx(summary.last_tx))),
            "backup {i} differs from the original as of tx {}",
            summary.last_tx
        );
        let mut per_tx = std::collections::BTreeMap::<Tx, usize>::new();
        for f in facts.iter().filter(|f| f.subject.starts_with("W:")) {
            *per_tx.entry(f.created_tx).or_default() += 1;
        }
        assert!(per_tx.values().all(|n| *n == 3), "backup {i} holds part of a transaction: {per_tx:?}");
        // Each writer's key has exactly one active value.
        for w in 0..3 {
            let q = FactQuery { subject: Some(format!("Key:{w}")), ..Default::default() };
            assert!(e.query("nas", &q).unwrap().facts.len() <= 1, "backup {i}: two active values of Key:{w}");
        }
        let s = e.stats("nas");
        assert_eq!((s.active + s.candidate + s.superseded + s.retracted) as usize, facts.len(), "backup {i}: stats");
    }
}

/// A backup's output that runs `pause` on every write it takes (the backup
/// writes through a 256 KiB buffer, so every 256 KiB of the scan).
struct Pausing<F: FnMut()> {
    out: Vec<u8>,
    pause: F,
    pauses: usize,
}

impl<F: FnMut()> std::io::Write for Pausing<F> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (self.pause)();
        self.pauses += 1;
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The records of a backup file: all but the time it was made (bytes 40..48
/// of the header) and the checksum that covers it.
fn records_of(file: &[u8]) -> (&[u8], &[u8]) {
    (&file[..40], &file[48..file.len() - 32])
}

#[test]
fn writes_during_a_backup_go_on_and_are_not_in_it() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Engine::open(EngineConfig::at(tmp.path().join("src"))).unwrap();
    // Enough records that the scan is paused in every large keyspace.
    let long = "x".repeat(300);
    let mut ids = Vec::new();
    for t in TENANTS {
        for chunk in 0..20 {
            let batch = (0..100)
                .map(|i| FactInput::new(format!("Person:p{chunk}-{i}"), "note", format!("{long} {chunk} {i}")))
                .collect();
            ids.extend(src.assert_batch(t, batch).unwrap().1.into_iter().map(|a| (t, a.fact.id)));
        }
    }
    let mut aux_keys: Vec<Vec<u8>> = (0..300).map(|i| format!("svc:{i:04}").into_bytes()).collect();
    src.aux_put_many(aux_keys.iter().map(|k| (k.clone(), long.as_bytes().to_vec())).collect()).unwrap();

    let mut before = Vec::new();
    let at_start = src.backup(&mut before).unwrap();

    // Every pause: supersede, retract and create facts all over the key
    // space (behind and ahead of the scan), in both tenants and a new one,
    // and rewrite, add and delete service records.
    let mut rng = common::Rng(7);
    let mut round = 0;
    let mut refused = None;
    let mut out = Pausing {
        out: Vec::new(),
        pauses: 0,
        pause: || {
            round += 1;
            for _ in 0..10 {
                let (t, id) = *rng.pick(&ids);
                let f = src.get(t, id, None).unwrap().unwrap();
                if f.status == Status::Active {
                    if rng.below(2) == 0 {
                        src.retract(t, id).unwrap();
                    } else {
                        src.assert(t, FactInput::new(f.subject.clone(), "note", format!("changed {round}"))).unwrap();
                    }
                }
                src.assert(t, FactInput::new(format!("Person:new-{round}"), "works_at", "Org:acme")).unwrap();
            }
            src.assert(&format!("tenant-{round}"), FactInput::new("Person:x", "likes", "tea")).unwrap();
            let k = rng.pick(&aux_keys).clone();
            src.aux_put(&k, b"rewritten").unwrap();
            src.aux_delete_many(vec![rng.pick(&aux_keys).clone()]).unwrap();
            src.aux_put(format!("svc:new-{round}").as_bytes(), b"new").unwrap();
            aux_keys.push(format!("svc:new-{round}").into_bytes());
            // A second backup while this one runs is refused.
            refused = Some(src.backup(&mut Vec::new()).map(|_| ()));
        },
    };
    let during = src.backup(&mut out).unwrap();
    let (pauses, during_file) = (out.pauses, out.out);
    assert!(pauses >= 8, "only {pauses} pauses: the store is too small to pause the scan in every keyspace");
    assert!(src.last_tx().0 > at_start.last_tx + 100, "the writes went on");
    assert!(matches!(refused, Some(Err(_))), "a second backup ran at the same time: {refused:?}");

    // The backup holds the store as it stood when it began, record for record.
    assert_eq!(during.last_tx, at_start.last_tx);
    assert_eq!(during.records, at_start.records);
    assert!(records_of(&during_file) == records_of(&before), "the backup differs from the store at its start");
    assert_eq!(verify(&mut during_file.as_slice()).unwrap(), during);

    // And the live store has every write made meanwhile.
    let live = src.backup(&mut Vec::new()).unwrap();
    assert!(live.last_tx > during.last_tx);
    assert!(src.tenants().len() > TENANTS.len() + 8, "the new tenants were written");
}

#[test]
fn a_damaged_or_truncated_file_restores_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let src = Engine::open(EngineConfig::at(tmp.path().join("src"))).unwrap();
    populate(&src);
    let mut file = Vec::new();
    src.backup(&mut file).unwrap();

    let target = tmp.path().join("target");
    let mut flipped = file.clone();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x40;
    let err = restore(&mut flipped.as_slice(), &target).unwrap_err().to_string();
    assert!(err.contains("damaged"), "{err}");
    // A flipped bit anywhere past the header (48 bytes) reads as damage,
    // whether it lands in a tag, a length, a key, a value or the trailer.
    let step = (file.len() / 400).max(1);
    for at in (48..file.len()).step_by(step).chain([file.len() - 1]) {
        for bit in [0x01u8, 0x80] {
            let mut flipped = file.clone();
            flipped[at] ^= bit;
            let err = verify(&mut flipped.as_slice()).unwrap_err().to_string();
            assert!(err.contains("damaged"), "bit {bit:#x} of byte {at}: {err}");
        }
    }

    for cut in [40, file.len() / 3, file.len() - 1] {
        let err = restore(&mut &file[..cut], &target).unwrap_err().to_string();
        assert!(err.contains("damaged"), "cut at {cut}: {err}");
    }
    let err = restore(&mut &file[..10], &target).unwrap_err().to_string();
    assert!(err.contains("not a tempora backup (too short)"), "{err}");
    let err = restore(&mut &b"not a backup at all, just some text"[..], &target).unwrap_err().to_string();
    assert!(err.contains("not a tempora backup"), "{err}");
    // Nothing was left behind: neither the target nor a scratch directory.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("src")], "left behind: {left:?}");

    // A store is never overwritten.
    let err = restore(&mut file.as_slice(), &tmp.path().join("src")).unwrap_err().to_string();
    assert!(err.contains("not empty"), "{err}");
    // The intact file still restores.
    restore(&mut file.as_slice(), &target).unwrap();
}
