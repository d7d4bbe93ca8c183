package pluginhost

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The stream cuts lines as the bytes come, in whatever pieces the pipe
// gives them; the lines must be those SplitStderr cuts from the whole, or
// job logs could not place a captured line that was not streamed.
func TestLineSplitterCutsAsSplitStderrDoes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "\n", "\n\n", "\r\n", "é", strings.Repeat("z", MaxStderrLine-1), strings.Repeat("y", MaxStderrLine+3)}
	for range 500 {
		var b strings.Builder
		for range rng.IntN(20) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		text := []byte(b.String())
		var s lineSplitter
		var got []string
		for rest := text; len(rest) > 0; {
			n := 1 + rng.IntN(len(rest))
			got = s.write(rest[:n], got)
			rest = rest[n:]
		}
		if len(s.partial) > 0 {
			got = append(got, string(s.partial))
		}
		require.Equal(t, SplitStderr(text), got, "%q", text)
	}
}
