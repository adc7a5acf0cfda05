//! The redb backend: its reads, batches, checkpoints, journal replay.

use super::*;

fn put(ks: Keyspace, k: &[u8], v: &[u8]) -> WriteBatch {
    let mut b = WriteBatch::default();
    b.put(ks, k.to_vec(), v.to_vec());
    b
}

fn keys(it: KvIter<'_>) -> Vec<Vec<u8>> {
    it.map(|r| r.unwrap().0).collect()
}

#[test]
fn scans_in_both_directions_and_empty_ranges_yield_nothing() {
    let kv = RedbKv::temporary().unwrap();
    let mut b = WriteBatch::default();
    for k in [b"a", b"b", b"c", b"d"] {
        b.put(Keyspace::Sp, k.to_vec(), k.to_vec());
    }
    b.put(Keyspace::Ps, b"b".to_vec(), b"other keyspace".to_vec());
    kv.apply(b).unwrap();
    let range = |lo: Bound<&[u8]>, hi: Bound<&[u8]>, rev| {
        keys(kv.scan(Keyspace::Sp, lo.map(|k| k.to_vec()), hi.map(|k| k.to_vec()), rev))
    };
    assert_eq!(range(Bound::Included(b"b"), Bound::Excluded(b"d"), false), [b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(
        range(Bound::Excluded(b"a"), Bound::Included(b"d"), true),
        [b"d".to_vec(), b"c".to_vec(), b"b".to_vec()]
    );
    assert_eq!(range(Bound::Unbounded, Bound::Unbounded, false).len(), 4);
    assert!(range(Bound::Included(b"c"), Bound::Excluded(b"b"), false).is_empty());
    assert!(range(Bound::Included(b"c"), Bound::Excluded(b"c"), true).is_empty());
    assert!(range(Bound::Excluded(b"c"), Bound::Included(b"c"), false).is_empty());
    assert_eq!(kv.get(Keyspace::Ps, b"b").unwrap().as_deref(), Some(&b"other keyspace"[..]));
    assert_eq!(kv.get(Keyspace::Ps, b"a").unwrap(), None);
}

#[test]
fn a_scan_keeps_the_state_it_started_on_while_writes_go_on() {
    let kv = RedbKv::temporary().unwrap();
    kv.apply(put(Keyspace::Log, b"1", b"x")).unwrap();
    let mut it = kv.scan(Keyspace::Log, Bound::Unbounded, Bound::Unbounded, false);
    let mut b = put(Keyspace::Log, b"2", b"y");
    b.delete(Keyspace::Log, b"1".to_vec());
    kv.apply(b).unwrap();
    assert_eq!(it.next().unwrap().unwrap().0, b"1");
    assert!(it.next().is_none());
    assert_eq!(keys(kv.scan(Keyspace::Log, Bound::Unbounded, Bound::Unbounded, false)), [b"2".to_vec()]);
}

#[test]
fn within_one_batch_the_later_write_to_a_key_wins_whatever_the_tables_between() {
    let kv = RedbKv::temporary().unwrap();
    let mut b = put(Keyspace::Sp, b"b", b"first");
    b.put(Keyspace::Log, b"b".to_vec(), b"log".to_vec());
    b.delete(Keyspace::Sp, b"b".to_vec());
    b.put(Keyspace::Sp, b"c".to_vec(), b"doomed".to_vec());
    b.put(Keyspace::Sp, b"a".to_vec(), b"a".to_vec());
    b.put(Keyspace::Sp, b"b".to_vec(), b"last".to_vec());
    b.delete(Keyspace::Sp, b"c".to_vec());
    kv.apply(b).unwrap();
    assert_eq!(kv.get(Keyspace::Sp, b"b").unwrap().as_deref(), Some(&b"last"[..]));
    assert_eq!(kv.get(Keyspace::Sp, b"c").unwrap(), None);
    assert_eq!(kv.get(Keyspace::Sp, b"a").unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(kv.get(Keyspace::Log, b"b").unwrap().as_deref(), Some(&b"log"[..]));
}

/// The journal number redb holds: the last batch of its last checkpoint
/// (0 before the first).
fn stored_seq(db: &redb::Database) -> u64 {
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(JOURNAL_SEQ).unwrap();
    table.get("seq").unwrap().map_or(0, |v| v.value())
}

/// The batches journal file `n` holds past the store's last one (`stored`):
/// what a reopen would replay from it.
fn to_replay(dir: &Path, n: usize, stored: u64) -> Vec<u64> {
    let (_, records) = Journal::open(dir, journal::FILE_NAMES[n]).unwrap();
    records.into_iter().map(|r| r.seq).filter(|&seq| seq > stored).collect()
}

/// Waits for the checkpoint under way, if any.
fn wait_for_checkpoint(kv: &RedbKv) {
    kv.shared.finish_checkpoint(&mut kv.shared.writer.lock()).unwrap();
}

#[test]
fn a_checkpoint_commits_while_a_reader_holds_the_publish_lock_and_the_batch_shows_once_it_lets_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut kv = RedbKv::open(dir.path(), 1 << 20).unwrap().idle_checkpoint_after(None);
    kv.checkpoint_bytes = 1; // every batch after the first one journaled
    let kv = Arc::new(kv);
    kv.apply(put(Keyspace::Log, b"a", b"1")).unwrap();
    assert_eq!(stored_seq(&kv.shared.db), 0, "the first batch waits in the journal");
    let publish = Arc::new(RwLock::new(()));
    let reading = publish.read();
    let writer = {
        let (kv, publish) = (Arc::clone(&kv), Arc::clone(&publish));
        std::thread::spawn(move || kv.apply_published(put(Keyspace::Log, b"k", b"v"), &publish))
    };
    // The checkpoint of the first batch does not wait for the reader...
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while stored_seq(&kv.shared.db) != 1 {
        assert!(std::time::Instant::now() < deadline, "the checkpoint waited for the reader");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // ...while the reader's view stays where it was, until it lets go.
    assert_eq!(kv.get(Keyspace::Log, b"k").unwrap(), None);
    assert_eq!(kv.get(Keyspace::Log, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    drop(reading);
    writer.join().unwrap().unwrap();
    assert_eq!(kv.get(Keyspace::Log, b"k").unwrap().as_deref(), Some(&b"v"[..]));
    wait_for_checkpoint(&kv);
    assert!(kv.view().frozen.is_none(), "the checkpoint's layer is gone once redb has it");
    assert_eq!(kv.get(Keyspace::Log, b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn the_cache_fills_up_to_its_ceiling_and_no_further() {
    let dir = tempfile::tempdir().unwrap();
    let mut kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
    kv.checkpoint_bytes = 256 << 10; // redb is written at checkpoints only
    let value = vec![7u8; 1000];
    for i in 0..40u32 {
        let mut b = WriteBatch::default();
        for j in 0..100u32 {
            b.put(Keyspace::Versions, (i * 100 + j).to_be_bytes().to_vec(), value.clone());
        }
        kv.apply(b).unwrap();
    }
    // 4 MB written through a 1 MiB cache: full, and never over.
    let fill = kv.cache_fill().unwrap();
    assert_eq!(fill.capacity, 1 << 20);
    assert!(fill.used > fill.capacity / 2 && fill.used <= fill.capacity, "{fill:?}");
}

#[test]
fn synced_writes_survive_a_reopen_and_a_held_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
    let mut b = put(Keyspace::Versions, b"v", b"1");
    b.put(Keyspace::Meta, b"m".to_vec(), b"2".to_vec());
    kv.apply(b).unwrap();
    kv.sync().unwrap();
    assert!(kv.size_on_disk().unwrap() > 0);
    match RedbKv::open(dir.path(), 1 << 20) {
        Err(StorageError::Locked(d)) => assert!(d.contains(&dir.path().display().to_string())),
        Err(e) => panic!("expected Locked, got {e:?}"),
        Ok(_) => panic!("a held store opened twice"),
    }
    drop(kv);
    let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(kv.get(Keyspace::Versions, b"v").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(kv.get(Keyspace::Meta, b"m").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_reopen_replays_the_journal_records_the_store_lacks_and_refuses_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    drop(RedbKv::open(dir.path(), 1 << 20).unwrap());
    // What a crash leaves: the store durable up to batch 1, the journal
    // holding batches 1 to 3 (batch 1 again, as before a checkpoint).
    {
        let db = redb::Database::create(dir.path().join(FILE_NAME)).unwrap();
        let mut pending = Pending::default();
        pending.apply(&put(Keyspace::Log, b"1", b"one"));
        commit(&db, &pending, 1, redb::Durability::Immediate).unwrap();
    }
    let (mut journal, _) = Journal::open(dir.path(), journal::FILE_NAMES[0]).unwrap();
    journal.append(1, &put(Keyspace::Log, b"1", b"one, journaled")).unwrap();
    journal.append(2, &put(Keyspace::Log, b"2", b"two")).unwrap();
    let mut three = put(Keyspace::Log, b"3", b"three");
    three.delete(Keyspace::Log, b"2".to_vec());
    journal.append(3, &three).unwrap();
    drop(journal);
    let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
    // Batch 1 was in the store already and is not applied again.
    assert_eq!(kv.get(Keyspace::Log, b"1").unwrap().as_deref(), Some(&b"one"[..]));
    assert_eq!(kv.get(Keyspace::Log, b"2").unwrap(), None);
    assert_eq!(kv.get(Keyspace::Log, b"3").unwrap().as_deref(), Some(&b"three"[..]));
    assert_eq!(kv.shared.writer.lock().next_seq(), 4);
    assert_eq!(stored_seq(&kv.shared.db), 3, "replayed and committed at the open");
    // The next batch continues the numbering, in a journal started over.
    kv.apply(put(Keyspace::Log, b"4", b"four")).unwrap();
    kv.sync().unwrap();
    let journal = std::fs::read(dir.path().join(journal::FILE_NAMES[0])).unwrap();
    assert_eq!(u64::from_le_bytes(journal[12..20].try_into().unwrap()), 4);
    // Closed cleanly, the store checkpoints batch 4 and empties the journal.
    drop(kv);
    assert_eq!(std::fs::metadata(dir.path().join(journal::FILE_NAMES[0])).unwrap().len(), 0);
    let db = redb::Database::create(dir.path().join(FILE_NAME)).unwrap();
    assert_eq!(stored_seq(&db), 4);
    drop(db);

    // A journal that starts past the store's next batch: batches lost.
    let gap = tempfile::tempdir().unwrap();
    drop(RedbKv::open(gap.path(), 1 << 20).unwrap());
    let (mut journal, _) = Journal::open(gap.path(), journal::FILE_NAMES[0]).unwrap();
    journal.append(5, &put(Keyspace::Log, b"5", b"five")).unwrap();
    drop(journal);
    match RedbKv::open(gap.path(), 1 << 20) {
        Err(StorageError::Corrupt(what)) => assert!(what.contains("batches 1 to 4 are missing"), "{what}"),
        other => panic!("expected Corrupt, got {:?}", other.err()),
    }
}

#[test]
fn a_full_journal_is_checkpointed_into_the_store_and_started_over() {
    let dir = tempfile::tempdir().unwrap();
    let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
    let big = vec![7u8; 1 << 20];
    let journal_bytes = || std::fs::metadata(dir.path().join(journal::FILE_NAMES[0])).unwrap().len();
    let mut i = 0u32;
    while journal_bytes() < CHECKPOINT_BYTES {
        kv.apply(put(Keyspace::Versions, &i.to_be_bytes(), &big)).unwrap();
        i += 1;
    }
    // Until then redb was not written: the writes are pending, and read.
    assert_eq!(stored_seq(&kv.shared.db), 0);
    assert_eq!(kv.get(Keyspace::Versions, &0u32.to_be_bytes()).unwrap().map(|v| v.len()), Some(1 << 20));
    // The next batch starts the checkpoint and goes to the other journal
    // file; once the checkpoint is done, every batch before it is durable in
    // redb and the first file starts over: the next record goes to its
    // start, and what it holds until then a reopen would not replay.
    kv.apply(put(Keyspace::Versions, &i.to_be_bytes(), b"last")).unwrap();
    wait_for_checkpoint(&kv);
    assert_eq!(stored_seq(&kv.shared.db), u64::from(i));
    assert_eq!(kv.shared.writer.lock().journals_bytes()[0], 0);
    assert!(to_replay(dir.path(), 0, u64::from(i)).is_empty());
    assert!(kv.view().frozen.is_none());
    let second = std::fs::read(dir.path().join(journal::FILE_NAMES[1])).unwrap();
    assert_eq!(u64::from_le_bytes(second[12..20].try_into().unwrap()), u64::from(i) + 1);
    drop(kv);
    let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(kv.get(Keyspace::Versions, &i.to_be_bytes()).unwrap().as_deref(), Some(&b"last"[..]));
    assert_eq!(kv.get(Keyspace::Versions, &0u32.to_be_bytes()).unwrap().map(|v| v.len()), Some(1 << 20));
}

#[test]
fn a_failed_checkpoint_loses_nothing_and_the_next_writer_to_need_one_gets_the_error() {
    use std::sync::atomic::Ordering::SeqCst;
    let open = |dir: &Path| {
        let mut kv = RedbKv::open(dir, 1 << 20).unwrap().idle_checkpoint_after(None);
        kv.checkpoint_bytes = 1; // every batch after the first one journaled
        kv
    };
    let has = |kv: &RedbKv, k: &[u8]| kv.get(Keyspace::Log, k).unwrap().is_some();

    // A's checkpoint fails on its thread; B goes to the other journal file.
    let dir = tempfile::tempdir().unwrap();
    let mut kv = open(dir.path());
    kv.shared.fail_checkpoints.store(true, SeqCst);
    kv.apply(put(Keyspace::Log, b"a", b"1")).unwrap();
    kv.apply(put(Keyspace::Log, b"b", b"2")).unwrap();
    // C needs the next checkpoint, tries A's again, and fails with it.
    match kv.apply(put(Keyspace::Log, b"c", b"3")) {
        Err(StorageError::Backend(what)) => assert!(what.contains("checkpoints fail"), "{what}"),
        other => panic!("expected the checkpoint's error, got {other:?}"),
    }
    assert!(has(&kv, b"a") && has(&kv, b"b") && !has(&kv, b"c"));
    assert_eq!(stored_seq(&kv.shared.db), 0);
    // A crash now: A is only in the first journal file, B in the second.
    kv.skip_checkpoint_on_close = true;
    drop(kv);
    let kv = open(dir.path());
    assert!(has(&kv, b"a") && has(&kv, b"b") && !has(&kv, b"c"));
    assert_eq!(stored_seq(&kv.shared.db), 2, "both files replayed");
    drop(kv);

    // Once checkpoints work again, the next writer's retry goes through.
    let dir = tempfile::tempdir().unwrap();
    let kv = open(dir.path());
    kv.shared.fail_checkpoints.store(true, SeqCst);
    kv.apply(put(Keyspace::Log, b"a", b"1")).unwrap();
    kv.apply(put(Keyspace::Log, b"b", b"2")).unwrap();
    kv.shared.fail_checkpoints.store(false, SeqCst);
    kv.apply(put(Keyspace::Log, b"c", b"3")).unwrap();
    wait_for_checkpoint(&kv);
    assert_eq!(stored_seq(&kv.shared.db), 2);
    assert!(has(&kv, b"a") && has(&kv, b"b") && has(&kv, b"c"));
    drop(kv);
    let kv = open(dir.path());
    assert_eq!(stored_seq(&kv.shared.db), 3, "closed cleanly: checkpointed, nothing to replay");
    assert!(has(&kv, b"a") && has(&kv, b"b") && has(&kv, b"c"));
}

#[test]
fn a_checkpoint_cut_short_between_its_parts_loses_nothing_and_reads_stay_right() {
    use std::sync::atomic::Ordering::SeqCst;
    let open = |dir: &Path| RedbKv::open(dir, 1 << 20).unwrap().idle_checkpoint_after(None);
    let key = |i: u32| format!("k{i:05}").into_bytes();
    let dir = tempfile::tempdir().unwrap();
    let mut kv = open(dir.path());
    // Some keys in redb already, to be overwritten and deleted by the layer.
    for i in (0..400).step_by(2) {
        kv.apply(put(Keyspace::Sp, &key(i), b"old")).unwrap();
    }
    wait_for_checkpoint(&kv);
    Shared::start_checkpoint(&kv.shared, &mut kv.shared.writer.lock()).unwrap();
    wait_for_checkpoint(&kv);
    let before = stored_seq(&kv.shared.db);
    // A layer of several parts (parts are 64 writes in tests): new keys,
    // overwrites, and deletes of keys redb holds.
    for i in 0..400u32 {
        kv.apply(put(Keyspace::Sp, &key(i), format!("v{i}").as_bytes())).unwrap();
    }
    for i in (0..400u32).step_by(4) {
        let mut b = WriteBatch::default();
        b.delete(Keyspace::Sp, key(i));
        kv.apply(b).unwrap();
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        (0..400u32).filter(|i| i % 4 != 0).map(|i| (key(i), format!("v{i}").into_bytes())).collect();
    let read_all = |kv: &RedbKv| -> Vec<(Vec<u8>, Vec<u8>)> {
        kv.scan(Keyspace::Sp, Bound::Unbounded, Bound::Unbounded, false).map(Result::unwrap).collect()
    };
    // The first part is committed, then the checkpoint stops.
    kv.shared.fail_between_chunks.store(true, SeqCst);
    Shared::start_checkpoint(&kv.shared, &mut kv.shared.writer.lock()).unwrap();
    while kv.shared.writer.lock().checkpoint_running() == Some(true) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let in_redb = {
        let txn = kv.shared.db.begin_read().unwrap();
        let table = txn.open_table(definition(Keyspace::Sp)).unwrap();
        table.range::<&[u8]>(..).unwrap().filter(|e| e.as_ref().unwrap().1.value().starts_with(b"v")).count()
    };
    assert!(in_redb > 0 && in_redb < expected.len(), "{in_redb} of the layer's values are in redb");
    assert_eq!(stored_seq(&kv.shared.db), before, "only the last part records the journal number");
    assert_eq!(read_all(&kv), expected, "readers see the layer over the part written");
    // A crash now: the journal replays the whole layer over the part.
    kv.skip_checkpoint_on_close = true;
    drop(kv);
    let kv = open(dir.path());
    assert_eq!(read_all(&kv), expected);
    assert_eq!(stored_seq(&kv.shared.db), before + 500);

    // Without the failure, a layer goes to redb in parts and reads as written.
    for i in 0..400u32 {
        kv.apply(put(Keyspace::Sp, &key(i), b"w")).unwrap();
    }
    Shared::start_checkpoint(&kv.shared, &mut kv.shared.writer.lock()).unwrap();
    wait_for_checkpoint(&kv);
    assert!(kv.view().frozen.is_none() && kv.view().active.is_empty());
    let all = read_all(&kv);
    assert_eq!(all.len(), 400);
    assert!(all.iter().all(|(_, v)| v == b"w"));
    assert_eq!(stored_seq(&kv.shared.db), before + 900);
}

#[test]
fn writes_go_on_while_a_slow_checkpoint_writes_until_the_journal_holds_four_times_its_size() {
    use std::sync::atomic::Ordering::SeqCst;
    let dir = tempfile::tempdir().unwrap();
    let mut kv = RedbKv::open(dir.path(), 1 << 20).unwrap().idle_checkpoint_after(None);
    kv.checkpoint_bytes = 4096;
    let kv = Arc::new(kv);
    let journal_bytes = |kv: &RedbKv| kv.shared.writer.lock().journal_bytes();
    let value = vec![1u8; 500];
    let mut i = 0u32;
    let mut next = |kv: &RedbKv| {
        i += 1;
        kv.apply(put(Keyspace::Versions, &i.to_be_bytes(), &value)).unwrap();
    };
    kv.shared.hold_checkpoints.store(true, SeqCst);
    while kv.shared.writer.lock().checkpoint_running().is_none() {
        next(&kv);
    }
    // The checkpoint of the first 4 KiB is stuck on a slow disk: writes go
    // on into the other journal file, past the checkpoint size.
    while journal_bytes(&kv) < 3 * 4096 {
        next(&kv);
    }
    assert_eq!(kv.shared.writer.lock().checkpoint_running(), Some(true));
    assert_eq!(stored_seq(&kv.shared.db), 0);
    // At four times the size, the next write waits for it.
    while journal_bytes(&kv) < 4 * 4096 {
        next(&kv);
    }
    let waiting = {
        let kv = Arc::clone(&kv);
        std::thread::spawn(move || kv.apply(put(Keyspace::Versions, b"waits", b"for the checkpoint")))
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiting.is_finished(), "a write past four times the checkpoint size waits for the checkpoint");
    kv.shared.hold_checkpoints.store(false, SeqCst);
    waiting.join().unwrap().unwrap();
    // It started the next checkpoint, of the whole grown layer.
    wait_for_checkpoint(&kv);
    assert_eq!(stored_seq(&kv.shared.db), u64::from(i));
    for k in 1..=i {
        assert_eq!(kv.get(Keyspace::Versions, &k.to_be_bytes()).unwrap().as_deref(), Some(&value[..]), "{k}");
    }
    assert!(kv.get(Keyspace::Versions, b"waits").unwrap().is_some());
}

mod model {
    //! The backend against a `BTreeMap`: batches of puts and deletes,
    //! checkpoints every few bytes or none at all, clean reopens and
    //! crashes, each followed by every get and a set of scans both ways.
    use super::*;
    use crate::kv::{within, KvPair};
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[derive(Debug, Clone)]
    enum Step {
        /// (keyspace is `Sp`, key, value or delete)
        Batch(Vec<(bool, Vec<u8>, Option<u8>)>),
        Reopen,
        /// Dropped without the closing checkpoint, as a killed process
        /// leaves it: only the journal has what is pending.
        Crash,
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(0u8..3, 1..3)
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => prop::collection::vec((any::<bool>(), key(), prop::option::of(any::<u8>())), 1..6).prop_map(Step::Batch),
            1 => Just(Step::Reopen),
            1 => Just(Step::Crash),
        ]
    }

    fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
        prop_oneof![
            Just(Bound::Unbounded),
            key().prop_map(Bound::Included),
            key().prop_map(Bound::Excluded),
        ]
    }

    fn open(dir: &Path, checkpoint_bytes: u64) -> RedbKv {
        let mut kv = RedbKv::open(dir, 1 << 20).unwrap().idle_checkpoint_after(None);
        kv.checkpoint_bytes = checkpoint_bytes;
        kv
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn reads_match_a_map_through_checkpoints_reopens_and_crashes(
            steps in prop::collection::vec(step(), 1..60),
            scans in prop::collection::vec((bound(), bound(), any::<bool>()), 1..5),
            // Small: checkpoints all the time; large: none, and the
            // batches' runs pile up and merge in memory.
            checkpoint_bytes in prop_oneof![1u64..60, Just(1u64 << 20)],
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut kv = open(dir.path(), checkpoint_bytes);
            let mut model: [BTreeMap<Vec<u8>, Vec<u8>>; 2] = Default::default();
            // Keys ever written: the first put of any other is a `put_new`,
            // as the writer marks a key made from a new fact id, so a later
            // delete in the same layer drops it from the layer outright.
            let mut written: [BTreeSet<Vec<u8>>; 2] = Default::default();
            for step in steps {
                match step {
                    Step::Batch(ops) => {
                        let mut batch = WriteBatch::default();
                        for (sp, key, value) in ops {
                            let (ks, m) = if sp { (Keyspace::Sp, 0) } else { (Keyspace::Log, 1) };
                            let new = written[m].insert(key.clone());
                            match value {
                                Some(v) => {
                                    let put = if new { WriteBatch::put_new } else { WriteBatch::put };
                                    put(&mut batch, ks, key.clone(), vec![v]);
                                    model[m].insert(key, vec![v]);
                                }
                                None => {
                                    batch.delete(ks, key.clone());
                                    model[m].remove(&key);
                                }
                            }
                        }
                        kv.apply(batch).unwrap();
                    }
                    Step::Reopen => {
                        drop(kv);
                        kv = open(dir.path(), checkpoint_bytes);
                    }
                    Step::Crash => {
                        kv.skip_checkpoint_on_close = true;
                        drop(kv);
                        kv = open(dir.path(), checkpoint_bytes);
                    }
                }
                for (m, ks) in [Keyspace::Sp, Keyspace::Log].into_iter().enumerate() {
                    for a in 0..3u8 {
                        for key in [vec![a], vec![a, 0], vec![a, 1], vec![a, 2]] {
                            prop_assert_eq!(kv.get(ks, &key).unwrap(), model[m].get(&key).cloned(), "get {:?}", key);
                        }
                    }
                    for (lo, hi, reverse) in &scans {
                        let got: Vec<KvPair> =
                            kv.scan(ks, lo.clone(), hi.clone(), *reverse).map(Result::unwrap).collect();
                        let mut want: Vec<KvPair> = model[m]
                            .iter()
                            .filter(|(k, _)| within(k, lo, hi))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        if *reverse {
                            want.reverse();
                        }
                        prop_assert_eq!(got, want, "scan {:?}..{:?} reverse {}", lo, hi, reverse);
                    }
                }
            }
        }
    }
}

#[test]
fn once_writes_stop_the_batches_in_memory_go_to_redb_and_reads_see_redb_alone() {
    let dir = tempfile::tempdir().unwrap();
    let idle = std::time::Duration::from_secs(2);
    let kv = RedbKv::open(dir.path(), 1 << 20).unwrap().idle_checkpoint_after(Some(idle));
    for i in 0..20u32 {
        kv.apply(put(Keyspace::Log, &i.to_be_bytes(), b"v")).unwrap();
    }
    kv.sync().unwrap();
    // Far below the checkpoint size: in memory and in the journal only.
    assert!(!kv.view().active.is_empty());
    assert_eq!(stored_seq(&kv.shared.db), 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let view = kv.view();
        if view.active.is_empty() && view.frozen.is_none() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no checkpoint once the writes stopped");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(stored_seq(&kv.shared.db), 20, "every batch is in redb");
    assert_eq!(kv.shared.writer.lock().journals_bytes(), [0, 0], "both files started over");
    for n in 0..2 {
        assert!(to_replay(dir.path(), n, 20).is_empty());
    }
    // And emptied: an idle store keeps no old records on the disk.
    let lengths = || crate::kv::journal::FILE_NAMES.map(|n| std::fs::metadata(dir.path().join(n)).unwrap().len());
    while lengths() != [0, 0] {
        assert!(std::time::Instant::now() < deadline, "journal files of an idle store: {:?} bytes", lengths());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(keys(kv.scan(Keyspace::Log, Bound::Unbounded, Bound::Unbounded, false)).len(), 20);

    // Writes go on after it as before, and a crash loses none of them.
    kv.apply(put(Keyspace::Log, b"later", b"w")).unwrap();
    kv.sync().unwrap();
    let mut kv = kv;
    kv.skip_checkpoint_on_close = true;
    drop(kv);
    let kv = RedbKv::open(dir.path(), 1 << 20).unwrap();
    assert_eq!(keys(kv.scan(Keyspace::Log, Bound::Unbounded, Bound::Unbounded, false)).len(), 21);
}

#[test]
fn a_store_without_idle_checkpoints_keeps_its_batches_in_memory_until_the_journal_fills() {
    let dir = tempfile::tempdir().unwrap();
    let short = Some(std::time::Duration::from_millis(50));
    // Turned off after the thread started with a short period.
    let kv = RedbKv::open(dir.path(), 1 << 20).unwrap().idle_checkpoint_after(short).idle_checkpoint_after(None);
    kv.apply(put(Keyspace::Log, b"a", b"1")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert!(!kv.view().active.is_empty());
    assert_eq!(stored_seq(&kv.shared.db), 0);
}

// --- warming the page cache (warm.rs) ---------------------------------------

/// `n` entries of `value_len` bytes in `ks`, in batches of 100, keyed `kNNNNNN`.
fn fill(kv: &RedbKv, ks: Keyspace, n: u32, value_len: usize) {
    fill_range(kv, ks, 0..n, value_len, false)
}

/// Entries `range` as [`fill`] writes them; with `in_step`, each batch
/// waits for the checkpoint under way, so checkpoints stay at the store's
/// size however fast the batches come (none is deferred).
fn fill_range(kv: &RedbKv, ks: Keyspace, range: std::ops::Range<u32>, value_len: usize, in_step: bool) {
    for chunk in range.collect::<Vec<_>>().chunks(100) {
        if in_step {
            wait_for_checkpoint(kv);
        }
        let mut b = WriteBatch::default();
        for i in chunk {
            b.put(ks, format!("k{i:06}").into_bytes(), vec![(*i % 251) as u8; value_len]);
        }
        kv.apply(b).unwrap();
    }
}

/// Pages redb had to fetch from the file while reading every key of `ks`.
fn misses_reading(kv: &RedbKv, ks: Keyspace, n: u32) -> u64 {
    let before = kv.shared.db.cache_stats().read_misses();
    for i in 0..n {
        assert!(kv.get(ks, format!("k{i:06}").as_bytes()).unwrap().is_some());
    }
    kv.shared.db.cache_stats().read_misses() - before
}

/// The misses of reading a table a pass put in the cache: a few at most.
/// (redb evicts within one of its cache's lock stripes, not the coldest page
/// of all, so in a 1 MiB cache a page or two the pass read can go; without a
/// pass these tables miss on about a hundred pages.)
fn assert_cached(misses: u64) {
    assert!(misses <= 4, "{misses} pages fetched from the file");
}

fn wait_for_warm_passes(kv: &RedbKv, passes: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while kv.warm_passes() < passes {
        assert!(std::time::Instant::now() < deadline, "no warm pass came");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A store of ~300 KiB of current facts and ~3 MiB of versions, closed,
/// for a cache of 1 MiB.
fn store_beyond_the_cache(dir: &Path) {
    let kv = RedbKv::open(dir, 1 << 20).unwrap();
    fill(&kv, Keyspace::Versions, 10_000, 300);
    fill(&kv, Keyspace::Sp, 1_000, 300);
}

#[test]
fn a_reopened_store_warms_its_cache_so_reads_fetch_nothing_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    store_beyond_the_cache(dir.path());
    let idle = Some(std::time::Duration::from_millis(20));
    let cold = RedbKv::open(dir.path(), 1 << 20).unwrap().warm_cache(false).idle_checkpoint_after(idle);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(cold.warm_passes(), 0);
    let misses = misses_reading(&cold, Keyspace::Sp, 1_000);
    assert!(misses > 20, "without a pass, the first reads fetch their pages: {misses}");
    drop(cold);

    let warm = RedbKv::open(dir.path(), 1 << 20).unwrap().idle_checkpoint_after(idle);
    wait_for_warm_passes(&warm, 1);
    assert_cached(misses_reading(&warm, Keyspace::Sp, 1_000));
}

#[test]
fn a_pass_stops_at_its_budget_having_read_the_most_read_tables_first() {
    let dir = tempfile::tempdir().unwrap();
    store_beyond_the_cache(dir.path());
    let cache = 1 << 20;
    let kv = RedbKv::open(dir.path(), cache).unwrap().warm_cache(false);
    let budget = warm::budget(cache);
    let warmed = kv.shared.warm(budget).unwrap();
    assert!(!warmed.complete, "{warmed:?}");
    assert!(warmed.read_bytes >= budget && warmed.read_bytes < budget + (64 << 10), "{warmed:?}");
    assert!(warmed.fetched_bytes > 0 && warmed.fetched_bytes <= warmed.read_bytes, "{warmed:?}");
    assert!(warmed.entries > 1_000 && warmed.entries < 11_000, "{warmed:?}");
    assert!(kv.cache_fill().unwrap().used <= cache);
    assert_cached(misses_reading(&kv, Keyspace::Sp, 1_000)); // read before the versions
    assert!(misses_reading(&kv, Keyspace::Versions, 10_000) > 0, "the versions did not all fit");

    // A store that fits is read to the end.
    drop(kv);
    let roomy = RedbKv::open(dir.path(), 16 << 20).unwrap().warm_cache(false);
    let warmed = roomy.shared.warm(warm::budget(16 << 20)).unwrap();
    assert!(warmed.complete && warmed.entries >= 11_000, "{warmed:?}");
    assert_cached(misses_reading(&roomy, Keyspace::Versions, 10_000));
}

#[test]
fn writes_the_full_cache_could_not_keep_are_read_back_once_the_store_is_idle() {
    let dir = tempfile::tempdir().unwrap();
    let cache = 1 << 20;
    let idle = Some(std::time::Duration::from_millis(20));
    let kv = RedbKv::open(dir.path(), cache).unwrap().checkpoint_every(256 << 10).idle_checkpoint_after(idle);
    wait_for_warm_passes(&kv, 1); // the one at open, of an empty store

    // A trickle far below a sixteenth of the cache starts no pass.
    fill(&kv, Keyspace::Sp, 10, 300);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(kv.warm_passes(), 1);

    // Three cachefuls through the checkpoints: the cache is full, and once
    // the writes stop a pass reads the current facts back in.
    // (No idle checkpoint during the writes, so that no pass comes between
    // them; and checkpoints of 256 KiB, a quarter of the cache, as a store
    // whose disk keeps up checkpoints: a deferred one, up to the whole 1 MiB
    // cache, leaves another cache than the store's proportions would.)
    let kv = kv.idle_checkpoint_after(None);
    fill_range(&kv, Keyspace::Versions, 0..10_000, 300, true);
    fill_range(&kv, Keyspace::Sp, 0..1_000, 300, true);
    let kv = kv.idle_checkpoint_after(idle);
    wait_for_warm_passes(&kv, 2);
    assert_cached(misses_reading(&kv, Keyspace::Sp, 1_000));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(kv.warm_passes(), 2, "one pass per burst of writes, not one per pause");
}

#[test]
fn a_pass_is_due_at_open_then_only_after_enough_was_checkpointed_into_a_full_cache() {
    let cache = 64 << 20;
    let mut state = warm::WarmState::default();
    assert!(state.due(0, cache), "the first pass");
    state.checkpointed = 0;
    state.checkpointed(cache / 16 - 1);
    assert!(!state.due(cache, cache), "too little written");
    state.checkpointed(1);
    assert!(state.due(cache, cache));
    assert!(!state.due(cache / 2, cache), "the cache kept what was written");
    assert!(!warm::WarmState::off().due(0, cache), "warming switched off");
}
