package main

import (
	"io"
	"log/slog"

	"github.com/ductile/ductile/daemon"
)

// The values of --log-format.
const (
	logAuto = "auto" // text when the log goes to a terminal, else JSON
	logJSON = "json"
	logText = "text"
)

// logger writes to w at level, or at debug with --verbose: readable lines
// when w is a terminal (or with --log-format text), else JSON lines. The
// daemon logs to stdout at info; other commands use quietLogger.
func (e *env) logger(w io.Writer, level slog.Level) *slog.Logger {
	if e.verbose {
		level = slog.LevelDebug
	}
	if e.logFormat == logText || e.logFormat != logJSON && daemon.IsTerminal(w) {
		return daemon.NewTextLogger(w, level)
	}
	return daemon.NewLogger(w, level)
}

// quietLogger is a one-shot command's logger: warnings and errors on stderr.
func (e *env) quietLogger() *slog.Logger { return e.logger(e.stderr, slog.LevelWarn) }
