-- Version 0005: the listings of tokens, tasks and supervisors (GET /tokens, /tasks,
-- /supervisors). Each index serves one filter of a listing in the listing's own order,
-- so that a page reads its rows and no more: tokens by status and state, most recently
-- moved first (ties by id); live tasks by status, state and supervisor, oldest first.
-- A supervisor's claim row keeps when it last claimed and last sent a heartbeat.

ALTER TABLE claims ADD COLUMN claimed_at TEXT;
ALTER TABLE claims ADD COLUMN heartbeat_at TEXT;
CREATE INDEX claims_claimed ON claims (claimed_at);
CREATE INDEX claims_heartbeat ON claims (heartbeat_at);

DROP INDEX tokens_moved;
DROP INDEX tokens_status_moved;
CREATE INDEX tokens_moved ON tokens (moved_at DESC, token);
CREATE INDEX tokens_status_moved ON tokens (status, moved_at DESC, token);
CREATE INDEX tokens_state_moved ON tokens (state, moved_at DESC, token);
CREATE INDEX tokens_status_state_moved ON tokens (status, state, moved_at DESC, token);
CREATE INDEX tokens_parent_moved ON tokens (parent, moved_at DESC, token)
    WHERE parent IS NOT NULL;

CREATE INDEX tasks_live_age ON tasks (queued_at, id)
    WHERE status IN ('queued', 'claimed', 'waiting');
CREATE INDEX tasks_queued_age ON tasks (queued_at, id) WHERE status = 'queued';
CREATE INDEX tasks_claimed_age ON tasks (queued_at, id) WHERE status = 'claimed';
CREATE INDEX tasks_waiting_age ON tasks (queued_at, id) WHERE status = 'waiting';
CREATE INDEX tasks_state_age ON tasks (state, queued_at, id)
    WHERE status IN ('queued', 'claimed', 'waiting');
CREATE INDEX tasks_held ON tasks (claimed_by, queued_at, id) WHERE status = 'claimed';
