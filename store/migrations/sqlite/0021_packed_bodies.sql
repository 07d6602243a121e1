-- Inputs and outputs of 512 bytes or more are kept as zstd frames (store/src/packed.rs):
-- the text column is then null and the frame sits here. Bodies stored before stay text.
ALTER TABLE spans ADD COLUMN input_z BLOB;
ALTER TABLE spans ADD COLUMN output_z BLOB;
