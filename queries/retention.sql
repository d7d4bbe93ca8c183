-- Pruning job_log (log.pruned, events/retention.go). A job's logs go when
-- the job is terminal as of the prune event (its job_queue row was last
-- changed before the event: updated_seq < @seq) and completed before the
-- cutoff. Times are ledger.TimeFormat text, fixed-width UTC, so comparing
-- them as text compares the instants.

-- name: DeletePrunedJobLog :exec
DELETE FROM job_log WHERE job_id IN (
    SELECT l.job_id FROM job_log l JOIN job_queue q ON q.id = l.job_id
    WHERE l.completed_at < CAST(@before AS TEXT)
      AND q.status IN ('succeeded', 'dead', 'canceled')
      AND q.completed_at < CAST(@before AS TEXT)
      AND q.updated_seq < CAST(@seq AS INTEGER)
);

-- name: CountPrunableJobs :one
-- How many jobs' logs a log.pruned with this cutoff would delete now.
SELECT count(DISTINCT l.job_id) AS jobs FROM job_log l JOIN job_queue q ON q.id = l.job_id
WHERE l.completed_at < CAST(@before AS TEXT)
  AND q.status IN ('succeeded', 'dead', 'canceled')
  AND q.completed_at < CAST(@before AS TEXT);

-- name: DeleteArchivedJobLog :exec
-- ledger.archived: the attempts of the jobs whose events moved to an
-- archive. A job with an event at or before the archive's last seq has all
-- of them there (views.ArchiveCut), so an attempt started there is one.
DELETE FROM job_log WHERE started_seq <= CAST(@through_seq AS INTEGER);

-- name: DeleteArchivedJobs :exec
-- ledger.archived: the jobs whose events moved to an archive (enqueued at
-- or before its last seq, and so terminal there).
DELETE FROM job_queue WHERE seq <= CAST(@through_seq AS INTEGER);
