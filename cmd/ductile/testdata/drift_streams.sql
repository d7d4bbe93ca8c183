-- Makes the streams projection disagree with an intact log, as a projection
-- bug or a hand edit would. Bind :stream.
UPDATE streams SET version = version + 100 WHERE stream = :stream;
