package engine_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// FuzzCheckPayload: any webhook delivery's body (PayloadDelivery) is
// accepted as JSON exactly when encoding/json finds it valid, it is UTF-8
// and nests at most commands.MaxPayloadDepth levels, and is then kept byte
// for byte.
func FuzzCheckPayload(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `"x"`, `1e400`, ` `, `{"a":`, "\xff", `[]`, "\"caf\xe9\""} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		payload, err := engine.CheckPayload(body, engine.PayloadDelivery)
		if err != nil {
			if json.Valid(body) && utf8.Valid(body) && len(bytes.TrimSpace(body)) > 0 && events.JSONDepth(body) <= commands.MaxPayloadDepth {
				t.Fatalf("valid JSON %q refused: %v", body, err)
			}
			return
		}
		if !json.Valid(payload) || !utf8.Valid(payload) || !bytes.Equal(payload, body) {
			t.Fatalf("payload %q from body %q", payload, body)
		}
	})
}
