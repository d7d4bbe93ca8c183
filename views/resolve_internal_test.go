package views

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPrefixEnd(t *testing.T) {
	t.Parallel()
	for prefix, want := range map[string]string{
		"job/ab":    "job/ac",
		"job/a\xff": "job/b",
		"\xff\xff":  "\xff\xff\xff\xff",
		"":          "\xff\xff\xff\xff",
	} {
		got := prefixEnd(prefix)
		require.Equal(t, want, got, "%q", prefix)
		require.Greater(t, got, prefix+"\xfe", "%q: above every string with the prefix", prefix)
	}
}
