-- Inputs and outputs of 512 bytes or more are kept as zstd frames (store/src/packed.rs):
-- the text column is then null and the frame sits here. Bodies stored before stay text.
-- A frame does not shrink again: TOAST is told not to try.
ALTER TABLE spans ADD COLUMN input_z BYTEA;
ALTER TABLE spans ADD COLUMN output_z BYTEA;
ALTER TABLE spans ALTER COLUMN input_z SET STORAGE EXTERNAL;
ALTER TABLE spans ALTER COLUMN output_z SET STORAGE EXTERNAL;
