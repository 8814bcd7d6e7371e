-- Version 0018: schedules, from the graph file (`flow`) or added at run time (`added`),
-- each with where its occurrences stand; and each occurrence's outcome, with the reason
-- of a skip.

CREATE TABLE schedules (
    name TEXT COLLATE "C" PRIMARY KEY,
    source TEXT NOT NULL,
    cron TEXT NOT NULL,
    tz TEXT NOT NULL,
    context JSON NOT NULL,
    overlap TEXT NOT NULL,
    catch_up TEXT NOT NULL,
    paused INTEGER NOT NULL,
    next_at TEXT COLLATE "C",
    last_at TEXT COLLATE "C",
    last_token TEXT,
    waiting_at TEXT COLLATE "C",
    added_at TEXT COLLATE "C" NOT NULL,
    added_by TEXT
);
CREATE TABLE schedule_history (
    schedule TEXT NOT NULL,
    at TEXT COLLATE "C" NOT NULL,
    outcome TEXT NOT NULL,
    token TEXT,
    missed INTEGER NOT NULL,
    reason TEXT,
    recorded_at TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (schedule, at)
);
