-- job_queue and job_log: written by the projector, read by the dispatcher and the CLI.

-- name: InsertJobRow :exec
-- A job's row as a page of events left it (projections/jobs.go): every
-- column, as the statements below set them one event at a time.
INSERT INTO job_queue (id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by,
                       dedupe_key, created_at, started_at, completed_at, next_retry_at, last_error,
                       parent_job_id, source_event_id, correlation_id, updated_seq,
                       timed_out, task_id, trace_id, root_job_id, run_attempt, progress, stage, message, exports_count)
VALUES (@id, @seq, @plugin, @command, @payload, @status, @attempt, @max_attempts, @submitted_by,
        @dedupe_key, @created_at, @started_at, @completed_at, @next_retry_at, @last_error,
        @parent_job_id, @source_event_id, @correlation_id, @updated_seq,
        @timed_out, @task_id, @trace_id, @root_job_id, @run_attempt, @progress, @stage, @message, @exports_count);

-- name: SetJobStarted :exec
-- A new attempt reports its own progress: the last one's is cleared.
UPDATE job_queue
SET status = 'running', attempt = @attempt, started_at = @at, next_retry_at = NULL,
    progress = NULL, stage = NULL, message = NULL, updated_seq = @seq
WHERE id = CAST(@id AS TEXT);

-- name: SetJobEnded :exec
-- A terminal status other than dead: succeeded or canceled (its end is no
-- timeout, whatever an earlier attempt's was).
UPDATE job_queue
SET status = @status, completed_at = @at, last_error = @last_error, next_retry_at = NULL, timed_out = 0, updated_seq = @seq
WHERE id = CAST(@id AS TEXT);

-- name: SetJobRetry :exec
UPDATE job_queue
SET status = 'queued', attempt = @attempt, next_retry_at = @next_retry_at,
    max_attempts = CASE WHEN CAST(@max_attempts AS INTEGER) > 0 THEN @max_attempts ELSE max_attempts END,
    updated_seq = @seq
WHERE id = CAST(@id AS TEXT);

-- name: SetJobDead :exec
UPDATE job_queue
SET status = 'dead', completed_at = @at, last_error = coalesce(last_error, @reason), next_retry_at = NULL, updated_seq = @seq
WHERE id = CAST(@id AS TEXT);

-- name: SetJobLastError :exec
-- An attempt failed (job.failed), or timed out (job.timed_out: timed_out 1).
UPDATE job_queue SET last_error = @last_error, timed_out = CAST(@timed_out AS INTEGER), updated_seq = @seq WHERE id = CAST(@id AS TEXT);

-- name: SetJobQueued :exec
-- Back in the queue after its runner died (recovery of an orphan).
UPDATE job_queue
SET status = 'queued', attempt = @attempt, last_error = @last_error, timed_out = 0, updated_seq = @seq
WHERE id = CAST(@id AS TEXT);

-- name: SetJobStatus :exec
UPDATE job_queue SET status = CAST(@status AS TEXT), updated_seq = @seq WHERE id = CAST(@id AS TEXT);

-- name: SetJobAttempt :exec
UPDATE job_queue SET attempt = CAST(@attempt AS INTEGER), last_error = @last_error, timed_out = 0, updated_seq = @seq WHERE id = CAST(@id AS TEXT);

-- name: GetJobForLog :one
-- The columns of a job that each of its attempts' rows repeats (fixed once
-- it is enqueued).
SELECT plugin, command, submitted_by, created_at, parent_job_id, source_event_id
FROM job_queue WHERE id = CAST(@id AS TEXT);

-- name: InsertJobLogRow :exec
-- An attempt's row as a page of events left it (projections/joblog.go).
INSERT INTO job_log (job_id, attempt, plugin, command, status, kind, result, stdout, stderr, stderr_truncated,
                     last_error, exit_code, submitted_by, created_at, started_at, completed_at, duration_ms,
                     parent_job_id, source_event_id, started_seq, ended_seq)
VALUES (@job_id, @attempt, @plugin, @command, @status, @kind, @result, @stdout, @stderr, @stderr_truncated,
        @last_error, @exit_code, @submitted_by, @created_at, @started_at, @completed_at, @duration_ms,
        @parent_job_id, @source_event_id, @started_seq, @ended_seq);

-- name: EndJobLog :exec
UPDATE job_log
SET status = @status, kind = @kind, result = @result, stdout = @stdout, stderr = @stderr,
    stderr_truncated = @stderr_truncated, last_error = @last_error, exit_code = @exit_code,
    completed_at = @at, duration_ms = @duration_ms, ended_seq = @seq
WHERE job_id = CAST(@job_id AS TEXT) AND attempt = CAST(@attempt AS INTEGER);

-- name: SetJobLogStatus :exec
UPDATE job_log
SET status = @status, last_error = @last_error, completed_at = @at, ended_seq = @seq
WHERE job_id = CAST(@job_id AS TEXT) AND attempt = CAST(@attempt AS INTEGER);

-- name: CancelJobLog :exec
UPDATE job_log
SET status = 'canceled', last_error = @last_error, completed_at = @at, ended_seq = @seq
WHERE job_id = CAST(@job_id AS TEXT) AND attempt = CAST(@attempt AS INTEGER) AND status = 'running';

-- name: DeleteJobQueue :exec
DELETE FROM job_queue;

-- name: DeleteJobLog :exec
DELETE FROM job_log;

-- name: DumpJobQueue :many
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq,
       timed_out, task_id, trace_id, root_job_id, run_attempt, progress, stage, message, exports_count
FROM job_queue ORDER BY seq;

-- name: DumpJobLog :many
SELECT job_id, attempt, plugin, command, status, kind, result, stdout, stderr, stderr_truncated, last_error,
       exit_code, submitted_by, created_at, started_at, completed_at, duration_ms, parent_job_id,
       source_event_id, started_seq, ended_seq
FROM job_log ORDER BY started_seq;

-- name: ListActiveJobs :many
-- Jobs a process is (or was, before a crash) running: read at start-up.
-- One status per arm, so each walks its partial index: job_queue_active
-- for running jobs (status in the index: no row is read for a job that is
-- only queued), job_queue_cancel_requested for the others.
SELECT id, seq FROM job_queue WHERE status = 'running'
UNION ALL
SELECT id, seq FROM job_queue WHERE status = 'cancel_requested'
ORDER BY seq;

-- name: GetJob :many
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue WHERE id = CAST(@id AS TEXT);

-- Job listings, newest first, optionally of one plugin (empty matches all).
-- One query per status, each naming its status with status = 'x' so that
-- SQLite reads it through that status's partial index (queries/
-- plan_internal_test.go checks it): a listing costs what it shows, not the
-- size of the history. A status given as a parameter would defeat every one
-- of those indexes and walk all jobs ever run.

-- name: ListJobs :many
-- Any status: walks job_queue by seq, newest first. Every listing below
-- starts before @before_seq (a page's cursor: the last seq it showed).
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC
LIMIT @max_jobs;

-- name: ListQueuedJobs :many
-- Through job_queue_active.
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE status = 'queued' AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC
LIMIT @max_jobs;

-- name: ListRunningJobs :many
-- Through job_queue_active.
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE status = 'running' AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC
LIMIT @max_jobs;

-- name: ListCancelRequestedJobs :many
-- Through job_queue_cancel_requested.
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE status = 'cancel_requested' AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC
LIMIT @max_jobs;

-- name: ListSucceededJobs :many
-- No index holds succeeded jobs (one would cost every completion a page
-- write): walks job_queue by seq, newest first, past the jobs that did not
-- succeed, few where most jobs succeed.
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE status = 'succeeded' AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC
LIMIT @max_jobs;

-- name: ListDeadJobs :many
-- Through job_queue_dead_or_canceled.
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE status = 'dead' AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC
LIMIT @max_jobs;

-- name: ListCanceledJobs :many
-- Through job_queue_dead_or_canceled.
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE status = 'canceled' AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
  AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC
LIMIT @max_jobs;

-- name: ListPluginJobs :many
-- One plugin's jobs, newest first, before @before_seq, through
-- job_queue_by_plugin (00019): the cost of the jobs it returns.
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE plugin = CAST(@plugin AS TEXT) AND seq < CAST(@before_seq AS INTEGER)
ORDER BY seq DESC
LIMIT @max_jobs;

-- name: ListQueue :many
-- The active jobs in run order, oldest first (a retry keeps its place),
-- each status through its own index, merged by seq.
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue WHERE status = 'running'
UNION ALL
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue WHERE status = 'cancel_requested'
UNION ALL
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue WHERE status = 'queued'
ORDER BY seq
LIMIT @max_jobs;

-- name: CountQueue :one
-- The size of the queue, each status counted in its own index.
SELECT
    CAST((SELECT count(*) FROM job_queue WHERE status = 'queued') AS INTEGER)           AS queued,
    CAST((SELECT count(*) FROM job_queue WHERE status = 'running') AS INTEGER)          AS running,
    CAST((SELECT count(*) FROM job_queue WHERE status = 'cancel_requested') AS INTEGER) AS cancel_requested;

-- name: ListChildJobs :many
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue WHERE parent_job_id = CAST(@parent_job_id AS TEXT) ORDER BY seq;

-- name: ListJobAttempts :many
SELECT job_id, attempt, plugin, command, status, kind, result, stdout, stderr, stderr_truncated, last_error,
       exit_code, submitted_by, created_at, started_at, completed_at, duration_ms, parent_job_id,
       source_event_id, started_seq, ended_seq
FROM job_log WHERE job_id = CAST(@job_id AS TEXT) ORDER BY attempt;

-- name: ListReadyJobs :many
-- Dispatch candidates that are not waiting for a retry, oldest first,
-- leaving out plugins at their parallelism cap (a JSON array of names),
-- with the trace id their plugin is given (runs, by primary key).
SELECT job_queue.id, job_queue.seq, job_queue.plugin, job_queue.command, job_queue.dedupe_key, runs.trace_id
FROM job_queue LEFT JOIN runs ON runs.job_id = job_queue.id
WHERE job_queue.status = 'queued' AND job_queue.next_retry_at IS NULL
  AND job_queue.plugin NOT IN (SELECT value FROM json_each(CAST(@capped_plugins AS TEXT)))
ORDER BY job_queue.seq
LIMIT @max_jobs;

-- name: ListWaitingRetries :many
-- Queued jobs waiting for their retry time (few: one per failing job). The
-- unary + keeps the planner on the small partial index job_queue_waiting_retry
-- instead of scanning every queued job through job_queue_active.
SELECT job_queue.id, job_queue.seq, job_queue.plugin, job_queue.command, job_queue.dedupe_key, job_queue.next_retry_at, runs.trace_id
FROM job_queue LEFT JOIN runs ON runs.job_id = job_queue.id
WHERE job_queue.next_retry_at IS NOT NULL AND +job_queue.status = 'queued'
ORDER BY job_queue.seq;

-- name: ListCancelRequested :many
-- Through the partial index of pending cancel requests (migration 00007),
-- the only index that holds them (00008).
SELECT id FROM job_queue WHERE status = 'cancel_requested' ORDER BY seq;
