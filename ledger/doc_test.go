package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsNameLedgerAPIThatExists: every ledger.X, ledger.X.Y and
// Ledger.X the docs (docs/*.md, README.md) name, and every doc link
// ([X], [Ledger.X]) of the package comment, is declared in package ledger:
// X a package-level name or a method of *Ledger, Y a field or method of X.
// The docs once described a Ledger.Submit that had gone.
func TestDocsNameLedgerAPIThatExists(t *testing.T) {
	t.Parallel()
	members := ledgerDecls(t)

	var problems []string
	check := func(where, name string) {
		if !members[name] {
			problems = append(problems, where+": "+name)
		}
	}
	docs, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	ref := regexp.MustCompile(`\b(ledger|Ledger)\.([A-Z]\w*(?:\.[A-Z]\w*)?)`)
	for _, path := range append(docs, "../README.md") {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			name := m[2]
			if m[1] == "Ledger" {
				name = "Ledger." + name
			}
			check(path, name)
		}
	}
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`\[([A-Z]\w*(?:\.[A-Z]\w*)?)\]`).FindAllStringSubmatch(string(b), -1) {
		check("doc.go", m[1])
	}
	require.Empty(t, problems, "docs name ledger API that does not exist")
}

// ledgerDecls is every exported name of package ledger: X for a
// package-level name (and a method of *Ledger, which docs call
// ledger.Decide), X.Y for a method or struct field Y of type X.
func ledgerDecls(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	names := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
					continue
				}
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					names[id.Name+"."+d.Name.Name] = true
					if id.Name == "Ledger" {
						names[d.Name.Name] = true
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, field := range st.Fields.List {
								for _, n := range field.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}
