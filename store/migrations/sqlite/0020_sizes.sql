-- What each trace's and run's rows weigh, counted at ingest (store/src/ingest/sizes.rs,
-- whose weights the sums below repeat): a read turns a run's share of the counted
-- weight into its share of the database's size (store/src/sizes.rs). Rows stored
-- before this version are counted here once.
ALTER TABLE traces ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deleted_runs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;

UPDATE traces SET bytes = 200 + 3 * length(trace_id) + length(CAST(attributes AS BLOB)) + COALESCE((
    SELECT SUM(160 + 3 * (length(s.trace_id) + length(s.span_id)) + length(CAST(s.name AS BLOB))
               + length(CAST(s.attributes AS BLOB)) + length(CAST(s.metrics AS BLOB))
               + length(CAST(s.links AS BLOB))
               + 3 * (COALESCE(length(CAST(s.input AS BLOB)), 0)
                      + COALESCE(length(CAST(s.output AS BLOB)), 0)
                      + COALESCE(length(CAST(s.error AS BLOB)), 0)) / 2)
      FROM spans s
     WHERE s.run_id = traces.run_id AND s.trace_id = traces.trace_id), 0);

UPDATE runs SET bytes = COALESCE((
    SELECT SUM(t.bytes) FROM traces t WHERE t.run_id = runs.run_id), 0) + COALESCE((
    SELECT SUM(40 + length(CAST(m.key AS BLOB))) FROM metric_points m WHERE m.run_id = runs.run_id), 0);
