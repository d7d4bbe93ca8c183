package daemon

import (
	"io"
	"log/slog"
)

// NewLogger writes JSON lines with the spec's field names: timestamp, level,
// message, and whatever attributes (component, plugin, job_id) callers add.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				switch a.Key {
				case slog.TimeKey:
					a.Key = "timestamp"
				case slog.MessageKey:
					a.Key = "message"
				}
			}
			return a
		},
	}))
}
