-- tempora on PostgreSQL, schema version 1.
--
-- Facts are rows with their valid interval (valid_from, valid_until) and
-- their record time (tx, recorded_at), not blobs: `facts` holds the latest
-- version of every fact (what current reads and takeovers work on) and
-- `fact_versions` every version ever written (history and `as_of` reads).
-- The database itself refuses the states the bitemporal rules forbid: an
-- interval that ends before it starts, two active facts holding the same
-- slot of a subject and predicate over overlapping valid time (the slot is
-- the whole pair under cardinality one and strict, the pair and the object
-- under many), a status or cardinality that does not exist.
--
-- Times are milliseconds since the Unix epoch (bigint), as on every other
-- surface of tempora. Names sort byte-wise (COLLATE "C"), as the embedded
-- engine's keys do, so pages come in the same order on both stores.
-- Objects and properties are JSON text as tempora writes it (keys sorted,
-- numbers as parsed): equal values have equal text, and every number comes
-- back exactly as it went in. Applied by src/store/postgres/schema.rs under an
-- advisory lock, in one transaction, recorded in tempora_schema.

-- int8 equality in the exclusion constraint below.
CREATE EXTENSION IF NOT EXISTS btree_gist;

-- The store's clock: its last committed transaction and that
-- transaction's record time. Every commit group locks this one row, from
-- before it takes its first tx number until it commits, so transactions
-- commit in tx order across every replica, and recorded_at (the database's
-- clock, never below the last one) never decreases with tx.
CREATE TABLE clock (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    last_tx bigint NOT NULL CHECK (last_tx >= 0),
    last_recorded_at bigint NOT NULL
);
INSERT INTO clock (last_tx, last_recorded_at) VALUES (0, 0);

CREATE TABLE tenants (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text COLLATE "C" NOT NULL UNIQUE CHECK (name <> ''),
    -- The tenant's last committed transaction and its record time.
    last_tx bigint NOT NULL DEFAULT 0 CHECK (last_tx >= 0),
    last_recorded_at bigint NOT NULL DEFAULT 0,
    -- The confidence at or above which an asserted fact is active.
    threshold double precision NOT NULL CHECK (threshold >= 0 AND threshold <= 1),
    -- Facts by their latest status, and distinct subjects and predicates
    -- that ever had a fact: kept with each write, as counting would take
    -- a scan of the tenant.
    active bigint NOT NULL DEFAULT 0 CHECK (active >= 0),
    candidate bigint NOT NULL DEFAULT 0 CHECK (candidate >= 0),
    superseded bigint NOT NULL DEFAULT 0 CHECK (superseded >= 0),
    retracted bigint NOT NULL DEFAULT 0 CHECK (retracted >= 0),
    subjects bigint NOT NULL DEFAULT 0 CHECK (subjects >= 0),
    predicate_count bigint NOT NULL DEFAULT 0 CHECK (predicate_count >= 0)
);

-- Facts of each source by their latest status (facts without a source are
-- not counted).
CREATE TABLE source_stats (
    tenant_id integer NOT NULL REFERENCES tenants (id),
    source text COLLATE "C" NOT NULL,
    active bigint NOT NULL DEFAULT 0 CHECK (active >= 0),
    candidate bigint NOT NULL DEFAULT 0 CHECK (candidate >= 0),
    superseded bigint NOT NULL DEFAULT 0 CHECK (superseded >= 0),
    retracted bigint NOT NULL DEFAULT 0 CHECK (retracted >= 0),
    PRIMARY KEY (tenant_id, source)
);

CREATE TABLE predicates (
    tenant_id integer NOT NULL REFERENCES tenants (id),
    name text COLLATE "C" NOT NULL CHECK (name <> ''),
    cardinality text NOT NULL CHECK (cardinality IN ('one', 'many', 'strict')),
    PRIMARY KEY (tenant_id, name)
);

-- Every version of every fact: a version is written by one transaction and
-- holds until the fact's next version.
CREATE TABLE fact_versions (
    tenant_id integer NOT NULL REFERENCES tenants (id),
    id uuid NOT NULL,
    tx bigint NOT NULL CHECK (tx > 0),
    subject text COLLATE "C" NOT NULL CHECK (subject <> ''),
    predicate text COLLATE "C" NOT NULL CHECK (predicate <> ''),
    object text NOT NULL,
    confidence double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    source text,
    properties text,
    valid_from bigint NOT NULL,
    valid_until bigint,
    recorded_at bigint NOT NULL,
    status text NOT NULL CHECK (status IN ('active', 'candidate', 'superseded', 'retracted')),
    created_tx bigint NOT NULL,
    created_at bigint NOT NULL,
    supersedes uuid[] NOT NULL DEFAULT '{}',
    superseded_by uuid,
    continues uuid,
    continued_by uuid[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, id, tx),
    -- A closed interval may be empty (a fact wholly taken over), never inverted.
    CHECK (valid_until IS NULL OR valid_until >= valid_from),
    CHECK (created_tx <= tx AND created_at <= recorded_at)
);
-- The versions of a subject (and predicate) up to a transaction: `as_of` reads.
CREATE INDEX fact_versions_by_subject ON fact_versions (tenant_id, subject, predicate, tx);
-- What a transaction wrote: the change feed resolves its events here.
CREATE INDEX fact_versions_by_tx ON fact_versions (tenant_id, tx);

-- The latest version of each fact (a copy of its newest fact_versions row):
-- the same columns and checks, and what only the latest version needs.
CREATE TABLE facts (
    LIKE fact_versions INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    -- What an active fact holds exclusively over its interval: '' (the whole
    -- subject and predicate) under cardinality one and strict, 'm' and a
    -- digest of its object under many. Set from the predicate's cardinality when the
    -- fact is asserted; the remainder of a closed fact keeps the fact's slot.
    slot text NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id) REFERENCES tenants (id),
    FOREIGN KEY (tenant_id, id, tx) REFERENCES fact_versions (tenant_id, id, tx),
    -- No two active facts hold one slot over overlapping valid time.
    CONSTRAINT one_active_value EXCLUDE USING gist (
        tenant_id WITH =,
        subject WITH =,
        predicate WITH =,
        slot WITH =,
        int8range(valid_from, valid_until) WITH &&
    ) WHERE (status = 'active')
);
-- Current reads by subject (and predicate), by predicate, and by object.
CREATE INDEX facts_by_subject ON facts (tenant_id, subject, predicate, id);
CREATE INDEX facts_by_predicate ON facts (tenant_id, predicate, subject, id);
CREATE INDEX facts_by_object ON facts (tenant_id, md5(object), predicate, subject, id);
-- Superseded facts still valid after a time: the shadows a takeover must close.
CREATE INDEX facts_shadows ON facts (tenant_id, subject, predicate, valid_until)
    WHERE status = 'superseded';

-- The change log: one row per committed transaction of a tenant. The feed
-- (SSE, the search index, embeddings, the monitor) follows this table on
-- every replica; NOTIFY only wakes them.
CREATE TABLE changes (
    tenant_id integer NOT NULL REFERENCES tenants (id),
    tx bigint NOT NULL CHECK (tx > 0),
    recorded_at bigint NOT NULL,
    -- The transaction's events (assert, retract, cardinality, threshold),
    -- as the embedded engine logs them.
    events jsonb NOT NULL,
    PRIMARY KEY (tenant_id, tx)
);
-- A record time to the last transaction recorded by then (`as_of`).
CREATE INDEX changes_by_time ON changes (recorded_at, tx);

-- The answer stored with a keyed write, in the write's own transaction: a
-- key replayed on any replica gets the same answer.
CREATE TABLE idempotency (
    tenant_id integer NOT NULL REFERENCES tenants (id),
    key bytea NOT NULL,
    reply bytea NOT NULL,
    tx bigint NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

-- The service's own records (artifacts, conversations, tools, alerts,
-- reports, connectors, sessions), by key.
CREATE TABLE aux (
    key bytea PRIMARY KEY,
    value bytea NOT NULL
);

-- Scheduled runs taken by one server (a report due at a time, a connector's
-- next pull, an alert evaluation): the first to insert a run's key runs it.
CREATE TABLE claims (
    key bytea PRIMARY KEY,
    claimed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX claims_by_age ON claims (claimed_at);
