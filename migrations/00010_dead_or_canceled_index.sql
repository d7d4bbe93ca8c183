-- Jobs that ended dead or canceled, by status then seq, so listing them
-- (job list --status dead) reads what it shows instead of walking the whole
-- history of succeeded jobs. Only these two statuses: a job that succeeds,
-- the common path, never enters this index, so the pages each completion
-- writes are unchanged (an index of succeeded jobs would add one to every
-- completion's commit; see 00005). Queued, running and cancel-requested
-- jobs have their indexes already (00007, 00008).

-- +goose Up
CREATE INDEX job_queue_dead_or_canceled ON job_queue (status, seq)
WHERE status = 'dead' OR status = 'canceled';

-- +goose Down
DROP INDEX job_queue_dead_or_canceled;
