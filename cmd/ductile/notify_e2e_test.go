package main_test

import (
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// notifySocket is a stand-in for systemd's $NOTIFY_SOCKET: it collects
// every datagram the daemon sends.
type notifySocket struct {
	path string
	conn *net.UnixConn
	mu   sync.Mutex
	got  []string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	s := &notifySocket{path: filepath.Join(t.TempDir(), "notify.sock")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.path, Net: "unixgram"})
	require.NoError(t, err)
	s.conn = conn
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.got = append(s.got, string(buf[:n]))
			s.mu.Unlock()
		}
	}()
	return s
}

// count is how many messages so far hold the line want.
func (s *notifySocket) count(want string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.got {
		for _, line := range strings.Split(m, "\n") {
			if line == want {
				n++
			}
		}
	}
	return n
}

// TestSystemdNotify: under a unit of Type=notify the daemon says READY=1
// once it runs, pings the watchdog while its ledger answers, says
// RELOADING=1 then READY=1 around a SIGHUP reload, and STOPPING=1 on
// SIGTERM.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	sock := listenNotify(t)
	state := filepath.Join(t.TempDir(), "state")
	p := start(t, cleanEnv(t, "NOTIFY_SOCKET="+sock.path, "WATCHDOG_USEC=200000"), "system", "start", "--state-dir", state)
	p.waitLine(t, 0, messageIs("ductile started"))
	waitFor(t, 10*time.Second, "READY=1", func() bool { return sock.count("READY=1") == 1 })
	waitFor(t, 10*time.Second, "two watchdog pings", func() bool { return sock.count("WATCHDOG=1") >= 2 })

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	waitFor(t, 10*time.Second, "RELOADING=1, then READY=1", func() bool { return sock.count("RELOADING=1") == 1 && sock.count("READY=1") == 2 })
	require.Equal(t, 0, p.signal(t, syscall.SIGTERM))
	require.Equal(t, 1, sock.count("STOPPING=1"))
}
