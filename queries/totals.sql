-- name: AddJobTotal :exec
-- Counts n more jobs of plugin that reached status (job_totals).
INSERT INTO job_totals (plugin, status, n) VALUES (@plugin, @status, @n)
ON CONFLICT (plugin, status) DO UPDATE SET n = n + excluded.n;

-- name: ListJobTotals :many
-- Every plugin's finished jobs by terminal status, over the ledger's life.
SELECT plugin, status, n FROM job_totals ORDER BY plugin, status;

-- name: DeleteJobTotals :exec
DELETE FROM job_totals;
