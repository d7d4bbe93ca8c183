-- Archives of the log's oldest events (ledger/archive.go, migration 00014).

-- name: ListArchives :many
SELECT first_seq, last_seq, file, prev_hash, last_hash, content_hash, events, archived_at
FROM ledger_archives ORDER BY first_seq;

-- name: ArchiveAnchor :many
-- The newest archive's last event: where the main file's chain continues
-- from (no row if nothing was archived).
SELECT last_seq, last_hash FROM ledger_archives ORDER BY last_seq DESC LIMIT 1;

-- name: InsertArchive :exec
INSERT INTO ledger_archives (first_seq, last_seq, file, prev_hash, last_hash, content_hash, events, archived_at)
VALUES (@first_seq, @last_seq, @file, @prev_hash, @last_hash, @content_hash, @events, @archived_at);

-- name: ArchivedStreamVersion :many
-- The newest archived version of a stream (no row if none was archived).
SELECT version FROM archived_streams WHERE stream = CAST(@stream AS TEXT);

-- name: KeepArchivedVersions :exec
-- Records the newest version each stream reached in events after_seq <
-- seq <= until_seq, and the type of that event, but for streams whose
-- names start with one of skip_prefixes (a JSON array of strings). (A bare column beside max() is SQLite's:
-- it is taken from the row holding the max.)
INSERT INTO archived_streams (stream, version, type)
SELECT stream, max(version), type FROM events
WHERE seq > CAST(@after_seq AS INTEGER) AND seq <= CAST(@until_seq AS INTEGER)
  AND NOT EXISTS (SELECT 1 FROM json_each(CAST(@skip_prefixes AS TEXT)) AS p WHERE p.value <> '' AND substr(stream, 1, length(p.value)) = p.value)
GROUP BY stream
ON CONFLICT (stream) DO UPDATE SET version = excluded.version, type = excluded.type
WHERE excluded.version > archived_streams.version;

-- name: CarryArchivedEvents :exec
-- Keeps, for each stream and type, the newest event after_seq < seq <=
-- until_seq in full (but for streams whose names start with one of
-- skip_prefixes, a JSON array of strings),
-- replacing what an earlier archive kept: what ReadStreamLast and
-- ReadStreamLastOfType read once the main file holds none.
INSERT INTO archived_stream_types (stream, type, seq, version, data, meta, recorded_at, prev_hash, hash)
SELECT stream, type, max(seq), version, data, meta, recorded_at, prev_hash, hash FROM events
WHERE seq > CAST(@after_seq AS INTEGER) AND seq <= CAST(@until_seq AS INTEGER)
  AND NOT EXISTS (SELECT 1 FROM json_each(CAST(@skip_prefixes AS TEXT)) AS p WHERE p.value <> '' AND substr(stream, 1, length(p.value)) = p.value)
GROUP BY stream, type
ON CONFLICT (stream, type) DO UPDATE SET
    seq = excluded.seq, version = excluded.version, data = excluded.data, meta = excluded.meta,
    recorded_at = excluded.recorded_at, prev_hash = excluded.prev_hash, hash = excluded.hash
WHERE excluded.seq > archived_stream_types.seq;

-- name: DeleteEventsThrough :exec
DELETE FROM events WHERE seq <= CAST(@until_seq AS INTEGER);

-- name: FirstSeqAtOrAfter :one
-- The first event recorded at or after a time (0: none).
SELECT CAST(coalesce(min(seq), 0) AS INTEGER) AS seq FROM events
WHERE recorded_at >= CAST(@recorded_at AS TEXT);

-- name: RangeSize :one
-- How many events, and about how many bytes of them, after_seq < seq <= until_seq.
SELECT CAST(count(*) AS INTEGER) AS events,
       CAST(coalesce(sum(length(stream) + length(type) + length(data) + length(meta) + 30 + 64 + 16), 0) AS INTEGER) AS bytes,
       CAST(count(DISTINCT CASE WHEN substr(stream, 1, 4) = 'job/' THEN stream END) AS INTEGER) AS job_streams
FROM events
WHERE seq > CAST(@after_seq AS INTEGER) AND seq <= CAST(@until_seq AS INTEGER);

-- name: ArchiveCutJobs :many
-- The earliest job stream that begins at or before through_seq but is not
-- finished there: it has events after it, or its job is not terminal. An
-- archive must stop before its first event (views/archive_cut.go).
SELECT s.stream, CAST(s.first_seq AS INTEGER) AS first_seq FROM (
    SELECT stream, min(seq) AS first_seq, max(seq) AS last_seq FROM events
    WHERE stream >= 'job/' AND stream < 'job0'
    GROUP BY stream
    HAVING min(seq) <= CAST(@through_seq AS INTEGER)
) s
LEFT JOIN job_queue q ON q.id = substr(s.stream, 5)
WHERE s.last_seq > CAST(@through_seq AS INTEGER)
   OR q.status IS NULL OR q.status NOT IN ('succeeded', 'dead', 'canceled')
ORDER BY s.first_seq
LIMIT 1;

-- name: ArchiveCutDedupe :many
-- The earliest dedupe reservation at or before through_seq whose release
-- is not there too: the key is held by a job still in flight.
SELECT r.stream, r.seq FROM events r
WHERE r.seq <= CAST(@through_seq AS INTEGER) AND r.type = 'dedupe.reserved'
  AND NOT EXISTS (
    SELECT 1 FROM events x
    WHERE x.stream = r.stream AND x.seq <= CAST(@through_seq AS INTEGER) AND x.type = 'dedupe.released'
      AND x.data ->> '$.job_id' = r.data ->> '$.job_id'
  )
ORDER BY r.seq
LIMIT 1;

-- name: ArchiveCutRuns :many
-- The pipeline runs not finished, oldest start first: those pipeline_runs
-- says are running (index pipeline_runs_running, migration 00017), and the
-- starts the projector has not applied yet (the tail after its oldest
-- checkpoint). An archive stops before their start and keeps the compiled
-- version they run on readable (views/archive_cut.go).
SELECT CAST(run_id AS TEXT) AS run_id, CAST(pipeline AS TEXT) AS pipeline, CAST(hash AS TEXT) AS hash,
       CAST(started_seq AS INTEGER) AS started_seq FROM (
    SELECT run_id, pipeline, hash, started_seq FROM pipeline_runs WHERE status = 'running'
    UNION ALL
    SELECT e.data ->> '$.run_id', e.data ->> '$.pipeline', e.data ->> '$.hash', e.seq FROM events e
    WHERE e.seq > (SELECT coalesce(min(c.seq), 0) FROM projector_checkpoint c) AND e.type = 'pipeline.run_started'
)
ORDER BY started_seq;

-- name: ArchiveCutMessages :many
-- The earliest topic message stream that begins at or before through_seq
-- but is not finished there: it has events after it, or a claim of it is
-- active. An archive must stop before its first event
-- (views/archive_cut.go): claims fold the message's stream whole.
SELECT s.stream, CAST(s.first_seq AS INTEGER) AS first_seq FROM (
    SELECT stream, min(seq) AS first_seq, max(seq) AS last_seq FROM events
    WHERE stream >= 'message/' AND stream < 'message0'
    GROUP BY stream
    HAVING min(seq) <= CAST(@through_seq AS INTEGER)
) s
WHERE s.last_seq > CAST(@through_seq AS INTEGER)
   OR EXISTS (SELECT 1 FROM topic_claims c WHERE c.message_id = substr(s.stream, 9) AND c.status = 'active')
ORDER BY s.first_seq
LIMIT 1;
