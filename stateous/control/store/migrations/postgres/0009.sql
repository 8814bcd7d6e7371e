-- Version 0009: the control plane's settings, one row each. `auth` is `on` once a
-- credential has been added, and stays on when every credential is revoked, until
-- `stateous auth disable`. A database that holds credentials, revoked ones too, has
-- authentication on from this version.

CREATE TABLE settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO settings (name, value) SELECT 'auth', 'on' WHERE EXISTS (SELECT 1 FROM credentials);
