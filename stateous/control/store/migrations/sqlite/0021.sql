-- Version 0021: parked keys and breakers. A key of a resource that a provider's quota
-- stopped, or whose breaker tripped, has a row of `key_parkings`: why (`cause`, `reason`,
-- the `fingerprint` of the failure that tripped it), until when (`until`, also kept as the
-- key's `closed_until`), how many parkings in a row (`times`, which doubles the next wait),
-- and, once it reopens, its `step` (0: the probe, then cohorts of 1, 2, 4, ...) and how
-- many tasks the step `admitted`. A key whose breaker counts failures has one too: the
-- `fingerprint` of its last failed attempt and the `streak` of them alike.

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
