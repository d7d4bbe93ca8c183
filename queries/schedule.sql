-- name: ListOutstandingJobs :many
-- A plugin's jobs of one command that are queued or running: the poll
-- guard's candidates, which the firing's decision checks again against
-- each job's stream. One status per arm, so each reads its index.
SELECT id, status FROM job_queue
WHERE status = 'queued' AND plugin = CAST(@plugin AS TEXT) AND command = CAST(@command AS TEXT)
UNION ALL
SELECT id, status FROM job_queue
WHERE status = 'running' AND plugin = CAST(@plugin AS TEXT) AND command = CAST(@command AS TEXT)
ORDER BY 1;
