-- name: CountJobsByPluginAndStatus :many
-- Jobs by plugin and status, each status counted through the index that
-- holds it: queued and running (job_queue_active), cancel_requested
-- (job_queue_cancel_requested), dead and canceled (job_queue_dead_or_canceled).
-- Succeeded jobs are in no index (00010 says why): they are not counted.
-- The unary + keeps the planner off job_queue_by_plugin (00019), whose
-- order it would take for the grouping and so walk every job ever run.
SELECT plugin, status, CAST(count(*) AS INTEGER) AS jobs
FROM job_queue WHERE status = 'queued' OR status = 'running' GROUP BY +plugin, status
UNION ALL
SELECT plugin, status, CAST(count(*) AS INTEGER) AS jobs
FROM job_queue WHERE status = 'cancel_requested' GROUP BY +plugin, status
UNION ALL
SELECT plugin, status, CAST(count(*) AS INTEGER) AS jobs
FROM job_queue WHERE status = 'dead' OR status = 'canceled' GROUP BY +plugin, status;
