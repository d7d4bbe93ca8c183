package webhooks_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/webhooks"
)

// FuzzDecodePayload: any body is accepted as JSON exactly when
// encoding/json finds it valid, it is UTF-8 and nests at most
// commands.MaxPayloadDepth levels, and is then kept byte for byte.
func FuzzDecodePayload(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `"x"`, `1e400`, ` `, `{"a":`, "\xff", `[]`, "\"caf\xe9\""} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		payload, err := webhooks.DecodePayload(body)
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

// FuzzHandler: whatever the path, headers and body, the handler answers
// with one of its statuses and a JSON body, never panics, and enqueues
// only a body signed with the secret.
func FuzzHandler(f *testing.F) {
	f.Add("/hook", "POST", "", []byte(`{"a":1}`), true)
	f.Add("/hook", "POST", "sha256=00", []byte(`{"a":1}`), false)
	f.Add("/hook/small", "POST", "", []byte(`{"a":"0123456789abcdefgh"}`), true)
	f.Add("/hook/replay", "POST", "", []byte(`[1]`), true)
	f.Add("/hook/stamped", "POST", "", []byte(`{}`), true)
	f.Add("/healthz", "GET", "", []byte(nil), false)
	f.Add("/nope", "PUT", "x", []byte(`{`), false)
	b := setup(f)
	f.Fuzz(func(t *testing.T, path, method, signature string, body []byte, sign bool) {
		if len(path) == 0 || path[0] != '/' {
			path = "/" + path
		}
		r, err := http.NewRequest(method, "http://hooks.test", bytes.NewReader(body))
		if err != nil {
			return // not a method net/http can send
		}
		r.URL.Path = path
		if sign {
			signature = sig(string(body))
		}
		r.Header.Set("X-Hub-Signature-256", signature)
		r.Header.Set("X-GitHub-Delivery", "fuzz")
		w := httptest.NewRecorder()
		b.handler.ServeHTTP(w, r)
		switch w.Code {
		case 200, 202, 400, 403, 404, 405, 413:
		default:
			t.Fatalf("status %d for %s %q: %s", w.Code, method, path, w.Body)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("body not JSON: %q", w.Body)
		}
		if (w.Code == 202 || w.Code == 200) && path != "/healthz" && !webhooks.Verify([]byte(secret), signature, body) {
			t.Fatalf("accepted a delivery without a good signature: %s %q", method, path)
		}
	})
}
