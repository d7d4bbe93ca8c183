-- The ledger: one append-only table of immutable events. Every other table in
-- the database is a projection derived from it (see 00002_projections.sql).

-- +goose Up
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,           -- global order; never reused
    stream      TEXT    NOT NULL CHECK (stream <> ''),       -- e.g. job/<id>
    version     INTEGER NOT NULL CHECK (version >= 1),       -- 1, 2, 3… within the stream
    type        TEXT    NOT NULL CHECK (type <> ''),         -- past tense, dotted: job.enqueued
    data        TEXT    NOT NULL CHECK (json_valid(data)),   -- compact JSON, hashed byte for byte
    meta        TEXT    NOT NULL CHECK (json_valid(meta)),   -- correlation_id, causation_id, actor
    recorded_at TEXT    NOT NULL CHECK (length(recorded_at) = 30), -- 2006-01-02T15:04:05.000000000Z
    prev_hash   BLOB    NOT NULL CHECK (length(prev_hash) = 32),
    hash        BLOB    NOT NULL CHECK (length(hash) = 32),
    UNIQUE (stream, version)
) STRICT;

-- Versions within a stream are contiguous: an event is version 1 or follows
-- the stream's previous version (UNIQUE(stream, version) forbids repeats).
-- +goose StatementBegin
CREATE TRIGGER events_contiguous_versions BEFORE INSERT ON events
WHEN NEW.version > 1 AND NOT EXISTS (
    SELECT 1 FROM events WHERE stream = NEW.stream AND version = NEW.version - 1
)
BEGIN
    SELECT RAISE(ABORT, 'events: version gap in stream');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: UPDATE is not allowed');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER events_contiguous_versions;
DROP TRIGGER events_no_delete;
DROP TRIGGER events_no_update;
DROP TABLE events;
