package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProgressBar: run watch's bar fills with the progress, clamped to
// [0, 1]; an unreported progress shows as unknown.
func TestProgressBar(t *testing.T) {
	t.Parallel()
	p := func(v float64) *float64 { return &v }
	require.Equal(t, "[······························]   ?%", progressBar(nil))
	require.Equal(t, "[······························]   0%", progressBar(p(0)))
	require.Equal(t, "[###############···············]  50%", progressBar(p(0.5)))
	require.Equal(t, "[##############################] 100%", progressBar(p(1)))
	require.Equal(t, progressBar(p(1)), progressBar(p(7)))
	require.Equal(t, progressBar(p(0)), progressBar(p(-1)))
	require.Equal(t, "40% [fetch] page 2", progressText(p(0.4), ptr("fetch"), ptr("page 2")))
	require.Empty(t, progressText(nil, nil, ptr("")))
	require.Equal(t, "ééé…", shorten("éééé\n é", 4), "cut by characters, on one line")
	require.Equal(t, "a b", shorten(" a\tb ", 4))
}
