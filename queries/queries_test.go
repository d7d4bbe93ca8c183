package queries_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWhereParametersAreCast guards against a costly SQLite behaviour: when
// a WHERE clause compares a column with a bare parameter (col = @p), the
// planner peeks at the bound value and marks the statement to be prepared
// again whenever the value changes, so every run re-parses and re-plans
// it. Wrapping the parameter in CAST(@p AS TYPE) keeps the plan stable and
// the index usable.
func TestWhereParametersAreCast(t *testing.T) {
	files, err := filepath.Glob("*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no query files: %v", err)
	}
	bare := regexp.MustCompile(`\b[a-z_]+\s*(=|<>|!=|<=|>=|<|>)\s*@[a-z_]+`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inWhere := false
		for i, line := range strings.Split(string(b), "\n") {
			s := strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(s, "-- name:"), strings.HasPrefix(s, "ORDER BY"), strings.HasPrefix(s, "LIMIT"),
				strings.HasPrefix(s, "GROUP BY"), strings.HasPrefix(s, "ON CONFLICT"):
				inWhere = false
			}
			if idx := strings.Index(line, "WHERE"); idx >= 0 {
				inWhere = true
				line = line[idx:] // SET assignments before WHERE do not go through the planner
			}
			if inWhere && bare.MatchString(line) {
				t.Errorf("%s:%d: compare with CAST(@param AS TYPE), not a bare parameter: %s", f, i+1, s)
			}
		}
	}
}
