//! Idempotent writes: the first request under a key is applied and its
//! rendered reply stored in the same transaction; retries get the stored
//! reply and apply nothing, across restarts too.

use std::sync::Arc;
use tempora_storage::*;

fn render_tx() -> Idempotency {
    Idempotency {
        key: b"k-1".to_vec(),
        render: Box::new(|r: &Result<WriteOutcome, EngineError>| match r {
            Ok(o) => Some(format!("ok tx={}", o.tx).into_bytes()),
            Err(EngineError::Conflict(m)) => Some(format!("conflict {m}").into_bytes()),
            Err(_) => None,
        }),
    }
}

fn assert_op(object: &str) -> Vec<WriteOp> {
    vec![WriteOp::Assert(FactInput::new("Person:sarah", "works_at", object))]
}

#[test]
fn a_retry_replays_the_first_reply_and_applies_nothing_even_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = Engine::open(EngineConfig::at(dir.path())).unwrap();
        let first = e.write_idempotent("default", assert_op("Org:acme"), render_tx()).unwrap();
        let tx = first.expect("applied").tx;
        let again = e.write_idempotent("default", assert_op("Org:globex"), render_tx()).unwrap();
        assert_eq!(again.unwrap_err(), format!("ok tx={tx}").into_bytes());
        assert_eq!(e.last_tx().0, tx, "the retry wrote nothing");
        // Another tenant's identical key is its own.
        let other = e.write_idempotent("other", assert_op("Org:acme"), render_tx()).unwrap();
        assert!(other.is_ok());
    }
    let e = Engine::open(EngineConfig::at(dir.path())).unwrap();
    let after = e.write_idempotent("default", assert_op("Org:initech"), render_tx()).unwrap();
    assert!(after.is_err(), "the stored reply survives a restart");
    assert_eq!(e.stats("default").active, 1);
    assert!(e.idempotent_reply("default", b"k-1").unwrap().is_some());
    assert!(e.idempotent_reply("default", b"k-2").unwrap().is_none());
}

#[test]
fn a_rejected_write_can_store_its_reply_too() {
    let e = Engine::open(EngineConfig::temporary()).unwrap();
    e.set_cardinality("default", "works_at", Cardinality::Strict).unwrap();
    e.assert("default", FactInput::new("Person:sarah", "works_at", "Org:acme")).unwrap();
    let err = e.write_idempotent("default", assert_op("Org:globex"), render_tx()).unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)));
    let replay = e.write_idempotent("default", assert_op("Org:acme"), render_tx()).unwrap();
    assert!(String::from_utf8(replay.unwrap_err()).unwrap().starts_with("conflict"));
}

#[test]
fn concurrent_requests_under_one_key_apply_once() {
    let e = Arc::new(Engine::open(EngineConfig::temporary()).unwrap());
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                e.write_idempotent("default", assert_op(&format!("Org:{i}")), render_tx()).unwrap().is_ok()
            })
        })
        .collect();
    let applied = handles.into_iter().map(|h| h.join().unwrap()).filter(|ok| *ok).count();
    assert_eq!(applied, 1);
    assert_eq!(e.last_tx().0, 1);
}

/// The service's opaque records: batches land whole, scans stay inside
/// their prefix, deletes stick across a reopen.
#[test]
fn aux_records_batch_scan_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = tempora_storage::Engine::open(tempora_storage::EngineConfig::at(dir.path())).unwrap();
        e.aux_put_many((0u8..5).map(|i| (vec![b'V', b'a', i], vec![i; 3])).collect()).unwrap();
        e.aux_put_many(vec![(b"Vb\x00".to_vec(), b"other".to_vec()), (b"W".to_vec(), b"w".to_vec())]).unwrap();
        e.aux_delete_many(vec![vec![b'V', b'a', 1]]).unwrap();
    }
    let e = tempora_storage::Engine::open(tempora_storage::EngineConfig::at(dir.path())).unwrap();
    let mut seen = Vec::new();
    e.aux_scan(b"Va", |k, v| {
        seen.push((k.to_vec(), v.to_vec()));
        true
    })
    .unwrap();
    assert_eq!(seen, vec![
        (vec![b'V', b'a', 0], vec![0; 3]),
        (vec![b'V', b'a', 2], vec![2; 3]),
        (vec![b'V', b'a', 3], vec![3; 3]),
        (vec![b'V', b'a', 4], vec![4; 3]),
    ]);
    let mut first = None;
    e.aux_scan(b"V", |k, _| {
        first = Some(k.to_vec());
        false
    })
    .unwrap();
    assert_eq!(first, Some(vec![b'V', b'a', 0]), "a scan stops when told");
}
