-- Circuit breakers (spec §5.8), projected from the breaker/<plugin>/<command>
-- streams: one row per plugin and command with the breaker's current state,
-- and one row per state transition (opened, half_opened, closed, reset).
-- failure_recorded and failures_cleared move only the count in
-- circuit_breakers: they are not transitions.

-- +goose Up
CREATE TABLE circuit_breakers (
    plugin       TEXT    NOT NULL,
    command      TEXT    NOT NULL,
    state        TEXT    NOT NULL, -- closed | open | half_open
    failures     INTEGER NOT NULL,
    threshold    INTEGER NOT NULL,
    opened_at    TEXT,
    probe_at     TEXT,
    probe_job_id TEXT,
    last_job_id  TEXT,
    last_error   TEXT,
    updated_at   TEXT    NOT NULL,
    updated_seq  INTEGER NOT NULL,
    PRIMARY KEY (plugin, command)
) STRICT, WITHOUT ROWID;

CREATE TABLE circuit_breaker_transitions (
    seq        INTEGER PRIMARY KEY,
    plugin     TEXT    NOT NULL,
    command    TEXT    NOT NULL,
    from_state TEXT,
    to_state   TEXT    NOT NULL,
    failures   INTEGER NOT NULL,
    reason     TEXT    NOT NULL,
    job_id     TEXT,
    actor      TEXT,
    last_error TEXT,
    created_at TEXT    NOT NULL
) STRICT;

CREATE INDEX circuit_breaker_transitions_breaker ON circuit_breaker_transitions (plugin, command, seq);

-- +goose Down
DROP TABLE circuit_breaker_transitions;
DROP TABLE circuit_breakers;
