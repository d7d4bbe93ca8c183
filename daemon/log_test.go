package daemon_test

import (
	"bytes"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ductile/ductile/daemon"
)

// openPTY opens a pseudo-terminal pair: a real terminal, without a library.
func openPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	controller, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { controller.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(controller.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(controller.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	terminal, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { terminal.Close() })
	return controller, terminal
}

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	_, terminal := openPTY(t)
	require.True(t, daemon.IsTerminal(terminal))

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, daemon.IsTerminal(w))
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	require.False(t, daemon.IsTerminal(null), "a character device that is not a terminal")
	require.False(t, daemon.IsTerminal(&bytes.Buffer{}))
}

// TestTextLogger: one readable line per record, whatever the values hold.
func TestTextLogger(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	log := daemon.NewTextLogger(&b, slog.LevelInfo).With("component", "dispatch")
	log.Debug("not shown")
	log.Info("job succeeded", "plugin", "echo", "attempt", 2, "took", 1500*time.Millisecond)
	log.WithGroup("req").Warn("slow request", "path", "/a b", "query", `x="1"`)
	log.Error("job is dead", "error", "line one\nline two", "empty", "", "nested", slog.GroupValue(slog.String("k", "v")))
	log.Info("message with\na line break")

	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	stamp := `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} `
	want := []string{
		`INFO  job succeeded component=dispatch plugin=echo attempt=2 took=1.5s`,
		`WARN  slow request component=dispatch req.path="/a b" req.query="x=\"1\""`,
		`ERROR job is dead component=dispatch error="line one\nline two" empty="" nested.k=v`,
		`INFO  "message with\na line break" component=dispatch`,
	}
	require.Len(t, lines, len(want), b.String())
	for i, line := range lines {
		require.Regexp(t, regexp.MustCompile("^"+stamp+regexp.QuoteMeta(want[i])+"$"), line)
	}
}
