-- runs: the Run protocol's listing of jobs (migrations/00021_runs.sql),
-- written by the projector (projections/runs.go), read by views.ListRuns.

-- name: InsertRunRow :exec
-- A run's row as a page of events left it: every column.
INSERT INTO runs (job_id, seq, plugin, command, status, timed_out, task_id, trace_id, root_job_id, run_attempt,
                  progress, stage, message, exports_count, updated_seq)
VALUES (@job_id, @seq, @plugin, @command, @status, @timed_out, @task_id, @trace_id, @root_job_id, @run_attempt,
        @progress, @stage, @message, @exports_count, @updated_seq);

-- name: GetRunRow :one
SELECT job_id, seq, plugin, command, status, timed_out, task_id, trace_id, root_job_id, run_attempt,
       progress, stage, message, exports_count, updated_seq
FROM runs WHERE job_id = CAST(@job_id AS TEXT);

-- name: UpdateRunRow :exec
-- The columns events change, as the projector folded them.
UPDATE runs
SET status = @status, timed_out = @timed_out, progress = @progress, stage = @stage, message = @message,
    exports_count = @exports_count, updated_seq = @updated_seq
WHERE job_id = CAST(@job_id AS TEXT);

-- name: DeleteRuns :exec
DELETE FROM runs;

-- name: DeleteArchivedRuns :exec
-- ledger.archived: the jobs whose events moved to an archive.
DELETE FROM runs WHERE seq <= CAST(@through_seq AS INTEGER);

-- name: DumpRuns :many
SELECT job_id, seq, plugin, command, status, timed_out, task_id, trace_id, root_job_id, run_attempt,
       progress, stage, message, exports_count, updated_seq
FROM runs ORDER BY seq;

-- name: ListRunIDs :many
-- Every run, newest first (the seq index). Every listing here starts
-- before @before_seq (the page's cursor: the last seq it showed).
SELECT job_id, seq FROM runs
WHERE seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC LIMIT @max_runs;

-- name: ListRunIDsOfPlugin :many
-- One plugin's runs (runs_by_plugin).
SELECT job_id, seq FROM runs INDEXED BY runs_by_plugin
WHERE plugin = CAST(@plugin AS TEXT) AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC LIMIT @max_runs;

-- name: ListRunIDsWithStatus :many
-- The runs of one status (runs_by_status), of one plugin if @plugin is set.
SELECT job_id, seq FROM runs INDEXED BY runs_by_status
WHERE status = CAST(@status AS TEXT) AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC LIMIT @max_runs;

-- name: ListRunIDsOfTask :many
-- The runs of one task (runs_by_task), of one plugin and one status if
-- they are set.
SELECT job_id, seq FROM runs INDEXED BY runs_by_task
WHERE task_id = CAST(@task_id AS TEXT)
  AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND (CAST(@status AS TEXT) = '' OR status = CAST(@status AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC LIMIT @max_runs;
