-- Version 0015: every graph file served is kept whole, by its checksum, with when it was
-- first and last served; each token names the graph it started on (a child, its parent's).
-- The tokens already kept started on the graph on record in `control_plane`.

CREATE TABLE graphs (
    checksum TEXT PRIMARY KEY,
    document TEXT NOT NULL,
    first_served_at TEXT NOT NULL,
    last_served_at TEXT NOT NULL
);
ALTER TABLE tokens ADD COLUMN checksum TEXT;
UPDATE tokens SET checksum = (SELECT checksum FROM control_plane WHERE id = 1);
CREATE INDEX tokens_live_checksum ON tokens (checksum)
    WHERE status = 'active' OR status = 'paused';
