-- A job tree for the HTTP API's GET /job/{id}/tree.

-- name: ListJobTree :many
-- The root job @root_id and every job it routed, at any depth, walking
-- parent_job_id down through job_queue_parent (one index search per job
-- of the tree, whatever the size of the history); at most @max_jobs rows,
-- breadth first, so a caller asking for one more than it shows knows the
-- tree was cut.
WITH RECURSIVE tree(id) AS (
    SELECT job_queue.id FROM job_queue WHERE job_queue.id = CAST(@root_id AS TEXT)
    UNION ALL
    SELECT child.id FROM job_queue AS child JOIN tree ON child.parent_job_id = tree.id
    LIMIT CAST(@max_jobs AS INTEGER)
)
SELECT j.id, j.seq, j.plugin, j.command, j.payload, j.status, j.attempt, j.max_attempts, j.submitted_by,
       j.dedupe_key, j.created_at, j.started_at, j.completed_at, j.next_retry_at, j.last_error, j.parent_job_id,
       j.source_event_id, j.correlation_id, j.updated_seq
FROM tree JOIN job_queue AS j ON j.id = tree.id;
