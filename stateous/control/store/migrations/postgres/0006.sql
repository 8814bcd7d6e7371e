-- Version 0006: the counts behind the metrics. `counts` keeps, for each counter and
-- label, how many times it happened since the database was made (slot -1), and, for
-- the counters of the last hour, a ring of sixty minutes (slot = minute % 60, with the
-- minute since 1970 beside it, so that a slot left from an older hour starts again
-- from zero). Each writer that runs at once bumps rows of its own `shard`, so that no
-- writer waits for another's row. The live tokens and tasks by status and state, and
-- the pending timers, are counts too, that each change moves up and down
-- (`live_tokens`, `live_tasks`, labelled `status state`; `timers_pending`). A database made before gets them from its rows, and the totals
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
INSERT INTO counts (name, label, slot, shard, minute, n)
    SELECT 'live_tokens', status || ' ' || CASE WHEN workflow IS NULL THEN state
        ELSE workflow || '/' || state END, -1, 0, -1, count(*)
    FROM tokens WHERE status IN ('active', 'paused') GROUP BY 2;
INSERT INTO counts (name, label, slot, shard, minute, n)
    SELECT 'live_tasks', status || ' ' || state, -1, 0, -1, count(*)
    FROM tasks WHERE status IN ('queued', 'claimed', 'waiting') GROUP BY 2;
INSERT INTO counts (name, label, slot, shard, minute, n)
    SELECT 'timers_pending', '', -1, 0, -1, count(*) FROM timers WHERE status = 'pending'
    HAVING count(*) > 0;
