package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sqlc-dev/plugin-sdk-go/plugin"
)

func TestScanPlaceholders(t *testing.T) {
	tests := []struct {
		sql      string
		bare     int
		numbered []int
		named    []string
	}{
		{sql: "SELECT 1"},
		{sql: "SELECT ? , ?", bare: 2},
		{sql: "SELECT ?1, ?12, ?1", numbered: []int{1, 12}},
		{sql: "SELECT '?', 'it''s ?', \"a?\", `b?`, [c?], x'3F' -- ?\n/* ?1 :x */", bare: 0},
		{sql: "SELECT a$b, :x, @y, $z, ?", bare: 1, named: []string{":x", "@y", "$z"}},
		{sql: "SELECT ?1 -- trailing ?", numbered: []int{1}},
	}
	for _, tc := range tests {
		p := scanPlaceholders(tc.sql)
		nums := slices.Sorted(maps.Keys(p.numbered))
		if p.bare != tc.bare || !slices.Equal(nums, tc.numbered) || !slices.Equal(p.named, tc.named) {
			t.Errorf("scanPlaceholders(%q) = bare %d, numbered %v, named %q; want %d, %v, %q",
				tc.sql, p.bare, nums, p.named, tc.bare, tc.numbered, tc.named)
		}
	}
}

func param(number int32, name, typ string, notNull, named bool) *plugin.Parameter {
	return &plugin.Parameter{Number: number, Column: &plugin.Column{
		Name: name, Type: &plugin.Identifier{Name: typ}, NotNull: notNull, IsNamedParam: named,
	}}
}

// The query texts and parameters below are what sqlc v1.31.1 sends.
func TestBindIndexes(t *testing.T) {
	tests := []struct {
		name    string
		q       *plugin.Query
		want    []int
		wantErr string
	}{{
		name: "anonymous",
		q: &plugin.Query{Text: "SELECT id, a FROM t WHERE a = ? AND n > ?",
			Params: []*plugin.Parameter{param(1, "a", "TEXT", true, false), param(2, "n", "INTEGER", true, false)}},
		want: []int{1, 2},
	}, {
		name: "@name twice",
		q: &plugin.Query{Text: "SELECT id FROM t WHERE a = ?1 OR b = ?1 OR n = ?2",
			Params: []*plugin.Parameter{param(1, "a", "TEXT", true, true), param(2, "n", "INTEGER", true, true)}},
		want: []int{1, 2},
	}, {
		name: "explicit numbers out of order",
		q: &plugin.Query{Text: "SELECT id FROM t WHERE a = ?2 AND n = ?1",
			Params: []*plugin.Parameter{param(1, "n", "INTEGER", true, false), param(2, "a", "TEXT", true, false)}},
		want: []int{1, 2},
	}, {
		name: "@name mixed with ?",
		q: &plugin.Query{Text: "SELECT id FROM t WHERE a = ? AND n = ? AND b = ?",
			Params: []*plugin.Parameter{param(2, "a", "TEXT", true, true), param(1, "n", "INTEGER", true, false)}},
		wantErr: "mixes anonymous ?",
	}, {
		name: "sqlc.arg mixed with ?",
		q: &plugin.Query{Text: "SELECT id FROM t WHERE a = ?2 AND n = ?",
			Params: []*plugin.Parameter{param(2, "a", "TEXT", true, true), param(1, "n", "INTEGER", true, false)}},
		wantErr: "mixes anonymous ?",
	}, {
		name:    "named left in text",
		q:       &plugin.Query{Text: "SELECT :a", Params: []*plugin.Parameter{param(1, "a", "TEXT", true, true)}},
		wantErr: "named parameter :a",
	}, {
		name:    "count mismatch",
		q:       &plugin.Query{Text: "SELECT ?, ?", Params: []*plugin.Parameter{param(1, "a", "TEXT", true, false)}},
		wantErr: "2 ? placeholders but sqlc reported 1",
	}, {
		name:    "number mismatch",
		q:       &plugin.Query{Text: "SELECT ?1, ?3", Params: []*plugin.Parameter{param(1, "a", "TEXT", true, true), param(2, "b", "TEXT", true, true)}},
		wantErr: "uses parameters [1 3] but sqlc reported parameter numbers [1 2]",
	}}
	for _, tc := range tests {
		got, err := bindIndexes(tc.q)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error = %v; want %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !slices.Equal(got, tc.want):
			t.Errorf("%s: indexes = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestSQLType(t *testing.T) {
	tests := map[string]string{
		"INTEGER": "int64", "BIGINT": "int64", "int": "int64", "TINYTEXT": "string",
		"REAL": "float64", "FLOAT": "float64", "DOUBLEPRECISION": "float64", "NUMERIC(10,2)": "float64", "DECIMAL": "float64",
		"BLOB": "[]byte", "BOOLEAN": "bool", "bool": "bool",
		"TEXT": "string", "VARCHAR(20)": "string", "CHARACTER": "string", "CLOB": "string", "JSON": "string", "JSONB": "string",
		"DATETIME": "string", "TIMESTAMP": "string", "DATE": "string",
		"any": "any", "": "any", "UUID": "any",
	}
	for typ, want := range tests {
		col := &plugin.Column{Type: &plugin.Identifier{Name: typ}, NotNull: true}
		if got := sqlType(col).String(); got != want {
			t.Errorf("sqlType(%q NOT NULL) = %s; want %s", typ, got, want)
		}
		col.NotNull = false
		wantNull := want
		if want != "any" && want != "[]byte" {
			wantNull = "*" + want
		}
		if got := sqlType(col).String(); got != wantNull {
			t.Errorf("sqlType(%q) = %s; want %s", typ, got, wantNull)
		}
	}
}

func TestNaming(t *testing.T) {
	for in, want := range map[string]string{
		"id": "ID", "user_id": "UserID", "createdAt": "CreatedAt", "max(n)": "MaxN", "1st": "X1st", "": "X", "ids": "Ids",
	} {
		if got := exportedName(in); got != want {
			t.Errorf("exportedName(%q) = %q; want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"UserID": "userID", "ID": "id", "URLPath": "urlPath", "GetAuthor": "getAuthor", "X": "x"} {
		if got := lowerFirst(in); got != want {
			t.Errorf("lowerFirst(%q) = %q; want %q", in, got, want)
		}
	}
	var ns names
	if got := []string{ns.add("ID"), ns.add("ID"), ns.add("ID"), ns.add("Name")}; !slices.Equal(got, []string{"ID", "ID_2", "ID_3", "Name"}) {
		t.Errorf("names.add = %q", got)
	}
	for in, want := range map[string]string{"type": "type_", "conn": "conn_", "string": "string_", "name": "name"} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestGenerateErrors(t *testing.T) {
	col := func(name string) *plugin.Column {
		return &plugin.Column{Name: name, Type: &plugin.Identifier{Name: "INTEGER"}, NotNull: true}
	}
	tests := []struct {
		name    string
		opts    string
		queries []*plugin.Query
		wantErr string
	}{
		{name: "copyfrom", queries: []*plugin.Query{{Name: "Copy", Cmd: ":copyfrom", Text: "INSERT INTO t (a) VALUES (?)"}},
			wantErr: "query Copy (x.sql): command :copyfrom is not supported"},
		{name: "batch", queries: []*plugin.Query{{Name: "B", Cmd: ":batchone", Text: "SELECT 1"}},
			wantErr: "command :batchone is not supported"},
		{name: "slice", queries: []*plugin.Query{{Name: "S", Cmd: ":many", Text: "SELECT id FROM t WHERE id IN (/*SLICE:ids*/?)",
			Columns: []*plugin.Column{col("id")},
			Params:  []*plugin.Parameter{{Number: 1, Column: &plugin.Column{Name: "ids", IsSqlcSlice: true, IsNamedParam: true}}}}},
			wantErr: "sqlc.slice(ids) is not supported"},
		{name: "embed", queries: []*plugin.Query{{Name: "E", Cmd: ":many", Text: "SELECT t.id FROM t",
			Columns: []*plugin.Column{{Name: "t", EmbedTable: &plugin.Identifier{Name: "t"}}}}},
			wantErr: "sqlc.embed is not supported"},
		{name: "one without columns", queries: []*plugin.Query{{Name: "U", Cmd: ":one", Text: "UPDATE t SET a = 1"}},
			wantErr: ":one query returns no columns"},
		{name: "name clash", queries: []*plugin.Query{
			{Name: "Foo", Cmd: ":one", Text: "SELECT 1, 2", Columns: []*plugin.Column{col("a"), col("b")}},
			{Name: "FooRow", Cmd: ":exec", Text: "SELECT 1"}},
			wantErr: "generated identifier FooRow clashes"},
		{name: "ErrNoRows clash", queries: []*plugin.Query{{Name: "ErrNoRows", Cmd: ":exec", Text: "SELECT 1"}},
			wantErr: "generated identifier ErrNoRows clashes with one from db.go"},
		{name: "unknown option", opts: `{"package": "q", "emit_json_tags": true}`,
			wantErr: `invalid plugin options: json: unknown field "emit_json_tags"`},
		{name: "bad package", opts: `{"package": "my-queries"}`, wantErr: `invalid package name "my-queries"`},
	}
	for _, tc := range tests {
		for _, q := range tc.queries {
			q.Filename = "x.sql"
		}
		opts := tc.opts
		if opts == "" {
			opts = `{"package": "q"}`
		}
		req := &plugin.GenerateRequest{PluginOptions: []byte(opts), Queries: tc.queries, SqlcVersion: "v1.31.1"}
		_, err := generate(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error = %v; want %q", tc.name, err, tc.wantErr)
		}
	}
}

func TestDefaultPackage(t *testing.T) {
	req := &plugin.GenerateRequest{
		Settings: &plugin.Settings{Codegen: &plugin.Codegen{Out: "internal/store"}},
		Queries:  []*plugin.Query{{Name: "Ping", Cmd: ":exec", Text: "SELECT 1", Filename: "ping.sql"}},
	}
	resp, err := generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range resp.Files {
		names = append(names, f.Name)
		if !strings.Contains(string(f.Contents), "\npackage store\n") {
			t.Errorf("%s is not in package store:\n%s", f.Name, f.Contents)
		}
	}
	if !slices.Equal(names, []string{"db.go", "ping.sql.go"}) {
		t.Errorf("files = %q", names)
	}
	// No query needs bindAny/columnAny, so db.go only imports errors.
	if db := string(resp.Files[0].Contents); strings.Contains(db, "bindAny") || strings.Contains(db, "zombiezen.com") {
		t.Errorf("db.go has unneeded helpers:\n%s", db)
	}
}
