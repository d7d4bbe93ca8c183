package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sqlc-dev/plugin-sdk-go/plugin"
)

// findSqlc locates the sqlc binary: $SQLC, then PATH, then $GOPATH/bin.
func findSqlc(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SQLC"); p != "" {
		return p
	}
	if p, err := exec.LookPath("sqlc"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(string(bytes.TrimSpace(out)), "bin", "sqlc")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("sqlc not found (set $SQLC or install github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1)")
	return ""
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// TestSqlcEndToEnd builds the plugin, runs the real sqlc on a copy of the
// example project (sqlc.yaml uses cmd: ./bin/sqlc-gen-zombiezen, relative
// to the directory sqlc runs in) and checks that the output matches the
// checked-in generated package. It also checks that request.json, the
// golden test's input, is what this sqlc sends.
func TestSqlcEndToEnd(t *testing.T) {
	sqlc := findSqlc(t)
	dir := t.TempDir()
	for _, pattern := range []string{"*.yaml", "migrations/*.sql", "queries/*.sql"} {
		files, err := filepath.Glob(filepath.Join(exampleDir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			rel, _ := filepath.Rel(exampleDir, f)
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	run(t, wd, "go", "build", "-o", filepath.Join(dir, "bin", "sqlc-gen-zombiezen"), ".")
	run(t, dir, sqlc, "generate")
	run(t, dir, sqlc, "-f", "sqlc.json.yaml", "generate")

	var files []*plugin.File
	entries, err := os.ReadDir(filepath.Join(dir, "queries"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".go" {
			data, err := os.ReadFile(filepath.Join(dir, "queries", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, &plugin.File{Name: e.Name(), Contents: data})
		}
	}
	// With -update, the checked-in package is rewritten from real sqlc's
	// output here, whichever test runs first.
	compareGenerated(t, filepath.Join(exampleDir, "queries"), files, *update)

	got, err := os.ReadFile(filepath.Join(dir, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(exampleDir, "request.json")
	if *update {
		if err := os.WriteFile(fixture, got, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if want, err := os.ReadFile(fixture); err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s is stale for this sqlc (run go test -update .)", fixture)
	}
}
