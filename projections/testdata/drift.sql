-- Makes the streams projection disagree with the log, as a projection bug or
-- a hand edit would.
UPDATE streams SET version = version + 100 WHERE stream = 'hot/3';
