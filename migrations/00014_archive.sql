-- Archiving the log's oldest events (ledger/archive.go, docs/architecture.md
-- "Archiving a prefix of the log"): the events with seq <= N move, verbatim,
-- to an archive file beside the ledger, and the main file keeps a record of
-- every archive and of the versions the moved events had reached.
--
-- ledger_archives: one row per archive file, oldest first. The newest row's
-- last_seq and last_hash are the anchor the main file's chain continues
-- from. The row is written in the same transaction that deletes the events
-- it covers, so DELETE is allowed only of events an archive already holds.
--
-- archived_streams: for each stream some of whose events were archived (but
-- job streams, archived whole and never appended to again), the newest
-- version archived, so a stream keeps counting from where it was: the
-- version triggers below check it as they check the events still present,
-- and the type of the newest event archived.
--
-- archived_stream_types: for the same streams, the newest archived event of
-- each type, in full. Readers that fold a stream's newest event (of a type)
-- as its state (the scheduler, the circuit breaker, a plugin's state and
-- health, the applied config) read it from here when the main file holds no
-- event of that stream (or type): queries/events.sql, ReadStreamLast and
-- ReadStreamLastOfType. The stream's newest archived event is the row whose
-- type archived_streams names.

-- +goose Up
CREATE TABLE ledger_archives (
    first_seq    INTEGER PRIMARY KEY,
    last_seq     INTEGER NOT NULL UNIQUE CHECK (last_seq >= first_seq),
    file         TEXT    NOT NULL CHECK (file <> ''),                -- base name, beside the ledger
    prev_hash    BLOB    NOT NULL CHECK (length(prev_hash) = 32),    -- of event first_seq - 1 (zeros: none)
    last_hash    BLOB    NOT NULL CHECK (length(last_hash) = 32),    -- of event last_seq
    content_hash BLOB    NOT NULL CHECK (length(content_hash) = 32), -- BLAKE3 of the archive file's bytes
    events       INTEGER NOT NULL CHECK (events = last_seq - first_seq + 1),
    archived_at  TEXT    NOT NULL
) STRICT;

CREATE TABLE archived_streams (
    stream  TEXT    PRIMARY KEY,
    version INTEGER NOT NULL CHECK (version >= 1),
    type    TEXT    NOT NULL -- of the newest event archived (archived_stream_types)
) STRICT, WITHOUT ROWID;

CREATE TABLE archived_stream_types (
    stream      TEXT    NOT NULL,
    type        TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    version     INTEGER NOT NULL CHECK (version >= 1),
    data        TEXT    NOT NULL,
    meta        TEXT    NOT NULL,
    recorded_at TEXT    NOT NULL,
    prev_hash   BLOB    NOT NULL,
    hash        BLOB    NOT NULL,
    PRIMARY KEY (stream, type)
) STRICT, WITHOUT ROWID;

DROP TRIGGER events_no_delete;

-- +goose StatementBegin
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN OLD.seq > coalesce((SELECT max(last_seq) FROM ledger_archives), 0)
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed (but of events an archive holds)');
END;
-- +goose StatementEnd

DROP TRIGGER events_contiguous_versions;

-- +goose StatementBegin
CREATE TRIGGER events_contiguous_versions BEFORE INSERT ON events
WHEN NEW.version > 1 AND NOT EXISTS (
    SELECT 1 FROM events WHERE stream = NEW.stream AND version = NEW.version - 1
) AND NOT EXISTS (
    SELECT 1 FROM archived_streams WHERE stream = NEW.stream AND version = NEW.version - 1
)
BEGIN
    SELECT RAISE(ABORT, 'events: version gap in stream');
END;
-- +goose StatementEnd

-- A version an archive holds is taken, as UNIQUE (stream, version) says of
-- the versions still present.
-- +goose StatementBegin
-- Only a version 1 can collide with an archived one: any later version needs
-- its predecessor among the events left (all newer than the archived ones)
-- or, for the first append after an archive, archived_streams' own version
-- (events_contiguous_versions). So the check runs once per new stream.
CREATE TRIGGER events_archived_versions BEFORE INSERT ON events
WHEN NEW.version = 1 AND EXISTS (
    SELECT 1 FROM archived_streams WHERE stream = NEW.stream
)
BEGIN
    SELECT RAISE(ABORT, 'events: version already taken by an archived event');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER events_archived_versions;
DROP TRIGGER events_contiguous_versions;
DROP TRIGGER events_no_delete;

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
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed');
END;
-- +goose StatementEnd

DROP TABLE archived_stream_types;
DROP TABLE archived_streams;
DROP TABLE ledger_archives;
