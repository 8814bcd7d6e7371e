-- Version 0025: a claim row per request id. Each grant keeps the request id it was asked
-- under in `claim_requests`, one row per task (its last grant), so that several asks of
-- one supervisor can be in flight at once, each granted again when sent again after a lost
-- answer. The supervisor's row of `claims` keeps only when it last claimed and sent a
-- heartbeat; the grant of each row kept there moves to `claim_requests`.

CREATE TABLE claim_requests (
    task_id INTEGER PRIMARY KEY,
    supervisor TEXT NOT NULL,
    request TEXT NOT NULL,
    attempt INTEGER NOT NULL
);
CREATE INDEX claim_requests_asked ON claim_requests (supervisor, request);
INSERT INTO claim_requests (task_id, supervisor, request, attempt)
    SELECT task_id, supervisor, request, attempt FROM claims
    WHERE task_id IS NOT NULL AND request IS NOT NULL AND attempt IS NOT NULL
    ON CONFLICT DO NOTHING;
ALTER TABLE claims DROP COLUMN request;
ALTER TABLE claims DROP COLUMN task_id;
ALTER TABLE claims DROP COLUMN attempt;
