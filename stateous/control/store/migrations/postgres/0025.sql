-- Version 0025: a claim row per request id. Each grant keeps the request id it was asked
-- under in `claim_requests`, one row per task (its last grant), so that several asks of
-- one supervisor can be in flight at once, each granted again when sent again after a lost
-- answer. The supervisor's row of `claims` keeps only when it last claimed and sent a
-- heartbeat; the grant of each row kept there moves to `claim_requests`.

CREATE TABLE claim_requests (
    task_id BIGINT PRIMARY KEY,
    supervisor TEXT COLLATE "C" NOT NULL,
    request TEXT COLLATE "C" NOT NULL,
    attempt INTEGER NOT NULL
);
CREATE INDEX claim_requests_asked ON claim_requests (supervisor, request);
INSERT INTO claim_requests (task_id, supervisor, request, attempt)
    SELECT task_id, supervisor, request, attempt FROM claims
    WHERE task_id IS NOT NULL AND request IS NOT NULL AND attempt IS NOT NULL
    ON CONFLICT DO NOTHING;
-- The row of `claims` is made anew without the three columns, so that its columns keep
-- the numbers of a new database's.
CREATE TABLE claims_kept (
    supervisor TEXT PRIMARY KEY,
    claimed_at TEXT COLLATE "C",
    heartbeat_at TEXT COLLATE "C",
    labels TEXT
);
INSERT INTO claims_kept (supervisor, claimed_at, heartbeat_at, labels)
    SELECT supervisor, claimed_at, heartbeat_at, labels FROM claims;
DROP TABLE claims;
ALTER TABLE claims_kept RENAME TO claims;
ALTER INDEX claims_kept_pkey RENAME TO claims_pkey;
CREATE INDEX claims_claimed ON claims (claimed_at);
CREATE INDEX claims_heartbeat ON claims (heartbeat_at);
