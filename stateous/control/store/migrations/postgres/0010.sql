-- Version 0010: a token that a transition to END completed keeps the payload of the
-- event that took it there (`result`, JSON, NULL when the event carried none), so that
-- the join of its parent can hand it back in each branch. Tokens that ended before
-- this version have none.

ALTER TABLE tokens ADD COLUMN result JSON;
