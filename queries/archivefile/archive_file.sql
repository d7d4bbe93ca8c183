-- name: InsertEvent :exec
-- Copies one event of the ledger into an archive file, as it was stored
-- (ledger/archive_write.go).
INSERT INTO events (seq, stream, version, type, data, meta, recorded_at, prev_hash, hash)
VALUES (@seq, @stream, @version, @type, @data, @meta, @recorded_at, @prev_hash, @hash);

-- name: SetInfo :exec
-- One key of what the archive is (format, ledger, first_seq, last_seq, last_hash).
INSERT INTO archive (key, value) VALUES (@key, @value);

-- name: ReadEvents :many
-- The events after_seq < seq <= until_seq, oldest first
-- (ledger/archive_read.go).
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
FROM events
WHERE seq > CAST(@after_seq AS INTEGER) AND seq <= CAST(@until_seq AS INTEGER)
ORDER BY seq;
