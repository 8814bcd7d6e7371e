-- Version 0008: the words that a column may hold, and the live statuses that partial
-- indexes keep, are named with OR, not with IN. SQLite evaluates `x IN (...)` of three
-- words or more through a temporary table, which it builds and drops at each use, and it
-- evaluates a table's CHECKs and the conditions of its partial indexes at every insert
-- and update: with the IN lists, a fire built and dropped twelve such tables, two fifths
-- of the instructions of its statements. A CHECK is changed by making the table anew
-- (SQLite cannot alter one): each table is copied whole into a new one, rowids and ids
-- with it, the old one dropped and the new one named as it was; its indexes are made
-- again.

CREATE TABLE new_tokens (
    token TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status = 'active' OR status = 'paused'
        OR status = 'completed' OR status = 'failed' OR status = 'cancelled'),
    visit INTEGER NOT NULL,
    context TEXT NOT NULL,
    entered_at TEXT NOT NULL,
    parent TEXT,
    workflow TEXT,
    moved_at TEXT NOT NULL,
    visits TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO new_tokens (rowid, token, state, status, visit, context, entered_at, parent,
    workflow, moved_at, visits)
SELECT rowid, token, state, status, visit, context, entered_at, parent, workflow,
    moved_at, visits
FROM tokens ORDER BY rowid;
DROP TABLE tokens;
ALTER TABLE new_tokens RENAME TO tokens;
CREATE UNIQUE INDEX tokens_folded ON tokens (lower(token));
CREATE INDEX tokens_moved ON tokens (moved_at DESC, token);
CREATE INDEX tokens_status_moved ON tokens (status, moved_at DESC, token);
CREATE INDEX tokens_state_moved ON tokens (state, moved_at DESC, token);
CREATE INDEX tokens_status_state_moved ON tokens (status, state, moved_at DESC, token);
CREATE INDEX tokens_parent_moved ON tokens (parent, moved_at DESC, token)
    WHERE parent IS NOT NULL;
CREATE INDEX tokens_parent ON tokens (parent) WHERE parent IS NOT NULL;

-- A table of AUTOINCREMENT ids keeps its last id in sqlite_sequence: the new one starts
-- from the old one's, so that no id is given twice. The queue's index now holds each
-- task's token too: a claim reads the head of a state's queue and its token from this
-- index alone, so SQLite takes it, and not the index of every live task of the state,
-- whose condition `status = 'queued'` now implies as well.
CREATE TABLE new_tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token TEXT NOT NULL,
    state TEXT NOT NULL,
    visit INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status = 'queued' OR status = 'claimed'
        OR status = 'waiting' OR status = 'done' OR status = 'failed'
        OR status = 'cancelled'),
    attempt INTEGER NOT NULL,
    claimed_by TEXT,
    lease_until TEXT,
    queued_at TEXT NOT NULL
);
INSERT INTO sqlite_sequence (name, seq)
SELECT 'new_tasks', seq FROM sqlite_sequence WHERE name = 'tasks';
INSERT INTO new_tasks (id, token, state, visit, status, attempt, claimed_by, lease_until,
    queued_at)
SELECT id, token, state, visit, status, attempt, claimed_by, lease_until, queued_at
FROM tasks ORDER BY id;
DROP TABLE tasks;
ALTER TABLE new_tasks RENAME TO tasks;
CREATE INDEX tasks_queue ON tasks (state, queued_at, id, token)
    WHERE status = 'queued';
CREATE INDEX tasks_lease ON tasks (lease_until) WHERE status = 'claimed';
CREATE INDEX tasks_live ON tasks (token, id)
    WHERE (status = 'queued' OR status = 'claimed' OR status = 'waiting');
CREATE INDEX tasks_live_age ON tasks (queued_at, id)
    WHERE (status = 'queued' OR status = 'claimed' OR status = 'waiting');
CREATE INDEX tasks_queued_age ON tasks (queued_at, id) WHERE status = 'queued';
CREATE INDEX tasks_claimed_age ON tasks (queued_at, id) WHERE status = 'claimed';
CREATE INDEX tasks_waiting_age ON tasks (queued_at, id) WHERE status = 'waiting';
CREATE INDEX tasks_state_age ON tasks (state, queued_at, id)
    WHERE (status = 'queued' OR status = 'claimed' OR status = 'waiting');
CREATE INDEX tasks_held ON tasks (claimed_by, queued_at, id) WHERE status = 'claimed';

CREATE TABLE new_timers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token TEXT NOT NULL,
    state TEXT NOT NULL,
    visit INTEGER NOT NULL,
    event TEXT NOT NULL,
    payload TEXT,
    set_at TEXT NOT NULL,
    due_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status = 'pending' OR status = 'fired'
        OR status = 'cancelled'),
    kind TEXT NOT NULL CHECK (kind = 'timeout' OR kind = 'timer')
);
INSERT INTO sqlite_sequence (name, seq)
SELECT 'new_timers', seq FROM sqlite_sequence WHERE name = 'timers';
INSERT INTO new_timers (id, token, state, visit, event, payload, set_at, due_at, status,
    kind)
SELECT id, token, state, visit, event, payload, set_at, due_at, status, kind
FROM timers ORDER BY id;
DROP TABLE timers;
ALTER TABLE new_timers RENAME TO timers;
CREATE INDEX timers_due ON timers (due_at, id) WHERE status = 'pending';
CREATE INDEX timers_token ON timers (token) WHERE status = 'pending';

CREATE TABLE new_credentials (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role = 'operator' OR role = 'supervisor'
        OR role = 'webhook'),
    events TEXT,
    may_start INTEGER NOT NULL DEFAULT 0,
    hmac_key TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    last_used TEXT,
    revoked_at TEXT
);
INSERT INTO new_credentials (name, role, events, may_start, hmac_key, secret_hash,
    created_at, last_used, revoked_at)
SELECT name, role, events, may_start, hmac_key, secret_hash, created_at, last_used,
    revoked_at
FROM credentials;
DROP TABLE credentials;
ALTER TABLE new_credentials RENAME TO credentials;
