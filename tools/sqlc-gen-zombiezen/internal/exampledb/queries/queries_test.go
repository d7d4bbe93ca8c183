package queries_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/tools/sqlc-gen-zombiezen/internal/exampledb/queries"
)

// migrate applies the "-- +goose Up" half of each migration in order.
func migrate(t *testing.T, conn *sqlite.Conn) {
	t.Helper()
	files, err := filepath.Glob("../migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	slices.Sort(files)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		up, _, _ := strings.Cut(string(src), "-- +goose Down")
		if err := sqlitex.ExecuteScript(conn, up, nil); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

func openDB(t *testing.T) *sqlite.Conn {
	t.Helper()
	conn, err := sqlite.OpenConn(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	migrate(t, conn)
	return conn
}

func ptr[T any](v T) *T { return &v }

// collect runs a :many query and returns its rows.
func collect[T any](t *testing.T, run func(fn func(T) error) error) []T {
	t.Helper()
	var out []T
	if err := run(func(v T) error { out = append(out, v); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAuthors(t *testing.T) {
	conn := openDB(t)

	ann, err := queries.CreateAuthor(conn, queries.CreateAuthorParams{Name: "Ann", Bio: ptr("poet")})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := queries.CreateAuthor(conn, queries.CreateAuthorParams{Name: "Bob"}) // NULL bio
	if err != nil {
		t.Fatal(err)
	}
	if ann != 1 || bob != 2 {
		t.Fatalf("last insert ids = %d, %d; want 1, 2", ann, bob)
	}

	got, err := queries.GetAuthor(conn, ann)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != ann || got.Name != "Ann" || got.Bio == nil || *got.Bio != "poet" || !got.Active || got.CreatedAt == "" {
		t.Errorf("GetAuthor(ann) = %+v", got)
	}
	if got, err := queries.GetAuthor(conn, bob); err != nil || got.Bio != nil {
		t.Errorf("GetAuthor(bob) = %+v, %v; want nil Bio", got, err)
	}

	if name, err := queries.GetAuthorName(conn, bob); err != nil || name != "Bob" {
		t.Errorf("GetAuthorName = %q, %v", name, err)
	}
	if bio, err := queries.GetAuthorBio(conn, ann); err != nil || bio == nil || *bio != "poet" {
		t.Errorf("GetAuthorBio(ann) = %v, %v", bio, err)
	}
	if bio, err := queries.GetAuthorBio(conn, bob); err != nil || bio != nil {
		t.Errorf("GetAuthorBio(bob) = %v, %v; want nil", bio, err)
	}

	// :one with no row.
	if _, err := queries.GetAuthor(conn, 99); err != queries.ErrNoRows {
		t.Errorf("GetAuthor(99) error = %v; want ErrNoRows", err)
	}
	if v, err := queries.GetAuthorBio(conn, 99); !errors.Is(err, queries.ErrNoRows) || v != nil {
		t.Errorf("GetAuthorBio(99) = %v, %v; want nil, ErrNoRows", v, err)
	}

	// :many with struct rows and nullable columns.
	rows := collect(t, func(fn func(queries.ListAuthorsRow) error) error { return queries.ListAuthors(conn, fn) })
	if len(rows) != 2 || rows[0].Name != "Ann" || *rows[0].Bio != "poet" || rows[1].Name != "Bob" || rows[1].Bio != nil {
		t.Errorf("ListAuthors = %+v", rows)
	}

	// :exec with a bool parameter; :many with a scalar result.
	if err := queries.SetActive(conn, queries.SetActiveParams{Active: false, ID: bob}); err != nil {
		t.Fatal(err)
	}
	names := collect(t, func(fn func(string) error) error { return queries.ListAuthorNames(conn, true, fn) })
	if !slices.Equal(names, []string{"Ann"}) {
		t.Errorf("ListAuthorNames(true) = %q", names)
	}
	names = collect(t, func(fn func(string) error) error { return queries.ListAuthorNames(conn, false, fn) })
	if !slices.Equal(names, []string{"Bob"}) {
		t.Errorf("ListAuthorNames(false) = %q", names)
	}

	// :execrows, with named parameters bound in an order unlike the SET/WHERE text.
	n, err := queries.SetBio(conn, queries.SetBioParams{Bio: ptr("novelist"), Name: "Bob"})
	if err != nil || n != 1 {
		t.Errorf("SetBio = %d, %v; want 1", n, err)
	}
	if n, err := queries.SetBio(conn, queries.SetBioParams{Bio: nil, Name: "Nobody"}); err != nil || n != 0 {
		t.Errorf("SetBio(Nobody) = %d, %v; want 0", n, err)
	}

	// Expression columns.
	if c, err := queries.CountAuthors(conn); err != nil || c != 2 {
		t.Errorf("CountAuthors = %d, %v", c, err)
	}
	stats, err := queries.AuthorStats(conn)
	if err != nil || stats.Total != 2 || stats.MaxID != int64(2) || stats.MaxIDInt != 2 {
		t.Errorf("AuthorStats = %+v, %v", stats, err)
	}

	if err := queries.DeleteAuthor(conn, bob); err != nil {
		t.Fatal(err)
	}
	if _, err := queries.GetAuthor(conn, bob); err != queries.ErrNoRows {
		t.Errorf("after delete: %v", err)
	}
}

// TestParameterBinding covers every way sqlc's SQLite engine passes
// parameters through: anonymous ?, explicit ?N, @name and sqlc.arg/narg,
// with a name used twice.
func TestParameterBinding(t *testing.T) {
	conn := openDB(t)
	for _, a := range []queries.CreateAuthorParams{
		{Name: "x", Bio: ptr("y")}, // 1
		{Name: "y", Bio: ptr("x")}, // 2
		{Name: "y"},                // 3
		{Name: "z", Bio: ptr("z")}, // 4
	} {
		if _, err := queries.CreateAuthor(conn, a); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(run func(fn func(int64) error) error) []int64 { return collect(t, run) }

	// @term appears twice (name and bio) and is bound once as ?1.
	got := ids(func(fn func(int64) error) error {
		return queries.SearchAuthors(conn, queries.SearchAuthorsParams{Term: "y", ID: 4}, fn)
	})
	if want := []int64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("SearchAuthors(y, 4) = %v; want %v", got, want)
	}
	got = ids(func(fn func(int64) error) error {
		return queries.SearchAuthors(conn, queries.SearchAuthorsParams{Term: "x", ID: 0}, fn)
	})
	if want := []int64{1, 2}; !slices.Equal(got, want) {
		t.Errorf("SearchAuthors(x, 0) = %v; want %v", got, want)
	}

	// sqlc.arg(term) twice plus a nullable sqlc.narg(min_id) twice.
	got = ids(func(fn func(int64) error) error {
		return queries.SearchAuthorsArg(conn, queries.SearchAuthorsArgParams{Term: "y", MinID: nil}, fn)
	})
	if want := []int64{1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("SearchAuthorsArg(y, nil) = %v; want %v", got, want)
	}
	got = ids(func(fn func(int64) error) error {
		return queries.SearchAuthorsArg(conn, queries.SearchAuthorsArgParams{Term: "y", MinID: ptr[int64](2)}, fn)
	})
	if want := []int64{2, 3}; !slices.Equal(got, want) {
		t.Errorf("SearchAuthorsArg(y, 2) = %v; want %v", got, want)
	}

	// Explicit ?2 before ?1: sqlc numbers params by N, not by position.
	got = ids(func(fn func(int64) error) error {
		return queries.SearchAuthorsNumbered(conn, queries.SearchAuthorsNumberedParams{Name: "y", ID: 2}, fn)
	})
	if want := []int64{4}; !slices.Equal(got, want) {
		t.Errorf("SearchAuthorsNumbered(y, 2) = %v; want %v", got, want)
	}

	// A parameter of unknown type is bound from its dynamic Go type.
	for _, tc := range []struct {
		in   any
		want int64
	}{{int64(7), 7}, {7, 7}, {"8", 8}, {2.0, 2}, {true, 1}, {nil, 0}} {
		if v, err := queries.EchoAny(conn, tc.in); err != nil || v != tc.want {
			t.Errorf("EchoAny(%#v) = %d, %v; want %d", tc.in, v, err, tc.want)
		}
	}
	if _, err := queries.EchoAny(conn, struct{}{}); err == nil || !strings.Contains(err.Error(), "EchoAny: parameter 1: unsupported type struct {}") {
		t.Errorf("EchoAny(struct{}{}) error = %v", err)
	}
}

func TestBooks(t *testing.T) {
	conn := openDB(t)
	author, err := queries.CreateAuthor(conn, queries.CreateAuthorParams{Name: "Ann"})
	if err != nil {
		t.Fatal(err)
	}

	cover := []byte{0, 1, 2, 0xff}
	b1, err := queries.CreateBook(conn, queries.CreateBookParams{
		AuthorID: author, Title: "One", Price: ptr(9.5), Cover: cover, Isbn: []byte("978"),
	})
	if err != nil || b1.ID != 1 || b1.Title != "One" {
		t.Fatalf("CreateBook = %+v, %v", b1, err)
	}
	cover[0] = 42 // the bound value was copied

	// NULL price and cover, empty (not NULL) isbn.
	b2, err := queries.CreateBook(conn, queries.CreateBookParams{AuthorID: author, Title: "Two"})
	if err != nil {
		t.Fatal(err)
	}

	got, err := queries.GetBook(conn, b1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Title != "One" || *got.Price != 9.5 || got.Rating != 0 || !bytes.Equal(got.Cover, []byte{0, 1, 2, 0xff}) || string(got.Isbn) != "978" {
		t.Errorf("GetBook(1) = %+v", got)
	}
	got, err = queries.GetBook(conn, b2.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Price != nil || got.Cover != nil || got.Isbn == nil || len(got.Isbn) != 0 {
		t.Errorf("GetBook(2) = %+v; want nil Price and Cover, empty non-nil Isbn", got)
	}

	// The returned blob is a copy, still valid after the statement moves on.
	c1, err := queries.BookCover(conn, b1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c2, err := queries.BookCover(conn, b2.ID); err != nil || c2 != nil {
		t.Errorf("BookCover(2) = %v, %v; want nil", c2, err)
	}
	if !bytes.Equal(c1, []byte{0, 1, 2, 0xff}) {
		t.Errorf("BookCover(1) = %v", c1)
	}

	// Joined columns with the same name are disambiguated (ID, ID_2).
	rows := collect(t, func(fn func(queries.ListBooksWithAuthorsRow) error) error {
		return queries.ListBooksWithAuthors(conn, ptr(5.0), fn)
	})
	if len(rows) != 1 || rows[0].ID != b2.ID || rows[0].ID_2 != author || rows[0].Name != "Ann" || rows[0].Price != nil {
		t.Errorf("ListBooksWithAuthors(5) = %+v", rows)
	}
	rows = collect(t, func(fn func(queries.ListBooksWithAuthorsRow) error) error {
		return queries.ListBooksWithAuthors(conn, ptr(10.0), fn)
	})
	if len(rows) != 2 {
		t.Errorf("ListBooksWithAuthors(10) = %+v", rows)
	}
}

func TestManyStopsOnCallbackError(t *testing.T) {
	conn := openDB(t)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := queries.CreateAuthor(conn, queries.CreateAuthorParams{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	calls := 0
	err := queries.ListAuthors(conn, func(queries.ListAuthorsRow) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Errorf("ListAuthors = %v after %d calls; want stop after 2", err, calls)
	}
	// The statement was reset: the same query runs again from the start.
	rows := collect(t, func(fn func(queries.ListAuthorsRow) error) error { return queries.ListAuthors(conn, fn) })
	if len(rows) != 3 {
		t.Errorf("ListAuthors after stop = %d rows", len(rows))
	}
}

func TestConstraintErrorIsWrapped(t *testing.T) {
	conn := openDB(t)
	_, err := queries.CreateBook(conn, queries.CreateBookParams{AuthorID: 1, Title: "x"})
	if err != nil {
		t.Fatalf("no foreign key enforcement expected by default: %v", err)
	}
	if err := sqlitex.ExecuteTransient(conn, "CREATE UNIQUE INDEX authors_name ON authors (name)", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := queries.CreateAuthor(conn, queries.CreateAuthorParams{Name: "dup"}); err != nil {
		t.Fatal(err)
	}
	_, err = queries.CreateAuthor(conn, queries.CreateAuthorParams{Name: "dup"})
	if err == nil || !strings.HasPrefix(err.Error(), "CreateAuthor: ") || sqlite.ErrCode(err) != sqlite.ResultConstraintUnique {
		t.Errorf("duplicate insert error = %v (code %v)", err, sqlite.ErrCode(err))
	}
	// The connection is still usable afterwards.
	if c, err := queries.CountAuthors(conn); err != nil || c != 1 {
		t.Errorf("CountAuthors = %d, %v", c, err)
	}
}

// TestPoolPut checks that every generated function leaves its statement
// reset, since sqlitex.Pool.Put panics on a connection with an active one.
func TestPoolPut(t *testing.T) {
	ctx := context.Background()
	pool, err := sqlitex.NewPool(filepath.Join(t.TempDir(), "pool.db"), sqlitex.PoolOptions{PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	use := func(f func(conn *sqlite.Conn)) {
		conn, err := pool.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Put(conn) // panics if a statement is still active
		f(conn)
	}
	use(func(conn *sqlite.Conn) { migrate(t, conn) })
	use(func(conn *sqlite.Conn) {
		for _, name := range []string{"a", "b"} {
			if _, err := queries.CreateAuthor(conn, queries.CreateAuthorParams{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
	})
	// :one stops after the first row; the statement would still be active.
	use(func(conn *sqlite.Conn) {
		if _, err := queries.GetAuthor(conn, 1); err != nil {
			t.Fatal(err)
		}
	})
	// :many abandoned half way by its callback.
	use(func(conn *sqlite.Conn) {
		_ = queries.ListAuthors(conn, func(queries.ListAuthorsRow) error { return errors.New("stop") })
	})
	use(func(conn *sqlite.Conn) {
		if _, err := queries.CreateBook(conn, queries.CreateBookParams{AuthorID: 1, Title: "t"}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNames exercises generated names that had to be escaped or
// disambiguated (see tags.sql).
func TestNames(t *testing.T) {
	conn := openDB(t)
	for _, tag := range []queries.InsertTagParams{
		{Type: "a", Conn: ptr("c1"), Err: ptr[int64](7)},
		{Type: "a"},
		{Type: "b"},
	} {
		if _, err := queries.InsertTag(conn, tag); err != nil {
			t.Fatal(err)
		}
	}
	got := collect(t, func(fn func(int64) error) error { return queries.TagsByType(conn, "a", fn) })
	if !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("TagsByType(a) = %v", got)
	}
	row, err := queries.TagByConn(conn, ptr("c1"))
	if err != nil || row.Type != "a" || row.Err == nil || *row.Err != 7 {
		t.Errorf("TagByConn(c1) = %+v, %v", row, err)
	}
	// conn = NULL is never true in SQL.
	if _, err := queries.TagByConn(conn, nil); err != queries.ErrNoRows {
		t.Errorf("TagByConn(nil) error = %v; want ErrNoRows", err)
	}
	if n, err := queries.Count(conn, 1); err != nil || n != 2 {
		t.Errorf("Count(1) = %d, %v", n, err)
	}
	pairs := collect(t, func(fn func(queries.TagPairsRow) error) error {
		return queries.TagPairs(conn, queries.TagPairsParams{ID: 2, ID_2: 0}, fn)
	})
	if want := []queries.TagPairsRow{{ID: 1, ID_2: 1}, {ID: 1, ID_2: 2}}; !slices.Equal(pairs, want) {
		t.Errorf("TagPairs = %+v; want %+v", pairs, want)
	}
}
