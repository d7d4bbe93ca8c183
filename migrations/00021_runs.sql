-- The Run protocol's listing (docs/runs.md): a run is a job, so its row in
-- job_queue gains what GET /runs filters on and shows, kept by the
-- projector from the job's stream: whether its last ended attempt timed
-- out (a dead job is then a 'timeout' run, else a 'failed' one), the
-- caller's task and trace ids, the retry chain, the running attempt's last
-- progress, and how many export items it has. Runs are listed through the
-- indexes job listings already use, plus one by task. (Columns on the row
-- the projector writes anyway, not a table of their own: a job's
-- lifecycle writes no more pages than before.)
-- A ledger from before it has no task ids, progress or items; timed_out
-- is read from each job's stream.

-- +goose Up
ALTER TABLE job_queue ADD COLUMN timed_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_queue ADD COLUMN task_id TEXT;
ALTER TABLE job_queue ADD COLUMN trace_id TEXT;
ALTER TABLE job_queue ADD COLUMN root_job_id TEXT; -- NULL: the job is its chain's root
ALTER TABLE job_queue ADD COLUMN run_attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE job_queue ADD COLUMN progress REAL;
ALTER TABLE job_queue ADD COLUMN stage TEXT;
ALTER TABLE job_queue ADD COLUMN message TEXT;
ALTER TABLE job_queue ADD COLUMN exports_count INTEGER NOT NULL DEFAULT 0;

CREATE INDEX job_queue_by_task ON job_queue (task_id, seq) WHERE task_id IS NOT NULL;

-- timed_out as the projector keeps it: 1 when the last of the job's
-- attempt ends (job.failed, job.timed_out, job.recovered) and ends
-- (job.succeeded, job.canceled) is a job.timed_out. Read from each job's
-- own stream, newest first (UNIQUE (stream, version)).
UPDATE job_queue SET timed_out = 1
WHERE (SELECT type FROM events
       WHERE stream = 'job/' || job_queue.id
         AND type IN ('job.failed', 'job.timed_out', 'job.recovered', 'job.succeeded', 'job.canceled')
       ORDER BY version DESC LIMIT 1) = 'job.timed_out';

-- +goose Down
DROP INDEX job_queue_by_task;
ALTER TABLE job_queue DROP COLUMN exports_count;
ALTER TABLE job_queue DROP COLUMN message;
ALTER TABLE job_queue DROP COLUMN stage;
ALTER TABLE job_queue DROP COLUMN progress;
ALTER TABLE job_queue DROP COLUMN run_attempt;
ALTER TABLE job_queue DROP COLUMN root_job_id;
ALTER TABLE job_queue DROP COLUMN trace_id;
ALTER TABLE job_queue DROP COLUMN task_id;
ALTER TABLE job_queue DROP COLUMN timed_out;
