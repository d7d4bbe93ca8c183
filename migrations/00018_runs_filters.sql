-- pipeline_runs_by_pipeline, pipeline_runs_by_status: pipeline runs and
-- GET /runs list one pipeline's runs, or the runs of one status, newest
-- start first (views.FindRuns); each reads its index from the newest end
-- and stops at its limit instead of walking every run ever recorded.

-- +goose Up
CREATE INDEX pipeline_runs_by_pipeline ON pipeline_runs (pipeline, started_seq);
CREATE INDEX pipeline_runs_by_status ON pipeline_runs (status, started_seq);

-- +goose Down
DROP INDEX pipeline_runs_by_status;
DROP INDEX pipeline_runs_by_pipeline;
