package pluginhost

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeResponseAsUnmarshal: ParseResponse decodes with
// decodeResponse directly; it must answer exactly as json.Unmarshal into a
// Response (which calls it through UnmarshalJSON) does.
func FuzzDecodeResponseAsUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"status":"ok","result":"done"}`, `{"status":"ok","result":{"a":1}}`, `{"status":5}`,
		`{"Status":"ok"}`, `{"status":"ok"} {}`, `{"status":"ok","retry":"no"}`, `{"events":[{"type":1}]}`,
		`{"status":"error","error":"x","result":"\ud800"}`, `{`, `{"result":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var viaUnmarshal, direct Response
		errUnmarshal := json.Unmarshal(data, &viaUnmarshal)
		errDirect := decodeResponse(data, &direct)
		if errUnmarshal != nil || errDirect != nil {
			require.Error(t, errUnmarshal)
			require.EqualError(t, errDirect, errUnmarshal.Error())
			return
		}
		require.Equal(t, viaUnmarshal, direct)
	})
}

func BenchmarkParseResponse(b *testing.B) {
	b.ReportAllocs()
	stdout := []byte(`{"status":"ok","result":"ok"}` + "\n")
	for b.Loop() {
		if _, err := ParseResponse(stdout); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzSimpleResponse: what parseSimpleResponse reads, decodeResponse reads
// the same, without an error.
func FuzzSimpleResponse(f *testing.F) {
	for _, s := range []string{
		`{"status":"ok"}`, `{"status":"ok","result":"done"}`, `{"result":"done","status":"error"}`,
		`{"status":"ok","result":""}`, `{"status":""}`, `{"result":"x"}`, `{"status":"ok","status":"error"}`,
		`{"result":"a","result":"b","status":"ok"}`, `{"status":"ok","Status":"x"}`, `{"status":"ok",}`,
		`{"status":"ok"}}`, `{"status":"o\k"}`, `{"status": "ok"}`, `{"status":"ok","result":"é"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		simple, ok := parseSimpleResponse(data)
		if !ok {
			require.Equal(t, Response{}, simple)
			return
		}
		var decoded Response
		require.NoError(t, decodeResponse(data, &decoded))
		require.Equal(t, decoded, simple)
		require.NotEmpty(t, simple.Status)
	})
}
