-- What `job tree --at` reads (views/job_tree_at.go): a job tree as it was
-- at a seq, folded from the job streams. Every read goes through an index
-- by key, so its cost follows the tree, not the history.

-- name: EventRecordedAt :many
-- When the event seq was recorded (no row: no such event in the main
-- file), through the primary key: one probe of the bisection that turns a
-- time into a seq.
SELECT recorded_at FROM events WHERE seq = CAST(@seq AS INTEGER);

-- name: SeqBounds :one
-- The oldest and newest seq in the main file (0, 0: none), each through
-- the primary key.
SELECT CAST(coalesce((SELECT min(seq) FROM events), 0) AS INTEGER) AS first_seq,
       CAST(coalesce((SELECT max(seq) FROM events), 0) AS INTEGER) AS last_seq;

-- name: ListJobTreeAt :many
-- The root job @root_id and every job it routed, at any depth, that was
-- enqueued at or before @at_seq (a child is always enqueued after its
-- parent, so the walk stops at the first job too new): through
-- job_queue_parent, at most @max_jobs rows, breadth first.
WITH RECURSIVE tree(id, seq) AS (
    SELECT job_queue.id, job_queue.seq FROM job_queue
    WHERE job_queue.id = CAST(@root_id AS TEXT) AND job_queue.seq <= CAST(@at_seq AS INTEGER)
    UNION ALL
    SELECT child.id, child.seq FROM job_queue AS child JOIN tree ON child.parent_job_id = tree.id
    WHERE child.seq <= CAST(@at_seq AS INTEGER)
    LIMIT CAST(@max_jobs AS INTEGER)
)
SELECT id, seq FROM tree;

-- name: ReadStreamThrough :many
-- One stream's events up to a seq, oldest first, through UNIQUE (stream,
-- version) (a stream's versions rise with its seqs), but its
-- job.stderr_written: output, which no fold reads (a job's stderr may be
-- many thousand events; their data is never loaded).
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
FROM events
WHERE stream = CAST(@stream AS TEXT) AND seq <= CAST(@until_seq AS INTEGER) AND type <> 'job.stderr_written'
ORDER BY version;

-- name: ReadStreamVersion :many
-- One event of a stream, by its version: a point read of UNIQUE (stream,
-- version).
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash
FROM events
WHERE stream = CAST(@stream AS TEXT) AND version = CAST(@version AS INTEGER);
