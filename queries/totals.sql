-- name: AddJobTotal :exec
-- Counts n more jobs of plugin that reached status (job_totals).
INSERT INTO job_totals (plugin, status, n) VALUES (@plugin, @status, @n)
ON CONFLICT (plugin, status) DO UPDATE SET n = n + excluded.n;

-- name: BumpJobTotal :exec
-- Counts n more jobs of plugin that reached status, if job_totals has a row
-- for them (no change otherwise: then AddJobTotal). A plain UPDATE of one
-- row costs about a third of what the upsert does.
UPDATE job_totals SET n = n + @n WHERE plugin = CAST(@plugin AS TEXT) AND status = CAST(@status AS TEXT);

-- name: ListJobTotals :many
-- Every plugin's finished jobs by terminal status, over the ledger's life.
SELECT plugin, status, n FROM job_totals ORDER BY plugin, status;

-- name: DeleteJobTotals :exec
DELETE FROM job_totals;

-- name: GetJobPlugin :one
-- The plugin of a job (job_queue), for job_totals.
SELECT plugin FROM job_queue WHERE id = CAST(@id AS TEXT);
