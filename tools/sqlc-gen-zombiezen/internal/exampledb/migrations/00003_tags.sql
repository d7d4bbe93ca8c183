-- +goose Up
-- Column names that collide with Go keywords and with generated locals.
CREATE TABLE tags (
  id INTEGER PRIMARY KEY,
  type TEXT NOT NULL,
  conn TEXT,
  err INTEGER
);

-- +goose Down
DROP TABLE tags;
