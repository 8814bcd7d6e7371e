-- The latest schema, whole: a new database is made from this file in one step and
-- recorded at the latest version. It must make what 0001.sql and the migrations after
-- it make, column order included (tests/control/test_schema.py compares the two
-- databases); a new migration changes this file too.
--
-- The words a column may hold, and the statuses a partial index keeps, are named with
-- OR, not IN: SQLite evaluates an IN list of three words or more through a temporary
-- table, at every insert and update of the row (0008).

-- `visits` counts the entries of the token into each state (0002), and `result` keeps the
-- payload of the event that completed it (0010); they come last, as their migrations added
-- them. `priority` is the token's, inherited by its children (0020).
CREATE TABLE tokens (
    token TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status = 'active' OR status = 'paused'
        OR status = 'completed' OR status = 'failed' OR status = 'cancelled'),
    visit INTEGER NOT NULL,
    context TEXT NOT NULL,
    entered_at TEXT NOT NULL,
    parent TEXT,
    workflow TEXT,
    moved_at TEXT NOT NULL,
    visits TEXT NOT NULL DEFAULT '{}',
    result TEXT,
    checksum TEXT,
    priority INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX tokens_folded ON tokens (lower(token));
CREATE INDEX tokens_moved ON tokens (moved_at DESC, token);
CREATE INDEX tokens_status_moved ON tokens (status, moved_at DESC, token);
CREATE INDEX tokens_state_moved ON tokens (state, moved_at DESC, token);
CREATE INDEX tokens_status_state_moved ON tokens (status, state, moved_at DESC, token);
CREATE INDEX tokens_parent_moved ON tokens (parent, moved_at DESC, token)
    WHERE parent IS NOT NULL;
CREATE INDEX tokens_parent ON tokens (parent) WHERE parent IS NOT NULL;
CREATE INDEX tokens_checksum_moved ON tokens (checksum, moved_at DESC, token);
CREATE INDEX tokens_live_checksum ON tokens (checksum)
    WHERE status = 'active' OR status = 'paused';

-- `pos` orders the rows of every token by commit, for the live stream (0007).
CREATE TABLE ledger (
    token TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT,
    data TEXT NOT NULL,
    pos INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (token, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX ledger_key ON ledger (token, key) WHERE key IS NOT NULL;
CREATE INDEX ledger_deferred ON ledger (kind) WHERE kind = 'event_deferred';
CREATE UNIQUE INDEX ledger_pos ON ledger (pos);

-- The largest `pos` that retention or `archive --remove` removed (0026): a control
-- plane that starts numbers new rows after it and after the largest kept.
CREATE TABLE ledger_removed (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pos INTEGER NOT NULL
);

-- `tasks_live` finds a token's task without reading its ended ones (0002). `contract` is
-- the digest of the task's state's contract in its token's graph; `tasks_contract_queue`,
-- the queue of a claim that names the graph its supervisor was built for (0017). The
-- queues are read in `turn_at` order: the moment the task is due its turn, in seconds,
-- from its priority and its fairness key (0020; `stateous.control.turns`).
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token TEXT NOT NULL,
    state TEXT NOT NULL,
    visit INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status = 'queued' OR status = 'claimed'
        OR status = 'waiting' OR status = 'done' OR status = 'failed'
        OR status = 'cancelled'),
    attempt INTEGER NOT NULL,
    claimed_by TEXT,
    lease_until TEXT,
    queued_at TEXT NOT NULL,
    contract TEXT,
    waits_for TEXT,
    turn_at REAL
);
CREATE INDEX tasks_queue ON tasks (state, turn_at, id, token, status, waits_for)
    WHERE coalesce(waits_for, status) = 'queued';
CREATE INDEX tasks_contract_queue ON tasks (contract, turn_at, id, token, status, waits_for)
    WHERE coalesce(waits_for, status) = 'queued';
CREATE INDEX tasks_lease ON tasks (lease_until) WHERE status = 'claimed';
CREATE INDEX tasks_live ON tasks (token, id)
    WHERE (status = 'queued' OR status = 'claimed' OR status = 'waiting');
CREATE INDEX tasks_live_age ON tasks (queued_at, id)
    WHERE (status = 'queued' OR status = 'claimed' OR status = 'waiting');
CREATE INDEX tasks_queued_age ON tasks (queued_at, id) WHERE status = 'queued';
CREATE INDEX tasks_claimed_age ON tasks (queued_at, id) WHERE status = 'claimed';
CREATE INDEX tasks_waiting_age ON tasks (queued_at, id) WHERE status = 'waiting';
CREATE INDEX tasks_state_age ON tasks (state, queued_at, id)
    WHERE (status = 'queued' OR status = 'claimed' OR status = 'waiting');
CREATE INDEX tasks_held ON tasks (claimed_by, queued_at, id) WHERE status = 'claimed';

CREATE TABLE timers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    token TEXT NOT NULL,
    state TEXT NOT NULL,
    visit INTEGER NOT NULL,
    event TEXT NOT NULL,
    payload TEXT,
    set_at TEXT NOT NULL,
    due_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status = 'pending' OR status = 'fired'
        OR status = 'cancelled'),
    kind TEXT NOT NULL CHECK (kind = 'timeout' OR kind = 'timer' OR kind = 'retry')
);
CREATE INDEX timers_due ON timers (due_at, id) WHERE status = 'pending';
CREATE INDEX timers_token ON timers (token) WHERE status = 'pending';

CREATE TABLE memory (
    token TEXT NOT NULL,
    state TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (token, state, key)
) WITHOUT ROWID;

-- The labels a supervisor's last claim sent, JSON, written when they change (0024).
CREATE TABLE claims (
    supervisor TEXT PRIMARY KEY,
    claimed_at TEXT,
    heartbeat_at TEXT,
    labels TEXT
);
CREATE INDEX claims_claimed ON claims (claimed_at);
CREATE INDEX claims_heartbeat ON claims (heartbeat_at);

-- The request id that each task's last grant was asked under (0025): an ask sent again
-- with it gets the task again while its supervisor holds it.
CREATE TABLE claim_requests (
    task_id INTEGER PRIMARY KEY,
    supervisor TEXT NOT NULL,
    request TEXT NOT NULL,
    attempt INTEGER NOT NULL
);
CREATE INDEX claim_requests_asked ON claim_requests (supervisor, request);

-- Every graph file served, whole, by its checksum (0015).
CREATE TABLE graphs (
    checksum TEXT PRIMARY KEY,
    document TEXT NOT NULL,
    first_served_at TEXT NOT NULL,
    last_served_at TEXT NOT NULL
);

CREATE TABLE control_plane (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    structure TEXT,
    checksum TEXT,
    serving TEXT,
    since TEXT
);

CREATE TABLE credentials (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role = 'operator' OR role = 'supervisor'
        OR role = 'webhook'),
    events TEXT,
    may_start INTEGER NOT NULL DEFAULT 0,
    hmac_key TEXT,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    last_used TEXT,
    revoked_at TEXT,
    supervisor TEXT,
    supervisor_prefix INTEGER NOT NULL DEFAULT 0,
    github TEXT
);

-- The control plane's settings (0009), one row each: `auth` is `on` from the first
-- credential added until `stateous auth disable`.
CREATE TABLE settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- The counts behind the metrics (0006): since the database was made (slot -1), and a
-- ring of the last sixty minutes; one shard per writer that runs at once. The live
-- tokens and tasks by status and state are counts too, that go up and down.
CREATE TABLE counts (
    name TEXT NOT NULL,
    label TEXT NOT NULL,
    slot INTEGER NOT NULL,
    shard INTEGER NOT NULL,
    minute INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (name, label, slot, shard)
);

-- The plans of bulk operations (0014): the action, its options and filter, and the
-- exact tokens, each marked once it was acted on.
CREATE TABLE plans (
    id TEXT PRIMARY KEY,
    action TEXT NOT NULL,
    options TEXT NOT NULL,
    filter TEXT NOT NULL,
    made_by TEXT,
    made_at TEXT NOT NULL
);
CREATE TABLE plan_tokens (
    plan TEXT NOT NULL,
    n INTEGER NOT NULL,
    token TEXT NOT NULL,
    outcome TEXT,
    reason TEXT,
    applied_at TEXT,
    PRIMARY KEY (plan, n)
);

-- Schedules (0018): from the graph file or added at run time, with where their
-- occurrences stand; and the outcome of each occurrence, with the reason of a skip.
CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    cron TEXT NOT NULL,
    tz TEXT NOT NULL,
    context TEXT NOT NULL,
    overlap TEXT NOT NULL,
    catch_up TEXT NOT NULL,
    paused INTEGER NOT NULL,
    next_at TEXT,
    last_at TEXT,
    last_token TEXT,
    waiting_at TEXT,
    added_at TEXT NOT NULL,
    added_by TEXT
);
CREATE TABLE schedule_history (
    schedule TEXT NOT NULL,
    at TEXT NOT NULL,
    outcome TEXT NOT NULL,
    token TEXT,
    missed INTEGER NOT NULL,
    reason TEXT,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (schedule, at)
);

-- Resources (0019): each resource, its keys (slots in use, rate bucket, closed until)
-- and each task's uses, held or waited for; a task that waits for one has `waits_for`
-- and stays out of the queues' indexes.
CREATE TABLE resources (
    name TEXT PRIMARY KEY,
    slots INTEGER NOT NULL,
    rate TEXT,
    declared_slots INTEGER,
    paused INTEGER NOT NULL,
    changed_at TEXT NOT NULL,
    changed_by TEXT
);
CREATE TABLE resource_keys (
    resource TEXT NOT NULL,
    key TEXT NOT NULL,
    in_use INTEGER NOT NULL,
    bucket REAL,
    filled_at TEXT,
    closed_until TEXT,
    PRIMARY KEY (resource, key)
) WITHOUT ROWID;
CREATE INDEX resource_keys_closed ON resource_keys (closed_until)
    WHERE closed_until IS NOT NULL;
CREATE TABLE task_resources (
    task INTEGER NOT NULL,
    resource TEXT NOT NULL,
    key TEXT NOT NULL,
    count INTEGER NOT NULL,
    taken INTEGER NOT NULL,
    waiting INTEGER NOT NULL,
    PRIMARY KEY (task, resource)
) WITHOUT ROWID;
CREATE INDEX task_resources_waiting ON task_resources (resource, key, task)
    WHERE waiting = 1;
CREATE INDEX task_resources_taken ON task_resources (resource, key, task)
    WHERE taken = 1;

-- Each fairness key's clock in each queue (0020): the start of the key's last task queued.
CREATE TABLE fair_clocks (
    queue TEXT NOT NULL,
    key TEXT NOT NULL,
    clock REAL NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;

-- The label that a queued task's state prefers (0020), and until when only a claim with it
-- may take the task; the claim that takes it removes its row.
CREATE TABLE preferred (
    task INTEGER PRIMARY KEY,
    label TEXT NOT NULL,
    until REAL NOT NULL
) WITHOUT ROWID;

-- A key parked by a quota report or its breaker, or whose breaker counts failures (0021).
CREATE TABLE key_parkings (
    resource TEXT NOT NULL,
    key TEXT NOT NULL,
    cause TEXT CHECK (cause = 'quota' OR cause = 'breaker'),
    reason TEXT,
    until TEXT,
    times INTEGER NOT NULL,
    step INTEGER,
    admitted INTEGER NOT NULL,
    fingerprint TEXT,
    streak INTEGER NOT NULL,
    PRIMARY KEY (resource, key)
) WITHOUT ROWID;

-- A token that holds a budget (0022): its limits by unit, the share at which the ledger
-- warns, its tree's spend by unit, the units warned of, and whether the spend reached a
-- limit. A claimed task of a state with `reserve=` holds what it reserved until its
-- attempt ends (`budget_reservations`).
CREATE TABLE budgets (
    token TEXT PRIMARY KEY,
    limits TEXT NOT NULL,
    warn REAL NOT NULL,
    spent TEXT NOT NULL,
    warned TEXT NOT NULL,
    over INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE budget_reservations (
    task INTEGER PRIMARY KEY,
    budget TEXT NOT NULL,
    amounts TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX budget_reservations_budget ON budget_reservations (budget);
