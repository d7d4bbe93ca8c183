-- Queries on the events table. The table is append-only: there is no UPDATE
-- or DELETE here, and triggers refuse them anyway.

-- name: InsertEvent :exec
INSERT INTO events (seq, stream, version, type, data, meta, recorded_at, prev_hash, hash)
VALUES (@seq, @stream, @version, @type, @data, @meta, @recorded_at, @prev_hash, @hash);

-- name: LedgerHead :one
-- The newest event: where the hash chain continues from.
SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1;

-- name: MaxSeq :one
SELECT CAST(coalesce(max(seq), 0) AS INTEGER) AS seq FROM events;

-- name: StreamVersion :many
-- The newest version of a stream, no row if it is empty. An aggregate form
-- of this query gets prepared again on every run, which costs more than it.
SELECT version FROM events WHERE stream = CAST(@stream AS TEXT) ORDER BY version DESC LIMIT 1;

-- name: ReadStream :many
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
FROM events
WHERE stream = CAST(@stream AS TEXT)
ORDER BY version;

-- name: ReadFromFiltered :many
-- Events after a seq, oldest first, up to a limit, keeping only one type
-- and/or one stream (an empty filter matches all: then ReadRange is used).
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
FROM events
WHERE seq > CAST(@after_seq AS INTEGER)
  AND (CAST(@type AS TEXT) = '' OR type = CAST(@type AS TEXT))
  AND (CAST(@stream AS TEXT) = '' OR stream = CAST(@stream AS TEXT))
ORDER BY seq
LIMIT @max_events;

-- name: ReadStreamAfter :many
-- One stream's events after a seq, oldest first, up to a limit, keeping
-- only one type if given: through UNIQUE (stream, version), since a
-- stream's versions rise with its seqs, so a follower of one job reads
-- that job's events, not the log since after_seq.
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
FROM events
WHERE stream = CAST(@stream AS TEXT)
  AND seq > CAST(@after_seq AS INTEGER)
  AND (CAST(@type AS TEXT) = '' OR type = CAST(@type AS TEXT))
ORDER BY version
LIMIT @max_events;

-- name: ReadRange :many
-- Events with after_seq < seq <= until_seq, oldest first, up to a limit.
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
FROM events
WHERE seq > CAST(@after_seq AS INTEGER) AND seq <= CAST(@until_seq AS INTEGER)
ORDER BY seq
LIMIT @max_events;

-- name: LedgerStats :one
SELECT
    CAST(count(*) AS INTEGER)                    AS events,
    CAST(coalesce(min(seq), 0) AS INTEGER)       AS first_seq,
    CAST(coalesce(max(seq), 0) AS INTEGER)       AS last_seq,
    CAST(coalesce(min(recorded_at), '') AS TEXT) AS first_recorded_at,
    CAST(coalesce(max(recorded_at), '') AS TEXT) AS last_recorded_at,
    CAST(coalesce(sum(length(data) + length(meta)), 0) AS INTEGER) AS payload_bytes
FROM events;

-- name: ReadStreamLast :many
-- The newest event of a stream (none if the stream is empty): in the main
-- file, through UNIQUE (stream, version), or if an archive moved all its
-- events, the newest one archived, carried in archived_stream_types
-- (migration 00014).
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash FROM (
    SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
    FROM events
    WHERE stream = CAST(@stream AS TEXT)
    ORDER BY version DESC
    LIMIT 1
)
UNION ALL
SELECT c.seq, c.stream, c.version, c.type, c.data, c.meta, c.recorded_at, c.prev_hash, c.hash
FROM archived_streams a
JOIN archived_stream_types c ON c.stream = a.stream AND c.type = a.type
WHERE a.stream = CAST(@stream AS TEXT)
  AND NOT EXISTS (SELECT 1 FROM events WHERE stream = CAST(@stream AS TEXT));

-- name: CountStreams :one
SELECT CAST(count(*) AS INTEGER) AS streams FROM events WHERE version = 1;

-- name: CountEventTypes :many
SELECT type, CAST(count(*) AS INTEGER) AS count FROM events GROUP BY type ORDER BY type;

-- name: ReadStreamLastOfType :many
-- The newest event of one type in a stream (none if it has none): walks the
-- stream backwards through UNIQUE (stream, version), or if the main file
-- holds none of that type, the newest one archived, carried in
-- archived_stream_types (migration 00014).
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash FROM (
    SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
    FROM events
    WHERE stream = CAST(@stream AS TEXT) AND type = CAST(@type AS TEXT)
    ORDER BY version DESC
    LIMIT 1
)
UNION ALL
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
FROM archived_stream_types
WHERE stream = CAST(@stream AS TEXT) AND type = CAST(@type AS TEXT)
  AND NOT EXISTS (SELECT 1 FROM events WHERE stream = CAST(@stream AS TEXT) AND type = CAST(@type AS TEXT));

-- name: FindStreamsByPrefix :many
-- Streams whose name lies in [from, until): a prefix search over
-- UNIQUE (stream, version), one row per stream (its first event).
SELECT stream
FROM events
WHERE stream >= CAST(@from AS TEXT) AND stream < CAST(@until AS TEXT) AND version = 1
ORDER BY stream
LIMIT @max_streams;

-- name: FindStreamsByTail :many
-- Streams named kind + id whose last 12 characters start with a short id
-- prefix (they lie in [tail_from, tail_until)): a search over
-- events_stream_tail, one row per stream (its first event). The kind is
-- compared apart from any index, so that the plan reads the tail's; the
-- CAST gives the indexed expression TEXT affinity, without which a range
-- on it bound to text could not use the index.
SELECT stream
FROM events
WHERE CAST(substr(stream, -12) AS TEXT) >= CAST(@tail_from AS TEXT) AND CAST(substr(stream, -12) AS TEXT) < CAST(@tail_until AS TEXT)
  AND version = 1
  AND substr(stream, 1, length(CAST(@kind AS TEXT))) = CAST(@kind AS TEXT)
ORDER BY CAST(substr(stream, -12) AS TEXT)
LIMIT @max_streams;

-- name: EventHash :many
-- The hash of the event at a seq (no row if there is none).
SELECT hash FROM events WHERE seq = CAST(@seq AS INTEGER);
