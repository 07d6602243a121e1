-- Chinese, Japanese and Korean characters became words of their own
-- (wire/src/text.rs), where a run of them was one word before: every stored body
-- is indexed again, in the background, from the first span on
-- (store/src/body_text.rs, `backfill_step`), each document replacing its old words.
INSERT INTO text_backfill (id, run_id, trace_id, span_id)
    SELECT 1, '', '', '' WHERE EXISTS (SELECT 1 FROM spans)
    AND NOT EXISTS (SELECT 1 FROM text_backfill);
UPDATE text_backfill SET run_id = '', trace_id = '', span_id = '';
