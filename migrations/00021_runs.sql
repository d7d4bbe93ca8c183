-- runs: one row per job as the Run protocol lists it (a run is a job:
-- run_id = job_id; docs/runs.md), folded by the projector from the job's
-- stream: the run status (a dead job whose last attempt timed out is
-- 'timeout', else 'failed'), the caller's task and trace ids, the retry
-- chain, the last progress and how many export items it has. GET /runs
-- and `ductile run list` page through its indexes, newest first (seq is
-- job.enqueued's), so a page costs what it shows, not the history.
-- A ledger from before it starts the table from job_queue and job_log
-- (no job of it has task ids, progress or exports).

-- +goose Up
CREATE TABLE runs (
    job_id         TEXT    PRIMARY KEY,
    seq            INTEGER NOT NULL UNIQUE,
    plugin         TEXT    NOT NULL,
    command        TEXT    NOT NULL,
    status         TEXT    NOT NULL,           -- queued | running | cancel_requested | succeeded | failed | timeout | canceled
    timed_out      INTEGER NOT NULL DEFAULT 0, -- the last attempt that ended timed out
    task_id        TEXT,
    trace_id       TEXT,
    root_job_id    TEXT,                       -- NULL: the job is its chain's root
    run_attempt    INTEGER NOT NULL DEFAULT 1,
    progress       REAL,
    stage          TEXT,
    message        TEXT,
    exports_count  INTEGER NOT NULL DEFAULT 0,
    updated_seq    INTEGER NOT NULL
) STRICT;

CREATE INDEX runs_by_task ON runs (task_id, seq) WHERE task_id IS NOT NULL;
CREATE INDEX runs_by_plugin ON runs (plugin, seq);
CREATE INDEX runs_by_status ON runs (status, seq);

INSERT INTO runs (job_id, seq, plugin, command, status, timed_out, updated_seq)
SELECT q.id, q.seq, q.plugin, q.command,
       CASE WHEN q.status = 'dead' AND l.kind = 'timeout' THEN 'timeout'
            WHEN q.status = 'dead' THEN 'failed'
            ELSE q.status END,
       coalesce(l.kind = 'timeout', 0), q.updated_seq
FROM job_queue q
LEFT JOIN job_log l ON l.job_id = q.id
    AND l.attempt = (SELECT max(attempt) FROM job_log WHERE job_id = q.id AND completed_at IS NOT NULL);

-- +goose Down
DROP TABLE runs;
