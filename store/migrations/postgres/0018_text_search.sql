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
