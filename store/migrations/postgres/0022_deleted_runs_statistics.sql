-- Statistics for `deleted_runs`, which is nearly always empty. Never analyzed, the
-- planner took it for 750 rows, guessed that excluding a deleted run's traces
-- (trace_list.rs) leaves almost none, and read a project-wide list by sorting the
-- whole project instead of reading its index in order: 833 ms against 0.4 ms for a
-- body search over 1M traces. An empty table once analyzed is known to be empty.
ANALYZE deleted_runs;
