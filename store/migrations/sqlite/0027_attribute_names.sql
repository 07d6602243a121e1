-- A span's attribute names repeat on every span of its kind, and were most of a
-- span row's bytes. Each name is now kept once here, and a span's attributes are
-- keyed by its code (decimal text) instead. Traces' root attributes keep their
-- names: filters and charts read those by name all the time.
CREATE TABLE attribute_names (
    code INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);

INSERT INTO attribute_names (name)
    SELECT DISTINCT a.key FROM spans s, json_each(s.attributes) AS a;

-- `->` hands each value over as its stored JSON text, so numbers keep their digits.
-- A path cannot name a key holding a quote or a backslash: those values are
-- rebuilt from their type instead. CROSS JOIN keeps the span's own order of names.
UPDATE spans SET attributes = (
    SELECT json_group_object(CAST(n.code AS TEXT), CASE
             WHEN instr(a.key, '"') = 0 AND instr(a.key, '\') = 0
               THEN spans.attributes -> a.fullkey
             WHEN a.type IN ('object', 'array') THEN json(a.value)
             WHEN a.type = 'true' THEN json('true')
             WHEN a.type = 'false' THEN json('false')
             ELSE a.value END)
      FROM json_each(spans.attributes) AS a
     CROSS JOIN attribute_names n ON n.name = a.key)
 WHERE attributes <> '{}';
