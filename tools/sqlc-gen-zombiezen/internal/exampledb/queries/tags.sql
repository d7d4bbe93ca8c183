-- name: InsertTag :execlastid
INSERT INTO tags (type, conn, err) VALUES (@type, @conn, @err);

-- name: TagsByType :many
SELECT id FROM tags WHERE type = ? ORDER BY id;

-- name: TagByConn :one
SELECT type, err FROM tags WHERE conn = ?;

-- name: Count :one
SELECT count(*) FROM tags WHERE id > @count;

-- name: TagPairs :many
SELECT a.id, b.id FROM tags a JOIN tags b ON a.type = b.type
WHERE a.id < ? AND b.id > ?
ORDER BY a.id, b.id;
