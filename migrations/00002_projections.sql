-- Projections: read models derived only from events by the projector, which
-- moves projector_checkpoint in the same transaction as the rows it writes.
-- Dropping them and replaying the log rebuilds identical content.

-- +goose Up
CREATE TABLE projector_checkpoint (
    name TEXT    PRIMARY KEY,
    seq  INTEGER NOT NULL CHECK (seq >= 0)
) STRICT;

-- One row per stream: its current version and where it starts and ends in the log.
CREATE TABLE streams (
    stream      TEXT    PRIMARY KEY,
    version     INTEGER NOT NULL,
    first_seq   INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL,
    last_type   TEXT    NOT NULL,
    created_at  TEXT    NOT NULL,
    updated_at  TEXT    NOT NULL
) STRICT;

-- One row per event type: how many there are and the latest one.
CREATE TABLE event_counts (
    type        TEXT    PRIMARY KEY,
    count       INTEGER NOT NULL,
    first_seq   INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE event_counts;
DROP TABLE streams;
DROP TABLE projector_checkpoint;
