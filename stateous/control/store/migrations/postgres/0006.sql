-- Version 0006: the counts behind the metrics. `counts` keeps, for each counter and
-- label, how many times it happened since the database was made (slot -1), and, for
-- the counters of the last hour, a ring of sixty minutes (slot = minute % 60, with the
-- minute since 1970 beside it, so that a slot left from an older hour starts again
-- from zero). Each writer that runs at once bumps rows of its own `shard`, so that no
-- writer waits for another's row. Two partial indexes count the live tokens and tasks
-- by state without reading the ended ones. A database made before gets the totals
-- that its ledger tells (reports are counted from this version on).

CREATE TABLE counts (
    name TEXT NOT NULL,
    label TEXT NOT NULL,
    slot INTEGER NOT NULL,
    shard INTEGER NOT NULL,
    minute BIGINT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (name, label, slot, shard)
);
CREATE INDEX tokens_live_state ON tokens (status, workflow, state)
    WHERE status IN ('active', 'paused');
CREATE INDEX tasks_live_state ON tasks (status, state)
    WHERE status IN ('queued', 'claimed', 'waiting');
INSERT INTO counts (name, label, slot, shard, minute, n)
    SELECT name, label, -1, 0, -1, count(*) FROM (
        SELECT CASE
            WHEN kind = 'started' THEN 'tokens_started'
            WHEN kind = 'event_accepted' THEN 'events_fired'
            WHEN kind = 'event_rejected' THEN 'events_refused'
            WHEN kind = 'task_claimed' THEN 'tasks_claimed'
            WHEN kind = 'task_failed' THEN 'attempts_failed'
            WHEN kind = 'timer_fired' THEN 'timers_fired'
            ELSE 'tokens_ended' END AS name,
        CASE
            WHEN kind = 'event_rejected' AND data ->> 'reason' LIKE '%; it takes no events'
                THEN 'token_not_active'
            WHEN kind = 'event_rejected' THEN 'event_not_allowed'
            WHEN kind IN ('completed', 'failed', 'cancelled') THEN kind
            ELSE '' END AS label
        FROM ledger WHERE kind IN ('started', 'event_accepted', 'event_rejected',
            'task_claimed', 'task_failed', 'timer_fired', 'completed', 'failed', 'cancelled')
    ) kinds GROUP BY name, label;
INSERT INTO counts (name, label, slot, shard, minute, n)
    SELECT 'leases_ended', '', -1, 0, -1, count(*) FROM ledger
    WHERE kind = 'task_failed' AND data ->> 'error' LIKE '% stopped answering: no heartbeat for %'
    HAVING count(*) > 0;
