-- The projector's checkpoint. Written only by the projector.

-- name: GetCheckpoint :one
SELECT seq FROM projector_checkpoint WHERE name = CAST(@name AS TEXT);

-- name: SetCheckpoint :exec
INSERT INTO projector_checkpoint (name, seq) VALUES (@name, @seq)
ON CONFLICT (name) DO UPDATE SET seq = excluded.seq;

-- name: DeleteCheckpoints :exec
DELETE FROM projector_checkpoint;

-- name: AdvanceCheckpoint :exec
UPDATE projector_checkpoint SET seq = CAST(@to_seq AS INTEGER)
WHERE name = CAST(@name AS TEXT) AND seq = CAST(@from_seq AS INTEGER);
