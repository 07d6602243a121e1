-- A trace's numbers are read by trace through the primary key, which now carries
-- the value for index-only reads. Its copy for that (trace_numbers_trace) goes:
-- one index entry fewer written for each number of a root span.
ALTER TABLE trace_numbers DROP CONSTRAINT trace_numbers_pkey,
    ADD CONSTRAINT trace_numbers_pkey PRIMARY KEY (run_id, trace_id, key) INCLUDE (value);
DROP INDEX trace_numbers_trace;
