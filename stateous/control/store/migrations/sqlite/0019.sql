-- Version 0019: resources. A task whose state `uses` resources holds their slots from
-- the time it is let into its queue until its attempt ends; one that cannot have them
-- yet keeps `waits_for` (`repo=acme/api`) and is left out of the queues' indexes, so a
-- claim never passes over it. `resources` keeps each resource (declared by the newest
-- graph file served, or set by an operator), `resource_keys` each key's slots in use (`in_use`),
-- its rate bucket and the time it is closed until, `task_resources` each task's uses:
-- taken, or the one it waits for. The queues' indexes keep a task while
-- `coalesce(waits_for, status) = 'queued'`, and carry both columns so that a claim's look
-- into a queue reads the index alone.

ALTER TABLE tasks ADD COLUMN waits_for TEXT;
DROP INDEX tasks_queue;
CREATE INDEX tasks_queue ON tasks (state, queued_at, id, token, status, waits_for)
    WHERE coalesce(waits_for, status) = 'queued';
DROP INDEX tasks_contract_queue;
CREATE INDEX tasks_contract_queue ON tasks (contract, queued_at, id, token, status, waits_for)
    WHERE coalesce(waits_for, status) = 'queued';
CREATE TABLE resources (
    name TEXT PRIMARY KEY,
    slots INTEGER NOT NULL,
    rate TEXT,
    declared_slots INTEGER,
    paused INTEGER NOT NULL,
    changed_at TEXT NOT NULL,
    changed_by TEXT
);
CREATE TABLE resource_keys (
    resource TEXT NOT NULL,
    key TEXT NOT NULL,
    in_use INTEGER NOT NULL,
    bucket REAL,
    filled_at TEXT,
    closed_until TEXT,
    PRIMARY KEY (resource, key)
) WITHOUT ROWID;
CREATE INDEX resource_keys_closed ON resource_keys (closed_until)
    WHERE closed_until IS NOT NULL;
CREATE TABLE task_resources (
    task INTEGER NOT NULL,
    resource TEXT NOT NULL,
    key TEXT NOT NULL,
    count INTEGER NOT NULL,
    taken INTEGER NOT NULL,
    waiting INTEGER NOT NULL,
    PRIMARY KEY (task, resource)
) WITHOUT ROWID;
CREATE INDEX task_resources_waiting ON task_resources (resource, key, task)
    WHERE waiting = 1;
CREATE INDEX task_resources_taken ON task_resources (resource, key, task)
    WHERE taken = 1;
