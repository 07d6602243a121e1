-- The words of span bodies, for `text=` searches (store/src/body_text.rs; what a
-- word is: wire/src/text.rs). One row per body (`field`: 0 input, 1 output,
-- 2 error), its words folded by the server and given as a tsvector with their
-- positions, beside the lexemes of its run and project. A span's rows go with it.
CREATE TABLE span_words (
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id  TEXT NOT NULL,
    field    SMALLINT NOT NULL,
    words    TSVECTOR NOT NULL,
    PRIMARY KEY (run_id, trace_id, span_id, field),
    FOREIGN KEY (run_id, trace_id, span_id) REFERENCES spans ON DELETE CASCADE
);
CREATE INDEX span_words_search ON span_words USING gin (words);
-- Spans stored before this index have their words indexed in the background, from
-- this key on (store/src/body_text.rs, `backfill_step`); the row goes when it is done.
CREATE TABLE text_backfill (
    id       INTEGER PRIMARY KEY,
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id  TEXT NOT NULL
);
INSERT INTO text_backfill (id, run_id, trace_id, span_id)
    SELECT 1, '', '', '' WHERE EXISTS (SELECT 1 FROM spans);
