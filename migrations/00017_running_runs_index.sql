-- pipeline_runs_running: the runs not finished, oldest start first. An
-- archive stops before the oldest one's start (commands.ArchiveCut).

-- +goose Up
CREATE INDEX pipeline_runs_running ON pipeline_runs (started_seq) WHERE status = 'running';

-- +goose Down
DROP INDEX pipeline_runs_running;
