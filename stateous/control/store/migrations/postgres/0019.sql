-- Version 0019: resources. A task whose state `uses` resources holds their slots from
-- the time it is let into its queue until its attempt ends; one that cannot have them
-- yet keeps `waits_for` (`repo=acme/api`) and is left out of the queues' indexes, so a
-- claim never passes over it. `resources` keeps each resource (declared by the newest
-- graph file served, or set by an operator), `resource_keys` each key's slots in use (`in_use`),
-- its rate bucket and the time it is closed until, `task_resources` each task's uses:
-- taken, or the one it waits for. The queues' indexes keep a task while
-- `coalesce(waits_for, status) = 'queued'`: one term, so that Postgres estimates them as
-- before (a `waits_for` always holds a '=' or is a sentence, never the word).

ALTER TABLE tasks ADD COLUMN waits_for TEXT;
DROP INDEX tasks_queue;
CREATE INDEX tasks_queue ON tasks (state, queued_at, id)
    WHERE coalesce(waits_for, status) = 'queued';
DROP INDEX tasks_contract_queue;
CREATE INDEX tasks_contract_queue ON tasks (contract, queued_at, id)
    WHERE coalesce(waits_for, status) = 'queued';
CREATE TABLE resources (
    name TEXT COLLATE "C" PRIMARY KEY,
    slots INTEGER NOT NULL,
    rate TEXT,
    declared_slots INTEGER,
    paused INTEGER NOT NULL,
    changed_at TEXT COLLATE "C" NOT NULL,
    changed_by TEXT
);
CREATE TABLE resource_keys (
    resource TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    in_use INTEGER NOT NULL,
    bucket DOUBLE PRECISION,
    filled_at TEXT COLLATE "C",
    closed_until TEXT COLLATE "C",
    PRIMARY KEY (resource, key)
);
CREATE INDEX resource_keys_closed ON resource_keys (closed_until)
    WHERE closed_until IS NOT NULL;
CREATE TABLE task_resources (
    task BIGINT NOT NULL,
    resource TEXT COLLATE "C" NOT NULL,
    key TEXT COLLATE "C" NOT NULL,
    count INTEGER NOT NULL,
    taken INTEGER NOT NULL,
    waiting INTEGER NOT NULL,
    PRIMARY KEY (task, resource)
);
CREATE INDEX task_resources_waiting ON task_resources (resource, key, task)
    WHERE waiting = 1;
CREATE INDEX task_resources_taken ON task_resources (resource, key, task)
    WHERE taken = 1;
