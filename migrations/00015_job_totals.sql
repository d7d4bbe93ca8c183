-- job_totals: how many jobs of each plugin reached each terminal status
-- (succeeded, dead, canceled) over the ledger's life, for the counter
-- ductile_jobs_finished_total. The job_queue projection adds one per
-- job.succeeded, job.dead and job.canceled; ledger.archived, which removes
-- archived jobs' rows from job_queue, leaves it alone, so archiving never
-- lowers a total. Counting succeeded jobs in job_queue instead would walk
-- the whole history (00010 says why no index holds them).
--
-- Existing ledgers start from the jobs job_queue holds. A ledger archived
-- before this migration counts its archived jobs only after a replay
-- (ductile ledger replay): until then ledger verify reports job_totals.

-- +goose Up
CREATE TABLE job_totals (
    plugin TEXT    NOT NULL,
    status TEXT    NOT NULL CHECK (status IN ('succeeded', 'dead', 'canceled')),
    n      INTEGER NOT NULL CHECK (n > 0),
    PRIMARY KEY (plugin, status)
) STRICT, WITHOUT ROWID;

INSERT INTO job_totals (plugin, status, n)
SELECT plugin, status, count(*) FROM job_queue
WHERE status IN ('succeeded', 'dead', 'canceled')
GROUP BY plugin, status;

-- +goose Down
DROP TABLE job_totals;
