-- The live (active and candidate) facts of a subject and predicate: what
-- every assert reads before it takes over. Without it an assert on a key
-- that has changed value many times walks the key's whole history of
-- closed facts through facts_by_subject.
CREATE INDEX facts_live ON facts (tenant_id, subject, predicate, id)
    WHERE status IN ('active', 'candidate');
