package events_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

func TestJSONDepth(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, events.JSONDepth([]byte(`"[{[{"`)), "brackets in strings do not count")
	require.Equal(t, 2, events.JSONDepth([]byte(`[{"a\"[[":1}]`)), "nor after an escaped quote")
	require.Equal(t, 3, events.JSONDepth([]byte(`[[[`)), "unclosed counts")
	require.Equal(t, 20000, events.JSONDepth([]byte(strings.Repeat("[", 20000)+strings.Repeat("]", 20000))), "past any decoder's limit")
}
