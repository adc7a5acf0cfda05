use super::*;
use crate::config::{Backend, EngineConfig};
use crate::engine::Engine;
use crate::kv::WriteBatch;
use crate::write::catalog::Catalog;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

fn current(valid_at: Option<Millis>) -> FactQuery {
    FactQuery { valid_at, ..Default::default() }
}

#[test]
fn the_closed_index_is_read_unless_the_bound_rules_it_out() {
    let bound = 1_000;
    // A current read at or past the bound: nothing superseded covers it.
    assert!(!needs_closed(&current(Some(1_000)), bound));
    assert!(!needs_closed(&current(Some(5_000)), bound));
    // Before the bound, a superseded fact may still cover it.
    assert!(needs_closed(&current(Some(999)), bound));
    // No valid time: current reads answer active facts only.
    assert!(!needs_closed(&current(None), bound));
    // A tenant without a known bound always looks.
    assert!(needs_closed(&current(Some(i64::MAX - 1)), Millis::MAX));
    // Rewound reads always look: the fact may have been live then.
    let rewound = FactQuery { as_of: Some(AsOf::Tx(3)), ..current(Some(5_000)) };
    assert!(needs_closed(&rewound, bound));
    // Retracted facts are not bounded by valid time.
    let retracted = FactQuery { include_retracted: true, ..current(Some(5_000)) };
    assert!(needs_closed(&retracted, bound));
    assert!(needs_closed(&FactQuery { status: StatusFilter::Only(Status::Retracted), ..current(Some(5_000)) }, bound));
    // Filters that admit superseded facts look before the bound only.
    for status in [StatusFilter::Any, StatusFilter::Only(Status::Superseded)] {
        assert!(needs_closed(&FactQuery { status, ..current(None) }, bound));
        assert!(needs_closed(&FactQuery { status, ..current(Some(999)) }, bound));
        assert!(!needs_closed(&FactQuery { status, ..current(Some(1_000)) }, bound));
    }
    // Filters that admit live facts only never look.
    assert!(!needs_closed(&FactQuery { status: StatusFilter::Only(Status::Active), ..current(Some(0)) }, bound));
}

/// The backend, counting the scans of `idx_closed` and of `versions`.
struct Counting {
    inner: Arc<dyn OrderedKv>,
    closed_scans: AtomicUsize,
    version_scans: AtomicUsize,
}

impl Counting {
    fn new(inner: Arc<dyn OrderedKv>) -> Counting {
        Counting { inner, closed_scans: AtomicUsize::new(0), version_scans: AtomicUsize::new(0) }
    }
}

impl OrderedKv for Counting {
    fn get(&self, ks: Keyspace, key: &[u8]) -> std::result::Result<Option<Vec<u8>>, crate::error::StorageError> {
        self.inner.get(ks, key)
    }
    fn scan(&self, ks: Keyspace, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, reverse: bool) -> KvIter<'_> {
        match ks {
            Keyspace::Closed => self.closed_scans.fetch_add(1, Relaxed),
            Keyspace::Versions => self.version_scans.fetch_add(1, Relaxed),
            _ => 0,
        };
        self.inner.scan(ks, lo, hi, reverse)
    }
    fn apply_published(
        &self,
        batch: WriteBatch,
        publish: &RwLock<()>,
    ) -> std::result::Result<(), crate::error::StorageError> {
        self.inner.apply_published(batch, publish)
    }
    fn sync(&self) -> std::result::Result<(), crate::error::StorageError> {
        self.inner.sync()
    }
    fn size_on_disk(&self) -> Option<u64> {
        None
    }
}

#[test]
fn the_bound_is_kept_on_disk_and_current_reads_past_it_skip_the_closed_index() {
    let dir = tempfile::tempdir().unwrap();
    let hour = 3_600_000;
    {
        let e = Engine::open(EngineConfig::at(dir.path())).unwrap();
        // Tenant "a": acme until 10 h, then globex: acme stays valid until 10 h.
        e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:acme").valid_from(0)).unwrap();
        e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:globex").valid_from(10 * hour)).unwrap();
        // Tenant "b": nothing superseded.
        e.assert("b", FactInput::new("Person:tom", "works_at", "Org:acme").valid_from(0)).unwrap();
        e.close();
    }
    let config = EngineConfig::at(dir.path());
    let kv = Counting::new(Backend::Redb.open(dir.path(), &config).unwrap());
    let catalog = Catalog::load(&kv).unwrap();
    let tid = |name: &str| catalog.state.tenants[name];
    assert_eq!(catalog.state.superseded_until(tid("a")), 10 * hour);
    assert_eq!(catalog.state.superseded_until(tid("b")), Millis::MIN);

    let read = |tenant: &str, subject: &str, valid_at: Millis| {
        let reader = Reader {
            kv: &kv,
            tid: tid(tenant),
            tenant: tenant.to_string(),
            superseded_until: catalog.state.superseded_until(tid(tenant)),
        };
        let q = FactQuery { subject: Some(subject.into()), ..current(Some(valid_at)) };
        let before = kv.closed_scans.load(Relaxed);
        let objects: Vec<String> = reader
            .query_within(&q, usize::MAX)
            .unwrap()
            .unwrap()
            .facts
            .into_iter()
            .map(|f| f.object.as_str().unwrap().to_string())
            .collect();
        (objects, kv.closed_scans.load(Relaxed) - before)
    };
    // Before 10 h the superseded acme answers, from idx_closed.
    assert_eq!(read("a", "Person:sarah", 5 * hour), (vec!["Org:acme".to_string()], 1));
    // From 10 h on only globex can: idx_closed is not read.
    assert_eq!(read("a", "Person:sarah", 10 * hour), (vec!["Org:globex".to_string()], 0));
    assert_eq!(read("b", "Person:tom", 5 * hour), (vec!["Org:acme".to_string()], 0));
}

#[test]
fn a_rewound_read_passes_over_facts_that_began_after_the_valid_instant() {
    let dir = tempfile::tempdir().unwrap();
    let hour = 3_600_000;
    {
        let e = Engine::open(EngineConfig::at(dir.path())).unwrap();
        // tx 1, 2: acme for [0, 10 h), globex from 10 h; tx 3: initech
        // from 20 h supersedes globex, whose latest version is then tx 3's.
        let acme = FactInput::new("Person:sarah", "works_at", "Org:acme").valid_from(0).valid_until(10 * hour);
        e.assert("a", acme).unwrap();
        e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:globex").valid_from(10 * hour)).unwrap();
        e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:initech").valid_from(20 * hour)).unwrap();
        e.close();
    }
    let config = EngineConfig::at(dir.path());
    let kv = Counting::new(Backend::Redb.open(dir.path(), &config).unwrap());
    let catalog = Catalog::load(&kv).unwrap();
    let tid = catalog.state.tenants["a"];
    let reader =
        Reader { kv: &kv, tid, tenant: "a".to_string(), superseded_until: catalog.state.superseded_until(tid) };
    let read = |as_of: AsOf, valid_at: Millis| {
        let q = FactQuery { subject: Some("Person:sarah".into()), as_of: Some(as_of), ..current(Some(valid_at)) };
        let before = kv.version_scans.load(Relaxed);
        let page = reader.query_within(&q, usize::MAX).unwrap().unwrap();
        let objects: Vec<String> = page.facts.iter().map(|f| f.object.as_str().unwrap().to_string()).collect();
        (objects, kv.version_scans.load(Relaxed) - before)
    };
    // As of tx 2 at 5 h: acme. globex was live then but began at 10 h,
    // so its version of tx 2 is not looked for.
    assert_eq!(read(AsOf::Tx(2), 5 * hour), (vec!["Org:acme".to_string()], 0));
    // As of tx 2 at 15 h: globex, open-ended then, read from `versions`.
    assert_eq!(read(AsOf::Tx(2), 15 * hour), (vec!["Org:globex".to_string()], 1));
    // Now at 15 h: globex's latest version (closed at 20 h) answers as it is.
    assert_eq!(read(AsOf::Tx(3), 15 * hour), (vec!["Org:globex".to_string()], 0));
}
