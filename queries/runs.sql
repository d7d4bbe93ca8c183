-- Pipeline runs as pipeline runs and GET /runs list them (views.FindRuns),
-- newest start first, one query per filter so that each reads its own
-- index from the newest end and stops at its limit (migration 00018).

-- name: FindPipelineRuns :many
-- Every run.
SELECT run_id, pipeline, hash, status, job_id, trigger, error, started_seq, started_at, finished_seq, finished_at
FROM pipeline_runs
ORDER BY started_seq DESC LIMIT @limit;

-- name: FindPipelineRunsOfPipeline :many
-- The runs of one pipeline (pipeline_runs_by_pipeline).
SELECT run_id, pipeline, hash, status, job_id, trigger, error, started_seq, started_at, finished_seq, finished_at
FROM pipeline_runs
WHERE pipeline = CAST(@pipeline AS TEXT)
ORDER BY started_seq DESC LIMIT @limit;

-- name: FindPipelineRunsWithStatus :many
-- The runs of one status (pipeline_runs_by_status).
SELECT run_id, pipeline, hash, status, job_id, trigger, error, started_seq, started_at, finished_seq, finished_at
FROM pipeline_runs
WHERE status = CAST(@status AS TEXT)
ORDER BY started_seq DESC LIMIT @limit;

-- name: FindPipelineRunsOfPipelineWithStatus :many
-- The runs of one pipeline and one status (pipeline_runs_by_pipeline, the
-- status checked on each).
SELECT run_id, pipeline, hash, status, job_id, trigger, error, started_seq, started_at, finished_seq, finished_at
FROM pipeline_runs INDEXED BY pipeline_runs_by_pipeline
WHERE pipeline = CAST(@pipeline AS TEXT) AND status = CAST(@status AS TEXT)
ORDER BY started_seq DESC LIMIT @limit;
