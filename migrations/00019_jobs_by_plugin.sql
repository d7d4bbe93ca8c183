-- job_queue_by_plugin: a plugin's jobs, newest first (plugin show, plugin
-- logs, and the last run of each plugin in system status), read through
-- this index: their cost follows the jobs shown, not the history (a
-- plugin whose last job is old is otherwise found by walking every job
-- since).

-- +goose Up
CREATE INDEX job_queue_by_plugin ON job_queue (plugin, seq);

-- +goose Down
DROP INDEX job_queue_by_plugin;
