-- events_stream_tail: the streams by the last 12 characters of their name
-- (as TEXT: see FindStreamsByTail), one entry per stream (its first event). For a job or run stream that is
-- the random tail of its UUIDv7 id, the short id the CLI prints
-- (views.ShortID); ResolveJobID and ResolveRunID find a short id, or a
-- prefix of one, through it without reading every stream.

-- +goose Up
CREATE INDEX events_stream_tail ON events (CAST(substr(stream, -12) AS TEXT)) WHERE version = 1;

-- +goose Down
DROP INDEX events_stream_tail;
