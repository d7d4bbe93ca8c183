-- The topic exchange (docs/topics.md), projected from the message/<id>
-- streams. topic_messages holds every message, in seq order by topic and
-- by conversation; topic_claims each worker group's claim of a message as
-- last recorded (one row per message and group: a claim again after an
-- expiry replaces it); topic_cursors, per topic and group, the seq through
-- which every message of the topic is done for the group (its claim ended
-- for good), so a claim scans from there: its cost follows the backlog,
-- not the topic's history.

-- +goose Up
CREATE TABLE topic_messages (
    seq             INTEGER PRIMARY KEY, -- of its message.published
    id              TEXT    NOT NULL UNIQUE,
    topic           TEXT    NOT NULL,
    conversation_id TEXT    NOT NULL,
    parent_id       TEXT,
    producer        TEXT,
    body            TEXT    NOT NULL,
    metadata        TEXT,
    created_at      TEXT    NOT NULL
) STRICT;

CREATE INDEX topic_messages_by_topic ON topic_messages (topic, seq);
CREATE INDEX topic_messages_by_conversation ON topic_messages (conversation_id, seq);

CREATE TABLE topic_claims (
    message_id   TEXT    NOT NULL,
    worker_group TEXT    NOT NULL,
    topic        TEXT    NOT NULL,
    message_seq  INTEGER NOT NULL,
    status       TEXT    NOT NULL, -- active | completed | failed | timed_out | expired
    done         INTEGER NOT NULL, -- 1: the group is done with the message (ended, or expired into its dead letter)
    worker       TEXT    NOT NULL,
    fence        INTEGER NOT NULL,
    lease_until  TEXT    NOT NULL,
    attempts     INTEGER NOT NULL,
    claimed_at   TEXT    NOT NULL,
    ended_at     TEXT,
    follow_up_id TEXT,
    error        TEXT,
    updated_seq  INTEGER NOT NULL,
    PRIMARY KEY (message_id, worker_group)
) STRICT, WITHOUT ROWID;

-- The claim's scan joins each message of the topic to its group's claim
-- (the primary key); the sweeper reads the active claims.
CREATE INDEX topic_claims_active ON topic_claims (message_seq) WHERE status = 'active';

CREATE TABLE topic_cursors (
    topic        TEXT    NOT NULL,
    worker_group TEXT    NOT NULL,
    done_through INTEGER NOT NULL,
    PRIMARY KEY (topic, worker_group)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE topic_cursors;
DROP TABLE topic_claims;
DROP TABLE topic_messages;
