-- Version 0014: plans of bulk operations. A plan keeps the action and the filter it was
-- made with, and the exact tokens it acts on, in order; each token is marked when it has
-- been acted on (`applied_at`, with its outcome and the reason of a refusal), so that an
-- apply run again after an interruption skips it.

CREATE TABLE plans (
    id TEXT PRIMARY KEY,
    action TEXT NOT NULL,
    options JSON NOT NULL,
    filter JSON NOT NULL,
    made_by TEXT,
    made_at TEXT COLLATE "C" NOT NULL
);
CREATE TABLE plan_tokens (
    plan TEXT NOT NULL,
    n INTEGER NOT NULL,
    token TEXT NOT NULL,
    outcome TEXT,
    reason TEXT,
    applied_at TEXT COLLATE "C",
    PRIMARY KEY (plan, n)
);
