-- Version 0002: each token keeps how many times it entered each state, so that a move
-- numbers its visit without counting the ledger; an index of live tasks finds a
-- token's task without reading its ended ones. The counts of tokens made before are
-- taken from their ledgers.

ALTER TABLE tokens ADD COLUMN visits TEXT NOT NULL DEFAULT '{}';
DROP INDEX tasks_token;
CREATE INDEX tasks_live ON tasks (token, id)
    WHERE status IN ('queued', 'claimed', 'waiting');
UPDATE tokens SET visits = (
    SELECT json_group_object(state, entries) FROM (
        SELECT data ->> 'state' AS state, count(*) AS entries FROM ledger
        WHERE ledger.token = tokens.token AND kind = 'entered' GROUP BY 1))
WHERE token IN (SELECT token FROM ledger WHERE kind = 'entered');
