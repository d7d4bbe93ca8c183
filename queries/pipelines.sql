-- event_context and pipeline_runs: written by the projector, read by views.

-- name: InsertEventContext :exec
INSERT INTO event_context (job_id, run_id, parent_id, pipeline_name, node, accumulated_json, created_at, seq)
VALUES (@job_id, @run_id, @parent_id, @pipeline_name, @node, @accumulated_json, @created_at, @seq);

-- name: DeleteEventContext :exec
DELETE FROM event_context;

-- name: DumpEventContext :many
SELECT job_id, run_id, parent_id, pipeline_name, node, accumulated_json, created_at, seq
FROM event_context ORDER BY job_id;

-- name: ListEventContextOfRun :many
SELECT job_id, run_id, parent_id, pipeline_name, node, accumulated_json, created_at, seq
FROM event_context WHERE run_id = CAST(@run_id AS TEXT) ORDER BY seq;

-- name: InsertPipelineRun :exec
INSERT INTO pipeline_runs (run_id, pipeline, hash, status, job_id, trigger, started_seq, started_at)
VALUES (@run_id, @pipeline, @hash, 'running', @job_id, @trigger, @started_seq, @started_at);

-- name: FinishPipelineRun :exec
UPDATE pipeline_runs SET status = @status, error = @error, finished_seq = @finished_seq, finished_at = @finished_at
WHERE run_id = CAST(@run_id AS TEXT);

-- name: DeletePipelineRuns :exec
DELETE FROM pipeline_runs;

-- name: DumpPipelineRuns :many
SELECT run_id, pipeline, hash, status, job_id, trigger, error, started_seq, started_at, finished_seq, finished_at
FROM pipeline_runs ORDER BY run_id;

-- name: GetPipelineRun :many
SELECT run_id, pipeline, hash, status, job_id, trigger, error, started_seq, started_at, finished_seq, finished_at
FROM pipeline_runs WHERE run_id = CAST(@run_id AS TEXT);

-- name: DeleteArchivedEventContext :exec
-- ledger.archived: the jobs whose events moved to an archive.
DELETE FROM event_context WHERE seq <= CAST(@through_seq AS INTEGER);

-- name: DeleteArchivedPipelineRuns :exec
-- ledger.archived: the runs whose start and finish moved to an archive (a
-- run not finished there keeps its row: views.ArchiveCut keeps the start
-- of a run still running out of an archive).
DELETE FROM pipeline_runs
WHERE started_seq <= CAST(@through_seq AS INTEGER) AND finished_seq <= CAST(@through_seq AS INTEGER);
