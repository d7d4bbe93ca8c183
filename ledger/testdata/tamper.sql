-- Edits one event behind the triggers' back, as an attacker with file access
-- could: drop the guard, change the data, put the guard back. The seq to
-- change is bound as :seq.
DROP TRIGGER events_no_update;
UPDATE events SET data = '{"amount":1000000}' WHERE seq = :seq;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: UPDATE is not allowed');
END;
