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
-- surface of tempora. Applied by src/store/postgres/schema.rs under an
-- advisory lock, in one transaction, recorded in tempora_schema.

-- int8 equality in the exclusion constraint below.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE tenants (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL UNIQUE CHECK (name <> ''),
    -- The tenant's last committed transaction and its record time. Every
    -- write of the tenant updates this row, so writes of one tenant take its
    -- lock in turn: tx numbers follow commit order, and recorded_at never
    -- decreases with them, whichever replica writes.
    last_tx bigint NOT NULL DEFAULT 0 CHECK (last_tx >= 0),
    last_recorded_at bigint NOT NULL DEFAULT 0,
    -- The confidence at or above which an asserted fact is active.
    threshold double precision NOT NULL CHECK (threshold >= 0 AND threshold <= 1)
);

CREATE TABLE predicates (
    tenant_id integer NOT NULL REFERENCES tenants (id),
    name text NOT NULL CHECK (name <> ''),
    cardinality text NOT NULL CHECK (cardinality IN ('one', 'many', 'strict')),
    PRIMARY KEY (tenant_id, name)
);

-- Every version of every fact: a version is written by one transaction and
-- holds until the fact's next version.
CREATE TABLE fact_versions (
    tenant_id integer NOT NULL REFERENCES tenants (id),
    id uuid NOT NULL,
    tx bigint NOT NULL CHECK (tx > 0),
    subject text NOT NULL CHECK (subject <> ''),
    predicate text NOT NULL CHECK (predicate <> ''),
    object jsonb NOT NULL,
    confidence double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    source text,
    properties jsonb,
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

-- The latest version of each fact (a copy of its newest fact_versions row).
CREATE TABLE facts (
    tenant_id integer NOT NULL REFERENCES tenants (id),
    id uuid NOT NULL,
    tx bigint NOT NULL CHECK (tx > 0),
    subject text NOT NULL CHECK (subject <> ''),
    predicate text NOT NULL CHECK (predicate <> ''),
    object jsonb NOT NULL,
    confidence double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    source text,
    properties jsonb,
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
    -- What an active fact holds exclusively over its interval: '' (the whole
    -- subject and predicate) under cardinality one and strict, the md5 of
    -- its object under many. Set from the predicate's cardinality when the
    -- version is written.
    slot text NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, id, tx) REFERENCES fact_versions (tenant_id, id, tx),
    CHECK (valid_until IS NULL OR valid_until >= valid_from),
    CHECK (created_tx <= tx AND created_at <= recorded_at),
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
CREATE INDEX facts_by_object ON facts (tenant_id, md5(object::text), predicate);
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
CREATE INDEX changes_by_time ON changes (tenant_id, recorded_at);

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
