package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/ledger"
)

// TestHealthzWhileWritesFail: while SQLite fails every write (another
// process holds the ledger's write lock past the busy timeout), an enqueue
// answers 500 and /healthz answers 503 unavailable, saying since when the
// writes fail and why; once a write succeeds, it is ok again.
func TestHealthzWhileWritesFail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ductile.db")
	l, err := ledger.Open(context.Background(), path, ledger.Options{Synchronous: "NORMAL", BusyTimeout: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	f := start(t, func(o *api.Options) { o.Ledger = l })

	intruder, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	require.NoError(t, err)
	defer intruder.Close()
	end, err := sqlitex.ImmediateTransaction(intruder)
	require.NoError(t, err)
	before := time.Now().UTC()
	requireError(t, f.do("POST", "/plugin/echo/handle", "plugin-rw", []byte(`{}`)), http.StatusInternalServerError, "error")
	r := f.do("GET", "/healthz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, r.status, string(r.raw))
	require.Equal(t, "unavailable", r.body["status"])
	writes := r.body["writes"].(map[string]any)
	require.Equal(t, true, writes["failing"])
	require.Contains(t, writes["last_error"], "database is locked")
	since, err := time.Parse(time.RFC3339Nano, writes["since"].(string))
	require.NoError(t, err)
	require.False(t, since.Before(before.Truncate(time.Second)), "since %v, the failure came after %v", since, before)

	end(&err) // err is set: the intruder rolls back
	r = f.do("POST", "/plugin/echo/handle", "plugin-rw", []byte(`{}`))
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	r = f.do("GET", "/healthz", "", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	require.Equal(t, "ok", r.body["status"])
	require.Equal(t, map[string]any{"failing": false}, r.body["writes"])
}
