-- Version 0003: Postgres keeps the plan of a prepared statement. On a new database's
-- empty tables the two indexes of pending timers cost alike, and a plan may take the
-- due one to find a token's timers, reading every pending timer of every token on
-- each move until the table is analyzed. Naming `due_at` in its condition leaves it
-- to the statements that compare `due_at`.

DROP INDEX timers_due;
CREATE INDEX timers_due ON timers (due_at, id)
    WHERE status = 'pending' AND due_at IS NOT NULL;
