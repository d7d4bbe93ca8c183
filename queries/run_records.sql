-- The Run protocol's columns of job_queue (migrations/00021_runs.sql),
-- written by the projector (projections/jobs.go), and the run listings of
-- views.ListRuns. A run's status is its job's, but a dead job is a
-- 'timeout' run when its last ended attempt timed out, else 'failed'.

-- name: SetJobProgress :exec
UPDATE job_queue SET progress = @progress, stage = @stage, message = @message, updated_seq = @seq
WHERE id = CAST(@id AS TEXT);

-- name: AddJobExport :exec
UPDATE job_queue SET exports_count = exports_count + 1, updated_seq = @seq WHERE id = CAST(@id AS TEXT);

-- name: ListRunIDs :many
-- Every run, newest first (job_queue's seq). Every listing here starts
-- before @before_seq (the page's cursor: the last seq it showed).
SELECT id, seq FROM job_queue
WHERE seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC LIMIT @max_runs;

-- name: ListDeadRunIDs :many
-- The failed (@timed_out 0) or timeout (1) runs, of one plugin if @plugin
-- is set: dead jobs, through job_queue_dead_or_canceled.
SELECT id, seq FROM job_queue INDEXED BY job_queue_dead_or_canceled
WHERE status = 'dead' AND timed_out = CAST(@timed_out AS INTEGER)
  AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC LIMIT @max_runs;

-- name: ListRunIDsOfTask :many
-- The runs of one task (job_queue_by_task), of one plugin and one run
-- status if they are set.
SELECT id, seq FROM job_queue INDEXED BY job_queue_by_task
WHERE task_id = CAST(@task_id AS TEXT)
  AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND (CAST(@status AS TEXT) = ''
       OR CASE WHEN status <> 'dead' THEN status WHEN timed_out = 1 THEN 'timeout' ELSE 'failed' END = CAST(@status AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC LIMIT @max_runs;
