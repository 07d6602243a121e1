-- What people and programs found about a trace or a span: one row per target, name
-- and author. span_id is '' for the trace itself and author '' on a server without
-- keys, so that the key is never NULL and a repeat meets the row it updates.
-- A value is in `number` (booleans as 0 and 1) or in `text`, as `kind` says.
CREATE TABLE annotations (
    run_id      TEXT NOT NULL,
    trace_id    TEXT NOT NULL,
    span_id     TEXT NOT NULL,
    name        TEXT NOT NULL,
    author      TEXT NOT NULL,
    author_name TEXT NOT NULL,
    project     TEXT NOT NULL,
    source      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    number      REAL,
    text        TEXT,
    comment     TEXT,
    created_us  INTEGER NOT NULL,
    updated_us  INTEGER NOT NULL,
    PRIMARY KEY (run_id, trace_id, span_id, name, author)
);
-- A name's type within a run, and its values in order: the filters' and sorts' way in.
CREATE INDEX annotations_run_name ON annotations (run_id, name, number, text, trace_id);
