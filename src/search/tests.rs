//! The index itself, in process: tenant and liveness filters at the index
//! level (not only through the engine's re-check), the watermark in the
//! commit, the rebuild triggers, and the indexer's steps and commits.

use super::indexer::Indexer;
use super::query::index_query;
use super::schema::{Fields, SCHEMA_VERSION};
use super::tokenize::query_terms;
use super::{Search, SearchRequest};
use crate::memory::Memory;
use std::sync::Arc;
use std::time::Duration;
use tantivy::collector::Count;
use crate::store::embedded::Engine;
use crate::store::FactInput;

fn engine() -> Arc<Engine> {
    crate::store::embedded::temporary()
}

/// The engine as the seam the index reads through.
fn store(e: &Arc<Engine>) -> Arc<dyn crate::store::MemoryStore> {
    e.clone()
}

fn hits(ix: &Indexer, tenant: &str, question: &str, as_of: Option<i64>) -> usize {
    let state = ix.state();
    let req = SearchRequest { question: question.into(), top_k: 8, as_of, ..Default::default() };
    let q = index_query(&state.fields, tenant, &req, &query_terms(question));
    state.reader.searcher().search(&q, &Count).unwrap()
}

#[test]
fn the_index_filters_by_tenant_and_follows_each_facts_latest_status() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine();
    let acme = e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:acme")).unwrap();
    e.assert("b", FactInput::new("Person:sarah", "works_at", "Org:acme")).unwrap();
    let (mut ix, wm) = Indexer::open(&dir.path().join("search"), store(&e), None).unwrap();
    assert_eq!(*wm.borrow(), 0);
    ix.catch_up(None, e.last_tx().0).unwrap();
    assert_eq!(*wm.borrow(), e.last_tx().0);
    assert_eq!(ix.num_docs(), 2);
    assert_eq!(hits(&ix, "a", "acme", None), 1);
    assert_eq!(hits(&ix, "c", "acme", None), 0);

    // Superseded: no longer live, still there for as_of searches.
    e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:globex")).unwrap();
    ix.catch_up(Some(["a".to_string()].into()), e.last_tx().0).unwrap();
    assert_eq!(hits(&ix, "a", "acme", None), 0);
    assert_eq!(hits(&ix, "a", "acme", Some(i64::MAX)), 1);
    assert_eq!(hits(&ix, "a", "acme", Some(acme.fact.created_at - 1)), 0, "created after as_of");
    assert_eq!(hits(&ix, "a", "globex", None), 1);
    assert_eq!(hits(&ix, "b", "acme", None), 1, "b's fact is untouched");
    assert_eq!(ix.num_docs(), 3, "a new version replaces the document");

    // Retracted: not live.
    let g = e.query("a", &Default::default()).unwrap().facts[0].id;
    e.retract("a", g).unwrap();
    ix.catch_up(Some(["a".to_string()].into()), e.last_tx().0).unwrap();
    assert_eq!(hits(&ix, "a", "globex", None), 0);
    assert_eq!(ix.num_docs(), 3);
}

#[test]
fn the_watermark_survives_a_reopen_and_a_bad_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("search");
    let e = engine();
    for i in 0..5 {
        e.assert("a", FactInput::new(format!("Tree:t{i}"), "fruit", "kiwi")).unwrap();
    }
    {
        let (mut ix, _) = Indexer::open(&path, store(&e), None).unwrap();
        ix.catch_up(None, 3).unwrap();
        assert_eq!((ix.watermark(), ix.num_docs()), (3, 3));
    }
    // Reopened: the watermark comes from the commit; catching up adds the rest.
    let (mut ix, _) = Indexer::open(&path, store(&e), None).unwrap();
    assert_eq!((ix.watermark(), ix.num_docs()), (3, 3));
    ix.catch_up(None, 5).unwrap();
    assert_eq!((ix.watermark(), ix.num_docs()), (5, 5));
    drop(ix);

    // An index ahead of the store (a store that lost writes) is rebuilt.
    let smaller = engine();
    smaller.assert("a", FactInput::new("Tree:x", "fruit", "kiwi")).unwrap();
    let (ix, _) = Indexer::open(&path, store(&smaller), None).unwrap();
    assert_eq!((ix.watermark(), ix.num_docs()), (0, 0));
    drop(ix);

    // Another schema version: rebuilt.
    {
        let (mut ix, _) = Indexer::open(&path, store(&e), None).unwrap();
        ix.catch_up(None, 5).unwrap();
    }
    {
        let index = tantivy::Index::open_in_dir(&path).unwrap();
        let mut w: tantivy::IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
        let mut c = w.prepare_commit().unwrap();
        c.set_payload(&format!(r#"{{"schema_version":{},"watermark":5}}"#, SCHEMA_VERSION + 1));
        c.commit().unwrap();
    }
    let (ix, _) = Indexer::open(&path, store(&e), None).unwrap();
    assert_eq!((ix.watermark(), ix.num_docs()), (0, 0));
    assert_eq!(ix.state().index.schema(), Fields::new().schema);
}

#[test]
fn only_documents_that_may_exist_are_deleted_before_they_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine();
    let (mut ix, _) = Indexer::open(&dir.path().join("search"), store(&e), None).unwrap();
    // One document per flush, so a batch crosses several.
    ix.set_stage_limit(1);
    for i in 0..5 {
        e.assert("a", FactInput::new(format!("Tree:t{i}"), "fruit", "kiwi")).unwrap();
    }
    e.assert("a", FactInput::new("Person:bob", "works_at", "Org:initech")).unwrap();
    ix.catch_up(None, e.last_tx().0).unwrap();
    assert_eq!((ix.num_docs(), ix.deletes()), (6, 0), "facts new since the watermark delete nothing");

    // One batch: sarah's first fact is added, then closed by the next one
    // (its closed version must replace the document this batch added), and
    // bob's indexed fact is closed (its document is in the committed index).
    e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:acme")).unwrap();
    e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:globex")).unwrap();
    e.assert("a", FactInput::new("Person:bob", "works_at", "Org:hooli")).unwrap();
    ix.catch_up(None, e.last_tx().0).unwrap();
    assert_eq!(ix.deletes(), 2, "sarah's closed fact and bob's");
    assert_eq!(ix.num_docs(), 9, "one document per fact");
    assert_eq!(hits(&ix, "a", "acme", None), 0, "the closed version replaced the live one");
    assert_eq!(hits(&ix, "a", "acme", Some(i64::MAX)), 1);
    assert_eq!(hits(&ix, "a", "initech", None), 0);
    assert_eq!(hits(&ix, "a", "globex hooli", None), 2);

    // Caught up again from the same watermark (a change indexed twice):
    // everything is at or before it now, so every document is replaced.
    drop(ix);
    let (mut again, _) = Indexer::open(&dir.path().join("search"), store(&e), None).unwrap();
    assert_eq!(again.watermark(), e.last_tx().0);
    e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:initrode")).unwrap();
    again.catch_up(None, e.last_tx().0).unwrap();
    assert_eq!((again.num_docs(), again.deletes()), (10, 1));
    assert_eq!(hits(&again, "a", "globex", None), 0);
}

#[test]
fn documents_handed_in_steps_are_searchable_at_the_commit_and_replace_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine();
    let (mut ix, wm) = Indexer::open(&dir.path().join("search"), store(&e), None).unwrap();
    e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:acme")).unwrap();
    ix.hand(None, e.last_tx().0).unwrap();
    assert_eq!((ix.num_docs(), *wm.borrow()), (0, 0), "handed to the writer, not committed");

    // The next step closes the fact the first one handed: its document,
    // uncommitted, must be replaced, not joined by a second one.
    e.assert("a", FactInput::new("Person:sarah", "works_at", "Org:globex")).unwrap();
    ix.hand(Some(["a".to_string()].into()), e.last_tx().0).unwrap();
    assert_eq!(ix.num_docs(), 0);
    ix.commit().unwrap();
    assert_eq!(*wm.borrow(), e.last_tx().0);
    assert_eq!((ix.num_docs(), ix.deletes()), (2, 1), "one document per fact");
    assert_eq!(hits(&ix, "a", "acme", None), 0, "the closed version replaced the live one");
    assert_eq!(hits(&ix, "a", "acme", Some(i64::MAX)), 1);
    assert_eq!(hits(&ix, "a", "globex", None), 1);

    // Nothing handed since: a commit changes nothing.
    ix.commit().unwrap();
    assert_eq!((ix.watermark(), ix.num_docs()), (e.last_tx().0, 2));
}

/// Polls until the index's watermark reaches `tx` (at most `within`).
async fn reaches(search: &Search, tx: u64, within: Duration) -> bool {
    let until = tokio::time::Instant::now() + within;
    while search.watermark() < tx {
        if tokio::time::Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Writes made before the index starts are committed by its catch-up, and
/// that commit starts the pause: the next write is not committed at once.
/// (A loaded machine can start the indexer's task after a test's first write;
/// the catch-up then commits that write, and the pause must still hold.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_up_commit_starts_the_pause() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine();
    let memory = Memory::new(store(&e));
    let kiwi = |i: usize| FactInput::new(format!("Tree:t{i}"), "fruit", "kiwi");
    let before = e.assert("a", kiwi(1)).unwrap();
    let (search, handle) = Search::start_paced(dir.path(), &memory, None, Duration::from_secs(3600)).unwrap();
    assert!(reaches(&search, before.fact.tx, Duration::from_secs(10)).await, "the catch-up did not commit");
    let after = e.assert("a", kiwi(2)).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(search.watermark() < after.fact.tx, "committed inside the pause");
    handle.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_wait_out_the_pause_unless_a_search_waits() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine();
    let memory = Memory::new(store(&e));
    let (search, handle) = Search::start_paced(dir.path(), &memory, None, Duration::from_secs(3600)).unwrap();
    let kiwi = |i: usize| FactInput::new(format!("Tree:t{i}"), "fruit", "kiwi");

    // The first write after a quiet spell (here: since the start) is
    // committed at once, with no search waiting.
    let first = e.assert("a", kiwi(1)).unwrap();
    assert!(reaches(&search, first.fact.tx, Duration::from_secs(10)).await, "the first write was not committed");

    // The next ones wait out the pause (an hour)...
    let second = e.assert("a", kiwi(2)).unwrap();
    e.assert("b", kiwi(3)).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(search.watermark() < second.fact.tx, "committed inside the pause");
    // ...unless a search waits for them: it waits for a's writes only.
    assert!(search.wait_fresh("a", Duration::from_secs(10)).await, "a waiting search was left to the pause");
    assert!(search.watermark() >= second.fact.tx);
    assert!(search.documents() >= 2);

    // On stop, what was announced is handed and committed.
    let last = e.assert("a", kiwi(4)).unwrap();
    handle.stop().await;
    let (ix, _) = Indexer::open(&dir.path().join("search"), store(&e), None).unwrap();
    assert_eq!((ix.watermark(), ix.num_docs()), (last.fact.tx, 4));
}
