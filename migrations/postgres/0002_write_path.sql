-- What every assert reads and writes, made cheap.
--
-- The live (active and candidate) facts of a subject and predicate: what an
-- assert reads before it takes over. Without this index an assert on a key
-- that has changed value many times walks the key's whole history of closed
-- facts through facts_by_subject.
CREATE INDEX facts_live ON facts (tenant_id, subject, predicate, id)
    WHERE status IN ('active', 'candidate');

-- The exclusion constraint compares one 128-bit key instead of four columns,
-- three of them text: a GiST index over text keeps ranges of strings in its
-- pages and compares them on every insert, and cost every assert more than
-- the rest of its transaction. The key is a digest of the tenant, the
-- subject and predicate (each with its length, so no two pairs run
-- together into the same text) and the slot (fixed-form: '' or 'm' and hex).
ALTER TABLE facts ADD COLUMN slot_key uuid GENERATED ALWAYS AS (
    md5(tenant_id::text || '/' || length(subject)::text || '/' || subject
        || length(predicate)::text || '/' || predicate || '/' || slot)::uuid
) STORED;
ALTER TABLE facts DROP CONSTRAINT one_active_value;
ALTER TABLE facts ADD CONSTRAINT one_active_value EXCLUDE USING gist (
    slot_key WITH =,
    int8range(valid_from, valid_until) WITH &&
) WHERE (status = 'active');
