package pluginhost_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pluginhost"
)

func TestExcerpt(t *testing.T) {
	const n = pluginhost.ExcerptBytes
	// All there and short enough: as it is.
	short := []byte(strings.Repeat("a", 2*n))
	out, cut := pluginhost.Excerpt(short, int64(len(short)))
	require.False(t, cut)
	require.Equal(t, short, out)

	// Longer: the first and the last n bytes, and what lies between.
	long := []byte(strings.Repeat("h", n) + strings.Repeat("m", 10) + "\n" + strings.Repeat("t", n))
	out, cut = pluginhost.Excerpt(long, int64(len(long)))
	require.True(t, cut)
	require.Equal(t, strings.Repeat("h", n)+"\n[ductile: 11 bytes left out here; 65547 bytes in all]\n"+strings.Repeat("t", n), string(out))

	// A prefix of more (stdout cut at its cap): the count is of everything.
	out, cut = pluginhost.Excerpt(short, 1<<30)
	require.True(t, cut)
	require.Equal(t, strings.Repeat("a", n)+"\n[ductile: 1073676288 bytes left out here; 1073741824 bytes in all]\n"+strings.Repeat("a", n), string(out))

	// Never a character cut in two: "é" is two bytes, so with an odd
	// number of a's before it, one straddles each cut.
	text := strings.Repeat("a", n-1) + strings.Repeat("é", n) + "a"
	out, cut = pluginhost.Excerpt([]byte(text), int64(len(text)))
	require.True(t, cut)
	require.True(t, utf8.Valid(out), "the excerpt is valid UTF-8")
	head, rest, ok := strings.Cut(string(out), "\n[ductile: ")
	require.True(t, ok)
	require.Equal(t, strings.Repeat("a", n-1), head, "the é across the first cut is left out")
	_, tail, _ := strings.Cut(rest, "]\n")
	require.Equal(t, strings.Repeat("é", (n-2)/2)+"a", tail, "so is the é across the last cut")
}
