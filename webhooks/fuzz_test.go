package webhooks_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ductile/ductile/webhooks"
)

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
