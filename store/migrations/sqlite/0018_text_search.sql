-- The words of span bodies, for `text=` searches (store/src/body_text.rs; what a
-- word is: wire/src/text.rs). One document per body: `span_docs` names its span and
-- which body it is (0 input, 1 output, 2 error); `span_words` indexes its words,
-- folded by the server, and the tokens of its run and project (`scope`), keeping
-- neither text. Its own key, not the spans' rowids, which a VACUUM may renumber.
CREATE TABLE span_docs (
    doc      INTEGER PRIMARY KEY,
    run_id   TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id  TEXT NOT NULL,
    field    INTEGER NOT NULL
);
CREATE UNIQUE INDEX span_docs_key ON span_docs (run_id, trace_id, span_id, field);
-- The words arrive folded and split; `ascii` then keeps every non-ASCII letter.
CREATE VIRTUAL TABLE span_words USING fts5 (
    words, scope, content = '', contentless_delete = 1, tokenize = 'ascii'
);
-- A span's documents go with it however it is deleted (a run, retention), and a
-- document's words with the document.
CREATE TRIGGER span_docs_follow AFTER DELETE ON spans BEGIN
    DELETE FROM span_docs
     WHERE run_id = old.run_id AND trace_id = old.trace_id AND span_id = old.span_id;
END;
CREATE TRIGGER span_words_follow AFTER DELETE ON span_docs BEGIN
    DELETE FROM span_words WHERE rowid = old.doc;
END;
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
