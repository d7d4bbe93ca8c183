-- The projector's checkpoint and the ledger-level projections (streams,
-- event_counts). Written only by the projector.

-- name: GetCheckpoint :one
SELECT seq FROM projector_checkpoint WHERE name = CAST(@name AS TEXT);

-- name: SetCheckpoint :exec
INSERT INTO projector_checkpoint (name, seq) VALUES (@name, @seq)
ON CONFLICT (name) DO UPDATE SET seq = excluded.seq;

-- name: DeleteCheckpoints :exec
DELETE FROM projector_checkpoint;

-- name: UpsertStream :exec
INSERT INTO streams (stream, version, first_seq, last_seq, last_type, created_at, updated_at)
VALUES (@stream, @version, @seq, @seq, @type, @recorded_at, @recorded_at)
ON CONFLICT (stream) DO UPDATE SET
    version    = excluded.version,
    last_seq   = excluded.last_seq,
    last_type  = excluded.last_type,
    updated_at = excluded.updated_at;

-- name: DeleteStreams :exec
DELETE FROM streams;

-- name: DumpStreams :many
SELECT stream, version, first_seq, last_seq, last_type, created_at, updated_at
FROM streams ORDER BY stream;

-- name: CountStreams :one
SELECT CAST(count(*) AS INTEGER) AS streams FROM streams;

-- name: UpsertEventCount :exec
INSERT INTO event_counts (type, count, first_seq, last_seq)
VALUES (@type, 1, @seq, @seq)
ON CONFLICT (type) DO UPDATE SET
    count    = count + 1,
    last_seq = excluded.last_seq;

-- name: DeleteEventCounts :exec
DELETE FROM event_counts;

-- name: DumpEventCounts :many
SELECT type, count, first_seq, last_seq FROM event_counts ORDER BY type;

