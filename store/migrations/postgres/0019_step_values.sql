-- A root attribute's rows carry their trace's step, and an index by (run, key, step)
-- reads one key's values over a run in step order without visiting the traces: a
-- distribution or the group lens over a whole run reads two ranges of these indexes
-- (the value, the split label or group key) and matches them by trace in the server
-- (store/src/step_values.rs), where a join cost a lookup a trace. Kept by the trace
-- upsert, and by the trigger below when a trace's step changes later.
ALTER TABLE trace_numbers ADD COLUMN step BIGINT;
ALTER TABLE trace_texts ADD COLUMN step BIGINT;

UPDATE trace_numbers n SET step = t.step
  FROM traces t
 WHERE t.run_id = n.run_id AND t.trace_id = n.trace_id AND t.step IS NOT NULL;
UPDATE trace_texts x SET step = t.step
  FROM traces t
 WHERE t.run_id = x.run_id AND t.trace_id = x.trace_id AND t.step IS NOT NULL;

CREATE INDEX trace_numbers_step ON trace_numbers (run_id, key, step, trace_id) INCLUDE (value);
CREATE INDEX trace_texts_step ON trace_texts (run_id, key, step, value, trace_id);

CREATE FUNCTION trace_values_step() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE trace_numbers SET step = NEW.step
     WHERE run_id = NEW.run_id AND trace_id = NEW.trace_id;
    UPDATE trace_texts SET step = NEW.step
     WHERE run_id = NEW.run_id AND trace_id = NEW.trace_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER traces_step_values AFTER UPDATE OF step ON traces
FOR EACH ROW WHEN (OLD.step IS DISTINCT FROM NEW.step)
EXECUTE FUNCTION trace_values_step();
