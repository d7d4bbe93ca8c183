-- Remote workers' claims (issue 23). Both read through the indexes of
-- active jobs (job_queue_active, job_queue_cancel_requested), so their cost
-- follows the queue and the running jobs, never the history; the unary +
-- keeps the planner off job_queue_by_plugin, which holds every job ever.

-- name: ListClaimableJobs :many
-- Queued jobs of the plugins named (a JSON array), oldest first, with the
-- retry time of those waiting for one (the caller compares it as a time):
-- what a remote worker's claim picks from.
SELECT id, seq, plugin, command, next_retry_at
FROM job_queue
WHERE status = 'queued' AND +plugin IN (SELECT value FROM json_each(CAST(@plugins AS TEXT)))
ORDER BY seq
LIMIT @max_jobs;

-- name: ListRunningPlugins :many
-- The plugin of each job of the plugins named (a JSON array) that runs
-- now, locally or under a remote lease (the caller counts them): what
-- their parallelism caps count. One status per arm, each through its own
-- partial index, as ListActiveJobs.
SELECT plugin
FROM job_queue
WHERE status = 'running' AND +plugin IN (SELECT value FROM json_each(CAST(@plugins AS TEXT)))
UNION ALL
SELECT plugin
FROM job_queue
WHERE status = 'cancel_requested' AND +plugin IN (SELECT value FROM json_each(CAST(@plugins AS TEXT)));
