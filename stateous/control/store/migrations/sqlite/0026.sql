-- Version 0026: the largest ledger position removed. Retention and `archive --remove`
-- raise it in the transaction that removes the rows; a control plane that starts numbers
-- new rows after it and after the largest `pos` kept, so that no stream id comes twice
-- once the newest rows are gone. No row until a first removal.

CREATE TABLE ledger_removed (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pos INTEGER NOT NULL
);
