package config

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeUnits are the units ParseSize accepts, by lower-case name.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1000, "mb": 1000 * 1000, "gb": 1000 * 1000 * 1000,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
}

// ParseSize reads a positive size in bytes (api.max_body_size, a webhook's
// max_body_size): a whole number with an optional unit,
// B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g.
// 1MB or 512KiB; case does not matter.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if i == 0 || !ok || err != nil || n <= 0 || n > (1<<62)/unit {
		return 0, fmt.Errorf("invalid size %q: give a whole number with a unit, e.g. 1MB, 512KiB or 1MiB (units: %s)", s, strings.Join(sizeUnitNames, ", "))
	}
	return n * unit, nil
}

var sizeUnitNames = []string{"B", "KB", "MB", "GB", "KiB", "MiB", "GiB"}
