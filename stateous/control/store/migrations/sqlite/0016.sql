-- Version 0016: the tokens of one graph file, most recently moved first: `GET /tokens` and
-- plans filter by `checksum` (the tokens to migrate), read in the listing's order.

CREATE INDEX tokens_checksum_moved ON tokens (checksum, moved_at DESC, token);
