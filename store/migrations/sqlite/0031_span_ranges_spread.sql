-- The rows of `span_ranges` whose least and greatest differ, by least value and
-- holding both. A trace's row is most often one value (a name on one of its
-- spans, or the same value on each): a number's equality finds those by the
-- greatest value alone, and only the rows whose values differ by a range of the
-- least, where a read by least and greatest together scanned most of the name's
-- rows (61–67 ms p95 on `bench rollouts`).
CREATE INDEX span_ranges_spread ON span_ranges (run_id, code, kind, lo, trace_id, hi)
    WHERE lo < hi;
