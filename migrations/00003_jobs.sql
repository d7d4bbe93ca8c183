-- Job and plugin projections (spec §12), derived from job/*, plugin/* events.
-- Times are recorded_at of the event that set them (fixed-width UTC text,
-- for display); order is always by seq.

-- +goose Up
CREATE TABLE job_queue (
    id              TEXT    PRIMARY KEY,
    seq             INTEGER NOT NULL UNIQUE,   -- seq of job.enqueued: FIFO order
    plugin          TEXT    NOT NULL,
    command         TEXT    NOT NULL,
    payload         TEXT    CHECK (payload IS NULL OR json_valid(payload)),
    status          TEXT    NOT NULL,          -- queued | running | cancel_requested | succeeded | dead | canceled
    attempt         INTEGER NOT NULL,
    max_attempts    INTEGER NOT NULL,
    submitted_by    TEXT    NOT NULL,
    dedupe_key      TEXT,
    created_at      TEXT    NOT NULL,
    started_at      TEXT,
    completed_at    TEXT,
    next_retry_at   TEXT,                      -- RFC 3339; compared as time in Go, never as text
    last_error      TEXT,
    parent_job_id   TEXT,
    source_event_id TEXT,
    correlation_id  TEXT    NOT NULL,          -- the root job of the tree
    updated_seq     INTEGER NOT NULL
) STRICT;

CREATE INDEX job_queue_status_seq ON job_queue (status, seq);
-- The few queued jobs waiting for a retry, without scanning the whole queue
-- (next_retry_at is set only while a job waits for its retry).
CREATE INDEX job_queue_waiting_retry ON job_queue (seq) WHERE next_retry_at IS NOT NULL;
CREATE INDEX job_queue_parent ON job_queue (parent_job_id) WHERE parent_job_id IS NOT NULL;

-- One row per attempt: what the plugin said and how long it took.
CREATE TABLE job_log (
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
) STRICT;

-- Append-only durable plugin record (primary); seq is the event's seq.
CREATE TABLE plugin_facts (
    seq         INTEGER PRIMARY KEY,
    plugin_name TEXT    NOT NULL,
    fact_type   TEXT    NOT NULL,
    job_id      TEXT,
    command     TEXT,
    fact_json   TEXT    NOT NULL CHECK (json_valid(fact_json)),
    created_at  TEXT    NOT NULL
) STRICT;

CREATE INDEX plugin_facts_plugin ON plugin_facts (plugin_name, seq);

-- Compatibility view: one row per plugin, its latest state.
CREATE TABLE plugin_state (
    plugin_name TEXT    PRIMARY KEY,
    state       TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(state)),
    updated_at  TEXT,
    updated_seq INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE plugin_state;
DROP TABLE plugin_facts;
DROP TABLE job_log;
DROP TABLE job_queue;
