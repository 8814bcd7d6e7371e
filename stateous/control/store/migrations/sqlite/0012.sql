-- Version 0012: a webhook credential made for GitHub keeps how a delivery to
-- `POST /hooks/{name}` becomes a start or a fire, as one JSON object: the GitHub event
-- kinds it takes and the workflow event of each, and the dotted paths of the token id,
-- the payload and the start's context. NULL for every other credential.

ALTER TABLE credentials ADD COLUMN github TEXT;
