-- Version 0002: each token keeps how many times it entered each state, so that a move
-- numbers its visit without counting the ledger; an index of live tasks finds a
-- token's task without reading its ended ones. The counts of tokens made before are
-- taken from their ledgers.

ALTER TABLE tokens ADD COLUMN visits JSON NOT NULL DEFAULT '{}';
DROP INDEX tasks_token;
CREATE INDEX tasks_live ON tasks (token, id)
    WHERE status IN ('queued', 'claimed', 'waiting');
UPDATE tokens SET visits = counted.visits FROM (
    SELECT token, json_object_agg(state, entries) AS visits FROM (
        SELECT token, data ->> 'state' AS state, count(*) AS entries
        FROM ledger WHERE kind = 'entered' GROUP BY 1, 2) AS entered
    GROUP BY token) AS counted
WHERE counted.token = tokens.token;
