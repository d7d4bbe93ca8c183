-- The schema of an archive file (ledger/archive_write.go): the events an
-- archive moved out of the ledger, as the ledger stored them, and what the
-- archive is (format ductile.archive.v1). Not a migration: an archive file
-- is written once, whole, and never changes. schema.go embeds it.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY,
    stream      TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    type        TEXT    NOT NULL,
    data        TEXT    NOT NULL,
    meta        TEXT    NOT NULL,
    recorded_at TEXT    NOT NULL,
    prev_hash   BLOB    NOT NULL,
    hash        BLOB    NOT NULL
) STRICT;
CREATE TABLE archive (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
