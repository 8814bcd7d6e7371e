-- Version 0024: the labels of each supervisor, as its last claim sent them, in its claim
-- row: a JSON object (`{}` for a supervisor that sends none), written when they change,
-- so that a restarted control plane knows which supervisors it saw in the last hour and
-- what they offered. A row of before 0024 has none (NULL): its supervisor's labels are
-- unknown until it next claims.
ALTER TABLE claims ADD COLUMN labels TEXT;
