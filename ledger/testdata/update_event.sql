-- Tries to rewrite history: the trigger must refuse it.
UPDATE events SET type = 'forged' WHERE seq = 1;
