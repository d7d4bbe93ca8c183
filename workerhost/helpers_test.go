package workerhost_test

import "fmt"

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

// orEmpty is v, or "" for nil.
func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}
