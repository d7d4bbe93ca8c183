-- Fewer pages written per append (measured with BenchmarkJobLifecycle and
-- ductile bench): every commit used to rewrite sqlite_sequence (AUTOINCREMENT)
-- and the rows of two ledger-wide projections, streams and event_counts.
--
-- seq stays the rowid. Without AUTOINCREMENT SQLite assigns max(seq) + 1,
-- and since DELETE is refused (events_no_delete) the largest seq is never
-- removed, so a seq is still never reused. The triggers are recreated as
-- they were (dropping a table drops its triggers).
--
-- streams and event_counts are dropped: ledger stats now counts streams and
-- event types from the log itself, and the job projections are what the
-- daemon reads.

-- +goose Up
CREATE TABLE events_lean (
    seq         INTEGER PRIMARY KEY,                         -- global order; never reused
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

INSERT INTO events_lean (seq, stream, version, type, data, meta, recorded_at, prev_hash, hash)
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash FROM events ORDER BY seq;

DROP TABLE events;

ALTER TABLE events_lean RENAME TO events;

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

DROP TABLE streams;
DROP TABLE event_counts;

-- +goose Down
-- Back to the 00003 schema. The two ledger-wide projections come back
-- filled as the projector would have left them at its checkpoint (events
-- past it are the projector's to apply, as before the migration).
CREATE TABLE events_auto (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    stream      TEXT    NOT NULL CHECK (stream <> ''),
    version     INTEGER NOT NULL CHECK (version >= 1),
    type        TEXT    NOT NULL CHECK (type <> ''),
    data        TEXT    NOT NULL CHECK (json_valid(data)),
    meta        TEXT    NOT NULL CHECK (json_valid(meta)),
    recorded_at TEXT    NOT NULL CHECK (length(recorded_at) = 30),
    prev_hash   BLOB    NOT NULL CHECK (length(prev_hash) = 32),
    hash        BLOB    NOT NULL CHECK (length(hash) = 32),
    UNIQUE (stream, version)
) STRICT;

INSERT INTO events_auto (seq, stream, version, type, data, meta, recorded_at, prev_hash, hash)
SELECT seq, stream, version, type, data, meta, recorded_at, prev_hash, hash FROM events ORDER BY seq;

DROP TABLE events;

ALTER TABLE events_auto RENAME TO events;

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

CREATE TABLE streams (
    stream      TEXT    PRIMARY KEY,
    version     INTEGER NOT NULL,
    first_seq   INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL,
    last_type   TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL
) STRICT;

CREATE TABLE event_counts (
    type        TEXT    PRIMARY KEY,
    count       INTEGER NOT NULL,
    first_seq   INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL
) STRICT;

INSERT INTO streams (stream, version, first_seq, last_seq, last_type, created_at, updated_at)
SELECT stream, version, first_seq, seq, type, created_at, recorded_at
FROM (
    SELECT stream, version, seq, type, recorded_at,
           row_number() OVER (PARTITION BY stream ORDER BY version DESC) AS newest,
           first_value(seq) OVER (PARTITION BY stream ORDER BY version) AS first_seq,
           first_value(recorded_at) OVER (PARTITION BY stream ORDER BY version) AS created_at
    FROM events
    WHERE seq <= coalesce((SELECT seq FROM projector_checkpoint WHERE name = 'main'), 0)
)
WHERE newest = 1;

INSERT INTO event_counts (type, count, first_seq, last_seq)
SELECT type, count(*), min(seq), max(seq)
FROM events
WHERE seq <= coalesce((SELECT seq FROM projector_checkpoint WHERE name = 'main'), 0)
GROUP BY type;
