-- plugin_facts and plugin_state: written by the projector.

-- name: InsertFact :exec
INSERT INTO plugin_facts (seq, plugin_name, fact_type, job_id, command, fact_json, created_at)
VALUES (@seq, @plugin_name, @fact_type, @job_id, @command, @fact_json, @created_at);

-- name: UpsertPluginState :exec
INSERT INTO plugin_state (plugin_name, state, updated_at, updated_seq)
VALUES (@plugin_name, @state, @updated_at, @updated_seq)
ON CONFLICT (plugin_name) DO UPDATE SET
    state = excluded.state, updated_at = excluded.updated_at, updated_seq = excluded.updated_seq;

-- name: DeleteFacts :exec
DELETE FROM plugin_facts;

-- name: DeletePluginState :exec
DELETE FROM plugin_state;

-- name: DumpFacts :many
SELECT seq, plugin_name, fact_type, job_id, command, fact_json, created_at FROM plugin_facts ORDER BY seq;

-- name: DumpPluginState :many
SELECT plugin_name, state, updated_at, updated_seq FROM plugin_state ORDER BY plugin_name;


-- name: GetPluginState :many
-- One plugin's compatibility view (none: no row).
SELECT plugin_name, state, updated_at, updated_seq FROM plugin_state WHERE plugin_name = CAST(@plugin AS TEXT);
