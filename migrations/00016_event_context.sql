-- event_context: one row per pipeline job, folded by the projector from
-- job.enqueued events that carry a pipeline step: where the job stands in
-- its run and the whole context (baggage) it was enqueued with.
-- pipeline_runs: one row per pipeline run, from pipeline.run_started and
-- pipeline.run_finished (stream run/<id>).

-- +goose Up
CREATE TABLE event_context (
    job_id           TEXT    PRIMARY KEY,
    run_id           TEXT    NOT NULL,
    parent_id        TEXT,
    pipeline_name    TEXT    NOT NULL,
    node             TEXT    NOT NULL,
    accumulated_json TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    seq              INTEGER NOT NULL
) STRICT;

CREATE INDEX event_context_by_run ON event_context (run_id, seq);

CREATE TABLE pipeline_runs (
    run_id       TEXT    PRIMARY KEY,
    pipeline     TEXT    NOT NULL,
    hash         TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    job_id       TEXT,
    trigger      TEXT    NOT NULL,
    error        TEXT,
    started_seq  INTEGER NOT NULL,
    started_at   TEXT    NOT NULL,
    finished_seq INTEGER,
    finished_at  TEXT
) STRICT;

CREATE INDEX pipeline_runs_by_seq ON pipeline_runs (started_seq);

-- +goose Down
DROP TABLE pipeline_runs;
DROP TABLE event_context;
