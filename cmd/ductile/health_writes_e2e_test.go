package main_test

// End-to-end tests of what the daemon reports when its front door or its
// ledger's writes fail.

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWritesFailingAreReported: a daemon whose ledger writes really fail
// (its files may not grow: RLIMIT_FSIZE, as a full disk would refuse
// them) answers /healthz 503 unavailable, and system status says the
// writes fail and since when, without trying to record health checks.
func TestWritesFailingAreReported(t *testing.T) {
	t.Parallel()
	prlimit, err := exec.LookPath("prlimit") // util-linux
	require.NoError(t, err, "prlimit (util-linux) sets the daemon's file size limit")
	// A schedule whose every firing records a large payload fills the
	// allowance in a few seconds.
	payload := strings.Repeat("x", 400<<10)
	w := newJobWorld(t, `
api: {listen: "127.0.0.1:0"}
plugins:
  echo:
    schedules:
      - {every: 1s, command: handle, payload: {blob: "`+payload+`"}}
`)
	w.runJSON(0, &map[string]any{}, "system", "migrate", "--json")
	largest := int64(0)
	for _, name := range []string{"ductile.db", "ductile.db-wal"} {
		if fi, err := os.Stat(filepath.Join(w.state, name)); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	limit := largest + 1<<20
	d := startProcess(t, cleanEnv(t), prlimit, append([]string{"--fsize=" + strconv.FormatInt(limit, 10), "--", ductileBin},
		w.args("system", "start")...)...)
	line, _ := d.waitLine(t, 0, messageIs("api: listening"))
	var listening struct {
		Addr string `json:"addr"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &listening))
	_, err = net.ResolveTCPAddr("tcp", listening.Addr)
	require.NoError(t, err)
	d.waitLine(t, 0, messageIs("ledger writes are failing: nothing can be recorded until they succeed again"))

	res, err := http.Get("http://" + listening.Addr + "/healthz")
	require.NoError(t, err)
	var health struct {
		Status string `json:"status"`
		Writes struct {
			Failing   bool      `json:"failing"`
			Since     time.Time `json:"since"`
			LastError string    `json:"last_error"`
		} `json:"writes"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&health))
	res.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Equal(t, "unavailable", health.Status)
	require.True(t, health.Writes.Failing)
	require.False(t, health.Writes.Since.IsZero())
	require.NotEmpty(t, health.Writes.LastError)

	var status struct {
		Daemon struct {
			Running bool `json:"running"`
			Writes  struct {
				Failing bool      `json:"failing"`
				Since   time.Time `json:"since"`
			} `json:"writes"`
		} `json:"daemon"`
	}
	w.runJSON(0, &status, "system", "status", "--json", "--no-health")
	require.True(t, status.Daemon.Running)
	require.True(t, status.Daemon.Writes.Failing, "system status --json says the writes fail")
	require.Equal(t, health.Writes.Since.UTC(), status.Daemon.Writes.Since.UTC(), "since the same moment /healthz says")
	r := w.run("system", "status") // runs no health check: it could not record it
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "writes    FAILING since ")
	require.Contains(t, r.stdout, "health not checked: the daemon's writes to the ledger fail")
}

// TestAPIOffIsReported: with the API's default address taken, system start
// says on its terminal (stderr, not only in the log) that it runs without
// the API and why, and system status says so too.
func TestAPIOffIsReported(t *testing.T) {
	t.Parallel()
	// Hold the default address; another process may hold it a while.
	var taken net.Listener
	waitFor(t, procTimeout, "127.0.0.1:8080 to be free for the test to hold", func() bool {
		var err error
		taken, err = net.Listen("tcp", "127.0.0.1:8080")
		return err == nil
	})
	defer taken.Close()
	w := newJobWorld(t, "")
	d := w.startDaemon()
	var status struct {
		Daemon struct {
			API struct {
				Enabled bool   `json:"enabled"`
				Off     string `json:"off"`
			} `json:"api"`
		} `json:"daemon"`
	}
	w.runJSON(0, &status, "system", "status", "--json", "--no-health")
	require.True(t, status.Daemon.API.Enabled)
	require.Contains(t, status.Daemon.API.Off, "its default address 127.0.0.1:8080 is not free")
	r := w.run("system", "status", "--no-health")
	require.Contains(t, r.stdout, "api       OFF: its default address 127.0.0.1:8080 is not free")
	w.stopDaemon(d)
	require.Contains(t, d.stderr.String(), "ductile: running WITHOUT the HTTP API: its default address 127.0.0.1:8080 is not free")
	require.Contains(t, d.stderr.String(), "set api.listen to a free address")
}
