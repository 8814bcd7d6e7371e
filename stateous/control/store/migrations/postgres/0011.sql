-- Version 0011: a supervisor credential is bound to the supervisors it may act as: one
-- name (`supervisor`), or every name that starts with `supervisor` when
-- `supervisor_prefix` is 1. Credentials kept before this version are left unbound (NULL):
-- they act as any supervisor, as they did, until they are replaced.

ALTER TABLE credentials ADD COLUMN supervisor TEXT;
ALTER TABLE credentials ADD COLUMN supervisor_prefix INTEGER NOT NULL DEFAULT 0;
