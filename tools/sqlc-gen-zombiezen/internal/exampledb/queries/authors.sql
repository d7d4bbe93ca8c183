-- name: CreateAuthor :execlastid
INSERT INTO authors (name, bio) VALUES (?, ?);

-- name: GetAuthor :one
-- GetAuthor returns one author by id.
SELECT id, name, bio, active, created_at FROM authors WHERE id = ?;

-- name: GetAuthorName :one
SELECT name FROM authors WHERE id = @id;

-- name: GetAuthorBio :one
SELECT bio FROM authors WHERE id = ?;

-- name: ListAuthors :many
SELECT id, name, bio FROM authors ORDER BY id;

-- name: ListAuthorNames :many
SELECT name FROM authors WHERE active = ? ORDER BY name;

-- name: SearchAuthors :many
-- The same named parameter is used twice and bound once.
SELECT id FROM authors WHERE name = @term OR bio = @term OR id = @id ORDER BY id;

-- name: SearchAuthorsArg :many
SELECT id FROM authors
WHERE (name = sqlc.arg(term) OR bio = sqlc.arg(term))
  AND (id >= sqlc.narg(min_id) OR sqlc.narg(min_id) IS NULL)
ORDER BY id;

-- name: SearchAuthorsNumbered :many
SELECT id FROM authors WHERE id >= ?2 AND name <> ?1 ORDER BY id;

-- name: SetBio :execrows
UPDATE authors SET bio = @bio WHERE name = @name;

-- name: SetActive :exec
UPDATE authors SET active = ? WHERE id = ?;

-- name: DeleteAuthor :exec
DELETE FROM authors WHERE id = ?;

-- name: CountAuthors :one
SELECT count(*) FROM authors;

-- name: AuthorStats :one
SELECT count(*) AS total, max(id) AS max_id, CAST(coalesce(max(id), 0) AS INTEGER) AS max_id_int FROM authors;
