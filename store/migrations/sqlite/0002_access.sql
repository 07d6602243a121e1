-- API keys created with `treeline keys create`. Only a SHA-256 digest of each key
-- is kept: keys are 256 random bits, so a slow hash would add nothing.
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL,
    project      TEXT,
    digest       TEXT NOT NULL,
    created_us   INTEGER NOT NULL,
    last_used_us INTEGER
);
CREATE UNIQUE INDEX api_keys_digest ON api_keys (digest);

-- Browser sessions, by a digest of the cookie's token. `key_id` is an api_keys id,
-- or `config:` and a digest prefix for a key given to `serve`.
CREATE TABLE sessions (
    digest     TEXT PRIMARY KEY,
    key_id     TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    expires_us INTEGER NOT NULL
);
CREATE INDEX sessions_key ON sessions (key_id);
CREATE INDEX sessions_expiry ON sessions (expires_us);
