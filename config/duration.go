package config

import (
	"strings"
	"time"
)

// formatDuration writes d the way an operator would: "720h", "1m30s", not
// "720h0m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
