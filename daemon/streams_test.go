package daemon_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// anyToken grants every scope to any bearer token, named by its key: each
// distinct key is a distinct token for api.max_streams_per_token.
type anyToken struct{}

func (anyToken) Check(authorization string, _ auth.Scope) (string, error) {
	return strings.TrimPrefix(authorization, "Bearer "), nil
}

// fillLedger appends about size bytes of padding events to the ledger at
// path, so a stream from seq 0 has megabytes to send.
func fillLedger(t testing.TB, path string, size int) {
	t.Helper()
	l, err := ledger.Open(context.Background(), path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer l.Close()
	pad := strings.Repeat("x", 4<<10)
	const batch = 100
	for n := 0; n*len(pad) < size; n += batch {
		evs := make([]ledger.NewEvent, batch)
		for i := range evs {
			evs[i] = ledger.NewEvent{Stream: fmt.Sprintf("test/pad-%d", n+i), Type: "test.padded", Data: map[string]string{"pad": pad}}
		}
		_, err := l.Append(context.Background(), evs...)
		require.NoError(t, err)
	}
}

// openStalledStream opens GET /events from seq 0 with token and never reads
// past the response's head: its client stops reading at once, with a tiny
// receive buffer, so the daemon's writes to it block. It returns the status.
func openStalledStream(t testing.TB, addr, token string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(1024))
	_, err = fmt.Fprintf(conn, "GET /events?after=0 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, token)
	require.NoError(t, err)
	// Read the status line and headers only (a small bufio buffer: nothing
	// much of the body is taken off the socket).
	r := textproto.NewReader(bufio.NewReaderSize(conn, 16))
	line, err := r.ReadLine()
	require.NoError(t, err)
	var status int
	_, err = fmt.Sscanf(line, "HTTP/1.1 %d", &status)
	require.NoError(t, err, line)
	_, err = r.ReadMIMEHeader()
	require.NoError(t, err)
	return status
}

// openOverALargeLedger opens a daemon with its API on 127.0.0.1 (any token
// grants every scope) over a ledger of 8 MB, and returns its config and the
// API's address.
func openOverALargeLedger(t testing.TB) (*daemon.Daemon, *config.Config, string) {
	state := t.TempDir()
	fillLedger(t, daemon.DBPath(state), 8<<20)
	addr := freeAddr(t)
	cfg := config.Default()
	cfg.APIServer = config.DefaultAPIServer()
	cfg.APIServer.Listen, cfg.APIServer.ListenSet = addr, true
	d, err := daemon.Open(context.Background(), daemon.Options{
		StateDir: state, Config: cfg, Logger: slog.New(slog.DiscardHandler),
		Ledger: ledger.Options{Synchronous: "NORMAL"}, API: daemon.APIOptions{Guard: anyToken{}},
	})
	require.NoError(t, err)
	return d, cfg, addr
}

// Event streams whose clients never read hold no database connection: with
// 8 (one token, at its cap) and 50 (one token each) such streams from seq 0
// over a ledger of several MB, jobs keep starting and finishing, and
// /healthz and GET /job/{id} answer. A token's stream beyond
// api.max_streams_per_token is refused with 429 too_many_streams.
// (Before the fix, a stream wrote to its client while holding one of the
// four pooled read connections: four stalled clients stopped the daemon.)
func TestStalledEventStreamsDoNotStopTheDaemon(t *testing.T) {
	for _, tc := range []struct {
		name    string
		streams int
		tokens  int // the streams are spread over this many tokens
	}{
		{"8 streams of one token", 8, 1},
		{"50 streams of 50 tokens", 50, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, cfg, addr := openOverALargeLedger(t)
			defer func() { require.NoError(t, d.Close()) }()

			for i := range tc.streams {
				require.Equal(t, http.StatusOK, openStalledStream(t, addr, fmt.Sprintf("token-%d", i%tc.tokens)))
			}
			if tc.tokens == 1 {
				require.Equal(t, http.StatusTooManyRequests, openStalledStream(t, addr, "token-0"),
					"a token's stream beyond api.max_streams_per_token")
			}

			client := &http.Client{Timeout: 10 * time.Second}
			get := func(path string) int {
				req, err := http.NewRequest("GET", "http://"+addr+path, nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer reader")
				res, err := client.Do(req)
				require.NoError(t, err, "GET %s while %d clients do not read their streams", path, tc.streams)
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				return res.StatusCode
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for range 5 {
				require.Equal(t, http.StatusOK, get("/healthz"))
				res, err := commands.EnqueueJob(ctx, d.Ledger, commands.JobFor(cfg, "echo", "poll", events.ActorCLI))
				require.NoError(t, err)
				j, _, err := views.WaitJob(ctx, d.Ledger, res.JobID)
				require.NoError(t, err, "a job enqueued while %d clients do not read their streams never finished", tc.streams)
				require.Equal(t, events.StatusSucceeded, j.Status)
				require.Equal(t, http.StatusOK, get("/job/"+res.JobID))
			}
		})
	}
}

// BenchmarkHealthzBesideStalledStreams times GET /healthz and a job's
// enqueue-to-success while 50 clients hold event streams from seq 0 over an
// 8 MB ledger and never read them.
func BenchmarkHealthzBesideStalledStreams(b *testing.B) {
	d, cfg, addr := openOverALargeLedger(b)
	defer d.Close()
	for i := range 50 {
		require.Equal(b, http.StatusOK, openStalledStream(b, addr, fmt.Sprintf("token-%d", i)))
	}
	b.Run("healthz", func(b *testing.B) {
		for b.Loop() {
			res, err := http.Get("http://" + addr + "/healthz")
			require.NoError(b, err)
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
	b.Run("job", func(b *testing.B) {
		for b.Loop() {
			res, err := commands.EnqueueJob(context.Background(), d.Ledger, commands.JobFor(cfg, "echo", "poll", events.ActorCLI))
			require.NoError(b, err)
			_, _, err = views.WaitJob(context.Background(), d.Ledger, res.JobID)
			require.NoError(b, err)
		}
	})
}
