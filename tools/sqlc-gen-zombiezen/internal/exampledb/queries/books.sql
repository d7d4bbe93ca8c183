-- name: CreateBook :one
INSERT INTO books (author_id, title, price, cover, isbn)
VALUES (@author_id, @title, @price, @cover, @isbn)
RETURNING id, title;

-- name: GetBook :one
SELECT * FROM books WHERE id = ?;

-- name: ListBooksWithAuthors :many
SELECT books.id, authors.id, books.title, authors.name, books.price
FROM books JOIN authors ON authors.id = books.author_id
WHERE books.price IS NULL OR books.price < ?
ORDER BY books.id;

-- name: BookCover :one
SELECT cover FROM books WHERE id = ?;

-- name: EchoAny :one
SELECT ? + 0 AS value;
