-- job_log keyed by (job_id, attempt) alone: a WITHOUT ROWID table keeps
-- its rows in the primary key's own b-tree, so an attempt's start writes one
-- b-tree instead of the table and its automatic index, and its end finds
-- the row in one search instead of two. Rows are copied as they are (the
-- projection is not rebuilt); the columns and their order are unchanged.

-- +goose Up
CREATE TABLE job_log_keyed (
    job_id           TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    plugin           TEXT    NOT NULL,
    command          TEXT    NOT NULL,
    status           TEXT    NOT NULL,         -- running | succeeded | failed | timed_out | recovered | canceled
    kind             TEXT,                     -- ok | error | protocol_error | timeout | …
    result           TEXT    CHECK (result IS NULL OR json_valid(result)), -- the protocol response
    stdout           TEXT,                     -- only when stdout was not a valid response
    stderr           TEXT,                     -- capped at 64 KiB
    stderr_truncated INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    exit_code        INTEGER,
    submitted_by     TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    started_at       TEXT    NOT NULL,
    completed_at     TEXT,
    duration_ms      INTEGER,
    parent_job_id    TEXT,
    source_event_id  TEXT,
    started_seq      INTEGER NOT NULL,
    ended_seq        INTEGER,
    PRIMARY KEY (job_id, attempt)
) STRICT, WITHOUT ROWID;

INSERT INTO job_log_keyed SELECT * FROM job_log;
DROP TABLE job_log;
ALTER TABLE job_log_keyed RENAME TO job_log;

-- +goose Down
CREATE TABLE job_log_rowid (
    job_id           TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    plugin           TEXT    NOT NULL,
    command          TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    kind             TEXT,
    result           TEXT    CHECK (result IS NULL OR json_valid(result)),
    stdout           TEXT,
    stderr           TEXT,
    stderr_truncated INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    exit_code        INTEGER,
    submitted_by     TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    started_at       TEXT    NOT NULL,
    completed_at     TEXT,
    duration_ms      INTEGER,
    parent_job_id    TEXT,
    source_event_id  TEXT,
    started_seq      INTEGER NOT NULL,
    ended_seq        INTEGER,
    PRIMARY KEY (job_id, attempt)
) STRICT;

INSERT INTO job_log_rowid SELECT * FROM job_log;
DROP TABLE job_log;
ALTER TABLE job_log_rowid RENAME TO job_log;
