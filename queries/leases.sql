-- Remote workers' claims (issue 23).

-- name: ListClaimableJobs :many
-- Queued jobs of the plugins named (a JSON array), oldest first, with the
-- retry time of those waiting for one (the caller compares it as a time):
-- what a remote worker's claim picks from, through job_queue_by_plugin.
SELECT id, seq, plugin, command, next_retry_at
FROM job_queue
WHERE plugin IN (SELECT value FROM json_each(CAST(@plugins AS TEXT))) AND status = 'queued'
ORDER BY seq
LIMIT @max_jobs;

-- name: CountRunningByPlugin :many
-- How many jobs of each plugin named (a JSON array) run now, locally or
-- under a remote lease: what their parallelism caps count.
SELECT plugin, count(*) AS running
FROM job_queue
WHERE plugin IN (SELECT value FROM json_each(CAST(@plugins AS TEXT))) AND status IN ('running', 'cancel_requested')
GROUP BY plugin;
