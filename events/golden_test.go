package events_test

import (
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/<event type>.golden.json from the examples")

// TestGolden pins the stored JSON of every event type the package declares:
// the data of each, built from a representative value, must equal its
// testdata/<type>.golden.json byte for byte. A change to a stored shape is
// then a deliberate change of a golden file (go test -run TestGolden
// -update), reviewed as such; a new event type fails here until it has an
// example and a golden.
func TestGolden(t *testing.T) {
	declared := declaredTypes(t)
	examples := goldenExamples()
	for _, typ := range declared {
		t.Run(typ, func(t *testing.T) {
			v, ok := examples[typ]
			require.True(t, ok, "event type %s has no example in goldenExamples: add a representative value and run go test -run TestGolden -update", typ)
			got, err := json.Marshal(v)
			require.NoError(t, err)
			path := filepath.Join("testdata", typ+".golden.json")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "event type %s has no golden: run go test -run TestGolden -update", typ)
			require.Equal(t, string(want), string(got), "the stored JSON of %s changed: if that is deliberate, run go test -run TestGolden -update (and keep old events readable)", typ)

			// What is stored reads back into the same value.
			back := reflect.New(reflect.TypeOf(v)).Interface()
			require.NoError(t, json.Unmarshal(got, back))
			again, err := json.Marshal(back)
			require.NoError(t, err)
			require.Equal(t, string(got), string(again))
		})
	}
	for typ := range examples {
		require.Contains(t, declared, typ, "goldenExamples has %s, which the package does not declare", typ)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden.json"))
	require.NoError(t, err)
	for _, f := range files {
		typ := strings.TrimSuffix(filepath.Base(f), ".golden.json")
		require.Contains(t, declared, typ, "%s is the golden of no declared event type: remove it", f)
	}
}

// eventType is the form of an event type's name: "<noun>.<verb>".
var eventType = regexp.MustCompile(`^[a-z]+\.[a-z_]+$`)

// declaredTypes parses the package's source for its string constants of
// the form of an event type: the catalogue as declared, so that a type
// added anywhere in the package is found.
func declaredTypes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				for _, value := range spec.(*ast.ValueSpec).Values {
					lit, ok := value.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					if eventType.MatchString(s) {
						out = append(out, s)
					}
				}
			}
		}
	}
	slices.Sort(out)
	require.NotEmpty(t, out)
	return slices.Compact(out)
}
