-- Version 0017: each task names the contract of its state in its token's graph (the digest
-- of `stateous.model.contracts`), so that a claim that names the graph its supervisor was
-- built for takes only the tasks whose contract it fits, through their own queue. The live
-- tasks kept before get theirs when the control plane next starts (`record_graph`).

ALTER TABLE tasks ADD COLUMN contract TEXT COLLATE "C";
CREATE INDEX tasks_contract_queue ON tasks (contract, queued_at, id) WHERE status = 'queued';
