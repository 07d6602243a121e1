-- Siblings list in the order the client created them (the SDK numbers them), or in
-- their order of arrival. Spans stored before this column hold 0, so they keep
-- listing by start time.
ALTER TABLE spans ADD COLUMN ordinal BIGINT NOT NULL DEFAULT 0;

DROP INDEX spans_children;
CREATE INDEX spans_children ON spans (run_id, trace_id, tree_parent, ordinal, start_us, span_id)
    WHERE tree_parent IS NOT NULL;
