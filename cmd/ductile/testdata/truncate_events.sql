-- Removes the newest events behind the triggers' back, as someone with write
-- access to the file could: drop the guard, delete every event after :seq,
-- put the guard back exactly as migrations/00004_lean_writes.sql creates it.
-- The chain that is left still verifies on its own. Bind :seq.
DROP TRIGGER events_no_delete;
DELETE FROM events WHERE seq > :seq;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed');
END;
