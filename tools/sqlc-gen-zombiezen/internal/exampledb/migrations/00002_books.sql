-- +goose Up
CREATE TABLE books (
  id INTEGER PRIMARY KEY,
  author_id INTEGER NOT NULL REFERENCES authors (id),
  title VARCHAR(200) NOT NULL,
  price REAL,
  rating DOUBLE PRECISION NOT NULL DEFAULT 0,
  cover BLOB,
  isbn BLOB NOT NULL DEFAULT x''
);

-- +goose Down
DROP TABLE books;
