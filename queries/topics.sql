-- topic_messages, topic_claims, topic_cursors: written by the projector
-- (projections/topics.go), read by the engine's claims and sweeps and by
-- the views.

-- name: InsertTopicMessage :exec
INSERT INTO topic_messages (seq, id, topic, conversation_id, parent_id, producer, body, metadata, created_at)
VALUES (@seq, @id, @topic, @conversation_id, @parent_id, @producer, @body, @metadata, @created_at);

-- name: TopicMessageSeq :one
SELECT seq, topic FROM topic_messages WHERE id = CAST(@id AS TEXT);

-- name: UpsertTopicClaim :exec
INSERT INTO topic_claims (message_id, worker_group, topic, message_seq, status, done, worker, fence, lease_until,
    attempts, claimed_at, ended_at, follow_up_id, error, updated_seq)
VALUES (@message_id, @worker_group, @topic, @message_seq, 'active', 0, @worker, @fence, @lease_until,
    @attempts, @claimed_at, NULL, NULL, NULL, @updated_seq)
ON CONFLICT (message_id, worker_group) DO UPDATE SET
    status = 'active', done = 0, worker = excluded.worker, fence = excluded.fence, lease_until = excluded.lease_until,
    attempts = excluded.attempts, claimed_at = excluded.claimed_at, ended_at = NULL, follow_up_id = NULL,
    error = NULL, updated_seq = excluded.updated_seq;

-- name: RenewTopicClaim :exec
UPDATE topic_claims SET lease_until = @lease_until, updated_seq = @updated_seq
WHERE message_id = CAST(@message_id AS TEXT) AND worker_group = CAST(@worker_group AS TEXT) AND fence = CAST(@fence AS INTEGER) AND status = 'active';

-- name: EndTopicClaim :one
UPDATE topic_claims SET status = @status, done = @done, ended_at = @ended_at, follow_up_id = @follow_up_id,
    error = @error, updated_seq = @updated_seq
WHERE message_id = CAST(@message_id AS TEXT) AND worker_group = CAST(@worker_group AS TEXT) AND fence = CAST(@fence AS INTEGER)
RETURNING topic, message_seq;

-- name: TopicCursor :one
SELECT done_through FROM topic_cursors WHERE topic = CAST(@topic AS TEXT) AND worker_group = CAST(@worker_group AS TEXT);

-- name: SetTopicCursor :exec
INSERT INTO topic_cursors (topic, worker_group, done_through) VALUES (@topic, @worker_group, @done_through)
ON CONFLICT (topic, worker_group) DO UPDATE SET done_through = excluded.done_through;

-- name: FirstUnfinishedMessage :many
-- The first message of the topic after seq after that the group is not
-- done with.
SELECT m.seq FROM topic_messages m
LEFT JOIN topic_claims c ON c.message_id = m.id AND c.worker_group = @worker_group
WHERE m.topic = CAST(@topic AS TEXT) AND m.seq > CAST(@after AS INTEGER) AND (c.done IS NULL OR c.done = 0)
ORDER BY m.seq LIMIT 1;

-- name: LastTopicMessage :many
SELECT seq FROM topic_messages WHERE topic = CAST(@topic AS TEXT) ORDER BY seq DESC LIMIT 1;

-- name: DeleteTopicMessages :exec
DELETE FROM topic_messages;

-- name: DeleteTopicClaims :exec
DELETE FROM topic_claims;

-- name: DeleteTopicCursors :exec
DELETE FROM topic_cursors;

-- name: DumpTopicMessages :many
SELECT seq, id, topic, conversation_id, parent_id, producer, body, metadata, created_at
FROM topic_messages ORDER BY seq;

-- name: DumpTopicClaims :many
SELECT message_id, worker_group, topic, message_seq, status, done, worker, fence, lease_until, attempts,
    claimed_at, ended_at, follow_up_id, error, updated_seq
FROM topic_claims ORDER BY message_id, worker_group;

-- name: DumpTopicCursors :many
SELECT topic, worker_group, done_through FROM topic_cursors ORDER BY topic, worker_group;

-- Claims and sweeps (engine).

-- name: ListClaimableMessages :many
-- The topic's messages after seq after that the group is not done with,
-- oldest first, with the group's claim if it has one (the engine skips
-- those whose lease holds and those whose backoff has not passed).
SELECT m.seq, m.id, c.status, c.lease_until, c.attempts, c.fence
FROM topic_messages m
LEFT JOIN topic_claims c ON c.message_id = m.id AND c.worker_group = @worker_group
WHERE m.topic = CAST(@topic AS TEXT) AND m.seq > CAST(@after AS INTEGER) AND (c.done IS NULL OR c.done = 0)
ORDER BY m.seq LIMIT @max_rows;

-- name: ListActiveTopicClaims :many
SELECT message_id, worker_group, topic, worker, fence, lease_until, attempts
FROM topic_claims WHERE status = 'active' ORDER BY message_seq;

-- Read side (views).

-- name: TopicMessageByID :many
SELECT seq, id, topic, conversation_id, parent_id, producer, body, metadata, created_at
FROM topic_messages WHERE id = CAST(@id AS TEXT);

-- name: ListTopicMessages :many
SELECT seq, id, topic, conversation_id, parent_id, producer, body, metadata, created_at
FROM topic_messages WHERE topic = CAST(@topic AS TEXT) AND seq > CAST(@after AS INTEGER) ORDER BY seq LIMIT @max_rows;

-- name: ListConversationMessages :many
SELECT seq, id, topic, conversation_id, parent_id, producer, body, metadata, created_at
FROM topic_messages WHERE conversation_id = CAST(@conversation_id AS TEXT) AND seq > CAST(@after AS INTEGER) ORDER BY seq LIMIT @max_rows;

-- name: ConversationReply :many
-- The first message of the conversation on the success or failure topic,
-- or on a topic ending .timed_out or .dead.
SELECT seq, id, topic, conversation_id, parent_id, producer, body, metadata, created_at
FROM topic_messages WHERE conversation_id = CAST(@conversation_id AS TEXT)
  AND (topic = CAST(@success AS TEXT) OR topic = CAST(@failure AS TEXT) OR topic LIKE '%.timed_out' OR topic LIKE '%.dead')
ORDER BY seq LIMIT 1;

-- name: ListMessageClaims :many
SELECT message_id, worker_group, status, worker, fence, lease_until, attempts, claimed_at, ended_at, follow_up_id, error
FROM topic_claims WHERE message_id = CAST(@message_id AS TEXT) ORDER BY worker_group;


-- name: TopicBacklogs :many
-- Per topic and worker group that has claimed from it (a cursor, or an
-- active claim before its first message is done), how many of the topic's
-- messages after the group's cursor it is not done with: its backlog,
-- claimed or not. The cost follows the backlogs, not the topics' history.
WITH grps AS (
    SELECT topic, worker_group, done_through FROM topic_cursors
    UNION
    SELECT DISTINCT a.topic, a.worker_group, 0 FROM topic_claims a
    WHERE a.status = 'active'
      AND NOT EXISTS (SELECT 1 FROM topic_cursors k WHERE k.topic = a.topic AND k.worker_group = a.worker_group)
)
SELECT g.topic, g.worker_group, (
    SELECT count(*) FROM topic_messages m
    LEFT JOIN topic_claims tc ON tc.message_id = m.id AND tc.worker_group = g.worker_group
    WHERE m.topic = g.topic AND m.seq > g.done_through AND (tc.done IS NULL OR tc.done = 0)
) AS backlog
FROM grps g ORDER BY g.topic, g.worker_group;
