-- A revoked key is kept, marked with when, so `keys list` still says who had access.
ALTER TABLE api_keys ADD COLUMN revoked_us BIGINT;
