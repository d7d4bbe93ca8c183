-- The projector's checkpoint also records the hash of the event at its seq.
-- The hash chain proves the order of the events, not that none were removed
-- from its end: a checkpoint past the log's head, or a hash that is not the
-- one of the event now at its seq, shows that the log lost events after the
-- projections applied them (ledger.CheckHead). The projector moves seq and
-- hash together.
--
-- Existing checkpoints get the hash of the event they stand at now; one past
-- the head (the log already lost events) keeps NULL, and is still caught by
-- its seq.

-- +goose Up
ALTER TABLE projector_checkpoint ADD COLUMN hash BLOB CHECK (hash IS NULL OR length(hash) = 32);

UPDATE projector_checkpoint SET hash = (SELECT e.hash FROM events e WHERE e.seq = projector_checkpoint.seq);

-- +goose Down
ALTER TABLE projector_checkpoint DROP COLUMN hash;
