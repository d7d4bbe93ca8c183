-- Makes the job_queue projection disagree with an intact log, as a
-- projection bug or a hand edit would. Bind :id.
UPDATE job_queue SET attempt = attempt + 100 WHERE id = :id;
