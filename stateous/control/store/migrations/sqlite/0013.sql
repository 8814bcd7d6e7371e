-- Version 0013: a timer may be of kind `retry`: the wait before the next attempt of a
-- task, set by `retry_delay` or asked for by a routine (`RetryLater`). When it is due, it
-- queues the task again instead of firing an event. SQLite cannot alter a CHECK, so the
-- table is copied whole into a new one, ids and its sequence with it, as 0008 did.

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
    kind TEXT NOT NULL CHECK (kind = 'timeout' OR kind = 'timer' OR kind = 'retry')
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
