-- Makes the job_queue projection disagree with the log, as a projection bug
-- or a hand edit would: the oldest job's attempt is bumped.
UPDATE job_queue SET attempt = attempt + 100 WHERE seq = (SELECT min(seq) FROM job_queue);
