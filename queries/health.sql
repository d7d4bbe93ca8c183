-- plugin_health: written by the projector, read by views.

-- name: UpsertPluginInit :exec
INSERT INTO plugin_health (plugin_name, init_status, init_config_hash, init_version, init_error, init_at, init_seq, updated_seq)
VALUES (@plugin_name, @init_status, @init_config_hash, @init_version, @init_error, @init_at, @init_seq, @init_seq)
ON CONFLICT (plugin_name) DO UPDATE SET
    init_status = excluded.init_status, init_config_hash = excluded.init_config_hash,
    init_version = excluded.init_version, init_error = excluded.init_error,
    init_at = excluded.init_at, init_seq = excluded.init_seq, updated_seq = excluded.updated_seq;

-- name: UpsertPluginHealthCheck :exec
INSERT INTO plugin_health (plugin_name, health_status, health_message, health_at, health_seq, updated_seq)
VALUES (@plugin_name, @health_status, @health_message, @health_at, @health_seq, @health_seq)
ON CONFLICT (plugin_name) DO UPDATE SET
    health_status = excluded.health_status, health_message = excluded.health_message,
    health_at = excluded.health_at, health_seq = excluded.health_seq, updated_seq = excluded.updated_seq;

-- name: DeletePluginHealth :exec
DELETE FROM plugin_health;

-- name: DumpPluginHealth :many
SELECT plugin_name, init_status, init_config_hash, init_version, init_error, init_at, init_seq,
       health_status, health_message, health_at, health_seq, updated_seq
FROM plugin_health ORDER BY plugin_name;

-- name: ListPluginHealth :many
SELECT plugin_name, init_status, init_config_hash, init_version, init_error, init_at, init_seq,
       health_status, health_message, health_at, health_seq
FROM plugin_health ORDER BY plugin_name;
