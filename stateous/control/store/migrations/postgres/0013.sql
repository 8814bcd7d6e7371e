-- Version 0013: a timer may be of kind `retry`: the wait before the next attempt of a
-- task, set by `retry_delay` or asked for by a routine (`RetryLater`). When it is due, it
-- queues the task again instead of firing an event.

ALTER TABLE timers DROP CONSTRAINT timers_kind_check;
ALTER TABLE timers ADD CONSTRAINT timers_kind_check
    CHECK (kind IN ('timeout', 'timer', 'retry'));
