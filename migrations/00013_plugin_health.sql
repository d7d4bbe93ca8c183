-- plugin_health: one row per plugin that ever ran init or a health check,
-- folded by the projector from plugin.initialized, plugin.init_failed and
-- plugin.health_checked (stream plugin/<name>/health). It holds the hash of
-- the config an init ran with, never the config.

-- +goose Up
CREATE TABLE plugin_health (
    plugin_name      TEXT    PRIMARY KEY,
    init_status      TEXT    CHECK (init_status IN ('initialized', 'init_failed')),
    init_config_hash TEXT,
    init_version     TEXT,
    init_error       TEXT,
    init_at          TEXT,
    init_seq         INTEGER,
    health_status    TEXT    CHECK (health_status IN ('healthy', 'unhealthy')),
    health_message   TEXT,
    health_at        TEXT,
    health_seq       INTEGER,
    updated_seq      INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE plugin_health;
