-- A 64-bit fingerprint of each stored body (0: no body), taken at ingest, so an
-- alignment compares bodies without reading them. Spans stored before this column
-- hold NULL and are compared as text.
ALTER TABLE spans ADD COLUMN input_hash INTEGER;
ALTER TABLE spans ADD COLUMN output_hash INTEGER;
ALTER TABLE spans ADD COLUMN error_hash INTEGER;
