-- circuit_breakers and circuit_breaker_transitions: written by the projector.

-- name: UpsertBreaker :exec
INSERT INTO circuit_breakers (plugin, command, state, failures, threshold, opened_at, probe_at, probe_job_id,
    last_job_id, last_error, updated_at, updated_seq)
VALUES (@plugin, @command, @state, @failures, @threshold, @opened_at, @probe_at, @probe_job_id,
    @last_job_id, @last_error, @updated_at, @updated_seq)
ON CONFLICT (plugin, command) DO UPDATE SET
    state = excluded.state, failures = excluded.failures, threshold = excluded.threshold,
    opened_at = excluded.opened_at, probe_at = excluded.probe_at, probe_job_id = excluded.probe_job_id,
    last_job_id = excluded.last_job_id, last_error = excluded.last_error,
    updated_at = excluded.updated_at, updated_seq = excluded.updated_seq;

-- name: InsertBreakerTransition :exec
INSERT INTO circuit_breaker_transitions (seq, plugin, command, from_state, to_state, failures, reason, job_id,
    actor, last_error, created_at)
VALUES (@seq, @plugin, @command, @from_state, @to_state, @failures, @reason, @job_id,
    @actor, @last_error, @created_at);

-- name: DeleteBreakers :exec
DELETE FROM circuit_breakers;

-- name: DeleteBreakerTransitions :exec
DELETE FROM circuit_breaker_transitions;

-- name: DumpBreakers :many
SELECT plugin, command, state, failures, threshold, opened_at, probe_at, probe_job_id, last_job_id, last_error,
    updated_at, updated_seq
FROM circuit_breakers ORDER BY plugin, command;

-- name: DumpBreakerTransitions :many
SELECT seq, plugin, command, from_state, to_state, failures, reason, job_id, actor, last_error, created_at
FROM circuit_breaker_transitions ORDER BY seq;

-- Read side (views).

-- name: ListBreakers :many
SELECT plugin, command, state, failures, threshold, opened_at, probe_at, probe_job_id, last_job_id, last_error,
    updated_at, updated_seq
FROM circuit_breakers ORDER BY plugin, command;

-- name: ListPluginBreakers :many
SELECT plugin, command, state, failures, threshold, opened_at, probe_at, probe_job_id, last_job_id, last_error,
    updated_at, updated_seq
FROM circuit_breakers WHERE plugin = CAST(@plugin AS TEXT) ORDER BY command;

-- name: BreakerTransitions :many
SELECT seq, plugin, command, from_state, to_state, failures, reason, job_id, actor, last_error, created_at
FROM circuit_breaker_transitions WHERE plugin = CAST(@plugin AS TEXT) AND command = CAST(@command AS TEXT)
ORDER BY seq DESC LIMIT @max_rows;
