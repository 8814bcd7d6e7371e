-- Version 0007: every ledger row gets `pos`, its place in the order of commits across
-- all tokens, which the live stream (`GET /stream`) gives as its event ids. Rows kept
-- before this version are numbered in the order (at, token, seq); the control plane
-- numbers each new row after the largest number in the table.

ALTER TABLE ledger ADD COLUMN pos INTEGER NOT NULL DEFAULT 0;
UPDATE ledger SET pos = numbered.pos
FROM (SELECT token, seq, row_number() OVER (ORDER BY at, token, seq) AS pos FROM ledger)
    AS numbered
WHERE ledger.token = numbered.token AND ledger.seq = numbered.seq;
CREATE UNIQUE INDEX ledger_pos ON ledger (pos);
