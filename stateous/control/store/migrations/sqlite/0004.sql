-- Version 0004: the credentials of those who may call the API, each with its role.
-- Only the SHA-256 of a secret is kept; the HMAC key of a signed webhook is kept as
-- it is, since checking a signature needs it.

CREATE TABLE credentials (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('operator', 'supervisor', 'webhook')),
    events TEXT,
    may_start INTEGER NOT NULL DEFAULT 0,
    hmac_key TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    last_used TEXT,
    revoked_at TEXT
);
