-- The projector's checkpoint. Written only by the projector.

-- name: GetCheckpoint :one
SELECT seq FROM projector_checkpoint WHERE name = CAST(@name AS TEXT);

-- name: SetCheckpoint :exec
INSERT INTO projector_checkpoint (name, seq) VALUES (@name, @seq)
ON CONFLICT (name) DO UPDATE SET seq = excluded.seq;

-- name: DeleteCheckpoints :exec
DELETE FROM projector_checkpoint;
