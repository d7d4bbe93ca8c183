-- The projector's checkpoint. Written only by the projector, which moves its
-- seq and the hash of the event at that seq together.

-- name: GetCheckpoint :one
SELECT seq FROM projector_checkpoint WHERE name = CAST(@name AS TEXT);

-- name: ListCheckpoints :many
-- Every checkpoint with the hash it recorded (NULL if it has not moved since
-- migration 00009 on a log that had already lost events past it).
SELECT name, seq, hash FROM projector_checkpoint ORDER BY name;

-- name: SetCheckpoint :exec
INSERT INTO projector_checkpoint (name, seq, hash) VALUES (@name, @seq, @hash)
ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, hash = excluded.hash;

-- name: DeleteCheckpoints :exec
DELETE FROM projector_checkpoint;

-- name: AdvanceCheckpoint :exec
UPDATE projector_checkpoint SET seq = CAST(@to_seq AS INTEGER), hash = CAST(@to_hash AS BLOB)
WHERE name = CAST(@name AS TEXT) AND seq = CAST(@from_seq AS INTEGER);
