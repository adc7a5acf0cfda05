//! The indexer: keeps the recall index in step with the engine's change log.
//!
//! The index is derived state. Its commit payload records the watermark, the
//! highest transaction whose changes are all in the index, in the same
//! atomic commit as the documents; so after any crash the index is exactly
//! "everything up to the watermark" and catching up from there is enough.
//! Re-applying a change is harmless (a document is replaced by its id), so
//! a change indexed twice does no damage either.
//!
//! Replacing costs a delete, and tantivy applies each delete at commit by
//! looking its id up in every segment. A fact first recorded after the
//! watermark cannot have a document in the committed index (every document
//! there came from a change at or before the watermark), so its first
//! document is added without one; only a document handed for it since the
//! last commit is replaced the usual way. Under asserts with supersession that
//! halves the deletes: the new fact needs none, the closed one does.
//!
//! Handing documents to the writer and committing them are paced apart.
//! Changes are handed over in small steps as their commit notices come (at
//! most one step per [`STEP_EVERY`]), so tantivy builds the segment while
//! writes go on; commits, which write and sync a segment, come at most once
//! per [`COMMIT_EVERY`] unless a search waits for a transaction (see
//! [`Hurry`]). A waiting search then waits for one small step and one
//! commit, not for everything written since the last commit to be read,
//! tokenized and indexed.

use super::schema::{Fields, IndexDoc, SCHEMA_VERSION, TOKENIZER};
use crate::memory::Committed;
use anyhow::{Context, Result};
use prometheus::IntCounter;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tantivy::directory::MmapDirectory;
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy};
use crate::store::{Change, ChangeEvent, MemoryStore, Fact, FactId, Tx};
use tokio::sync::{broadcast, watch};

/// Changes read from the log per call.
const LOG_PAGE: usize = 1000;
/// Distinct documents staged before they are handed to the writer.
const STAGE_LIMIT: usize = 10_000;
/// The writer's indexing memory (tantivy flushes a segment when it is full).
const WRITER_MEMORY: usize = 50 << 20;
/// The least time between two commits while writes keep coming and no search
/// is waiting. Every commit writes and syncs a new segment, and small
/// segments are merged again and again: committing after each write batch
/// made indexing cost more CPU than the writes themselves (over a third of
/// the server under durable asserts). The first write after a quiet spell is
/// still committed at once, and a search waiting for its tenant's writes (see
/// `Search::wait_fresh`) cuts the pause short, so searches do not wait for it.
/// Four seconds took about 6 % off the server's CPU per assert under W1 at
/// 1M facts (fewer, larger segments), but a search during a bulk import
/// then took 1.0-1.7 s instead of 0.5-0.9 s (measured when changes were
/// still read and indexed only at each commit); so one second.
pub const COMMIT_EVERY: Duration = Duration::from_secs(1);
/// The least time between two steps that hand changes to the writer, unless
/// a search waits. A step reads the change log once per tenant it was told
/// of, and a fact closed in the step after the one that handed it costs a
/// second document and a delete, where one step would have handed its last
/// version alone. In the hot-key run (16 writers on 100 keys) steps of 50 ms
/// indexed 1.17 documents per assert against 1.02 when changes were read
/// once per commit; 250 ms, 1.03. Searches made during a 1M bulk import
/// waited 0.1-0.4 s with 50 ms steps, 0.2-0.5 s with 250 ms, 0.4-1.8 s with
/// one read per commit.
pub const STEP_EVERY: Duration = Duration::from_millis(250);

/// What searches ask of the indexer: the highest transaction one of them
/// waits for. The indexer commits as soon as it has handed everything up to
/// it to the writer, whatever the pause between commits.
#[derive(Default)]
pub struct Hurry {
    wanted: AtomicU64,
    notify: tokio::sync::Notify,
}

impl Hurry {
    /// A search waits for every transaction up to `tx`.
    pub fn want(&self, tx: Tx) {
        self.wanted.fetch_max(tx, Ordering::AcqRel);
        self.notify.notify_one();
    }

    fn wanted(&self) -> Tx {
        self.wanted.load(Ordering::Acquire)
    }
}

/// The index and its reader, shared by the indexer and the searches.
pub struct IndexState {
    pub index: Index,
    pub reader: IndexReader,
    pub fields: Fields,
}

/// What the indexer reports to the metrics.
#[derive(Clone)]
pub struct IndexerMetrics {
    /// Documents written (added or replaced).
    pub docs: IntCounter,
    /// The watermark, for the lag gauge.
    pub watermark: Arc<AtomicU64>,
}

/// The commit payload.
#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    schema_version: u32,
    watermark: Tx,
}

/// Where the index of a data directory lives.
pub fn index_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("search")
}

/// Writes the index of one data directory.
pub struct Indexer {
    engine: Arc<dyn MemoryStore>,
    state: Arc<IndexState>,
    writer: IndexWriter,
    /// Every change up to it is in the committed index.
    watermark: Tx,
    /// Every change up to it is in the writer, committed or not.
    handed: Tx,
    published: watch::Sender<Tx>,
    staged: HashMap<FactId, IndexDoc>,
    /// Flush the stage at this many documents ([`STAGE_LIMIT`]).
    stage_limit: usize,
    /// Ids of facts first recorded after the watermark that were handed to
    /// the writer since the last commit: a later version of one must delete
    /// the document handed.
    added_fresh: HashSet<FactId>,
    /// Deletes handed to the writer since the index was opened.
    deletes: u64,
    metrics: Option<IndexerMetrics>,
    /// A step or commit failed: what was handed since the last commit was
    /// rolled back, and the next step covers every tenant.
    failed: bool,
    /// The least time between two commits ([`COMMIT_EVERY`]).
    commit_every: Duration,
}

impl Indexer {
    /// Opens the index in `dir`, or rebuilds it (from nothing: the catch-up
    /// then indexes the whole log) when it is missing, unreadable, of another
    /// schema version, or ahead of the store.
    pub fn open(dir: &Path, engine: Arc<dyn MemoryStore>, metrics: Option<IndexerMetrics>) -> Result<(Indexer, watch::Receiver<Tx>)> {
        let fields = Fields::new();
        let last_tx = engine.last_tx().0;
        let opened = match try_open(dir, &fields) {
            Ok((index, reader, wm)) if wm <= last_tx => Some((index, reader, wm)),
            Ok((_, _, wm)) => {
                tracing::warn!(
                    watermark = wm,
                    last_tx,
                    "search index is ahead of the store (the store lost unsynced writes); rebuilding it from the change log"
                );
                None
            }
            Err(Problem::Missing) => {
                tracing::info!(dir = %dir.display(), "no search index yet; building it from the change log");
                None
            }
            Err(Problem::Unusable(reason)) => {
                tracing::warn!(dir = %dir.display(), %reason, "search index unusable; rebuilding it from the change log");
                None
            }
        };
        let (index, reader, watermark) = match opened {
            Some(o) => o,
            None => {
                let (index, reader) = create(dir, &fields)?;
                (index, reader, 0)
            }
        };
        let writer = index.writer_with_num_threads(1, WRITER_MEMORY).context("cannot open the search index writer")?;
        let (published, rx) = watch::channel(watermark);
        if let Some(m) = &metrics {
            m.watermark.store(watermark, Ordering::Relaxed);
        }
        let state = Arc::new(IndexState { index, reader, fields });
        let indexer = Indexer {
            engine,
            state,
            writer,
            watermark,
            handed: watermark,
            published,
            staged: HashMap::new(),
            stage_limit: STAGE_LIMIT,
            added_fresh: HashSet::new(),
            deletes: 0,
            metrics,
            failed: false,
            commit_every: COMMIT_EVERY,
        };
        Ok((indexer, rx))
    }

    pub fn state(&self) -> Arc<IndexState> {
        Arc::clone(&self.state)
    }

    pub fn watermark(&self) -> Tx {
        self.watermark
    }

    /// The least time between two commits while writes keep coming.
    pub fn set_commit_every(&mut self, pause: Duration) {
        self.commit_every = pause;
    }

    /// Indexes the changes of `tenants` (every tenant when `None`) up to
    /// `target`, commits with `target` as the new watermark and reloads the
    /// reader: [`Indexer::hand`], then [`Indexer::commit`].
    pub fn catch_up(&mut self, tenants: Option<BTreeSet<String>>, target: Tx) -> Result<()> {
        self.hand(tenants, target)?;
        self.commit()
    }

    /// Hands the changes of `tenants` (every tenant when `None`, and after
    /// a failure) from the last step up to `target` to the writer, without
    /// committing. On failure everything handed since the last commit is
    /// rolled back.
    pub fn hand(&mut self, tenants: Option<BTreeSet<String>>, target: Tx) -> Result<()> {
        let tenants = match tenants {
            Some(t) if !self.failed => t,
            _ => self.engine.tenants().into_iter().collect(),
        };
        let result = self.read_and_stage(&tenants, target);
        if result.is_err() {
            self.abandon();
        }
        result
    }

    fn read_and_stage(&mut self, tenants: &BTreeSet<String>, target: Tx) -> Result<()> {
        if target <= self.handed {
            return Ok(());
        }
        for tenant in tenants {
            let mut after = self.handed;
            'log: loop {
                let changes = self.engine.changes(tenant, after, LOG_PAGE).context("reading the change log")?;
                let n = changes.len();
                for c in &changes {
                    if c.tx > target {
                        break 'log;
                    }
                    after = c.tx;
                    self.stage_change(c)?;
                }
                if n < LOG_PAGE {
                    break;
                }
            }
        }
        self.flush()?;
        self.handed = target;
        Ok(())
    }

    /// Commits what was handed, with it the new watermark, and reloads the
    /// reader. Nothing to do when nothing was handed since the last commit.
    /// On failure everything handed since the last commit is rolled back.
    pub fn commit(&mut self) -> Result<()> {
        if self.handed <= self.watermark {
            return Ok(());
        }
        let result = self.write_commit();
        match &result {
            Ok(()) => self.failed = false,
            Err(_) => self.abandon(),
        }
        result
    }

    fn write_commit(&mut self) -> Result<()> {
        let target = self.handed;
        let payload = serde_json::to_string(&Payload { schema_version: SCHEMA_VERSION, watermark: target })?;
        let mut prepared = self.writer.prepare_commit().context("preparing the search index commit")?;
        prepared.set_payload(&payload);
        prepared.commit().context("committing the search index")?;
        self.state.reader.reload().context("reloading the search index reader")?;
        self.watermark = target;
        self.added_fresh.clear();
        // The gauge first: a search waiting on `published` may answer, and
        // its caller read `/metrics`, before this thread runs another line.
        if let Some(m) = &self.metrics {
            m.watermark.store(target, Ordering::Relaxed);
        }
        self.published.send_replace(target);
        Ok(())
    }

    /// After a failure: drops what was handed since the last commit, so the
    /// next step starts again from the watermark, over every tenant.
    fn abandon(&mut self) {
        self.failed = true;
        self.staged.clear();
        self.added_fresh.clear();
        self.handed = self.watermark;
        if let Err(e) = self.writer.rollback() {
            tracing::error!(error = %e, "search index rollback failed");
        }
    }

    /// A commit is due: something was handed since the last one and a
    /// search waits for no more than that, or the last one failed, or the
    /// pause since the last one (`None`: none yet) is over.
    fn commit_due(&self, wanted: Tx, last_commit: Option<Instant>) -> bool {
        self.handed > self.watermark
            && ((wanted > self.watermark && self.handed >= wanted)
                || self.failed
                || last_commit.is_none_or(|t| t.elapsed() >= self.commit_every))
    }

    fn stage_change(&mut self, c: &Change) -> Result<()> {
        for e in &c.events {
            match e {
                ChangeEvent::Assert { fact, superseded, continued } => {
                    self.stage(fact)?;
                    for f in superseded.iter().chain(continued) {
                        self.stage(f)?;
                    }
                }
                ChangeEvent::Retract { fact } => self.stage(fact)?,
                ChangeEvent::Cardinality(_) | ChangeEvent::Threshold(_) => {}
            }
        }
        Ok(())
    }

    /// Later versions of a fact replace earlier ones in the stage, so a
    /// batch writes each fact once.
    fn stage(&mut self, f: &Fact) -> Result<()> {
        let doc = IndexDoc::Fact(f.clone());
        self.staged.insert(doc.id(), doc);
        if self.staged.len() >= self.stage_limit {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let fields = &self.state.fields;
        let n = self.staged.len();
        for (id, doc) in self.staged.drain() {
            // A fact first recorded after the watermark has no document to
            // replace, unless one was handed since the last commit (see the
            // module comment). After a failure nothing is taken for granted:
            // a commit may have landed even though a later step failed.
            let first = !self.failed && doc.created_tx() > self.watermark && self.added_fresh.insert(id);
            if !first {
                self.writer.delete_term(fields.id_term(id));
                self.deletes += 1;
            }
            self.writer.add_document(fields.document(&doc)).context("adding a search document")?;
        }
        if let Some(m) = &self.metrics {
            m.docs.inc_by(n as u64);
        }
        Ok(())
    }

    /// Deletes handed to the writer since the index was opened.
    pub fn deletes(&self) -> u64 {
        self.deletes
    }

    /// A smaller stage, so tests can cross its flushes with a few facts.
    #[cfg(test)]
    pub fn set_stage_limit(&mut self, limit: usize) {
        self.stage_limit = limit.max(1);
    }

    /// Documents in the committed index.
    pub fn num_docs(&self) -> u64 {
        self.state.reader.searcher().num_docs()
    }

    /// Follows the commit notices until `stop` flips: first catches up with
    /// the whole log, then hands each step's changes to the writer as their
    /// notices come and commits when due (see the module comment). On stop
    /// it hands what is still announced and commits.
    pub async fn run(self, mut notices: broadcast::Receiver<Committed>, mut stop: watch::Receiver<bool>, hurry: Arc<Hurry>) {
        let target = self.engine.last_tx().0;
        let opened_at = self.watermark;
        let Some(mut me) = self.blocking(move |ix| ix.catch_up(None, target)).await else { return };
        tracing::info!(watermark = me.watermark, documents = me.num_docs(), "search index caught up");
        // A catch-up that committed is the last commit: the writes after it
        // wait out the pause like any others. Only with nothing to catch up
        // is the first write the first after a quiet spell.
        let mut last_commit: Option<Instant> = (me.watermark > opened_at).then(Instant::now);
        let mut last_step: Option<Instant> = None;
        loop {
            let due_at = (me.handed > me.watermark).then(|| {
                let after = last_commit.map_or(Duration::ZERO, |t| me.commit_every.saturating_sub(t.elapsed()));
                tokio::time::Instant::now() + after
            });
            let retry = me.failed;
            let event = tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                n = notices.recv() => Event::Notice(n),
                _ = hurry.notify.notified() => Event::Hurry,
                _ = sleep_until(due_at), if due_at.is_some() => Event::Due,
                _ = tokio::time::sleep(Duration::from_secs(1)), if retry => Event::Retry,
            };
            // What to hand to the writer now: the tenants and the highest tx
            // (None: nothing new).
            let step = match event {
                Event::Notice(Err(broadcast::error::RecvError::Closed)) => break,
                Event::Notice(first) => {
                    // Gather notices until a step is due, unless a search
                    // waits for more than has been handed.
                    let gather = last_step.map_or(Duration::ZERO, |t| STEP_EVERY.saturating_sub(t.elapsed()));
                    if !gather.is_zero() && hurry.wanted() <= me.handed {
                        tokio::select! {
                            _ = stop.wait_for(|s| *s) => {}
                            _ = tokio::time::sleep(gather) => {}
                            _ = hurry.notify.notified() => {}
                        }
                    }
                    Some(drain(first, &mut notices, &*me.engine))
                }
                // A search waits: hand over whatever was announced so far.
                Event::Hurry => waiting(&mut notices, &*me.engine),
                Event::Due => None,
                // A failed step or commit is retried over every tenant.
                Event::Retry => Some((None, me.engine.last_tx().0)),
            };
            if let Some((tenants, target)) = step {
                last_step = Some(Instant::now());
                match me.blocking(move |ix| ix.hand(tenants, target)).await {
                    Some(m) => me = m,
                    None => return,
                }
            }
            if me.commit_due(hurry.wanted(), last_commit) {
                last_commit = Some(Instant::now());
                match me.blocking(|ix| ix.commit()).await {
                    Some(m) => me = m,
                    None => return,
                }
            }
        }
        // Writes have stopped: hand whatever was announced (everything, after
        // a failure), then commit.
        let (tenants, target) = match waiting(&mut notices, &*me.engine) {
            _ if me.failed => (None, me.engine.last_tx().0),
            Some(step) => step,
            None => (Some(BTreeSet::new()), me.handed),
        };
        me.blocking(move |ix| {
            ix.hand(tenants, target)?;
            ix.commit()
        })
        .await;
    }

    /// Runs `work` on the blocking pool, logging its failure (the next step
    /// retries); `None` if the task itself died.
    async fn blocking(mut self, work: impl FnOnce(&mut Indexer) -> Result<()> + Send + 'static) -> Option<Indexer> {
        let joined = tokio::task::spawn_blocking(move || {
            if let Err(e) = work(&mut self) {
                tracing::error!(error = format!("{e:#}"), "search indexing failed; retrying");
            }
            self
        })
        .await;
        match joined {
            Ok(me) => Some(me),
            Err(e) => {
                tracing::error!(error = %e, "search indexer stopped");
                None
            }
        }
    }
}

/// What woke the indexer.
enum Event {
    Notice(Result<Committed, broadcast::error::RecvError>),
    /// A search waits ([`Hurry`]).
    Hurry,
    /// A commit is due.
    Due,
    /// The last step or commit failed a second ago.
    Retry,
}

/// Sleeps until `at`; never returns for `None` (a branch disabled by its guard).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// [`drain`] of the notices already waiting; `None` when there are none.
fn waiting(notices: &mut broadcast::Receiver<Committed>, engine: &dyn MemoryStore) -> Option<(Option<BTreeSet<String>>, Tx)> {
    let first = match notices.try_recv() {
        Ok(n) => Ok(n),
        Err(broadcast::error::TryRecvError::Lagged(n)) => Err(broadcast::error::RecvError::Lagged(n)),
        Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed) => return None,
    };
    Some(drain(first, notices, engine))
}

/// The tenants and the highest tx of `first` and every notice already
/// waiting. A lagged receiver lost notices: then every tenant, up to the
/// engine's last tx.
pub(crate) fn drain(
    first: Result<Committed, broadcast::error::RecvError>,
    notices: &mut broadcast::Receiver<Committed>,
    engine: &dyn MemoryStore,
) -> (Option<BTreeSet<String>>, Tx) {
    let mut tenants = BTreeSet::new();
    let mut target = 0;
    let mut lagged = false;
    let mut note = |n: Result<Committed, ()>| match n {
        Ok(c) => {
            tenants.insert(c.tenant.to_string());
            target = target.max(c.tx);
        }
        Err(()) => lagged = true,
    };
    note(first.map_err(|_| ()));
    loop {
        match notices.try_recv() {
            Ok(c) => note(Ok(c)),
            Err(broadcast::error::TryRecvError::Lagged(_)) => note(Err(())),
            Err(_) => break,
        }
    }
    if lagged {
        (None, engine.last_tx().0.max(target))
    } else {
        (Some(tenants), target)
    }
}

enum Problem {
    Missing,
    Unusable(String),
}

fn register_tokenizer(index: &Index) {
    index.tokenizers().register(TOKENIZER, TextAnalyzer::from(WhitespaceTokenizer::default()));
}

fn reader(index: &Index) -> tantivy::Result<IndexReader> {
    index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()
}

fn try_open(dir: &Path, fields: &Fields) -> Result<(Index, IndexReader, Tx), Problem> {
    if !dir.join("meta.json").exists() {
        return Err(Problem::Missing);
    }
    let unusable = |e: &dyn std::fmt::Display| Problem::Unusable(e.to_string());
    let directory = MmapDirectory::open(dir).map_err(|e| unusable(&e))?;
    let index = Index::open(directory).map_err(|e| unusable(&e))?;
    let meta = index.load_metas().map_err(|e| unusable(&e))?;
    let payload: Payload = match meta.payload.as_deref().map(serde_json::from_str) {
        Some(Ok(p)) => p,
        Some(Err(e)) => return Err(unusable(&format!("unreadable commit payload: {e}"))),
        None => return Err(Problem::Unusable("no commit payload".into())),
    };
    if payload.schema_version != SCHEMA_VERSION || index.schema() != fields.schema {
        return Err(Problem::Unusable(format!(
            "schema version {} (this server writes {SCHEMA_VERSION})",
            payload.schema_version
        )));
    }
    register_tokenizer(&index);
    let reader = reader(&index).map_err(|e| unusable(&e))?;
    Ok((index, reader, payload.watermark))
}

/// A new, empty index in `dir` (whatever was there is removed).
fn create(dir: &Path, fields: &Fields) -> Result<(Index, IndexReader)> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let directory = MmapDirectory::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    let index = Index::create(directory, fields.schema.clone(), Default::default())
        .with_context(|| format!("cannot create the search index in {}", dir.display()))?;
    register_tokenizer(&index);
    let reader = reader(&index).context("cannot open the search index reader")?;
    Ok((index, reader))
}

/// What a rebuild did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    pub facts: u64,
    pub tenants: usize,
    pub watermark: Tx,
}

/// Deletes the index of `data_dir` and builds it again from the change log.
pub fn rebuild(data_dir: &Path, engine: Arc<dyn MemoryStore>) -> Result<Rebuilt> {
    let dir = index_dir(data_dir);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    let tenants = engine.tenants().len();
    let target = engine.last_tx().0;
    let (mut indexer, _) = Indexer::open(&dir, engine, None)?;
    indexer.catch_up(None, target)?;
    let facts = indexer.num_docs();
    let watermark = indexer.watermark;
    indexer.writer.wait_merging_threads().context("finishing the search index merges")?;
    Ok(Rebuilt { facts, tenants, watermark })
}
