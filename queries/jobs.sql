-- job_queue and job_log: written by the projector, read by the dispatcher and the CLI.

-- name: InsertJob :exec
INSERT INTO job_queue (id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by,
                       dedupe_key, created_at, parent_job_id, source_event_id, correlation_id, updated_seq)
VALUES (@id, @seq, @plugin, @command, @payload, 'queued', 1, @max_attempts, @submitted_by,
        @dedupe_key, @created_at, @parent_job_id, @source_event_id, @correlation_id, @seq);

-- name: SetJobStarted :exec
UPDATE job_queue
SET status = 'running', attempt = @attempt, started_at = @at, next_retry_at = NULL, updated_seq = @seq
WHERE id = CAST(@id AS TEXT);

-- name: SetJobEnded :exec
-- A terminal status: succeeded, dead or canceled.
UPDATE job_queue
SET status = @status, completed_at = @at, last_error = @last_error, next_retry_at = NULL, updated_seq = @seq
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
UPDATE job_queue SET last_error = @last_error, updated_seq = @seq WHERE id = CAST(@id AS TEXT);

-- name: SetJobQueued :exec
-- Back in the queue after its runner died (recovery of an orphan).
UPDATE job_queue
SET status = 'queued', attempt = @attempt, last_error = @last_error, updated_seq = @seq
WHERE id = CAST(@id AS TEXT);

-- name: SetJobStatus :exec
UPDATE job_queue SET status = CAST(@status AS TEXT), updated_seq = @seq WHERE id = CAST(@id AS TEXT);

-- name: SetJobAttempt :exec
UPDATE job_queue SET attempt = CAST(@attempt AS INTEGER), last_error = @last_error, updated_seq = @seq WHERE id = CAST(@id AS TEXT);

-- name: StartJobLog :exec
INSERT INTO job_log (job_id, attempt, plugin, command, status, submitted_by, created_at, started_at,
                     parent_job_id, source_event_id, started_seq)
SELECT id, @attempt, plugin, command, 'running', submitted_by, created_at, @at,
       parent_job_id, source_event_id, @seq
FROM job_queue WHERE id = CAST(@job_id AS TEXT);

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
       correlation_id, updated_seq
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

-- name: ListJobs :many
-- Newest first, optionally one status and/or one plugin (empty matches all).
SELECT id, seq, plugin, command, payload, status, attempt, max_attempts, submitted_by, dedupe_key,
       created_at, started_at, completed_at, next_retry_at, last_error, parent_job_id, source_event_id,
       correlation_id, updated_seq
FROM job_queue
WHERE (CAST(@status AS TEXT) = '' OR status = CAST(@status AS TEXT)) AND (CAST(@plugin AS TEXT) = '' OR plugin = CAST(@plugin AS TEXT))
ORDER BY seq DESC
LIMIT @max_jobs;

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

-- name: CountJobsByStatus :many
SELECT status, CAST(count(*) AS INTEGER) AS jobs FROM job_queue GROUP BY status ORDER BY status;

-- name: ListReadyJobs :many
-- Dispatch candidates that are not waiting for a retry, oldest first,
-- leaving out plugins at their parallelism cap (a JSON array of names).
SELECT id, seq, plugin, command, dedupe_key
FROM job_queue
WHERE status = 'queued' AND next_retry_at IS NULL
  AND plugin NOT IN (SELECT value FROM json_each(CAST(@capped_plugins AS TEXT)))
ORDER BY seq
LIMIT @max_jobs;

-- name: ListWaitingRetries :many
-- Queued jobs waiting for their retry time (few: one per failing job). The
-- unary + keeps the planner on the small partial index job_queue_waiting_retry
-- instead of scanning every queued job through job_queue_active.
SELECT id, seq, plugin, command, dedupe_key, next_retry_at
FROM job_queue
WHERE next_retry_at IS NOT NULL AND +status = 'queued'
ORDER BY seq;

-- name: ListCancelRequested :many
-- Through the partial index of pending cancel requests (migration 00007),
-- the only index that holds them (00008).
SELECT id FROM job_queue WHERE status = 'cancel_requested' ORDER BY seq;
