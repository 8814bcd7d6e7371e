-- Version 0022: spend and budgets. A token that holds a budget (set at its start, or by
-- its workflow's `budget=`) has a row of `budgets`: its limits by unit, the share of
-- them at which the ledger warns, what its tree (the token and all its children) has
-- spent, by unit, and the units warned of. `over` is set while the tree's spend has
-- reached a limit: no task of the tree is granted then. A claimed task of a state with
-- `reserve=` holds a row of `budget_reservations` until its attempt ends: what it reserved
-- of its tree's budget. What a routine spends is a ledger row of kind `spent`.

CREATE TABLE budgets (
    token TEXT COLLATE "C" PRIMARY KEY,
    limits TEXT NOT NULL,
    warn DOUBLE PRECISION NOT NULL,
    spent TEXT NOT NULL,
    warned TEXT NOT NULL,
    over INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE budget_reservations (
    task BIGINT PRIMARY KEY,
    budget TEXT COLLATE "C" NOT NULL,
    amounts TEXT NOT NULL
);
CREATE INDEX budget_reservations_budget ON budget_reservations (budget);
