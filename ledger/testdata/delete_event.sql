-- Tries to erase history: the trigger must refuse it.
DELETE FROM events WHERE seq = 1;
