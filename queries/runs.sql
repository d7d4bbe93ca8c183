-- Pipeline runs as pipeline runs and GET /runs list them (views.FindRuns).

-- name: FindPipelineRuns :many
-- Runs, newest start first, of one pipeline and/or one status ('' = any).
SELECT run_id, pipeline, hash, status, job_id, trigger, error, started_seq, started_at, finished_seq, finished_at
FROM pipeline_runs
WHERE (CAST(@pipeline AS TEXT) = '' OR pipeline = CAST(@pipeline AS TEXT))
  AND (CAST(@status AS TEXT) = '' OR status = CAST(@status AS TEXT))
ORDER BY started_seq DESC LIMIT @limit;
