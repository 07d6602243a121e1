-- A root attribute's rows carry their trace's step, and an index by (run, key, step)
-- reads one key's values over a run in step order without visiting the traces: a
-- distribution or the group lens over a whole run reads two ranges of these indexes
-- (the value, the split label or group key) and matches them by trace in the server
-- (store/src/step_values.rs), where a join cost three descents a trace. Kept by the
-- trace upsert, and by the trigger below when a trace's step changes later.
ALTER TABLE trace_numbers ADD COLUMN step INTEGER;
ALTER TABLE trace_texts ADD COLUMN step INTEGER;

UPDATE trace_numbers SET step = (
    SELECT t.step FROM traces t
     WHERE t.run_id = trace_numbers.run_id AND t.trace_id = trace_numbers.trace_id);
UPDATE trace_texts SET step = (
    SELECT t.step FROM traces t
     WHERE t.run_id = trace_texts.run_id AND t.trace_id = trace_texts.trace_id);

CREATE INDEX trace_numbers_step ON trace_numbers (run_id, key, step, trace_id, value);
CREATE INDEX trace_texts_step ON trace_texts (run_id, key, step, value, trace_id);

CREATE TRIGGER traces_step_values AFTER UPDATE OF step ON traces
WHEN old.step IS NOT new.step
BEGIN
    UPDATE trace_numbers SET step = new.step
     WHERE run_id = new.run_id AND trace_id = new.trace_id;
    UPDATE trace_texts SET step = new.step
     WHERE run_id = new.run_id AND trace_id = new.trace_id;
END;
