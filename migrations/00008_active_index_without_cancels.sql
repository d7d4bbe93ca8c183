-- The index of active jobs holds queued and running jobs only. Pending
-- cancel requests have their own index (00007); with both indexes holding
-- them, the planner (which has no statistics) walked the active index for
-- them unless told otherwise (INDEXED BY), and reading the jobs left
-- running or cancel-requested at start-up walked it twice. Now each status
-- is in one index, so each query finds its own. A cancel request moves its
-- job's entry from one index to the other, as rare as cancel requests are;
-- the path of an ordinary job is unchanged.

-- +goose Up
DROP INDEX job_queue_active;
CREATE INDEX job_queue_active ON job_queue (seq, status)
WHERE status = 'queued' OR status = 'running';

-- +goose Down
DROP INDEX job_queue_active;
CREATE INDEX job_queue_active ON job_queue (seq, status)
WHERE status = 'queued' OR status = 'running' OR status = 'cancel_requested';
