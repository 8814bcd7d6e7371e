-- Version 0020: priorities and fairness. A token has a `priority` (its children inherit
-- it), and each queued task a `turn_at`, the moment it is due its turn, in seconds:
-- the moment it was queued, less 60 seconds a level of priority, and, in a workflow with
-- a fairness key, no earlier than its key's clock allows (`fair_clocks`). The queues are
-- read in `turn_at` order instead of `queued_at`. The live tasks kept before take their
-- `queued_at` as their turn. A queued task of a state with `prefers` has a row of
-- `preferred`: the label its supervisor should have (`box=ws-3`), and until when, in
-- seconds, only a supervisor with it may claim the task.

ALTER TABLE tokens ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN turn_at REAL;
UPDATE tasks SET turn_at = (julianday(queued_at) - 2440587.5) * 86400.0
    WHERE (status = 'queued' OR status = 'claimed' OR status = 'waiting');
DROP INDEX tasks_queue;
DROP INDEX tasks_contract_queue;
CREATE INDEX tasks_queue ON tasks (state, turn_at, id, token, status, waits_for)
    WHERE coalesce(waits_for, status) = 'queued';
CREATE INDEX tasks_contract_queue ON tasks (contract, turn_at, id, token, status, waits_for)
    WHERE coalesce(waits_for, status) = 'queued';
CREATE TABLE fair_clocks (
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    clock REAL NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;
CREATE TABLE preferred (
    task INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    until REAL NOT NULL
) WITHOUT ROWID;
