-- Pruning job_log (log.pruned) finds the attempts that ended before a
-- cutoff through this index: its cost is the rows it prunes, not the
-- size of job_log or of job_queue (which is never pruned).

-- +goose Up
CREATE INDEX job_log_completed_at ON job_log (completed_at) WHERE completed_at IS NOT NULL;

-- +goose Down
DROP INDEX job_log_completed_at;
