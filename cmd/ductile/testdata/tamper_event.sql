-- Edits one event's data behind the triggers' back, as someone with write
-- access to the file could: drop the guard, change the data, put the guard
-- back exactly as migrations/00001_events.sql creates it. Bind :seq.
DROP TRIGGER events_no_update;
UPDATE events SET data = '{"amount":1000000}' WHERE seq = :seq;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: UPDATE is not allowed');
END;
