package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqlc-dev/plugin-sdk-go/plugin"
	"google.golang.org/protobuf/encoding/protojson"
)

var update = flag.Bool("update", false, "rewrite the golden files (and, with sqlc installed, request.json)")

// exampleDir holds a sqlc project whose generated package, queries/, is
// both the golden output and the subject of an integration test.
const exampleDir = "internal/exampledb"

// loadRequest reads the GenerateRequest that sqlc's built-in JSON generator
// wrote for the example project (see sqlc.json.yaml) and sets the codegen
// settings that sqlc.yaml would give the plugin.
func loadRequest(t *testing.T) *plugin.GenerateRequest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(exampleDir, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	req := &plugin.GenerateRequest{}
	if err := protojson.Unmarshal(data, req); err != nil {
		t.Fatal(err)
	}
	req.Settings.Codegen = &plugin.Codegen{Out: "queries", Plugin: "zombiezen"}
	req.PluginOptions = []byte(`{"package": "queries"}`)
	return req
}

func TestGolden(t *testing.T) {
	resp, err := generate(context.Background(), loadRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	compareGenerated(t, filepath.Join(exampleDir, "queries"), resp.Files, *update)
}

// compareGenerated checks that dir holds exactly the generated files, or
// rewrites dir's generated files when update is set.
func compareGenerated(t *testing.T, dir string, files []*plugin.File, update bool) {
	t.Helper()
	var got []string
	for _, f := range files {
		got = append(got, f.Name)
		path := filepath.Join(dir, f.Name)
		if update {
			if err := os.WriteFile(path, f.Contents, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (run go test -update)", err)
			continue
		}
		if string(want) != string(f.Contents) {
			t.Errorf("%s differs from the generated code (run go test -update and review the diff):\n%s", path, firstDiff(string(want), string(f.Contents)))
		}
	}
	// Every non-test .go file in dir must be generated.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !slices.Contains(got, name) {
			t.Errorf("%s is not generated any more; delete it", filepath.Join(dir, name))
		}
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, wl, gl)
		}
	}
	return "(no line differs)"
}

func TestDeterministic(t *testing.T) {
	first, err := generate(context.Background(), loadRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := generate(context.Background(), loadRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Files) != len(first.Files) {
			t.Fatal("file count changed between runs")
		}
		for i := range first.Files {
			if again.Files[i].Name != first.Files[i].Name || string(again.Files[i].Contents) != string(first.Files[i].Contents) {
				t.Fatalf("output of %s changed between runs", first.Files[i].Name)
			}
		}
	}
}
