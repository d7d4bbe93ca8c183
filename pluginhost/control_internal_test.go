package pluginhost

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The fast reading of a simple progress line agrees with encoding/json's on
// every line it takes, and leaves the rest to it.
func TestSimpleProgressReadsAsEncodingJSONDoes(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		`{"progress":0.4}`, `{"progress":0}`, `{"progress":-0}`, `{"progress":1}`, `{"progress":1.0}`, `{"progress":0.5e0}`, `{"progress":5E-1}`,
		`{"message":"plain"}`, `{"stage":"s","message":"m","progress":0.25}`, `{"message":""}`, `{"message":"é ✓"}`,
	} {
		simple, ok := parseSimpleProgress([]byte(line))
		require.True(t, ok, line)
		decoded, err := decodeControlLine([]byte(line))
		require.NoError(t, err, line)
		require.Equal(t, decoded, simple, line)
	}
	for _, line := range []string{
		`{"progress":1.5}`, `{"progress":01}`, `{"progress":.5}`, `{"progress":1.}`, `{"progress":"0.5"}`,
		`{"progress":null}`, `{"progress":0.1,"progress":0.2}`, `{"message":"esc\"aped"}`, `{"Progress":0.1}`,
		`{"progress":0.1,"export":{}}`, `{ "progress":0.1}`, `{"progress":0.1}x`, `{"progress":0.1,}`, `{}`, `{"other":1}`,
	} {
		_, ok := parseSimpleProgress([]byte(line))
		require.False(t, ok, line)
	}
}

func FuzzSimpleProgress(f *testing.F) {
	for _, seed := range []string{`{"progress":0.4,"message":"m","stage":"s"}`, `{"progress":1e-3}`, `{"message":"x"}`, `{"progress":-0.0}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseControlLine([]byte(line))
		simple, ok := parseSimpleProgress([]byte(line))
		if !ok {
			return
		}
		decoded, derr := decodeControlLine([]byte(line))
		if derr != nil {
			t.Fatalf("%q: taken as simple, refused by encoding/json: %v", line, derr)
		}
		if err != nil {
			t.Fatalf("%q: taken as simple, refused: %v", line, err)
		}
		require.Equal(t, decoded, simple, line)
		require.Equal(t, decoded, m, line)
	})
}
