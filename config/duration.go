package config

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// parseDuration accepts Go durations ("90s", "2h30m") and a leading whole
// number of days ("30d", "1d12h"). Go durations have no "d" unit, so a "d"
// always means days.
func parseDuration(s string) (time.Duration, error) {
	i := strings.IndexByte(s, 'd')
	if i <= 0 || strings.TrimLeft(s[:i], "0123456789") != "" {
		return time.ParseDuration(s)
	}
	days, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || days > math.MaxInt64/int64(24*time.Hour) {
		return 0, errors.New("too many days")
	}
	total := time.Duration(days) * 24 * time.Hour
	if rest := s[i+1:]; rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, err
		}
		if d < 0 || total > math.MaxInt64-d {
			return 0, errors.New("out of range")
		}
		total += d
	}
	return total, nil
}

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
