package daemon_test

import (
	"bytes"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/internal/ptytest"
)

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	_, terminal := ptytest.Open(t)
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
