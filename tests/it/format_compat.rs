//! On-disk format compatibility: a data directory written by format 1 (kept
//! under `tests/data/format1`, written by
//! `storage/examples/make_format1_fixture.rs`) opens and reads the same, with
//! the per-source counts that later formats keep built by the migrations and
//! its facts rewritten in format 4's shape and each tenant's
//! superseded-until bound recorded (format 5), and its per-fact `idx_ps`
//! keys read beside format 6's per-pair ones, and its change log, which
//! names fact ids only, read by id with the subjects and value changes that
//! format 7 records, and its live facts of `many` predicates indexed by
//! value (formats 8 and 9) so that a `many` value reasserted takes over its
//! copy. A format-8 data directory (redb, `tests/data/format8`) keeps its
//! facts and drops the by-value keys of its `one` predicates (format 9). A
//! directory of a newer format is refused with a clear message and left as
//! it was.

use crate::common::copy_dir;
use std::path::{Path, PathBuf};
use tempora_storage::kv::{Keyspace, OrderedKv, SledKv, WriteBatch};
use tempora_storage::*;

fn fixture() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format1"), &dir);
    (tmp, dir)
}

fn by_subject(e: &Engine, tenant: &str, subject: &str, q: FactQuery) -> Vec<Fact> {
    e.query(tenant, &FactQuery { subject: Some(subject.into()), ..q }).unwrap().facts
}

#[test]
fn a_format_1_data_dir_opens_and_reads_the_same() {
    let (_tmp, dir) = fixture();
    let e = Engine::open(EngineConfig::at(&dir)).unwrap();
    assert_eq!(e.format_found(), 1);

    let now = by_subject(&e, "default", "Person:sarah", FactQuery { predicate: Some("works_at".into()), ..Default::default() });
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].object, "Org:globex");
    let then = by_subject(
        &e,
        "default",
        "Person:sarah",
        FactQuery { predicate: Some("works_at".into()), valid_at: Some(1_640_995_200_000), ..Default::default() },
    );
    assert_eq!(then[0].object, "Org:acme");
    assert_eq!(then[0].status, Status::Superseded);

    let knows = by_subject(&e, "default", "Person:sarah", FactQuery { predicate: Some("knows".into()), ..Default::default() });
    assert_eq!(knows.len(), 2, "a `many` predicate keeps both values");
    assert_eq!(e.predicate("default", "knows").unwrap().cardinality, Cardinality::Many);

    let candidates = by_subject(&e, "default", "Person:tom", FactQuery { status: StatusFilter::Only(Status::Candidate), ..Default::default() });
    assert_eq!(candidates.len(), 1);

    let acme = e.query("acme", &FactQuery { include_retracted: true, ..Default::default() }).unwrap().facts;
    assert_eq!(acme.len(), 1);
    assert_eq!(acme[0].status, Status::Retracted);

    let s = e.stats("default");
    assert_eq!((s.active, s.superseded, s.candidate, s.retracted), (3, 1, 1, 0));
    // Migration 0003 counted the facts of source "hr": acme superseded by globex.
    let hr = SourceStats { active: 1, candidate: 0, superseded: 1, retracted: 0 };
    assert_eq!(e.source_stats("default", "hr").unwrap(), hr);
    assert_eq!(e.source_stats("acme", "hr").unwrap(), SourceStats::default());
    assert_eq!(e.last_tx().0, 6);
    assert_eq!(e.changes("default", 0, 100).unwrap().len(), 4);

    // It keeps working as a live store: a new write continues the tx sequence.
    let next = e.assert("default", FactInput::new("Person:sarah", "works_at", "Org:initech")).unwrap();
    assert_eq!(next.fact.tx, 7);
    assert_eq!(next.superseded[0].object, "Org:globex");
    let hr = SourceStats { active: 0, candidate: 0, superseded: 2, retracted: 0 };
    assert_eq!(e.source_stats("default", "hr").unwrap(), hr);

    // Migration 0002 indexed acme's remaining [2020, 2024): a backfill from
    // 2022 cuts it back, so 2023 answers only the backfilled value.
    let backfill = e
        .assert("default", FactInput::new("Person:sarah", "works_at", "Org:hooli").valid_from(1_640_995_200_000))
        .unwrap();
    assert!(backfill.superseded.iter().any(|f| f.object == "Org:acme"), "{:?}", backfill.superseded);
    let in_2023 = by_subject(
        &e,
        "default",
        "Person:sarah",
        FactQuery { predicate: Some("works_at".into()), valid_at: Some(1_672_531_200_000), ..Default::default() },
    );
    assert_eq!(in_2023.len(), 1, "{in_2023:?}");
    assert_eq!(in_2023[0].object, "Org:hooli");
    // Cutting acme back again keeps it superseded: "hr" counts do not move.
    assert_eq!(e.source_stats("default", "hr").unwrap(), hr);

    // By predicate, format 1's per-fact `idx_ps` keys read as one pair each
    // (format 6 keeps them): every fact once, in pages too; a pair new since
    // the upgrade gets format 6's key and reads beside them.
    e.assert("default", FactInput::new("Person:zoe", "knows", "Person:sarah")).unwrap();
    let zoe_works = e.assert("default", FactInput::new("Person:zoe", "works_at", "Org:initech")).unwrap().fact.id;
    let by_predicate = |q: FactQuery| -> Vec<FactId> {
        let (mut ids, mut cursor) = (Vec::new(), None);
        loop {
            let page = e.query("default", &FactQuery { cursor, ..q.clone() }).unwrap();
            ids.extend(page.facts.iter().map(|f| f.id));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return ids,
            }
        }
    };
    let knows = FactQuery { predicate: Some("knows".into()), ..Default::default() };
    let all_knows = by_predicate(knows.clone());
    assert_eq!(all_knows.len(), 3, "sarah's two and zoe's one");
    assert_eq!(by_predicate(FactQuery { limit: 1, ..knows }), all_knows);
    let history = FactQuery { predicate: Some("works_at".into()), status: StatusFilter::Any, ..Default::default() };
    let works = by_predicate(history.clone());
    let sarah = FactQuery { predicate: Some("works_at".into()), ..history.clone() };
    let mut expected: Vec<FactId> = by_subject(&e, "default", "Person:sarah", sarah).iter().map(|f| f.id).collect();
    assert_eq!(expected.len(), 4, "acme, globex, initech, hooli: {expected:?}");
    expected.push(zoe_works);
    assert_eq!(works, expected, "sarah's facts, closed ones included, then zoe's");
    assert_eq!(by_predicate(FactQuery { limit: 1, ..history }), works);

    // Format 1's log entries (tx 1-6) hold ids only: `change_log` reads
    // their versions; the entries written since carry their subjects.
    let logged = change_log_matches_changes(&e, "default");
    let globex = logged.iter().find(|c| c.tx <= 6 && matches!(&c.events[0], LoggedEvent::Assert { superseded, .. } if !superseded.is_empty()));
    match &globex.expect("format 1 superseded acme").events[0] {
        LoggedEvent::Assert { subject, changed, .. } => assert_eq!((subject.as_str(), *changed), ("Person:sarah", 1)),
        other => panic!("{other:?}"),
    }
    change_log_matches_changes(&e, "acme");
    e.close();
    drop(e);

    // Migration 0004 rewrote the facts format 1 stored whole.
    let kv = open_sled(&dir);
    let mut entries = 0;
    for ks in [Keyspace::Sp, Keyspace::Closed, Keyspace::Versions] {
        for item in kv.scan(ks, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, false) {
            let (_, v) = item.unwrap();
            assert!(!fact_record::is_whole_fact(&v), "{ks:?} still holds a whole fact");
            entries += 1;
        }
    }
    assert!(entries >= 16, "{entries}");
    assert!(kv.get(Keyspace::Meta, &[0x09]).unwrap().is_some(), "the rewrite is recorded as done");

    // Migration 0005 recorded each tenant's superseded-until bound.
    let meta = |key: Vec<u8>| kv.get(Keyspace::Meta, &key).unwrap().expect("a meta record");
    let bound = |tenant: &str| -> i64 {
        let id: u32 = record::decode(&meta(keys::meta::tenant_by_name(tenant))).unwrap();
        record::decode(&meta(keys::meta::superseded_until(id))).unwrap()
    };
    // acme was superseded until 2024, globex since (until now).
    assert!(bound("default") >= 1_704_067_200_000, "{}", bound("default"));
    // Tenant "acme" has one retracted fact and nothing superseded.
    assert_eq!(bound("acme"), i64::MIN);

    // Migration 0006 left format 1's `idx_ps` keys (one per fact, the fact id
    // last); the writes since added a key only for the new pair, without an id.
    let (mut per_fact, mut per_pair) = (0, Vec::new());
    for item in kv.scan(Keyspace::Ps, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, false) {
        let (k, _) = item.unwrap();
        match keys::decode_ps(&k).unwrap() {
            (_, _, Some(_)) => per_fact += 1,
            (s, p, None) => per_pair.push((s, p)),
        }
    }
    // Format 1 wrote 6 facts; sarah's initech and hooli since, and zoe's two.
    assert_eq!(per_fact, 6);
    let pairs = [("Person:zoe", "knows"), ("Person:zoe", "works_at")].map(|(s, p)| (s.to_string(), p.to_string()));
    assert_eq!(per_pair, pairs);
}

/// Migration 0008 built `idx_spo` from format 1's live facts: one key per
/// fact of `idx_sp`, and a `many` value reasserted supersedes its live copy
/// and nothing else.
#[test]
fn a_format_1_data_dir_reasserts_a_many_value_after_migrating() {
    let (_tmp, dir) = fixture();
    let e = Engine::open(EngineConfig::at(&dir)).unwrap();
    let knows = || {
        let q = FactQuery { predicate: Some("knows".into()), ..Default::default() };
        let mut facts = by_subject(&e, "default", "Person:sarah", q);
        facts.sort_by(|a, b| a.object.to_string().cmp(&b.object.to_string()));
        facts
    };
    let before = knows();
    assert_eq!(before.len(), 2);
    let again = e.assert("default", FactInput::new("Person:sarah", "knows", before[0].object.clone())).unwrap();
    assert_eq!(again.superseded.iter().map(|f| f.id).collect::<Vec<_>>(), [before[0].id]);
    let after = knows();
    let objects = |fs: &[Fact]| fs.iter().map(|f| f.object.clone()).collect::<Vec<_>>();
    assert_eq!(objects(&after), objects(&before));
    assert!(after.iter().any(|f| f.id == again.fact.id) && after.iter().any(|f| f.id == before[1].id));
    // From format 9 only the live facts of `many` predicates are kept by value.
    let many: std::collections::HashSet<String> = e
        .tenants()
        .iter()
        .flat_map(|t| e.predicates(t).unwrap())
        .filter(|p| p.cardinality == Cardinality::Many)
        .map(|p| p.name)
        .collect();
    assert!(many.contains("knows"));
    e.close();
    drop(e);

    let kv = open_sled(&dir);
    let all = |ks| -> Vec<Vec<u8>> {
        kv.scan(ks, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, false).map(|i| i.unwrap().0).collect()
    };
    let (mut want, mut live) = (Vec::new(), 0);
    for item in kv.scan(Keyspace::Sp, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, false) {
        let (k, v) = item.unwrap();
        let f = fact_record::decode_indexed("", &k, &v).unwrap();
        live += 1;
        if many.contains(&f.predicate) {
            want.push(keys::spo(keys::tenant_of_index_key(&k).unwrap(), &f.subject, &f.predicate, &f.object, f.id));
        }
    }
    want.sort();
    // Three active facts of tenant "default" and tom's candidate; sarah's
    // two `knows` are the `many` ones.
    assert_eq!(live, 4);
    assert_eq!(want.len(), 2);
    assert_eq!(all(Keyspace::Spo), want);
}

/// `tests/data/format8`: a redb store written by format 8 through the HTTP
/// API: `works_at` (one) for ada (acme, then globex from 2021) and bob
/// (acme); `likes` (many) for ada (tea, chess, and jazz, retracted) and bob
/// (tea). Format 8 kept all five live facts by value.
fn format8() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format8"), &dir);
    (tmp, dir)
}

#[test]
fn a_format_8_data_dir_keeps_its_facts_and_only_the_many_ones_by_value() {
    let (_tmp, dir) = format8();
    assert_eq!(usage(&dir).unwrap().table(Keyspace::Spo).unwrap().entries, 5, "format 8: every live fact");
    let e = Engine::open(EngineConfig::at(&dir)).unwrap();
    assert_eq!(e.format_found(), 8);
    let objects = |subject: &str, predicate: &str| {
        let q = FactQuery { predicate: Some(predicate.into()), ..Default::default() };
        let mut v: Vec<String> =
            by_subject(&e, "default", subject, q).iter().map(|f| f.object.as_str().unwrap().to_string()).collect();
        v.sort();
        v
    };
    assert_eq!(objects("Person:ada", "works_at"), ["Org:globex"]);
    assert_eq!(objects("Person:bob", "works_at"), ["Org:acme"]);
    assert_eq!(objects("Person:ada", "likes"), ["chess", "tea"]);
    let all = FactQuery { status: StatusFilter::Any, include_retracted: true, ..Default::default() };
    let history = by_subject(&e, "default", "Person:ada", all);
    assert_eq!(history.len(), 5, "globex, acme superseded, tea, chess, jazz retracted");
    // Writes after the migration: a many value reasserted takes over its
    // copy alone; a one value takes over the pair.
    let tea = by_subject(&e, "default", "Person:ada", FactQuery { predicate: Some("likes".into()), ..Default::default() })
        .into_iter()
        .find(|f| f.object == "tea")
        .unwrap();
    let again = e.assert("default", FactInput::new("Person:ada", "likes", "tea")).unwrap();
    assert_eq!(again.superseded.iter().map(|f| f.id).collect::<Vec<_>>(), [tea.id]);
    let moved = e.assert("default", FactInput::new("Person:bob", "works_at", "Org:initech")).unwrap();
    assert_eq!(moved.superseded.len(), 1);
    assert_eq!(objects("Person:ada", "likes"), ["chess", "tea"]);
    e.close();
    drop(e);
    // ada's tea (the new copy) and chess, bob's tea.
    assert_eq!(usage(&dir).unwrap().table(Keyspace::Spo).unwrap().entries, 3);
}

/// `change_log` says by fact id what `changes` says by version: the same
/// transactions and events, each assert's and retract's subject, and how many
/// of the facts an assert closed held another object. Returns the log.
fn change_log_matches_changes(e: &Engine, tenant: &str) -> Vec<LoggedChange> {
    let full = e.changes(tenant, 0, 1000).unwrap();
    let logged = e.change_log(tenant, 0, 1000).unwrap();
    assert_eq!(full.len(), logged.len());
    for (c, l) in full.iter().zip(&logged) {
        assert_eq!((c.tx, c.recorded_at, c.events.len()), (l.tx, l.recorded_at, l.events.len()));
        for (ce, le) in c.events.iter().zip(&l.events) {
            let ids = |facts: &[Fact]| facts.iter().map(|f| f.id).collect::<Vec<_>>();
            match (ce, le) {
                (
                    ChangeEvent::Assert { fact, superseded, continued },
                    LoggedEvent::Assert { fact: id, subject, superseded: closed, continued: tails, changed },
                ) => {
                    assert_eq!((fact.id, &fact.subject), (*id, subject));
                    assert_eq!((ids(superseded), ids(continued)), (closed.clone(), tails.clone()));
                    assert_eq!(superseded.iter().filter(|f| f.object != fact.object).count(), *changed, "tx {}", c.tx);
                }
                (ChangeEvent::Retract { fact }, LoggedEvent::Retract { fact: id, subject }) => {
                    assert_eq!((fact.id, &fact.subject), (*id, subject));
                }
                (ChangeEvent::Cardinality(a), LoggedEvent::Cardinality(b)) => assert_eq!(a, b),
                (ChangeEvent::Threshold(a), LoggedEvent::Threshold(b)) => assert_eq!(a, b),
                (a, b) => panic!("tx {}: {a:?} against {b:?}", c.tx),
            }
        }
    }
    logged
}

#[test]
fn the_change_log_names_subjects_and_counts_changed_values() {
    let e = Engine::open(EngineConfig::temporary()).unwrap();
    let ann = |object: &str| FactInput::new("Person:ann", "works_at", object);
    e.assert("t", ann("Org:a").valid_from(1_000)).unwrap();
    // Confirming the value closes the older copy and changes nothing.
    e.assert("t", ann("Org:a").valid_from(1_000)).unwrap();
    e.assert("t", ann("Org:b").valid_from(2_000)).unwrap();
    // A bounded interval inside b's: b is closed, and its tail continues it.
    let split = e.assert("t", ann("Org:c").valid_from(3_000).valid_until(4_000)).unwrap();
    assert_eq!((split.superseded.len(), split.continued.len()), (1, 1));
    e.write(
        "t",
        vec![
            WriteOp::SetCardinality { predicate: "knows".into(), cardinality: Cardinality::Many },
            WriteOp::SetThreshold(0.5),
            WriteOp::Retract(split.fact.id),
        ],
    )
    .unwrap();
    let logged = change_log_matches_changes(&e, "t");
    let changed: Vec<usize> = logged
        .iter()
        .flat_map(|c| &c.events)
        .filter_map(|ev| match ev {
            LoggedEvent::Assert { changed, .. } => Some(*changed),
            _ => None,
        })
        .collect();
    assert_eq!(changed, [0, 0, 1, 1]);
    assert!(matches!(&logged[4].events[2], LoggedEvent::Retract { subject, .. } if subject == "Person:ann"));
}

/// The sled store in `dir`, once the engine that had it open has let go of
/// its lock (sled releases it when its background work ends).
fn open_sled(dir: &Path) -> SledKv {
    for _ in 0..100 {
        match SledKv::open(dir, 1 << 20) {
            Ok(kv) => return kv,
            Err(e) if e.to_string().contains("in use") => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the store stayed locked");
}

fn set_format(dir: &Path, format_record: Vec<u8>) {
    let kv = SledKv::open(dir, 1 << 20).unwrap();
    let mut b = WriteBatch::default();
    b.put(Keyspace::Meta, vec![0x01], format_record);
    kv.apply(b).unwrap();
    kv.sync().unwrap();
}

#[test]
fn a_newer_format_is_refused_with_a_clear_message_and_left_untouched() {
    let (_tmp, dir) = fixture();
    // Record version byte 1, then MessagePack 99 (a positive fixint).
    set_format(&dir, vec![0x01, 99]);
    let err = match Engine::open(EngineConfig::at(&dir)) {
        Err(e) => e,
        Ok(_) => panic!("a format-99 directory must not open"),
    };
    assert!(matches!(err, EngineError::FormatTooNew(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("format 99") && msg.contains("newer"), "{msg}");

    // Nothing was changed: the marker still says 99.
    let kv = SledKv::open(&dir, 1 << 20).unwrap();
    assert_eq!(kv.get(Keyspace::Meta, &[0x01]).unwrap(), Some(vec![0x01, 99]));
}

#[test]
fn a_store_with_data_but_no_format_marker_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let kv = SledKv::open(tmp.path(), 1 << 20).unwrap();
        let mut b = WriteBatch::default();
        b.put(Keyspace::Versions, b"stray".to_vec(), b"x".to_vec());
        kv.apply(b).unwrap();
        kv.sync().unwrap();
    }
    let err = Engine::open(EngineConfig::at(tmp.path())).err().expect("refused");
    assert!(err.to_string().contains("without a tempora format marker"), "{err}");
}
