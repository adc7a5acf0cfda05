-- The live facts of a subject and predicate holding one value: what an
-- assert under cardinality `many` reads before it takes over (only a copy
-- of the same value can be taken over). Through facts_live it would read
-- every value of the subject: a subject holding a hundred thousand values
-- (an agent's `User:me`, a conversation stored turn by turn) made each
-- assert on it read them all.
CREATE INDEX facts_live_values ON facts (tenant_id, subject, predicate, md5(object))
    WHERE status IN ('active', 'candidate');
